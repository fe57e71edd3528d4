"""Writing a Spark DataFrame as a dataset: executors write the parts, the driver commits once.

Two paths, same result (the dataset layer's format and commit):

``arrow`` (any shared :class:`Store`)
    ``DataFrame.mapInArrow`` runs :class:`~._task_writer.TaskWriter`: every
    task streams its Arrow batches into Parquet parts through the pickled
    store and yields one small row per part. The driver keeps exactly one
    attempt per Spark partition (see :mod:`._parts`) and commits.

``native`` (a :class:`LocalStore`; an ``S3Store`` when Spark has ``s3a://``)
    Spark's own Parquet writer (see :mod:`._native`).

On a store with :attr:`~dagster_parquet_dataset.Capability.RENAME` the parts
are staged and renamed to the dataset layer's names (``part-NNNNN.parquet``
for a new dataset, with the write token otherwise). Other stores have no cheap
rename (on S3 it is a full copy), so there the parts keep the names the tasks
gave them; the manifest is the only list of parts either way.

When the job fails, the driver waits until its tasks have stopped, deletes
what they wrote, and abandons the write (a new dataset's ``_claim`` is
released, so the key reads as absent again).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

import pyarrow as pa

from ..dataset import DatasetManifest, FileEntry, ParquetDatasetStore, PendingWrite
from ..dataset.engine import check_partition_by
from ..errors import NotFound
from ._native import native_folder, resolve_write_mode, write_native
from ._parts import Destination, write_into, write_staged
from ._spark_schema import spark_schema_to_arrow
from ._stores import check_shared_store, s3a_available, spark_read_uri, spark_uri

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "WriteMode",
    "check_shared_store",
    "s3a_available",
    "spark_read_uri",
    "spark_uri",
    "write_parts_of",
    "write_spark_dataset",
]

log = logging.getLogger(__name__)

WriteMode = Literal["auto", "arrow", "native"]


def write_parts_of(
    df: DataFrame, datasets: ParquetDatasetStore, pending: PendingWrite, schema: pa.Schema, resolved: str
) -> tuple[list[FileEntry], pa.Schema]:
    """The parts of an unpartitioned write of ``df`` for ``pending``, written by ``resolved`` (arrow/native).

    On failure everything the write put on the store is removed, once Spark's tasks stopped,
    and ``pending`` is abandoned.

    Raises:
        pyspark.errors.PySparkException: the Spark job failed.
        RemoteStoreError: the native writer's output is unusable, or a final part name is taken.
    """
    try:
        if resolved == "native":
            return write_native(df, datasets, pending.key, pending.txn, schema, name=pending.part_name)
        return write_staged(
            df, datasets, key=pending.key, txn=pending.txn, schema=schema, name=pending.part_name
        ), schema
    except BaseException:
        abandon(datasets, pending, native_folder(datasets, pending.txn) if resolved == "native" else None)
        raise


def abandon(datasets: ParquetDatasetStore, pending: PendingWrite, folder: str | None = None) -> None:
    """After a failed Spark write: remove ``folder`` (under the key) and abandon ``pending``. Never raises."""
    try:
        if folder is not None:
            try:
                datasets.store.delete_folder(f"{pending.key}/{folder}")
            except NotFound:
                pass
        datasets.abandon_write(pending)
    except Exception as exc:  # cleanup must not hide the real error
        log.warning("could not clean up after a failed Spark write to %r: %s", pending.key, exc)


def write_spark_dataset(
    df: DataFrame,
    datasets: ParquetDatasetStore,
    key: str,
    *,
    overwrite: bool = False,
    run_id: str | None = None,
    metadata: dict[str, str] | None = None,
    mode: WriteMode = "auto",
    partition_by: Sequence[str] | None = None,
    repartition: bool = False,
    expect_owner: Mapping[str, str | None] | None = None,
) -> DatasetManifest:
    """Write a Spark DataFrame as the dataset ``key``: executors write the parts, the driver commits once.

    The dataset has the dataset layer's format and guarantees (manifest with
    per-file row counts and sizes taken from the Parquet writers, the Arrow
    schema, ``_SUCCESS``; atomic, conflict-checked commit; a crash leaves the
    previous version intact). ``datasets``' ``compression``,
    ``max_rows_per_file`` (per Spark partition) and ``row_group_size`` apply.
    The DataFrame is computed once.

    Args:
        df: the DataFrame. Its Spark schema is stored as Arrow:
            ``TimestampType`` as ``timestamp[us, tz=UTC]``, ``TimestampNTZType``
            as ``timestamp[us]``, decimals, arrays, maps and structs as such.
        datasets: the dataset store; its store must be reachable from the
            executors (a ``LocalStore`` on a shared disk, or an ``S3Store``).
        key: the dataset key.
        overwrite: replace an existing dataset.
        run_id, metadata: recorded in the manifest.
        mode: ``"arrow"`` writes through the store from the executors
            (``mapInArrow``; any shared store, the only way to S3 without
            hadoop-aws); ``"native"`` uses Spark's own Parquet writer (a
            ``LocalStore``, or an ``S3Store`` when Spark has ``s3a://``);
            ``"auto"`` picks native on a ``LocalStore`` when the codec and
            options allow it, else arrow. A ``partition_by`` write always
            takes the arrow path.
        partition_by: split the rows into ``col=value/`` folders named and
            encoded exactly as :meth:`ParquetDatasetStore.write_dataset` does
            (null and empty values in ``__HIVE_DEFAULT_PARTITION__``, non-ASCII
            kept); each task writes one part per folder it touches.
        repartition: with ``partition_by``, first repartition the rows by the
            partition columns (a shuffle) so each folder gets few, large files.
        expect_owner: the owner the replaced version must record
            (``ParquetDatasetStore.write_dataset``'s), checked when the write
            begins and again by the commit.

    Returns:
        The committed manifest.

    Raises:
        TypeError: ``df`` is not a Spark DataFrame, or a column's type cannot be
            stored (the message names the column); nothing is written.
        ValueError: bad ``mode``, duplicate column names, or a bad key.
        CapabilityNotSupported: a ``MemoryStore`` (invisible to executors), or
            ``mode="native"`` where Spark cannot write (the message says why).
        AlreadyExists: the dataset exists and ``overwrite`` is false.
        CommitConflict: an overwrite kept losing the commit race.
        OwnerMismatch: the dataset records another owner than ``expect_owner``
            (when the write begins or when it commits); nothing is committed and
            the parts are deleted.
        pyspark.errors.PySparkException: the Spark job failed (after Spark's
            own task retries); what the write put on the store is removed once
            its tasks stopped, and a new dataset's claim is released.
    """
    from pyspark.sql import DataFrame as SparkDataFrame

    if not isinstance(df, SparkDataFrame):
        raise TypeError(
            f"write_spark_dataset takes a pyspark.sql.DataFrame, got {type(df).__module__}.{type(df).__name__}"
        )
    if not isinstance(datasets, ParquetDatasetStore):
        raise TypeError(f"datasets must be a ParquetDatasetStore, got {type(datasets).__name__}")
    resolved = resolve_write_mode(df.sparkSession, datasets, mode)
    schema = spark_schema_to_arrow(df.schema)
    partition = check_partition_by(partition_by, schema) if partition_by is not None and len(partition_by) else ()
    pending = datasets.begin_write(
        key, overwrite=overwrite, run_id=run_id, metadata=metadata, expect_owner=expect_owner
    )
    if not partition:
        entries, stored = write_parts_of(df, datasets, pending, schema, resolved)
        return datasets.commit_write(pending, entries, stored)
    try:
        entries = write_into(
            df,
            datasets,
            Destination(pending.key),
            txn=pending.txn,
            schema=schema,
            partition_by=partition,
            repartition=repartition,
        )
    except BaseException:
        abandon(datasets, pending)
        raise
    return datasets.commit_write(pending, entries, schema, partition_by=partition)
