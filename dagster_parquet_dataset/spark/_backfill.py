"""A single-run backfill of a Spark DataFrame: one Spark job writes every partition's parts.

The executors do the splitting: a first ``mapInArrow`` stage tags each row
with the index of its partition (the run's locator maps the rows of each
batch; a null or a value outside the run marks the rows with ``-1`` and the
reason), the rows are sorted by that index within each Spark partition, and
the one Spark task writer (:mod:`._task_writer`) writes one part per
partition a task holds into that partition's dataset folder (staged, then
renamed, on a store that renames). Only one small descriptor row per part
comes back to the driver, which keeps one attempt per Spark partition, then
commits the N manifests in parallel threads through the dataset layer's
``begin_write`` / ``commit_write``.

A row that maps to no partition of the run makes its task return an error
row instead of parts; the driver then deletes everything the job wrote and
raises ``ValueError``: no partition changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..dagster_io._backfill import Backfill, commit_each
from ..dataset import DatasetManifest, FileEntry, ParquetDatasetStore, PendingWrite
from ._parts import GROUP_COLUMN, drop_staging, place, staging_folder, write_spark_parts
from ._schema import spark_schema_to_arrow
from ._stores import check_shared_store
from ._task_writer import Destination
from ._write import abandon

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Name of the column holding why a row maps to no partition (internal; never stored).
ERROR_COLUMN = "__pds_error"


@dataclass(frozen=True)
class _Locate:
    """Appends each row's partition index (and, for a row of no partition, why) to Spark's batches."""

    locator: Any  # an object with ``codes(batch) -> np.ndarray`` raising ValueError/TypeError

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
    folders = [staging_folder(datasets.store, p.txn) for p in pendings]
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    tagged = df.mapInArrow(
        _Locate(backfill.locator),
        StructType([*df.schema.fields, StructField(GROUP_COLUMN, LongType()), StructField(ERROR_COLUMN, StringType())]),
    )
    try:
        written = write_spark_parts(
            tagged,
            datasets,
            [Destination(p.key, f) for p, f in zip(pendings, folders, strict=True)],
            schema=schema,
            group_column=GROUP_COLUMN,
            error_column=ERROR_COLUMN,
        )

        def put(i: int) -> list[FileEntry]:
            entries = written.entries.get(i, [])
            if not folders[i]:
                return entries
            try:
                return place(datasets.store, pendings[i].key, entries, pendings[i].part_name)
            finally:
                drop_staging(datasets.store, pendings[i].key, pendings[i].txn)

        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pds-backfill") as pool:
            placed = list(pool.map(put, range(len(targets))))
    except (ValueError, TypeError) as exc:
        for p in pendings:
            abandon(datasets, p)
        raise type(exc)(f"{backfill.what}: {exc}") from None
    except BaseException:
        for p in pendings:
            abandon(datasets, p)
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
            abandon(datasets, pendings[i])
            for entry in placed[i]:
                datasets.store.delete(f"{pendings[i].key}/{entry.path}", missing_ok=True)
        raise
