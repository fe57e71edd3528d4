"""Executor tasks that write parts grouped by column values (partition folders, files, datasets).

Every Spark write that splits rows goes through :func:`write_spark_parts`:
``partition_by`` writes (overwrite and append), the replacement parts and the
inserted rows of a merge, and any caller that sends groups of rows to
different datasets (a single-run backfill).

Each task sorts its rows by the group columns (``sortWithinPartitions``, or a
``repartition`` by them first when asked, so that each folder gets few,
large files), streams them, and writes one part per group it sees (more if
``max_rows_per_file`` cuts it), with the dataset layer's folder naming
(:func:`~dagster_parquet_dataset.dataset._partition.partition_folder`: Hive
escaping, ``__HIVE_DEFAULT_PARTITION__`` for null and empty values,
non-ASCII kept) and partition-value encoding. Only one descriptor per part
comes back to the driver; no data row does.

Like the unpartitioned writer, every part name carries the write's token and
the task attempt's id; the driver keeps the parts of the one attempt per Spark
partition that Spark reports and deletes every other attempt's files.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..dataset import DatasetManifest, FileEntry, ParquetDatasetStore
from ..dataset._keys import check_folder_fits
from ..dataset._partition import check_partition_by, encode_partition_values, partition_folder
from ..dataset._write import PartOptions, encode_part
from ..storage.base import Capability, Store
from ._schema import spark_schema_to_arrow
from ._write import _GROUP_ROWS, FAIL_AFTER_PART_PROPERTY, _conform, _InjectedTaskFailure, _keep_one_attempt, _regroup

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

#: Name of the column holding each row's destination index (internal; never stored).
GROUP_COLUMN = "__pds_group"

_DESCRIPTOR_DDL = (
    "partition int, chunk int, task_attempt long, attempt int, grp long, path string, row_count long, "
    "size_bytes long, stats string, pvalues string"
)
_DESCRIPTOR_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("chunk", pa.int32()),
        ("task_attempt", pa.int64()),
        ("attempt", pa.int32()),
        ("grp", pa.int64()),
        ("path", pa.string()),
        ("row_count", pa.int64()),
        ("size_bytes", pa.int64()),
        ("stats", pa.string()),
        ("pvalues", pa.string()),
    ]
)


@dataclass(frozen=True)
class Destination:
    """Where one group's rows go.

    Attributes:
        key: the dataset key the parts are written under.
        folder: folder below the key (``""``, or ``"a=1/b=x"`` for a merge rewriting a
            partitioned file in place).
        partition_values: manifest partition values the folder stands for (``None``: none).
    """

    key: str
    folder: str = ""
    partition_values: dict[str, Any] | None = None


@dataclass(frozen=True)
class WrittenParts:
    """What :func:`write_spark_parts` wrote.

    Attributes:
        txn: the token every part name carries.
        entries: per destination index, its parts (paths relative to the destination's
            dataset key, with row counts, sizes, statistics and partition values), in order.
    """

    txn: str
    entries: dict[int, list[FileEntry]] = field(default_factory=dict)


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
    """``(group values, rows)`` for each run of equal ``columns`` values in a sorted stream."""
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


class _GroupSplitter:
    """Consecutive parts of a run stream: a new part at every group change or after ``rows`` rows."""

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
class _GroupTaskWriter:
    """The function ``mapInArrow`` runs on the executors (pickled with the store and the destinations)."""

    store: Store
    txn: str  # the write's token and this job's: every part name carries it
    schema: pa.Schema  # the incoming batches' target schema (data columns, then the group column if any)
    value_schema: pa.Schema  # types of the partition columns, for their manifest encoding
    destinations: tuple[Destination, ...]
    group_column: str | None
    partition_by: tuple[str, ...]
    compression: str
    row_group_size: int | None
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
        partition, attempt, task = ctx.partitionId(), ctx.attemptNumber(), ctx.taskAttemptId()
        fail_partition = ctx.getLocalProperty(FAIL_AFTER_PART_PROPERTY)
        options = PartOptions(self.compression, self.row_group_size)
        group_rows = self.row_group_size or _GROUP_ROWS
        keys = ([self.group_column] if self.group_column else []) + list(self.partition_by)
        dropped = set(keys)
        file_schema = pa.schema([f for f in self.schema if f.name not in dropped], metadata=self.schema.metadata)
        splitter = _GroupSplitter(_runs(_conform(batches, self.schema), keys), self.max_rows_per_file)
        for chunk, (values, part) in enumerate(splitter.parts()):
            index, dest = self._place(values)
            name = f"part-{partition:05d}-{chunk:05d}-{self.txn}-t{task}{self.suffix}.parquet"
            relative = f"{dest.folder}/{name}" if dest.folder else name
            data = (b.select(file_schema.names) for b in part)
            entry = encode_part(
                self.store,
                f"{dest.key}/{relative}",
                relative,
                file_schema,
                _regroup(data, file_schema, group_rows),
                options,
                dest.partition_values,
            )
            yield pa.RecordBatch.from_pylist(
                [
                    {
                        "partition": partition,
                        "chunk": chunk,
                        "task_attempt": task,
                        "attempt": attempt,
                        "grp": index,
                        "path": entry.path,
                        "row_count": entry.row_count,
                        "size_bytes": entry.size_bytes,
                        "stats": json.dumps(entry.stats) if entry.stats else None,
                        "pvalues": json.dumps(entry.partition_values) if entry.partition_values is not None else None,
                    }
                ],
                schema=_DESCRIPTOR_SCHEMA,
            )
            if fail_partition is not None and fail_partition == str(partition) and attempt == 0:
                raise _InjectedTaskFailure(
                    f"test knob {FAIL_AFTER_PART_PROPERTY}: attempt 0 of partition {partition} fails after "
                    f"writing {relative}"
                )


def delete_attempt_leftovers(store: Store, key: str, txn: str, kept: set[str]) -> None:
    """Delete files under dataset ``key`` that carry write token ``txn`` but are not in ``kept``.

    They are parts of failed, retried or speculative task attempts (or of a
    failed write), which no manifest lists.
    """
    if not store.supports(Capability.LIST):
        log.warning("%r cannot list files; leftovers of failed task attempts stay", store)
        return
    marker = f"-{txn}-t"
    prefix = key + "/"
    for info in list(store.list_files(key)):
        relative = info.path[len(prefix) :]
        if marker in relative and relative not in kept:
            store.delete(info.path, missing_ok=True)


def write_spark_parts(
    df: DataFrame,
    datasets: ParquetDatasetStore,
    destinations: Sequence[Destination],
    *,
    schema: pa.Schema | None = None,
    group_column: str | None = None,
    partition_by: Sequence[str] = (),
    value_schema: pa.Schema | None = None,
    repartition: bool = False,
    txn: str | None = None,
    suffix: str = "",
) -> WrittenParts:
    """Executor tasks write ``df``'s rows as parts, grouped by destination and partition values.

    The public building block for writes that split a DataFrame: partitioned
    datasets, merges, and a single-run backfill that sends each partition
    key's rows to its own dataset. Nothing is committed: the caller commits
    the returned entries (``commit_write``, ``commit_append``,
    ``commit_merge``) and, if it gives up, deletes them with
    :func:`delete_attempt_leftovers` (``kept=set()``).

    Part names are ``part-<spark partition>-<chunk>-<txn>-j<job>-t<task attempt><suffix>.parquet``.

    Args:
        df: the rows. Its columns are ``schema``'s data columns (any order),
            plus ``group_column`` (integers indexing ``destinations``) if given.
        datasets: gives the store (reachable from the executors), compression,
            ``row_group_size`` and ``max_rows_per_file``.
        destinations: where each group goes (one entry when ``group_column`` is ``None``).
        schema: the Arrow schema the stored rows must have, partition columns
            included (default: the DataFrame's, as the Spark layer maps it); rows
            are cast to it in the tasks.
        group_column: the column holding each row's destination index; not stored.
        partition_by: columns that further split each destination into
            ``col=value/`` folders; not stored in the files.
        value_schema: types of the ``partition_by`` columns for the manifest
            encoding (default: ``schema``).
        repartition: first repartition the rows by the group and partition
            columns (a shuffle), so each folder gets few, large files.
        txn: the token part names carry (default: a new one).
        suffix: appended to each part name before ``.parquet``.

    Returns:
        :class:`WrittenParts`: the token and, per destination index, the parts of the
        one successful attempt of each Spark partition, in order. A destination with
        no rows has no entry.

    Raises:
        ValueError: a ``partition_by`` or ``group_column`` column is not in ``df``.
        TypeError: a column cannot be converted to ``schema`` (a task fails).
        pyspark.errors.PySparkException: the Spark job failed after Spark's own
            task retries; every file the write put on the store is removed first.
    """
    from pyspark.sql import functions as F

    txn = txn or uuid.uuid4().hex[:16]
    token = f"{txn}-j{uuid.uuid4().hex[:6]}"  # this job's files alone (a write may run several jobs)
    dests = tuple(destinations)
    if not dests:
        raise ValueError("write_spark_parts needs at least one destination")
    partition = tuple(partition_by)
    data_cols = [c for c in df.columns if c != group_column]
    for col in (*partition, *([group_column] if group_column else [])):
        if col not in df.columns:
            raise ValueError(f"column {col!r} is not in the DataFrame; its columns are {df.columns}")
    if schema is None:
        schema = spark_schema_to_arrow(df.select(*[F.col(f"`{c}`") for c in data_cols]).schema)
    target_fields = list(schema)
    ordered = [F.col(f"`{f.name}`") for f in target_fields]
    if group_column is not None:
        ordered.append(F.col(f"`{group_column}`").cast("long"))
        target_fields.append(pa.field(group_column, pa.int64()))
    frame = df.select(*ordered)
    keys = ([group_column] if group_column else []) + list(partition)
    if keys:
        key_cols = [F.col(f"`{c}`") for c in keys]
        if repartition:
            frame = frame.repartition(*key_cols)
        frame = frame.sortWithinPartitions(*key_cols)
    writer = _GroupTaskWriter(
        store=datasets.store,
        txn=token,
        schema=pa.schema(target_fields, metadata=schema.metadata),
        value_schema=value_schema or schema,
        destinations=dests,
        group_column=group_column,
        partition_by=partition,
        compression=datasets.compression,
        row_group_size=datasets.row_group_size,
        max_rows_per_file=datasets.max_rows_per_file,
        suffix=suffix,
    )
    dest_keys = sorted({d.key for d in dests})
    try:
        rows = [r.asDict() for r in frame.mapInArrow(writer, _DESCRIPTOR_DDL).collect()]
    except BaseException:
        for key in dest_keys:
            _quietly(lambda k=key: delete_attempt_leftovers(datasets.store, k, token, set()))  # type: ignore[misc]
        raise
    kept = _keep_one_attempt(rows)
    out: dict[int, list[FileEntry]] = {}
    for r in kept:
        out.setdefault(int(r["grp"]), []).append(  # type: ignore[call-overload]
            FileEntry(
                str(r["path"]),
                int(r["row_count"]),  # type: ignore[call-overload]
                int(r["size_bytes"]),  # type: ignore[call-overload]
                partition_values=json.loads(str(r["pvalues"])) if r["pvalues"] else None,
                stats=json.loads(str(r["stats"])) if r["stats"] else None,
            )
        )
    for key in dest_keys:
        kept_paths = {e.path for i, d in enumerate(dests) if d.key == key for e in out.get(i, [])}
        delete_attempt_leftovers(datasets.store, key, token, kept_paths)
    return WrittenParts(txn, out)


def _quietly(fn: Any) -> None:
    try:
        fn()
    except Exception as exc:  # cleanup must not hide the real error
        log.warning("could not clean up after a failed Spark write: %s", exc)


def delete_parts(datasets: ParquetDatasetStore, key: str, entries: Sequence[FileEntry]) -> None:
    """Delete written but uncommitted parts (never raises)."""
    for entry in entries:
        _quietly(lambda e=entry: datasets.store.delete(f"{key}/{e.path}", missing_ok=True))  # type: ignore[misc]


def entries_of(written: WrittenParts) -> list[FileEntry]:
    """All entries of a single-destination write, in order."""
    return [e for i in sorted(written.entries) for e in written.entries[i]]


def group_index_column(column: str, values: Mapping[Any, int]) -> Any:
    """A Spark column mapping ``column``'s values to destination indices (null for other values)."""
    from itertools import chain

    from pyspark.sql import functions as F

    mapping = F.create_map(*chain.from_iterable((F.lit(k), F.lit(v)) for k, v in values.items()))
    return mapping[F.col(f"`{column}`")]


def write_partitioned(
    df: DataFrame,
    datasets: ParquetDatasetStore,
    key: str,
    schema: pa.Schema,
    partition_by: Sequence[str],
    repartition: bool,
    overwrite: bool,
    run_id: str | None,
    metadata: dict[str, str] | None,
) -> DatasetManifest:
    """``write_spark_dataset`` with ``partition_by``: tasks write the folders, the driver commits once."""
    partition = check_partition_by(partition_by, schema)
    pending = datasets.begin_write(key, overwrite=overwrite, run_id=run_id, metadata=metadata)
    written = write_spark_parts(
        df,
        datasets,
        [Destination(pending.key)],
        schema=schema,
        partition_by=partition,
        repartition=repartition,
        txn=pending.txn,
    )
    return datasets.commit_write(pending, entries_of(written), schema, partition_by=partition)
