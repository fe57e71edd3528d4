"""Merging a Spark DataFrame into a dataset by key columns, on the executors, in two Spark jobs.

The driver only ever receives aggregates: per task of the first job one row
(row count, null-key counts, key ranges, row-hash sums, distinct partition
values), and from the second one record per written part, per-file match counts
and, only on error, one duplicate or moved key.

1. One Spark job checks the changes (null keys are refused as
   :meth:`ParquetDatasetStore.merge_dataset` refuses them, before anything is
   written) and aggregates their key ranges, partition values and, for an
   idempotent merge, the hash of their rows (per-task aggregates: no shuffle).
2. :meth:`ParquetDatasetStore.plan_merge` picks candidate files from the
   manifest alone, on the driver.
3. One Spark job (:func:`~._merge_job.run_merge_job`; one task per core reads the
   changes) matches the changes with the candidate files' keys, refuses duplicate keys and keys whose partition
   would change (deleting what it wrote), and writes each matched file's
   replacement (its unmatched rows plus the matched changes, in the file's own
   folder) and the inserted rows (into their partition folders). Exactly the
   files holding matched keys are rewritten.
   :meth:`ParquetDatasetStore.commit_merge` commits once. If a concurrent commit
   touched what the plan relied on, the parts are deleted and the merge plans again.

A merge that creates the dataset checks for duplicate keys in a job of its own,
then writes as :func:`~._spark_write.write_spark_dataset` does.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..dataset import MergePlan, MergeReplanNeeded, MergeResult, ParquetDatasetStore
from ..dataset.engine import check_key_columns, merge_content, retry_replans
from ..errors import AlreadyExists, DatasetNotFound, NotFound
from ._jobs import collect_rows
from ._merge_job import run_merge_job
from ._spark_append import check_spark_args
from ._spark_schema import spark_schema_to_arrow
from ._spark_write import write_spark_dataset

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_H64 = "__pds_hash64"
_H32 = "__pds_hash32"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


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


def _hashable(df: DataFrame, name: str) -> Column:
    """``name`` as a column Spark's hash functions take (they refuse maps: those go as JSON)."""
    from pyspark.sql import functions as F

    return F.to_json(_col(name)) if "map<" in df.schema[name].dataType.simpleString() else _col(name)


def _source_hash_aggs(df: DataFrame) -> list[Column]:
    """Aggregates whose values, with the row count and schema, stand for the source rows: sums of two
    row hashes (64-bit xxHash and 32-bit Murmur3), in decimals so they never overflow. Row order does
    not matter (a merge's outcome does not depend on it)."""
    from pyspark.sql import functions as F

    cols = [_hashable(df, n) for n in df.columns]
    return [
        F.sum(F.xxhash64(*cols).cast("decimal(20,0)")).alias("hash64"),
        F.sum(F.hash(*cols).cast("decimal(20,0)")).alias("hash32"),
    ]


def _source_hash(df: DataFrame, row: Any) -> str:
    """``sha256:<hex>`` of the changes' schema, row count and row-hash sums (from :func:`_source_hash_aggs`)."""
    text = f"spark-merge-source|{df.schema.simpleString()}|{row['n']}|{row['hash64']}|{row['hash32']}"
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class _Summary:
    """Each task's aggregates of the changes (one pickled row): row count, per key its nulls and range,
    the row-hash sums, and the distinct partition values."""

    keys: tuple[str, ...]
    partition: tuple[str, ...]
    hashed: bool

    def __call__(self, batches: Any) -> Any:
        import pyarrow.compute as pc

        n, h64, h32 = 0, 0, 0
        nulls = [0] * len(self.keys)
        ranges: list[tuple[Any, Any] | None] = [None] * len(self.keys)
        values: set[tuple[Any, ...]] = set()
        for batch in batches:
            if not batch.num_rows:
                continue
            n += batch.num_rows
            for i, k in enumerate(self.keys):
                column = batch.column(k)
                nulls[i] += column.null_count
                lo_hi = pc.min_max(column)
                lo, hi = lo_hi["min"].as_py(), lo_hi["max"].as_py()
                if lo is not None:
                    old = ranges[i]
                    ranges[i] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
            if self.hashed:
                a = batch.column(_H64).to_numpy(zero_copy_only=False).astype(np.int64)
                h64 += int(np.sum(a >> 32)) * (1 << 32) + int(np.sum(a & 0xFFFFFFFF))
                h32 += int(np.sum(batch.column(_H32).to_numpy(zero_copy_only=False).astype(np.int64)))
            if self.partition:
                table = pa.Table.from_batches([batch]).select(list(self.partition))
                distinct = table.group_by(list(self.partition)).aggregate([])
                values.update(tuple(r[c] for c in self.partition) for r in distinct.to_pylist())
        summary = {"n": n, "h64": h64, "h32": h32, "nulls": nulls, "ranges": ranges, "values": values}
        yield pa.record_batch([pa.array([pickle.dumps(summary)], pa.binary())], names=["s"])


