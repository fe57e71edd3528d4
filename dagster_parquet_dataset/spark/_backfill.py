"""A single-run backfill of a Spark DataFrame: one Spark job writes every partition's parts.

The executors do the splitting (``DataFrame.mapInArrow``): each task buffers
up to about one row group of its rows, locates each row's partition with the
IO manager's :class:`~dagster_parquet_dataset.dagster_io._backfill.PartitionLocator`
(pure pyarrow, pickled to the tasks), and writes one Parquet part per
partition it holds into that partition's dataset folder (staged under
``_spark_staging-<txn>/`` on a ``LocalStore``). Only one small descriptor row
per part comes back to the driver, which keeps one attempt per Spark
partition (retried or speculative attempts are dropped and their files
deleted), then commits the N manifests in parallel threads through the dataset
layer's ``begin_write`` / ``commit_write``.

A row whose partition value is null or outside the run makes its task return an
error row instead of parts; the driver then deletes everything the job wrote
and raises ``ValueError``: no partition changes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from ..dagster_io._backfill import Backfill, PartitionLocator, commit_each, group_rows
from ..dataset._write import PartOptions, encode_part
from ..dataset.manifest import DatasetManifest, FileEntry
from ..dataset.store import ParquetDatasetStore, PendingWrite
from ..storage.base import Store
from ..storage.local import LocalStore
from ._schema import spark_schema_to_arrow
from ._write import (
    _GROUP_BYTES,
    _GROUP_ROWS,
    _STAGING,
    FAIL_AFTER_PART_PROPERTY,
    _conform,
    _InjectedTaskFailure,
    _keep_one_attempt,
    _regroup,
    _SparkWrite,
    check_shared_store,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: What each backfill task returns per part it wrote (or one row with ``error`` set).
#: Parts a task encodes at once (one per partition it holds).
_TASK_THREADS = 4

_DESCRIPTOR_DDL = (
    "target int, partition int, chunk int, task_attempt long, attempt int, path string, row_count long, "
    "size_bytes long, stats string, error string"
)
_DESCRIPTOR_SCHEMA = pa.schema(
    [
        ("target", pa.int32()),
        ("partition", pa.int32()),
        ("chunk", pa.int32()),
        ("task_attempt", pa.int64()),
        ("attempt", pa.int32()),
        ("path", pa.string()),
        ("row_count", pa.int64()),
        ("size_bytes", pa.int64()),
        ("stats", pa.string()),
        ("error", pa.string()),
    ]
)


@dataclass
class _BackfillTaskWriter:
    """The function ``mapInArrow`` runs on the executors (pickled with the store and the locator)."""

    store: Store
    locator: PartitionLocator
    keys: tuple[str, ...]  # dataset key per target
    folders: tuple[str, ...]  # dataset-relative folder of the task files per target ("" or staging)
    txns: tuple[str, ...]  # the pending write's token per target
    schema: pa.Schema
    compression: str
    row_group_size: int | None
    max_rows_per_file: int | None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:  # pragma: no cover - mapInArrow always runs in a task
            raise RuntimeError("the Spark backfill function must run inside a Spark task")
        self._task = (ctx.partitionId(), ctx.attemptNumber(), ctx.taskAttemptId())
        fail_partition = ctx.getLocalProperty(FAIL_AFTER_PART_PROPERTY)
        self._fail = fail_partition is not None and fail_partition == str(self._task[0]) and self._task[1] == 0
        self._chunk = 0
        held: list[pa.RecordBatch] = []
        rows = size = 0
        for batch in _conform(batches, self.schema):
            held.append(batch)
            rows += batch.num_rows
            size += batch.nbytes
            if rows >= _GROUP_ROWS or size >= _GROUP_BYTES:
                yield from self._flush(held)
                if self._chunk < 0:
                    return
                held, rows, size = [], 0, 0
        if held:
            yield from self._flush(held)

    def _flush(self, held: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Write the buffered rows: one part per partition they hold (split by ``max_rows_per_file``)."""
        partition, attempt, task = self._task
        table = pa.Table.from_batches(held, self.schema)
        try:
            codes = self.locator.codes(table)
        except (ValueError, TypeError) as exc:
            self._chunk = -1  # stop: the driver discards the whole job's output
            yield self._descriptor({"error": f"{type(exc).__name__}: {exc}"})
            return
        options = PartOptions(self.compression, self.row_group_size)
        group = self.row_group_size or _GROUP_ROWS
        jobs: list[tuple[int, int, str, pa.Table]] = []
        for target, rows in enumerate(group_rows(table, codes, len(self.keys))):
            limit = self.max_rows_per_file or max(rows.num_rows, 1)
            for start in range(0, rows.num_rows, limit):
                name = (
                    f"{self.folders[target]}part-{partition:05d}-{self._chunk:05d}-{self.txns[target]}-t{task}.parquet"
                )
                jobs.append((target, self._chunk, name, rows.slice(start, limit)))
                self._chunk += 1

        def encode(job: tuple[int, int, str, pa.Table]) -> FileEntry:
            target, _chunk, name, piece = job
            return encode_part(
                self.store,
                f"{self.keys[target]}/{name}",
                name,
                self.schema,
                _regroup(iter(piece.to_batches()), self.schema, group),
                options,
            )

        # The partitions' parts are encoded a few at a time (pyarrow releases the GIL while encoding and writing).
        with ThreadPoolExecutor(max_workers=_TASK_THREADS, thread_name_prefix="pds-backfill-task") as pool:
            for (target, chunk, name, _piece), entry in zip(jobs, pool.map(encode, jobs), strict=True):
                yield self._descriptor(
                    {
                        "target": target,
                        "chunk": chunk,
                        "path": entry.path,
                        "row_count": entry.row_count,
                        "size_bytes": entry.size_bytes,
                        "stats": json.dumps(entry.stats) if getattr(entry, "stats", None) else None,
                    }
                )
                if self._fail:
                    raise _InjectedTaskFailure(
                        f"test knob {FAIL_AFTER_PART_PROPERTY}: attempt 0 of partition {partition} fails after "
                        f"writing {name}"
                    )

    def _descriptor(self, values: dict[str, object]) -> pa.RecordBatch:
        partition, attempt, task = self._task
        row = {"partition": partition, "task_attempt": task, "attempt": attempt, "chunk": 0, **values}
        return pa.RecordBatch.from_pylist([row], schema=_DESCRIPTOR_SCHEMA)


