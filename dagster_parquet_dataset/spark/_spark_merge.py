"""Merging a Spark DataFrame into a dataset by key columns, on the executors.

The driver only ever receives aggregates: the changes' row count, null-key
counts and key ranges (one row), a duplicate-key example (one row, only on
error), the changes' distinct partition values, one ``(file, matches)`` row per
candidate file, and one descriptor per written part.

1. Spark checks the changes (null and duplicate keys are refused as
   :meth:`ParquetDatasetStore.merge_dataset` refuses them, before anything is
   written) and aggregates their key ranges and partition values.
2. :meth:`ParquetDatasetStore.plan_merge` picks candidate files from the
   manifest alone.
3. The executors read the candidate files' key columns (through the store,
   as the executor-side read does) and join them with the changes: exactly
   the files holding matched keys are rewritten.
4. Tasks write each rewritten file's replacement (its unmatched rows plus the
   matched changes, in the file's own folder) and the inserted rows (into their
   partition folders); :meth:`ParquetDatasetStore.commit_merge` commits once. If
   a concurrent commit touched what the plan relied on, the parts are deleted
   and the merge plans again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..dataset import FileEntry, MergePlan, MergeReplanNeeded, MergeResult, ParquetDatasetStore
from ..dataset.engine import check_key_columns, retry_replans
from ..errors import AlreadyExists, DatasetNotFound, NotFound
from ._jobs import collect_rows
from ._parts import Destination, delete_parts, entries_of, write_into, write_spark_parts
from ._spark_append import check_spark_args
from ._spark_read import _Source, _TaskReader
from ._spark_schema import arrow_schema_to_spark, spark_schema_to_arrow
from ._spark_write import write_spark_dataset

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_FILE = "__pds_file"
_SRC = "__pds_src_"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class _IndexedReader:
    """Reads parts on the executors (the executor-side read), tagging each row with its part's index."""

    reader: _TaskReader

    def __call__(self, batches: Any) -> Any:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                for out in self.reader._read(self.reader.parts[index]):
                    tag = pa.array(np.full(out.num_rows, index, dtype=np.int64))
                    yield pa.RecordBatch.from_arrays([*out.columns, tag], names=[*out.schema.names, _FILE])


def _read_files(
    df: DataFrame, datasets: ParquetDatasetStore, plan: MergePlan, entries: Sequence[FileEntry], columns: Sequence[str]
) -> DataFrame:
    """A DataFrame of ``columns`` of ``entries`` plus ``__pds_file`` (the entry's index), read by the executors."""
    from pyspark.sql.types import LongType, StructField, StructType

    assert plan.schema is not None and plan.manifest is not None
    selected = pa.schema([plan.schema.field(c) for c in columns])
    spark_schema = arrow_schema_to_spark(selected)
    source = _Source(plan.key, plan.manifest, plan.schema, tuple(entries), None)
    reader = _TaskReader(
        store=datasets.store,
        schema=plan.schema,
        parts=tuple(source.parts()),
        target=spark_schema_to_arrow(spark_schema),
    )
    out_schema = StructType([*spark_schema.fields, StructField(_FILE, LongType(), False)])
    spark = df.sparkSession
    return spark.range(0, len(entries), 1, len(entries)).mapInArrow(_IndexedReader(reader), out_schema)


def _col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(f"`{name}`")