def _check_changes(
    df: DataFrame, keys: list[str], partition: Sequence[str], *, hashed: bool = False
) -> tuple[int, dict[str, tuple[Any, Any]], list[tuple[Any, ...]], str | None]:
    """Row count, key ranges and distinct ``partition`` values of the changes, and with ``hashed`` a hash of
    their rows, in one Spark job (per-task aggregates, no shuffle); refuse null keys. Duplicate keys are
    found by the merge job (:func:`~._merge_job.run_merge_job`), or by :func:`_check_duplicates` when the
    merge creates the dataset.

    Raises:
        ValueError: a key column holds nulls.
    """
    from pyspark.sql import functions as F

    cols = [_hashable(df, n) for n in df.columns]
    extra = [F.xxhash64(*cols).alias(_H64), F.hash(*cols).alias(_H32)] if hashed else []
    used = list(dict.fromkeys([*keys, *partition]))
    # One task per core at most: each task costs a Python worker round trip, and the changes are usually small.
    frame = df.select(*[_col(c) for c in used], *extra).coalesce(
        max(1, df.sparkSession.sparkContext.defaultParallelism)
    )
    rows = collect_rows(frame.mapInArrow(_Summary(tuple(keys), tuple(partition), hashed), "s binary"))
    total, h64, h32 = 0, 0, 0
    nulls = [0] * len(keys)
    found: list[tuple[Any, Any] | None] = [None] * len(keys)
    values: set[tuple[Any, ...]] = set()
    for row in rows:
        part = pickle.loads(row["s"])
        total, h64, h32 = total + part["n"], h64 + part["h64"], h32 + part["h32"]
        values |= part["values"]
        for i in range(len(keys)):
            nulls[i] += part["nulls"][i]
            r, old = part["ranges"][i], found[i]
            if r is not None:
                found[i] = r if old is None else (min(old[0], r[0]), max(old[1], r[1]))
    for i, k in enumerate(keys):
        if nulls[i]:
            raise ValueError(f"key column {k!r} has {nulls[i]} null values in the source; keys must not be null")
    ranges = {k: r for k, r in zip(keys, found, strict=True) if r is not None}
    summary = {"n": total, "hash64": h64 if total else None, "hash32": h32 if total else None}
    return total, ranges if total else {}, sorted(values, key=repr), _source_hash(df, summary) if hashed else None


def _check_duplicates(df: DataFrame, keys: list[str]) -> None:
    """Refuse duplicate keys in the changes (a merge that creates the dataset; otherwise the merge job checks).

    Raises:
        ValueError: a key appears more than once (the message shows one).
    """
    from pyspark.sql import functions as F

    dups = df.groupBy(*[_col(k) for k in keys]).count().where(F.col("count") > 1)
    found = dups.agg(  # one row: how many duplicate keys, and one of them
        F.count(F.lit(1)).alias("n"), F.min(F.struct(*[_driver_value(df, k).alias(k) for k in keys], "count"))
    ).collect()[0]
    if found["n"]:
        first = found[1]
        example = {k: _from_driver(df, k, first[k]) for k in keys}
        raise ValueError(
            f"the source has {found['n']} duplicate keys (e.g. {example} appears "
            f"{first['count']} times); each key may appear once"
        )


def _partitioning(datasets: ParquetDatasetStore, key: str, partition_by: Sequence[str] | None) -> tuple[str, ...]:
    try:
        return tuple(datasets.read_manifest(key).partition_by)
    except NotFound:
        return tuple(partition_by or ())


