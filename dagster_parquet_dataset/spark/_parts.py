"""Driver side of every Spark write: run :class:`~._task_writer.TaskWriter` over a DataFrame, keep one attempt.

:func:`write_spark_parts` is the public building block (``partition_by``
writes and appends, the replacement parts and inserted rows of a merge,
single-run backfills, and any caller sending groups of rows to different
datasets); :func:`write_staged` is the plain write's path, which on a store
with :attr:`~dagster_parquet_dataset.Capability.RENAME` writes into a staging
folder and renames the parts to the dataset layer's names.

Each task sorts its rows by the group columns (``sortWithinPartitions``, or a
``repartition`` by them first when asked, so that each folder gets few, large
files) and writes one part per group it sees (more if ``max_rows_per_file``
cuts it), with the dataset layer's folder naming and partition-value
encoding. Only one descriptor per part comes back to the driver.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..dataset import FileEntry, ParquetDatasetStore
from ..dataset.engine import PartOptions
from ..errors import NotFound
from ..storage.base import Capability, Store
from ._descriptor import DDL, entries_by_group, first_error, hash_seconds
from ._jobs import collect_rows
from ._spark_schema import spark_schema_to_arrow
from ._task_writer import Destination, TaskWriter

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

log = logging.getLogger(__name__)

#: Name of the column holding each row's destination index (internal; never stored).
GROUP_COLUMN = "__pds_group"

#: Folder (under the dataset key, followed by the write's token) where parts wait to be renamed.
STAGING = "_spark_staging-"

#: Whether Spark writes record each part's content hash (:attr:`FileEntry.content_hash`). Always on;
#: ``benchmarks/bench_spark.py`` turns it off for one variant to measure what the hash costs a write.
HASH_CONTENT = True


@dataclass
class HashClock:
    """CPU seconds the executors spent computing content hashes, summed over tasks and Spark writes
    since :meth:`reset` (a measurement: ``benchmarks/bench_spark.py`` reports it as a share of a write)."""

    seconds: float = 0.0

    def add(self, seconds: float) -> None:
        self.seconds += seconds

    def reset(self) -> None:
        self.seconds = 0.0


#: The driver's :class:`HashClock`; :func:`write_spark_parts` and the native write add to it.
HASH_CLOCK = HashClock()


def part_options(datasets: ParquetDatasetStore) -> PartOptions:
    """The Parquet encoding options of ``datasets``, for parts written on the executors."""
    return PartOptions(datasets.compression, datasets.row_group_size, hash_content=HASH_CONTENT)


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


def delete_attempt_leftovers(store: Store, key: str, txn: str, kept: set[str]) -> None:
    """Delete files under dataset ``key`` that carry write token ``txn`` but are not in ``kept``.

    They are parts of failed, retried or speculative task attempts (or of a
    failed write), which no manifest lists.
    """
    if not store.supports(Capability.LIST):
        log.warning("%r cannot list files; leftovers of failed task attempts stay", store)
        return
    marker = f"-{txn}-"
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
    error_column: str | None = None,
) -> WrittenParts:
    """Executor tasks write ``df``'s rows as parts, grouped by destination and partition values.

    Nothing is committed: the caller commits the returned entries
    (``commit_write``, ``commit_append``, ``commit_merge``) and, if it gives up,
    deletes them with :func:`delete_attempt_leftovers` (``kept=set()``) or the
    dataset layer's ``abandon_write``.

    Part names are ``part-<spark partition>-<chunk>-<txn>-j<job>-t<task attempt><suffix>.parquet``.

    Args:
        df: the rows. Its columns are ``schema``'s data columns (any order),
            plus ``group_column`` (integers indexing ``destinations``) and
            ``error_column`` if given.
        datasets: gives the store (reachable from the executors), compression,
            ``row_group_size`` and ``max_rows_per_file``.
        destinations: where each group goes (one entry when ``group_column`` is ``None``).
        schema: the Arrow schema the stored rows must have, partition columns
            included (default: the DataFrame's, as the Spark layer maps it); rows
            are cast to it in the tasks.
        group_column: the column holding each row's destination index; not stored.
            A negative index marks a bad row: ``error_column`` says why.
        partition_by: columns that further split each destination into
            ``col=value/`` folders; not stored in the files.
        value_schema: types of the ``partition_by`` columns for the manifest
            encoding (default: ``schema``).
        repartition: first repartition the rows by the group and partition
            columns (a shuffle), so each folder gets few, large files.
        txn: the token part names carry (default: a new one).
        suffix: appended to each part name before ``.parquet``.
        error_column: with ``group_column``, the column holding
            ``"<ValueError|TypeError>: <message>"`` on rows whose index is negative; not stored.

    Returns:
        :class:`WrittenParts`: the token and, per destination index, the parts of the
        one successful attempt of each Spark partition, in order. A destination with
        no rows has no entry.

    Raises:
        ValueError: a ``partition_by`` or ``group_column`` column is not in ``df``, or a
            row is marked bad (the message is its ``error_column`` text); nothing is kept.
        TypeError: a row is marked bad with a ``TypeError`` text; nothing is kept.
        pyspark.errors.PySparkException: the Spark job failed after Spark's own
            task retries; once its tasks stopped, every file the job wrote is removed.
    """
    txn = txn or uuid.uuid4().hex[:16]
    token = f"{txn}-j{uuid.uuid4().hex[:6]}"  # this job's files alone (a write may run several jobs)
    dests = tuple(destinations)
    if not dests:
        raise ValueError("write_spark_parts needs at least one destination")
    partition = tuple(partition_by)
    extra = [c for c in (group_column, error_column) if c is not None]
    for col in (*partition, *extra):
        if col not in df.columns:
            raise ValueError(f"column {col!r} is not in the DataFrame; its columns are {df.columns}")
    if schema is None:
        schema = spark_schema_to_arrow(df.select(*[_col(c) for c in df.columns if c not in extra]).schema)
    target_fields = list(schema)
    ordered = [_col(f.name) for f in target_fields]
    if group_column is not None:
        ordered.append(_col(group_column).cast("long"))
        target_fields.append(pa.field(group_column, pa.int64()))
    if error_column is not None:
        ordered.append(_col(error_column).cast("string"))
        target_fields.append(pa.field(error_column, pa.string()))
    frame = df.select(*ordered)
    keys = ([group_column] if group_column else []) + list(partition)
    if keys:
        key_cols = [_col(c) for c in keys]
        if repartition:
            frame = frame.repartition(*key_cols)
        frame = frame.sortWithinPartitions(*key_cols)
    writer = TaskWriter(
        store=datasets.store,
        token=token,
        schema=pa.schema(target_fields, metadata=schema.metadata),
        value_schema=value_schema or schema,
        destinations=dests,
        group_column=group_column,
        error_column=error_column,
        partition_by=partition,
        options=part_options(datasets),
        max_rows_per_file=datasets.max_rows_per_file,
        suffix=suffix,
    )
    dest_keys = sorted({d.key for d in dests})

    def discard() -> None:
        for key in dest_keys:
            quietly(lambda k=key: delete_attempt_leftovers(datasets.store, k, token, set()))  # type: ignore[misc]

    try:
        rows = collect_rows(frame.mapInArrow(writer, DDL))
    except BaseException:
        discard()
        raise
    error = first_error(rows)
    if error is not None:
        discard()
        raise error
    out = entries_by_group(rows)
    HASH_CLOCK.add(hash_seconds(rows))
    for key in dest_keys:
        kept_paths = {e.path for i, d in enumerate(dests) if d.key == key for e in out.get(i, [])}
        delete_attempt_leftovers(datasets.store, key, token, kept_paths)
    return WrittenParts(txn, out)


def _col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(f"`{name}`")


def quietly(fn: Callable[[], object]) -> None:
    """Run a clean-up step; log instead of raising (a clean-up must not hide the real error)."""
    try:
        fn()
    except Exception as exc:
        log.warning("could not clean up after a failed Spark write: %s", exc)


def delete_parts(datasets: ParquetDatasetStore, key: str, entries: Sequence[FileEntry]) -> None:
    """Delete written but uncommitted parts (never raises)."""
    for entry in entries:
        quietly(lambda e=entry: datasets.store.delete(f"{key}/{e.path}", missing_ok=True))  # type: ignore[misc]


def entries_of(written: WrittenParts) -> list[FileEntry]:
    """All entries of a single-destination write, in order."""
    return [e for i in sorted(written.entries) for e in written.entries[i]]


def write_into(
    df: DataFrame,
    datasets: ParquetDatasetStore,
    destination: Destination,
    *,
    txn: str,
    schema: pa.Schema,
    partition_by: Sequence[str] = (),
    repartition: bool = False,
) -> list[FileEntry]:
    """:func:`write_spark_parts` to one destination: its parts, in order.

    Raises:
        as :func:`write_spark_parts`.
    """
    written = write_spark_parts(
        df, datasets, [destination], schema=schema, partition_by=partition_by, repartition=repartition, txn=txn
    )
    return entries_of(written)


def group_index_column(column: str, values: Mapping[Any, int]) -> Any:
    """A Spark column mapping ``column``'s values to destination indices (null for other values)."""
    from itertools import chain

    from pyspark.sql import functions as F

    mapping = F.create_map(*chain.from_iterable((F.lit(k), F.lit(v)) for k, v in values.items()))
    return mapping[_col(column)]


# ------------------------------------------------------------------- staging and renames


def staging_folder(store: Store, txn: str) -> str:
    """The folder a write with token ``txn`` stages its parts in: ``""`` (none) if ``store`` cannot rename."""
    return f"{STAGING}{txn}" if store.supports(Capability.RENAME) else ""


def place(store: Store, key: str, entries: Sequence[FileEntry], name: Callable[[int], str]) -> list[FileEntry]:
    """Rename staged parts of dataset ``key`` to ``name(i)``, in order; undo the renames done if one fails.

    Raises:
        AlreadyExists: a target name is taken (another writer uses this write's names).
        NotFound: a staged part vanished.
    """
    placed: list[FileEntry] = []
    try:
        for i, entry in enumerate(entries):
            final = name(i)
            store.rename(f"{key}/{entry.path}", f"{key}/{final}")
            placed.append(replace(entry, path=final))
    except BaseException:
        for entry in placed:
            quietly(lambda e=entry: store.delete(f"{key}/{e.path}", missing_ok=True))  # type: ignore[misc]
        raise
    return placed


def drop_staging(store: Store, key: str, txn: str) -> None:
    """Remove what is left in the staging folder of the write ``txn`` (never raises)."""
    try:
        store.delete_folder(f"{key}/{STAGING}{txn}")
    except NotFound:
        pass
    except Exception as exc:
        log.warning("could not remove the staging folder of a Spark write to %r: %s", key, exc)


def write_staged(
    df: DataFrame,
    datasets: ParquetDatasetStore,
    *,
    key: str,
    txn: str,
    schema: pa.Schema,
    name: Callable[[int], str],
) -> list[FileEntry]:
    """Write ``df`` unsplit as parts of ``key``; on a store that renames, staged then renamed to ``name(i)``.

    Raises:
        pyspark.errors.PySparkException: the Spark job failed; its files are removed.
        AlreadyExists: a final name is taken.
    """
    folder = staging_folder(datasets.store, txn)
    try:
        entries = write_into(df, datasets, Destination(key, folder), txn=txn, schema=schema)
        return place(datasets.store, key, entries, name) if folder else entries
    finally:
        if folder:
            drop_staging(datasets.store, key, txn)
