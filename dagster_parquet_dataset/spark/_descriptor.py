"""The one row a write task returns per part it wrote (or per error), and the driver's reading of those rows.

The Arrow schema is the definition; the Spark DDL that ``mapInArrow`` needs is
derived from it, so the two cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from ..dataset.manifest import FileEntry

SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),  # the Spark partition the task wrote
        ("chunk", pa.int32()),  # the part's position among the task's parts
        ("task_attempt", pa.int64()),  # Spark's unique id of the task attempt
        ("attempt", pa.int32()),
        ("grp", pa.int64()),  # the destination index
        ("path", pa.string()),  # relative to the destination's dataset key
        ("row_count", pa.int64()),
        ("size_bytes", pa.int64()),
        ("stats", pa.string()),  # per-column statistics (JSON), from the Parquet writer's metadata
        ("pvalues", pa.string()),  # manifest partition values (JSON)
        ("content_hash", pa.string()),  # the part's bytes before its footer, hashed as the task wrote them
        ("hash_seconds", pa.float64()),  # CPU seconds the task spent computing content_hash (a measurement)
        ("error", pa.string()),  # set on an error row: "<ExceptionType>: <message>"; the task wrote nothing more
    ]
)

_DDL_TYPES = {pa.int32(): "int", pa.int64(): "long", pa.float64(): "double", pa.string(): "string"}

#: :data:`SCHEMA` as the Spark DDL string ``mapInArrow`` takes.
DDL = ", ".join(f"{f.name} {_DDL_TYPES[f.type]}" for f in SCHEMA)


@dataclass(frozen=True)
class TaskIds:
    """Who wrote a part: the Spark partition, the attempt number and the attempt's unique id."""

    partition: int
    attempt: int
    task_attempt: int


def part_row(task: TaskIds, chunk: int, group: int, entry: FileEntry, *, hash_seconds: float = 0.0) -> pa.RecordBatch:
    """The descriptor of one written part (``hash_seconds``: CPU seconds its content hash took)."""
    return _row(
        task,
        chunk=chunk,
        grp=group,
        path=entry.path,
        row_count=entry.row_count,
        size_bytes=entry.size_bytes,
        stats=json.dumps(entry.stats) if entry.stats else None,
        pvalues=json.dumps(entry.partition_values) if entry.partition_values is not None else None,
        content_hash=entry.content_hash,
        hash_seconds=hash_seconds,
    )


def error_row(task: TaskIds, error: str) -> pa.RecordBatch:
    """The row a task returns instead of parts when its input is bad (``error``: ``"<Type>: <message>"``)."""
    return _row(task, chunk=0, grp=-1, error=error)


def _row(task: TaskIds, **values: object) -> pa.RecordBatch:
    row = {"partition": task.partition, "attempt": task.attempt, "task_attempt": task.task_attempt, **values}
    return pa.RecordBatch.from_pylist([row], schema=SCHEMA)


def first_error(rows: Sequence[Mapping[str, object]]) -> Exception | None:
    """The error an error row reports, as a ``ValueError`` (or ``TypeError``), or ``None``."""
    for row in rows:
        if row["error"] is not None:
            kind, _, text = str(row["error"]).partition(": ")
            return (TypeError if kind == "TypeError" else ValueError)(text)
    return None


def keep_one_attempt(rows: Sequence[Mapping[str, object]]) -> list[Mapping[str, object]]:
    """The descriptors of one attempt per Spark partition (Spark returns one; this makes sure), in part order."""
    chosen: dict[int, int] = {}
    for row in rows:
        chosen.setdefault(int(row["partition"]), int(row["task_attempt"]))  # type: ignore[call-overload]
    kept = [r for r in rows if chosen[int(r["partition"])] == int(r["task_attempt"])]  # type: ignore[call-overload]
    return sorted(kept, key=lambda r: (int(r["partition"]), int(r["chunk"])))  # type: ignore[call-overload]


def hash_seconds(rows: Sequence[Mapping[str, object]]) -> float:
    """CPU seconds the kept attempts spent hashing their parts, summed over the tasks."""
    total = 0.0
    for row in keep_one_attempt(rows):
        total += float(row["hash_seconds"] or 0.0)  # type: ignore[arg-type]
    return total


def entries_by_group(rows: Sequence[Mapping[str, object]]) -> dict[int, list[FileEntry]]:
    """Per destination index, the parts of one attempt per Spark partition, in order."""
    out: dict[int, list[FileEntry]] = {}
    for r in keep_one_attempt(rows):
        out.setdefault(int(r["grp"]), []).append(  # type: ignore[call-overload]
            FileEntry(
                str(r["path"]),
                int(r["row_count"]),  # type: ignore[call-overload]
                int(r["size_bytes"]),  # type: ignore[call-overload]
                partition_values=json.loads(str(r["pvalues"])) if r["pvalues"] else None,
                stats=json.loads(str(r["stats"])) if r["stats"] else None,
                content_hash=str(r["content_hash"]) if r["content_hash"] else None,
            )
        )
    return out
