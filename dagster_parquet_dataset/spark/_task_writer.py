"""The one function every Spark write runs on the executors (``DataFrame.mapInArrow``).

Plain writes, ``partition_by`` writes, appends, merges and single-run backfills
all run :class:`TaskWriter`: it casts Spark's Arrow batches to the stored
schema, cuts the stream into parts with :class:`_PartSplitter` (a new part at
every change of destination or partition values, or after
``max_rows_per_file`` rows), writes each part through the pickled store with
the dataset layer's encoder, and returns one descriptor row per part
(:mod:`._descriptor`). No data row goes back to the driver.

Rows must arrive sorted by their destination and partition columns (the driver
sorts within Spark partitions when there are any). Every part name carries the
job's token and the task attempt's unique id, so the driver can keep exactly
one attempt per Spark partition and delete the others' files.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..dataset.engine import PartOptions, check_folder_fits, encode_part, encode_partition_values, partition_folder
from ..storage.base import Store
from ._descriptor import TaskIds, error_row, part_row

#: Row-group bounds for parts encoded on the executors (when ``row_group_size`` is unset):
#: pyarrow's default row count, and Spark's default Parquet block size.
GROUP_ROWS = 1024 * 1024
GROUP_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class Destination:
    """Where one group's rows go.

    Attributes:
        key: the dataset key the parts are written under.
        folder: folder below the key (``""``; a staging folder; or ``"a=1/b=x"`` for a merge
            rewriting a partitioned file in place).
        partition_values: manifest partition values the folder stands for (``None``: none).
    """

    key: str
    folder: str = ""
    partition_values: dict[str, Any] | None = None


def conform(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Cast Spark's batches to the stored schema (in practice: relabel timestamps as UTC).

    Raises:
        TypeError: a batch does not convert (the message shows both schemas).
    """
    for batch in batches:
        if batch.schema.equals(schema, check_metadata=False):
            yield batch
            continue
        try:
            cast = batch.cast(schema, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise TypeError(
                f"Spark's Arrow batch {batch.schema} does not convert to the stored schema {schema}: {exc}"
            ) from None
        yield cast


def regroup(batches: Iterator[pa.RecordBatch], schema: pa.Schema, rows: int) -> Iterator[pa.Table]:
    """Tables of at most ``rows`` rows (and about :data:`GROUP_BYTES`), one Parquet row group each."""
    pending: list[pa.RecordBatch] = []
    held = held_bytes = 0
    for batch in batches:
        while batch.num_rows:
            take = min(rows - held, batch.num_rows)
            piece = batch.slice(0, take)
            pending.append(piece)
            held += take
            held_bytes += piece.nbytes
            batch = batch.slice(take)
            if held == rows or held_bytes >= GROUP_BYTES:
                yield pa.Table.from_batches(pending, schema)
                pending, held, held_bytes = [], 0, 0
    if pending:
        yield pa.Table.from_batches(pending, schema)


def _changes(column: pa.Array) -> np.ndarray:
    """Positions ``i`` (>= 1) where ``column[i]`` differs from ``column[i - 1]`` (nulls equal each other)."""
    n = len(column)
    if n < 2:
        return np.zeros(0, dtype=bool)
    a, b = column.slice(1), column.slice(0, n - 1)
    neq = pc.fill_null(pc.not_equal(a, b), False)
    nulls = pc.not_equal(pc.is_null(a), pc.is_null(b))
    return np.asarray(pc.or_(neq, nulls).to_numpy(zero_copy_only=False), dtype=bool)


def _runs(
    batches: Iterator[pa.RecordBatch], columns: Sequence[str]
) -> Iterator[tuple[tuple[Any, ...], pa.RecordBatch]]:
    """``(group values, rows)`` for each run of equal ``columns`` values in a sorted stream (empty batches dropped)."""
    for batch in batches:
        if not batch.num_rows:
            continue
        if not columns:
            yield (), batch
            continue
        changed = np.zeros(max(batch.num_rows - 1, 0), dtype=bool)
        for col in columns:
            changed |= _changes(batch.column(col))
        starts = [0, *(np.flatnonzero(changed) + 1).tolist(), batch.num_rows]
        for lo, hi in zip(starts, starts[1:], strict=False):
            yield tuple(batch.column(c)[lo].as_py() for c in columns), batch.slice(lo, hi - lo)


class _PartSplitter:
    """Consecutive parts of a run stream: a new part at every group change or after ``rows`` rows.

    Each part must be consumed before the next is requested.
    """

    def __init__(self, runs: Iterator[tuple[tuple[Any, ...], pa.RecordBatch]], rows: int | None) -> None:
        self._it = runs
        self._head = next(self._it, None)
        self._rows = rows

    def parts(self) -> Iterator[tuple[tuple[Any, ...], Iterator[pa.RecordBatch]]]:
        while self._head is not None:
            yield self._head[0], self._part(self._head[0])

    def _part(self, group: tuple[Any, ...]) -> Iterator[pa.RecordBatch]:
        left = self._rows
        while self._head is not None and self._head[0] == group and (left is None or left > 0):
            values, batch = self._head
            if left is None or batch.num_rows <= left:
                self._head = next(self._it, None)
                if left is not None:
                    left -= batch.num_rows
                yield batch
            else:
                self._head = (values, batch.slice(left))
                yield batch.slice(0, left)
                left = 0


@dataclass(frozen=True)
class TaskWriter:
    """The function ``mapInArrow`` runs on the executors (pickled with the store and the destinations).

    Attributes:
        store: where the parts go (shared with the executors).
        token: the job's token; every part name carries it.
        schema: the incoming batches' target schema: data columns, then ``group_column`` and
            ``error_column`` if any.
        value_schema: types of the ``partition_by`` columns, for their manifest encoding.
        destinations: where each destination index sends its rows.
        group_column: the column holding each row's destination index (``None``: one destination).
            A negative index marks a row the input maps nowhere; ``error_column`` says why.
        error_column: the column holding, on such rows, ``"<ExceptionType>: <message>"``.
        partition_by: columns that split each destination into ``col=value/`` folders.
        options: Parquet encoding options.
        max_rows_per_file: rows per part at most (``None``: no limit).
        suffix: appended to each part name before ``.parquet``.
    """

    store: Store
    token: str
    schema: pa.Schema
    value_schema: pa.Schema
    destinations: tuple[Destination, ...]
    group_column: str | None
    error_column: str | None
    partition_by: tuple[str, ...]
    options: PartOptions
    max_rows_per_file: int | None
    suffix: str = ""

    def _place(self, values: tuple[Any, ...]) -> tuple[int, Destination]:
        index = 0
        if self.group_column is not None:
            index, values = values[0], values[1:]
            if index is None or not 0 <= index < len(self.destinations):
                raise ValueError(f"row with no destination (group index {index!r})")
        dest = self.destinations[index]
        if not self.partition_by:
            return index, dest
        check_folder_fits(self.store, dest.key, self.partition_by, values)
        folder = partition_folder(self.partition_by, values)
        encoded = dict(dest.partition_values or {})
        encoded.update(encode_partition_values(self.partition_by, values, self.value_schema))
        return index, Destination(dest.key, f"{dest.folder}/{folder}" if dest.folder else folder, encoded)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:  # pragma: no cover - mapInArrow always runs in a task
            raise RuntimeError("the Spark write function must run inside a Spark task")
        task = TaskIds(ctx.partitionId(), ctx.attemptNumber(), ctx.taskAttemptId())
        group_rows = self.options.row_group_size or GROUP_ROWS
        keys = ([self.group_column] if self.group_column else []) + list(self.partition_by)
        dropped = {*keys, *([self.error_column] if self.error_column else [])}
        file_schema = pa.schema([f for f in self.schema if f.name not in dropped], metadata=self.schema.metadata)
        splitter = _PartSplitter(_runs(conform(batches, self.schema), keys), self.max_rows_per_file)
        for chunk, (values, part) in enumerate(splitter.parts()):
            if self.error_column is not None and values and values[0] is not None and values[0] < 0:
                first = next(part)
                yield error_row(task, str(first.column(self.error_column)[0].as_py()))
                return  # the driver discards the whole job's output
            index, dest = self._place(values)
            name = f"part-{task.partition:05d}-{chunk:05d}-{self.token}-t{task.task_attempt}{self.suffix}.parquet"
            relative = f"{dest.folder}/{name}" if dest.folder else name
            data = (b.select(file_schema.names) for b in part)
            hashed: list[float] = []
            entry = encode_part(
                self.store,
                f"{dest.key}/{relative}",
                relative,
                file_schema,
                regroup(data, file_schema, group_rows),
                options=self.options,
                partition_values=dest.partition_values,
                on_hashed=hashed.append,
            )
            yield part_row(task, chunk, index, entry, hash_seconds=sum(hashed))