def write_spark_partitions(df: DataFrame, datasets: ParquetDatasetStore, backfill: Backfill) -> list[DatasetManifest]:
    """Write ``df`` split by ``backfill``'s partitions: one Spark job, then one commit per partition.

    Each partition's dataset is overwritten (``backfill.run_id`` and the
    target's metadata in its manifest); a partition with no rows gets an empty
    dataset with the DataFrame's schema. ``datasets``' ``compression``,
    ``row_group_size`` and ``max_rows_per_file`` apply. The DataFrame is
    computed once.

    Returns:
        The committed manifest per target, in order.

    Raises:
        ValueError: a row's partition value is null or in no partition of the run
            (the message names value and column); nothing is committed and the
            parts the job wrote are deleted.
        TypeError: a column cannot be stored, or the partition column's type cannot
            map to its kind of partition.
        CapabilityNotSupported: a ``MemoryStore`` (invisible to the executors).
        BackfillIncomplete: some partitions committed and others failed.
        pyspark.errors.PySparkException: the Spark job failed; what it wrote is removed.
    """
    check_shared_store(datasets.store, "write a Spark DataFrame")
    schema = spark_schema_to_arrow(df.schema)
    for column in backfill.locator.columns:
        if column not in schema.names:
            raise ValueError(
                f"{backfill.what}: the partition_expr column {column!r} is not in the output; "
                f"its columns are {schema.names}"
            )
    targets = backfill.targets
    threads = max(1, min(backfill.threads, len(targets)))

    def begin(i: int) -> PendingWrite:
        t = targets[i]
        return datasets.begin_write(t.dataset_key, overwrite=True, run_id=backfill.run_id, metadata=t.metadata)

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pds-backfill") as pool:
        pendings = list(pool.map(begin, range(len(targets))))
    writes = [_SparkWrite(df, datasets, p, schema) for p in pendings]
    renames = isinstance(datasets.store, LocalStore)
    writer = _BackfillTaskWriter(
        store=datasets.store,
        locator=backfill.locator,
        keys=tuple(p.key for p in pendings),
        folders=tuple(f"{_STAGING}{p.txn}/" if renames else "" for p in pendings),
        txns=tuple(p.txn for p in pendings),
        schema=schema,
        compression=datasets.compression,
        row_group_size=datasets.row_group_size,
        max_rows_per_file=datasets.max_rows_per_file,
    )
    try:
        rows = [r.asDict() for r in df.mapInArrow(writer, _DESCRIPTOR_DDL).collect()]
        errors = [r["error"] for r in rows if r["error"] is not None]
        if errors:
            message = str(errors[0])
            kind, _, text = message.partition(": ")
            raise (TypeError if kind == "TypeError" else ValueError)(f"{backfill.what}: {text}")
        kept = _keep_one_attempt(rows)
        entries: list[list[FileEntry]] = [[] for _ in targets]
        for r in kept:
            entries[int(r["target"])].append(  # type: ignore[call-overload]
                FileEntry(
                    str(r["path"]),
                    int(r["row_count"]),  # type: ignore[call-overload]
                    int(r["size_bytes"]),  # type: ignore[call-overload]
                    stats=json.loads(str(r["stats"])) if r["stats"] else None,
                )
            )

        def place(i: int) -> list[FileEntry]:
            write = writes[i]
            if renames:
                placed = write._place(entries[i])
                write._drop_staging()
                return placed
            write._delete_other_attempts({e.path for e in entries[i]})
            return entries[i]

        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pds-backfill") as pool:
            placed = list(pool.map(place, range(len(targets))))
    except BaseException:
        for write in writes:
            write.cleanup()
        raise
    committed: set[int] = set()

    def commit(i: int) -> DatasetManifest:
        manifest = datasets.commit_write(pendings[i], placed[i], schema)
        committed.add(i)
        return manifest

    try:
        return commit_each([t.partition_key for t in targets], commit, backfill.threads, backfill.what)
    except BaseException:
        # Partitions whose commit failed or never started: their parts are in no manifest.
        for i in set(range(len(targets))) - committed:
            for entry in placed[i]:
                datasets.store.delete(f"{pendings[i].key}/{entry.path}", missing_ok=True)
        raise