def merge_spark_dataset(
    df: DataFrame,
    datasets: ParquetDatasetStore,
    key: str,
    *,
    key_columns: Sequence[str],
    strategy: str = "upsert",
    partition_by: Sequence[str] | None = None,
    repartition: bool = False,
    run_id: str | None = None,
    metadata: dict[str, str] | None = None,
    expect_owner: Mapping[str, str | None] | None = None,
    idempotency_key: str | None = None,
) -> MergeResult:
    """Merge a Spark DataFrame of changes into the dataset ``key`` by ``key_columns``, on the executors.

    Same semantics as :meth:`ParquetDatasetStore.merge_dataset`: ``upsert``
    replaces matching rows whole and inserts the rest, ``update`` only
    replaces, ``insert`` only adds rows whose key is new. Exactly the files
    holding matched keys are rewritten (in their own folders); every other file
    stays referenced as it is. Only aggregates and per-file descriptors reach
    the driver. Into an existing dataset it runs two Spark jobs, so the DataFrame
    is evaluated twice (the check, then the merge job): persist it first if it is
    expensive or not deterministic.

    Args:
        df: the changes; its columns must be the dataset's (any order, castable types).
        datasets: the dataset store; its store must be reachable from the executors.
        key: the dataset key.
        key_columns: the columns that identify a row.
        strategy: ``"upsert"``, ``"insert"`` or ``"update"``.
        partition_by: for a new dataset, its partition columns; otherwise ``None``
            or exactly the dataset's.
        repartition: for a partitioned dataset, repartition inserted rows by the
            partition columns first.
        run_id, metadata: recorded in the manifest.
        expect_owner: as :func:`~._spark_write.write_spark_dataset`'s (checked by the plan and the commit).
        idempotency_key: as :meth:`ParquetDatasetStore.merge_dataset`'s: the content recorded with it
            is a hash of the changes' rows (sums of Spark's row hashes, computed in the check job),
            strategy and key columns. If the live version records the key with the same content, an
            earlier attempt of this merge committed it: nothing is written and that version is
            returned (no rows counted); the commit checks again.

    Returns:
        A :class:`~dagster_parquet_dataset.dataset.MergeResult`.

    Raises:
        ValueError: null or duplicate keys in the changes, unknown strategy, a key
            column missing, a schema the dataset's cannot take, or a key whose
            partition values would change; nothing is committed (what the merge job wrote
            before it found a duplicate or moved key is deleted).
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
    checked = _partitioning(datasets, key, partition_by)
    total, ranges, values, source_hash = _check_changes(df, keys, checked, hashed=idempotency_key is not None)
    idempotency = (idempotency_key, source_hash) if idempotency_key is not None and source_hash is not None else None

    def attempt() -> MergeResult:
        nonlocal checked, values
        partition = _partitioning(datasets, key, partition_by)
        for col in partition:
            if col not in df.columns:
                raise ValueError(f"partition column {col!r} of dataset {key!r} is not in the source")
        if partition != checked:  # repartitioned since the check: its partition values again (one more job)
            checked, values = partition, _check_changes(df, keys, partition)[2]
        plan = datasets.plan_merge(
            key,
            source_schema=schema,
            key_columns=keys,
            strategy=strategy,
            key_ranges=ranges,
            partitions=values,
            partition_by=partition_by,
            run_id=run_id,
            metadata=metadata,
            expect_owner=expect_owner,
        )
        if not plan.exists:
            if strategy == "update":
                raise DatasetNotFound(f"dataset {plan.key!r} does not exist; nothing to update")
            _check_duplicates(df, keys)
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
        done = _already_merged(plan, idempotency)
        if done is not None:
            return done
        return _merge_once(df, datasets, plan, repartition, idempotency)

    return retry_replans(
        datasets.commit_timeout,
        attempt,
        lambda: (
            f"dataset {key!r}: gave up merging after {datasets.commit_timeout:g} s; concurrent commits "
            "kept changing the files it planned on (raise commit_timeout to wait longer)"
        ),
    )


def _already_merged(plan: MergePlan, idempotency: tuple[str, str] | None) -> MergeResult | None:
    """The result of an earlier attempt of this merge that the planned-on version records, or ``None``."""
    if idempotency is None or plan.manifest is None:
        return None
    content = merge_content(idempotency[1], plan.strategy, plan.key_columns)
    if not any(k == idempotency[0] and c == content for k, c, _t in plan.manifest.idempotency):
        return None
    return MergeResult(0, 0, (), tuple(plan.manifest.parts), (), plan.manifest.version)


def _merge_once(
    df: DataFrame,
    datasets: ParquetDatasetStore,
    plan: MergePlan,
    repartition: bool,
    idempotency: tuple[str, str] | None = None,
) -> MergeResult:
    assert plan.schema is not None
    changes = df.select(*[_col(n) for n in plan.schema.names])
    outcome = run_merge_job(changes, datasets, plan, repartition=repartition)
    candidates = [*plan.candidates, *plan.elsewhere]
    if idempotency is not None:
        plan = replace(plan, idempotency_key=idempotency[0], source_hash=idempotency[1])
    return datasets.commit_merge(
        plan,
        rewritten=[candidates[i].path for i in outcome.rewritten],
        new_entries=outcome.written,
        inserted=outcome.inserted,
        updated=sum(outcome.per_file.get(i, 0) for i in outcome.rewritten),
    )
