"""Appending a Spark DataFrame to a dataset: executors write the parts, the driver commits an append."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..dataset import DatasetManifest, FileEntry, ParquetDatasetStore
from ._native import resolve_write_mode
from ._parts import Destination, write_into
from ._spark_schema import spark_schema_to_arrow
from ._spark_write import WriteMode, abandon, write_parts_of
from ._stores import check_shared_store

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def check_spark_args(df: object, datasets: object, action: str) -> None:
    """Refuse a non-DataFrame, a non-dataset store, or a store the executors cannot see.

    Raises:
        TypeError: ``df`` is not a Spark DataFrame or ``datasets`` not a ``ParquetDatasetStore``.
        CapabilityNotSupported: a ``MemoryStore``.
    """
    from pyspark.sql import DataFrame as SparkDataFrame

    if not isinstance(df, SparkDataFrame):
        raise TypeError(f"{action} takes a pyspark.sql.DataFrame, got {type(df).__module__}.{type(df).__name__}")
    if not isinstance(datasets, ParquetDatasetStore):
        raise TypeError(f"datasets must be a ParquetDatasetStore, got {type(datasets).__name__}")
    check_shared_store(datasets.store, action.replace("_", " "))
    names = df.columns
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"the DataFrame names the column(s) {repeated} more than once; column names must be unique")


def append_spark_dataset(
    df: DataFrame,
    datasets: ParquetDatasetStore,
    key: str,
    *,
    run_id: str | None = None,
    metadata: dict[str, str] | None = None,
    partition_by: Sequence[str] | None = None,
    allow_new_columns: bool = False,
    repartition: bool = False,
    mode: WriteMode = "auto",
    expect_owner: Mapping[str, str | None] | None = None,
    idempotency_key: str | None = None,
) -> DatasetManifest:
    """Append a Spark DataFrame's rows to the dataset ``key`` (creating it if absent), on the executors.

    Spark's tasks write the new parts (through the store, or with Spark's own
    writer on a ``LocalStore`` when the schema allows); only one small
    descriptor per part comes back to the driver, which commits them with
    :meth:`ParquetDatasetStore.append_dataset`'s rules: existing files stay, the
    schema must match the dataset's (new nullable columns only with
    ``allow_new_columns``), a partitioned dataset keeps its partitioning, and a
    commit that loses a race with another writer is rebased on the latest
    version and retried, so concurrent appends never lose rows. A retried or
    speculative task leaves exactly one attempt's rows.

    Args:
        df: the rows to append (computed once).
        datasets: the dataset store; its store must be reachable from the executors.
        key: the dataset key.
        run_id, metadata: recorded in the manifest.
        partition_by: for a new dataset, its partition columns; for an existing
            one, ``None`` or exactly its partitioning.
        allow_new_columns: add the DataFrame's extra (nullable) columns to the dataset.
        repartition: for a partitioned dataset, repartition the rows by the
            partition columns first (few, large files per folder).
        mode: as :func:`write_spark_dataset`'s (unpartitioned appends only).
        expect_owner: as :func:`write_spark_dataset`'s.
        idempotency_key: as :meth:`ParquetDatasetStore.append_dataset`'s: the commit records it with
            the content hashes of the parts the executors wrote; if the version it would build on
            already records the key with the same content (an earlier attempt of this append
            committed these rows), the new parts are deleted and that version is returned.

    Returns:
        The committed manifest.

    Raises:
        TypeError: ``df`` is not a Spark DataFrame, or a column cannot be stored.
        ValueError: the schema differs from the dataset's (the message names the
            columns), new columns without ``allow_new_columns``, ``partition_by``
            differs from the dataset's, or a bad key; nothing is written.
        CapabilityNotSupported: a ``MemoryStore`` (invisible to executors).
        ManifestCorrupted: the live manifest cannot be parsed.
        CommitConflict: commits kept winning, or the dataset was repartitioned meanwhile.
        OwnerMismatch: the dataset records another owner than ``expect_owner``; nothing is committed.
        pyspark.errors.PySparkException: the Spark job failed; its files are removed.
    """
    from pyspark.sql import functions as F

    check_spark_args(df, datasets, "append_spark_dataset")
    schema = spark_schema_to_arrow(df.schema)
    pending = datasets.begin_append(
        key,
        schema,
        run_id=run_id,
        metadata=metadata,
        partition_by=partition_by,
        allow_new_columns=allow_new_columns,
        expect_owner=expect_owner,
    )
    target = pending.schema
    if pending.partition_by:
        try:
            entries: list[FileEntry] = write_into(
                df,
                datasets,
                Destination(pending.key),
                txn=pending.txn,
                schema=target,
                partition_by=pending.partition_by,
                repartition=repartition,
            )
        except BaseException:
            abandon(datasets, pending.write)
            raise
    else:
        ordered = df.select(*[F.col(f"`{n}`") for n in target.names])
        resolved = resolve_write_mode(df.sparkSession, datasets, mode)
        if resolved == "native" and not spark_schema_to_arrow(ordered.schema).equals(target):
            resolved = "arrow"  # Spark's writer would not convert to the dataset's types
        entries = write_parts_of(ordered, datasets, pending.write, target, resolved)[0]
    return datasets.commit_append(replace(pending, idempotency_key=idempotency_key), entries)
