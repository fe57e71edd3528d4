"""A single-run backfill of a Spark DataFrame: one Spark job writes every partition's parts.

The executors do the splitting: a first ``mapInArrow`` stage tags each row
with the index of its partition (the run's
:class:`~dagster_parquet_dataset.dataset.engine.RowLocator`, plain data,
maps the rows of each batch; a null or a value outside the run marks the rows with ``-1`` and the
reason), the rows are sorted by that index within each Spark partition, and
the one Spark task writer (:mod:`._task_writer`) writes one part per
partition a task holds into that partition's dataset folder (staged, then
renamed, on a store that renames). Only one small descriptor row per part
comes back to the driver, which keeps one attempt per Spark partition, then
commits the N manifests in parallel threads through the dataset layer's
``begin_write`` / ``commit_write``.

Every ``write_mode`` works this way: an overwrite (optionally with
``partition_by`` folders) and an append write all partitions' parts in that
one job, then commit each partition (``commit_write`` / ``commit_append``);
a merge checks every row's partition in one job first, then merges each
partition's rows on the executors (:func:`~._spark_merge.merge_spark_dataset`).

A row that maps to no partition of the run makes its task return an error
row instead of parts; the driver then deletes everything the job wrote and
raises ``ValueError``: no partition changes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..dagster_io._backfill_split import Backfill, commit_each
from ..dagster_io._ownership import commit_owner
from ..dataset import DatasetManifest, FileEntry, ParquetDatasetStore, PendingAppend, PendingWrite
from ..dataset.engine import RowLocator, check_partition_by
from ..errors import CommitOutcomeUnknown
from ._descriptor import first_error
from ._jobs import collect_rows
from ._parts import GROUP_COLUMN, drop_staging, place, staging_folder, write_spark_parts
from ._spark_merge import merge_spark_dataset
from ._spark_schema import spark_schema_to_arrow
from ._spark_write import abandon
from ._stores import check_shared_store
from ._task_writer import Destination

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

#: Name of the column holding why a row maps to no partition (internal; never stored).
ERROR_COLUMN = "__pds_error"


@dataclass(frozen=True)
class _Locate:
    """Appends each row's partition index (and, for a row of no partition, why) to Spark's batches."""

    locator: RowLocator  # plain data: no Dagster object travels to the executors

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            error = None
            try:
                codes = self.locator.codes(batch)
            except (ValueError, TypeError) as exc:
                codes = np.full(batch.num_rows, -1, dtype=np.int64)
                error = f"{type(exc).__name__}: {exc}"
            columns = [*batch.columns, pa.array(codes, pa.int64()), pa.array([error] * batch.num_rows, pa.string())]
            yield pa.RecordBatch.from_arrays(columns, names=[*batch.schema.names, GROUP_COLUMN, ERROR_COLUMN])


def _tag(df: DataFrame, locator: RowLocator) -> DataFrame:
    """``df`` plus each row's partition index (``-1`` for a row of no partition) and the reason."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    plain = RowLocator(locator.dimensions, locator.lookup, locator.partition_keys)  # not a Dagster subclass
    fields = [*df.schema.fields, StructField(GROUP_COLUMN, LongType()), StructField(ERROR_COLUMN, StringType())]
    return df.mapInArrow(_Locate(plain), StructType(fields))