def _driver_value(df: DataFrame, name: str) -> Column:
    """``name`` as a column whose collected value is exact: a UTC timestamp as epoch microseconds."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    if isinstance(df.schema[name].dataType, TimestampType):
        return F.unix_micros(_col(name))
    return _col(name)


def _from_driver(df: DataFrame, name: str, value: Any) -> Any:
    from pyspark.sql.types import TimestampType

    if value is not None and isinstance(df.schema[name].dataType, TimestampType):
        return _EPOCH + dt.timedelta(microseconds=int(value))
    return value


def _check_changes(df: DataFrame, keys: list[str]) -> tuple[int, dict[str, tuple[Any, Any]]]:
    """Row count and key ranges of the changes; refuse null and duplicate keys (Spark aggregates only).

    Raises:
        ValueError: a key column holds nulls, or a key appears more than once (the message shows one).
    """
    from pyspark.sql import functions as F

    aggs = [F.count(F.lit(1)).alias("n")]
    for i, k in enumerate(keys):
        aggs += [
            F.sum(F.when(_col(k).isNull(), 1).otherwise(0)).alias(f"null{i}"),
            F.min(_driver_value(df, k)).alias(f"min{i}"),
            F.max(_driver_value(df, k)).alias(f"max{i}"),
        ]
    row = df.agg(*aggs).collect()[0]
    for i, k in enumerate(keys):
        nulls = int(row[f"null{i}"] or 0)
        if nulls:
            raise ValueError(f"key column {k!r} has {nulls} null values in the source; keys must not be null")
    total = int(row["n"])
    if total:
        dups = df.groupBy(*[_col(k) for k in keys]).count().where(F.col("count") > 1)
        found = dups.agg(  # one job, one row: how many duplicate keys, and one of them
            F.count(F.lit(1)).alias("n"), F.min(F.struct(*[_driver_value(df, k).alias(k) for k in keys], "count"))
        ).collect()[0]
        if found["n"]:
            first = found[1]
            example = {k: _from_driver(df, k, first[k]) for k in keys}
            raise ValueError(
                f"the source has {found['n']} duplicate keys (e.g. {example} appears "
                f"{first['count']} times); each key may appear once"
            )
    ranges = {k: (_from_driver(df, k, row[f"min{i}"]), _from_driver(df, k, row[f"max{i}"])) for i, k in enumerate(keys)}
    return total, ranges if total else {}


def _partitioning(datasets: ParquetDatasetStore, key: str, partition_by: Sequence[str] | None) -> tuple[str, ...]:
    try:
        return tuple(datasets.read_manifest(key).partition_by)
    except NotFound:
        return tuple(partition_by or ())


def _distinct_partitions(df: DataFrame, partition: Sequence[str]) -> list[tuple[Any, ...]]:
    if not partition:
        return []
    rows = df.select(*[_driver_value(df, c).alias(c) for c in partition]).distinct().collect()
    return [tuple(_from_driver(df, c, r[c]) for c in partition) for r in rows]


def merge_spark_dataset(
    df: DataFrame,
    datasets: ParquetDatasetStore,
    key: str,
    *,
    key_columns: Sequence[str],
    strategy: str = "upsert",
    partition_by: Sequence[str] | None = None,
    run_id: str | None = None,
    metadata: dict[str, str] | None = None,
    repartition: bool = False,
    expect_owner: Mapping[str, str | None] | None = None,
) -> MergeResult:
    """Merge a Spark DataFrame of changes into the dataset ``key`` by ``key_columns``, on the executors.

    Same semantics as :meth:`ParquetDatasetStore.merge_dataset`: ``upsert``
    replaces matching rows whole and inserts the rest, ``update`` only
    replaces, ``insert`` only adds rows whose key is new. Exactly the files
    holding matched keys are rewritten (in their own folders); every other file
    stays referenced as it is. Only aggregates and per-file descriptors reach
    the driver. The DataFrame is evaluated several times (checks, planning,
    join, write): persist it first if it is expensive or not deterministic.

    Args:
        df: the changes; its columns must be the dataset's (any order, castable types).
        datasets: the dataset store; its store must be reachable from the executors.
        key: the dataset key.
        key_columns: the columns that identify a row.
        strategy: ``"upsert"``, ``"insert"`` or ``"update"``.
        partition_by: for a new dataset, its partition columns; otherwise ``None``
            or exactly the dataset's.
        run_id, metadata: recorded in the manifest.
        repartition: for a partitioned dataset, repartition inserted rows by the
            partition columns first.
        expect_owner: as :func:`~._spark_write.write_spark_dataset`'s (checked by the plan and the commit).

    Returns:
        A :class:`~dagster_parquet_dataset.dataset.MergeResult`.

    Raises:
        ValueError: null or duplicate keys in the changes, unknown strategy, a key
            column missing, a schema the dataset's cannot take, or a key whose
            partition values would change; nothing is written.
        DatasetNotFound: ``strategy="update"`` on a dataset that does not exist.
        TypeError: bad arguments (``df`` not a DataFrame, ``key_columns`` not a list).
        CapabilityNotSupported: a ``MemoryStore``.
        CommitConflict: concurrent commits kept changing the files it planned on.
        OwnerMismatch: the dataset records another owner than ``expect_owner``; nothing is committed.
        pyspark.errors.PySparkException: a Spark job failed; the merge's files are removed.
    """
    check_spark_args(df, datasets, "merge_spark_dataset")
    keys = check_key_columns(key_columns, strategy, df.columns)
    schema = spark_schema_to_arrow(df.schema)
    total, ranges = _check_changes(df, keys)

    def attempt() -> MergeResult:
        partition = _partitioning(datasets, key, partition_by)
        for col in partition:
            if col not in df.columns:
                raise ValueError(f"partition column {col!r} of dataset {key!r} is not in the source")
        plan = datasets.plan_merge(
            key,
            source_schema=schema,
            key_columns=keys,
            strategy=strategy,
            key_ranges=ranges,
            partitions=_distinct_partitions(df, partition),
            partition_by=partition_by,
            run_id=run_id,
            metadata=metadata,
            expect_owner=expect_owner,
        )
        if not plan.exists:
            if strategy == "update":
                raise DatasetNotFound(f"dataset {plan.key!r} does not exist; nothing to update")
            try:
                manifest = write_spark_dataset(
                    df,
                    datasets,
                    key,
                    run_id=run_id,
                    metadata=metadata,
                    partition_by=plan.partition_by or None,
                    repartition=repartition,
                    expect_owner=expect_owner,
                )
            except AlreadyExists:
                raise MergeReplanNeeded() from None  # created meanwhile: merge into it
            return MergeResult(total, 0, (), (), tuple(manifest.parts), manifest.version)
        if plan.partition_by != partition:
            raise MergeReplanNeeded()  # repartitioned between the two manifest reads
        return _merge_once(df, datasets, plan, repartition)

    return retry_replans(
        datasets.commit_timeout,
        attempt,
        lambda: (
            f"dataset {key!r}: gave up merging after {datasets.commit_timeout:g} s; concurrent commits "
            "kept changing the files it planned on (raise commit_timeout to wait longer)"
        ),
    )


def _merge_once(df: DataFrame, datasets: ParquetDatasetStore, plan: MergePlan, repartition: bool) -> MergeResult:
    from pyspark.sql import functions as F

    assert plan.schema is not None
    schema, partition, keys = plan.schema, plan.partition_by, list(plan.key_columns)
    changes = df.select(*[_col(n) for n in schema.names])
    candidates = [*plan.candidates, *plan.elsewhere]
    matched: DataFrame | None = None
    per_file: dict[int, int] = {}
    if candidates:
        target = _read_files(df, datasets, plan, candidates, [*keys, *partition])
        src = changes.select(*[_col(k) for k in keys], *[_col(c).alias(_SRC + c) for c in partition])
        matched = target.join(src, keys, "inner")
        moved = F.lit(False)
        for c in partition:
            moved = moved | ~(_col(c).eqNullSafe(_col(_SRC + c)))
        counts = matched.groupBy(_FILE).agg(
            F.count(F.lit(1)).alias("n"), F.sum(F.when(moved, 1).otherwise(0)).alias("moved")
        )
        rows = collect_rows(counts)  # one row per candidate file that holds matched keys (reads them on the workers)
        if any(int(r["moved"] or 0) for r in rows):
            bad = matched.where(moved).select(*[_driver_value(matched, k).alias(k) for k in keys], _FILE).limit(1)
            first = bad.collect()[0]
            example = {k: _from_driver(matched, k, first[k]) for k in keys}
            entry = candidates[int(first[_FILE])]
            values = tuple((entry.partition_values or {}).get(c) for c in partition)
            raise ValueError(
                f"dataset {plan.key!r}: key {example} exists in partition {values} but the source puts it in "
                "another; partition columns cannot change for existing keys"
            )
        per_file = {int(r[_FILE]): int(r["n"]) for r in rows}

    n_rewrite = len(plan.candidates)
    rewrite = sorted(i for i in per_file if i < n_rewrite) if plan.strategy != "insert" else []
    written: list[FileEntry] = []
    try:
        if rewrite:
            files = [candidates[i] for i in rewrite]
            old = _read_files(df, datasets, plan, files, [n for n in schema.names if n not in partition])
            kept = old.join(changes.select(*[_col(k) for k in keys]), keys, "left_anti")
            where = old.select(*[_col(k) for k in keys], _col(_FILE))
            new = changes.join(where, keys, "inner").drop(*partition)
            replacement = kept.unionByName(new)
            file_schema = pa.schema([f for f in schema if f.name not in partition], metadata=schema.metadata)
            dests = [
                Destination(plan.key, f.path.rpartition("/")[0], dict(f.partition_values) if partition else None)
                for f in files
            ]
            parts = write_spark_parts(
                replacement,
                datasets,
                dests,
                schema=file_schema,
                group_column=_FILE,
                repartition=True,  # one replacement part per rewritten file
                txn=plan.txn,
                suffix="-m",
            )
            written += entries_of(parts)
        inserted = 0
        if plan.strategy != "update":
            inserts = changes
            if matched is not None and per_file:
                inserts = changes.join(matched.select(*[_col(k) for k in keys]), keys, "left_anti")
            new_entries = write_into(inserts, datasets, Destination(plan.key), plan.txn, schema, partition, repartition)
            inserted = sum(e.row_count or 0 for e in new_entries)
            written += new_entries
    except BaseException:
        delete_parts(datasets, plan.key, written)
        raise
    updated = sum(per_file[i] for i in rewrite)
    return datasets.commit_merge(
        plan,
        rewritten=[candidates[i].path for i in rewrite],
        new_entries=written,
        inserted=inserted,
        updated=updated,
    )