def write_spark_partitions(
    df: DataFrame, datasets: ParquetDatasetStore, backfill: Backfill, *, repartition: bool = False
) -> list[DatasetManifest]:
    """Write ``df`` split by ``backfill``'s partitions with its write options, on the executors.

    ``overwrite`` (the default): each partition's dataset is replaced
    (``backfill.run_id`` and the target's metadata in its manifest); a
    partition with no rows gets an empty dataset with the DataFrame's schema.
    ``append``: each partition's rows are appended (a partition with no rows
    gets an append of nothing). Both write every partition in one Spark job,
    with ``partition_by`` folders if asked. ``merge``: one job checks every
    row's partition, then each partition's rows are merged into its dataset.
    ``datasets``' ``compression``, ``row_group_size`` and ``max_rows_per_file``
    apply; nothing data-sized comes back to the driver.

    Args:
        df: the rows of every partition of the run.
        datasets: the dataset store (reachable from the executors).
        backfill: the run's partitions, locator and write options.
        repartition: with ``partition_by``, repartition the rows by the partition and
            partition columns first (few, large files per folder).

    Returns:
        The committed manifest per target, in order (for a merge, the manifest after it).

    Raises:
        ValueError: a row's partition value is null or in no partition of the run
            (the message names value and column), or (append) the partitions'
            datasets differ in schema or partitioning; nothing is committed and the
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
    tagged = _tag(df, backfill.locator)
    if backfill.options.write_mode == "merge":
        return _merge_each(tagged, datasets, backfill, repartition)
    targets = backfill.targets
    threads = max(1, min(backfill.threads, len(targets)))
    appending = backfill.options.write_mode == "append"

    def begin(i: int) -> PendingWrite | PendingAppend:
        t = targets[i]
        if appending:
            return datasets.begin_append(
                t.dataset_key,
                schema,
                run_id=backfill.run_id,
                metadata=t.metadata,
                partition_by=backfill.options.partition_by,
                allow_new_columns=backfill.options.allow_new_columns,
                expect_owner=commit_owner(t.metadata),
            )
        return datasets.begin_write(
            t.dataset_key,
            overwrite=True,
            run_id=backfill.run_id,
            metadata=t.metadata,
            expect_owner=commit_owner(t.metadata),
        )

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pds-backfill") as pool:
        pendings = list(pool.map(begin, range(len(targets))))
    writes = [p.write if isinstance(p, PendingAppend) else p for p in pendings]
    try:
        stored, partition = _layout(pendings, schema, backfill)
        renames = not appending and not partition
        folders = [staging_folder(datasets.store, w.txn) if renames else "" for w in writes]
        written = write_spark_parts(
            tagged,
            datasets,
            [Destination(w.key, f) for w, f in zip(writes, folders, strict=True)],
            schema=stored,
            group_column=GROUP_COLUMN,
            error_column=ERROR_COLUMN,
            partition_by=partition,
            repartition=repartition,
        )

        def put(i: int) -> list[FileEntry]:
            entries = written.entries.get(i, [])
            if not folders[i]:
                return entries
            try:
                return place(datasets.store, writes[i].key, entries, writes[i].part_name)
            finally:
                drop_staging(datasets.store, writes[i].key, writes[i].txn)

        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pds-backfill") as pool:
            placed = list(pool.map(put, range(len(targets))))
    except (ValueError, TypeError) as exc:
        for w in writes:
            abandon(datasets, w)
        raise type(exc)(f"{backfill.what}: {exc}") from None
    except BaseException:
        for w in writes:
            abandon(datasets, w)
        raise
    committed: set[int] = set()
    failed: dict[int, BaseException] = {}

    def commit(i: int) -> DatasetManifest:
        pending = pendings[i]
        try:
            if isinstance(pending, PendingAppend):
                manifest = datasets.commit_append(pending, placed[i])
            else:
                manifest = datasets.commit_write(pending, placed[i], stored, partition_by=partition or None)
        except BaseException as exc:
            failed[i] = exc
            raise
        committed.add(i)
        return manifest

    try:
        return commit_each([t.partition_key for t in targets], commit, backfill.threads, backfill.what)
    except BaseException:
        for i in set(range(len(targets))) - committed:
            _clean_up(datasets, writes[i], placed[i], failed.get(i), started=i in failed)
        raise


def _clean_up(
    datasets: ParquetDatasetStore,
    write: PendingWrite,
    placed: list[FileEntry],
    error: BaseException | None,
    *,
    started: bool,
) -> None:
    """Remove the parts of one partition of a failed backfill, never a file a commit may have listed.

    A partition whose commit never started: its parts are in no manifest, they go. One whose commit
    raised: the commit itself deleted its parts if it knew it lost, and kept them if its outcome was
    unknown (or it landed, e.g. when only its ``_SUCCESS`` write failed). After a definite error
    (an ``Exception`` other than ``CommitOutcomeUnknown``) what is left goes through
    ``abandon_write``, which never deletes a file the live or a retained version lists; after an
    unknown outcome or an interrupt nothing is deleted (vacuum removes what no version lists).
    """
    if not started:
        abandon(datasets, write)
        for entry in placed:
            datasets.store.delete(f"{write.key}/{entry.path}", missing_ok=True)
        return
    if isinstance(error, Exception) and not isinstance(error, CommitOutcomeUnknown):
        try:
            datasets.abandon_write(write, [e.path for e in placed])
        except Exception as exc:  # cleanup must not hide the real error
            log.warning("could not clean up after a failed commit of %r: %s", write.key, exc)


def _layout(
    pendings: list[PendingWrite | PendingAppend], schema: pa.Schema, backfill: Backfill
) -> tuple[pa.Schema, tuple[str, ...]]:
    """The stored schema and partition columns every partition's parts share.

    Raises:
        ValueError: an append's partitions' datasets differ in schema or partitioning
            (one Spark job writes them all with one schema), or a bad ``partition_by``.
    """
    if not all(isinstance(p, PendingAppend) for p in pendings):
        by = backfill.options.partition_by
        return schema, check_partition_by(by, schema) if by else ()
    appends = [p for p in pendings if isinstance(p, PendingAppend)]
    first = appends[0]
    for other, target in zip(appends, backfill.targets, strict=True):
        if not other.schema.equals(first.schema) or other.partition_by != first.partition_by:
            raise ValueError(
                f"partition {target.partition_key!r} has the schema {other.schema} partitioned by "
                f"{list(other.partition_by)}, but partition {backfill.targets[0].partition_key!r} has "
                f"{first.schema} partitioned by {list(first.partition_by)}; a single-run append writes every "
                "partition with one schema. Nothing was written."
            )
    return first.schema, first.partition_by


def _merge_each(
    tagged: DataFrame, datasets: ParquetDatasetStore, backfill: Backfill, repartition: bool
) -> list[DatasetManifest]:
    """Check every row's partition (one job), then merge each partition's rows into its dataset.

    Raises:
        ValueError / TypeError: a row maps to no partition of the run; nothing is written.
        BackfillIncomplete: some partitions merged and others failed.
    """
    from pyspark.sql import functions as F

    bad = collect_rows(tagged.where(F.col(GROUP_COLUMN) < 0).select(ERROR_COLUMN).limit(1))
    error = first_error([{"error": r[ERROR_COLUMN]} for r in bad])
    if error is not None:
        raise type(error)(f"{backfill.what}: {error}")
    options = backfill.options
    columns = [c for c in tagged.columns if c not in (GROUP_COLUMN, ERROR_COLUMN)]

    def merge(i: int) -> DatasetManifest:
        target = backfill.targets[i]
        rows = tagged.where(F.col(GROUP_COLUMN) == i).select(*[F.col(f"`{c}`") for c in columns])
        merge_spark_dataset(
            rows,
            datasets,
            target.dataset_key,
            key_columns=list(options.key_columns or ()),
            strategy=options.merge_strategy,
            partition_by=options.partition_by,
            run_id=backfill.run_id,
            metadata=target.metadata,
            repartition=repartition,
            expect_owner=commit_owner(target.metadata),
        )
        return datasets.read_manifest(target.dataset_key)

    return commit_each([t.partition_key for t in backfill.targets], merge, backfill.threads, backfill.what)
