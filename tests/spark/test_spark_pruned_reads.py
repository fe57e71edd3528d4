"""Pruned Spark reads and many datasets as one scan (issue 10, items 4 and 5).

On the shared ``local[2,2]`` session, against a ``LocalStore`` (Spark's own
Parquet reader) and moto S3 (the executor-side read). "Spark touches only the
selected files" is shown three ways: the native DataFrame's ``inputFiles()``,
the executor read's number of Spark partitions (one per file), and deleting
the pruned files, after which the filtered read still succeeds while an
unfiltered read fails. Every result is compared with ``read_dataset`` for the
same columns and filters.
"""

import datetime as dt
import os
import threading
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dagster_parquet_dataset import DatasetIncomplete, LocalStore, ParquetDatasetStore, S3Store
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager, S3StoreResource
from dagster_parquet_dataset.spark import arrow_schema_to_spark, read_spark_dataset, read_spark_datasets
from dagster_parquet_dataset.spark.handler import SparkDataFrameHandler

from ..conftest import make_bucket


@pytest.fixture(params=["local", "s3"])
def datasets(request: pytest.FixtureRequest, tmp_path: Any) -> ParquetDatasetStore:
    if request.param == "local":
        store: LocalStore | S3Store = LocalStore(os.path.join(tmp_path, "store"))
    else:
        store = request.getfixturevalue("s3_store")
    return ParquetDatasetStore(store, max_rows_per_file=10, retain_versions=1)


@pytest.fixture
def local(tmp_path: Any) -> ParquetDatasetStore:
    return ParquetDatasetStore(LocalStore(os.path.join(tmp_path, "store")), max_rows_per_file=10, retain_versions=1)


def table(n: int = 100, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([None if i % 7 == 0 else i * 0.5 for i in ids], pa.float64()),
            "s": pa.array([None if i % 5 == 0 else f"s{i}" for i in ids], pa.string()),
            "day": pa.array([dt.date(2026, 1, 1 + i % 3) for i in ids], pa.date32()),
            "grp": pa.array([i % 4 for i in ids], pa.int32()),
            "dec": pa.array([Decimal(i) / 4 for i in ids], pa.decimal128(12, 2)),
        }
    )


def rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def expected(tables: Sequence[pa.Table], columns: Sequence[str]) -> list[tuple[Any, ...]]:
    out = []
    for t in tables:
        for r in t.to_pylist():
            out.append(tuple(r.get(c) for c in columns))
    return sorted(out, key=repr)


def spark_partitions(df: DataFrame) -> int:
    return df.rdd.getNumPartitions()


def file_scans(df: DataFrame) -> int:
    plan = df._jdf.queryExecution().executedPlan().toString()
    return plan.count("FileScan")


def delete_parts(datasets: ParquetDatasetStore, key: str, paths: Sequence[str]) -> None:
    for path in paths:
        datasets.store.delete(f"{key}/{path}")


# ----------------------------------------------------------------------- one dataset, pruned


def test_statistics_prune_to_one_file_spark_opens_only_it(spark: SparkSession, local: ParquetDatasetStore) -> None:
    local.write_dataset(table(100), "t")  # ten files of ten ids each
    filters = [("id", "==", 55)]
    plan = local.plan_read("t", filters=filters)
    assert len(plan.selected) == 1 and len(plan.pruned) == 9

    df = read_spark_dataset(spark, local, "t", filters=filters)
    assert [os.path.basename(f) for f in df.inputFiles()] == [os.path.basename(plan.selected[0].path)]
    assert rows(df) == expected([local.read_dataset("t", filters=filters)], df.columns)
    assert [r["id"] for r in df.collect()] == [55]

    delete_parts(local, "t", [e.path for e in plan.pruned])
    assert rows(read_spark_dataset(spark, local, "t", filters=filters)) == rows(df)
    with pytest.raises(DatasetIncomplete, match="missing"):
        read_spark_dataset(spark, local, "t")


@pytest.mark.parametrize("mode", ["auto", "arrow"])
def test_partition_values_prune_and_come_back_typed(
    spark: SparkSession, datasets: ParquetDatasetStore, mode: str
) -> None:
    data = table(60)
    datasets.write_dataset(data, "p", partition_by=["day", "grp"])
    filters = [[("day", "==", dt.date(2026, 1, 2)), ("grp", "in", [1, 3])], [("id", "<", 3)]]
    plan = datasets.plan_read("p", filters=filters)
    assert plan.pruned and plan.selected

    df = read_spark_dataset(spark, datasets, "p", filters=filters, mode=mode)  # type: ignore[arg-type]
    want = datasets.read_dataset("p", filters=filters)
    assert df.schema == arrow_schema_to_spark(want.schema)
    assert rows(df) == expected([want], df.columns)
    assert want.num_rows > 3
    assert spark_partitions(df) == len(plan.selected)  # one task per selected file, no other file opened

    delete_parts(datasets, "p", [e.path for e in plan.pruned])
    assert rows(read_spark_dataset(spark, datasets, "p", filters=filters, mode=mode)) == rows(df)  # type: ignore[arg-type]
    with pytest.raises(DatasetIncomplete):
        read_spark_dataset(spark, datasets, "p", mode=mode)  # type: ignore[arg-type]


def test_projection_with_filter_on_partition_column(spark: SparkSession, datasets: ParquetDatasetStore) -> None:
    datasets.write_dataset(table(40), "p", partition_by=["grp"])
    filters = [("grp", "!=", 2), ("v", ">", 5.0)]
    df = read_spark_dataset(spark, datasets, "p", columns=["s", "grp"], filters=filters)
    assert df.columns == ["s", "grp"]
    assert rows(df) == expected([datasets.read_dataset("p", columns=["s", "grp"], filters=filters)], ["s", "grp"])


# ----------------------------------------------------------------------- many datasets, one scan


def test_many_datasets_are_one_native_scan(spark: SparkSession, local: ParquetDatasetStore) -> None:
    keys = [f"daily/2026-01-0{d}" for d in range(1, 7)]
    tables = [table(25, start=100 * d) for d in range(6)]
    for key, t in zip(keys, tables, strict=True):
        local.write_dataset(t, key)
    files = sum(len(local.read_manifest(k).parts) for k in keys)

    df = read_spark_datasets(spark, local, keys)
    assert len(df.inputFiles()) == files == 18
    assert file_scans(df) == 1
    assert "Union" not in df._jdf.queryExecution().executedPlan().toString()
    assert df.count() == 150
    assert rows(df) == expected(tables, df.columns)


def test_many_datasets_fetch_each_manifest_once_in_parallel(spark: SparkSession, datasets: ParquetDatasetStore) -> None:
    """Issue 21 item 5: N manifests, fetched at once (a barrier only N concurrent reads pass), then planned."""
    from ..test_many_roots import KEYS, CountingStore, N, _write_days

    _write_days(datasets.store)
    counting = CountingStore(datasets.store)
    counting.barrier = threading.Barrier(N)
    df = read_spark_datasets(spark, ParquetDatasetStore(counting, retain_versions=1), KEYS, mode="arrow")
    assert sorted(counting.requests()) == sorted(("read_bytes", f"{k}/manifest.json") for k in KEYS)
    counting.barrier = None
    assert df.count() == sum(range(1, N + 1))


def test_many_datasets_filters_prune_across_datasets(spark: SparkSession, datasets: ParquetDatasetStore) -> None:
    keys = ["a", "b", "c"]
    tables = [table(30, start=1000 * i) for i in range(3)]
    for key, t in zip(keys, tables, strict=True):
        datasets.write_dataset(t, key)
    filters = [("id", ">=", 1005), ("id", "<", 1012)]  # two files of dataset "b"
    selected = {k: datasets.plan_read(k, filters=filters).selected for k in keys}
    assert [len(selected[k]) for k in keys] == [0, 2, 0]

    df = read_spark_datasets(spark, datasets, keys, columns=["s", "id"], filters=filters)
    want = [datasets.read_dataset(k, columns=["s", "id"], filters=filters) for k in keys]
    assert rows(df) == expected(want, ["s", "id"])
    assert sorted(r["id"] for r in df.collect()) == list(range(1005, 1012))
    if isinstance(datasets.store, LocalStore):
        assert sorted(os.path.basename(f) for f in df.inputFiles()) == sorted(
            os.path.basename(e.path) for e in selected["b"]
        )
    else:
        assert spark_partitions(df) == 2
    for key in ("a", "c"):  # nothing of the other datasets is touched
        delete_parts(datasets, key, datasets.read_manifest(key).parts)
    assert rows(read_spark_datasets(spark, datasets, keys, columns=["s", "id"], filters=filters)) == rows(df)


@pytest.mark.parametrize("mode", ["auto", "arrow"])
def test_partition_by_datasets_keep_their_own_partition_values(
    spark: SparkSession, datasets: ParquetDatasetStore, mode: str
) -> None:
    keys = ["x", "y"]
    tables = [table(20, start=0), table(20, start=50)]
    for key, t in zip(keys, tables, strict=True):
        datasets.write_dataset(t, key, partition_by=["grp"])
    df = read_spark_datasets(spark, datasets, keys, mode=mode)  # type: ignore[arg-type]
    assert df.schema == arrow_schema_to_spark(datasets.read_dataset("x").schema)
    assert spark_partitions(df) == sum(len(datasets.read_manifest(k).parts) for k in keys)
    assert rows(df) == expected([datasets.read_dataset(k) for k in keys], df.columns)

    filters = [("grp", "==", 3)]
    pruned = read_spark_datasets(spark, datasets, keys, filters=filters, mode=mode)  # type: ignore[arg-type]
    assert spark_partitions(pruned) == sum(len(datasets.plan_read(k, filters=filters).selected) for k in keys)
    assert rows(pruned) == expected([datasets.read_dataset(k, filters=filters) for k in keys], df.columns)
    assert {r["grp"] for r in pruned.collect()} == {3}


@pytest.mark.parametrize("mode", ["auto", "arrow"])
def test_datasets_differing_by_added_columns_read_nulls(
    spark: SparkSession, datasets: ParquetDatasetStore, mode: str
) -> None:
    old = table(15).select(["id", "v"])
    new = table(15, start=100).select(["id", "s", "v"])
    datasets.write_dataset(old, "old")
    datasets.write_dataset(new, "new")
    # ... and one dataset whose earlier files lack a column appended later.
    datasets.write_dataset(table(12, start=200).select(["id", "v"]), "mixed")
    datasets.append_dataset(table(12, start=300).select(["id", "v", "dec"]), "mixed", allow_new_columns=True)
    keys = ["old", "new", "mixed"]

    df = read_spark_datasets(spark, datasets, keys, mode=mode)  # type: ignore[arg-type]
    assert df.columns == ["id", "v", "s", "dec"]
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types == {"id": "bigint", "v": "double", "s": "string", "dec": "decimal(12,2)"}
    assert all(f.nullable for f in df.schema.fields if f.name in ("s", "dec"))
    want = [datasets.read_dataset(k) for k in keys]
    assert rows(df) == expected(want, df.columns)
    got = {r["id"]: r for r in df.collect()}
    assert got[3]["s"] is None and got[101]["s"] == "s101"
    assert got[201]["dec"] is None and got[301]["dec"] == Decimal("75.25")

    only = read_spark_datasets(spark, datasets, keys, columns=["s", "id"], filters=[("id", ">", 105)], mode=mode)  # type: ignore[arg-type]
    assert rows(only) == expected([datasets.read_dataset(k, filters=[("id", ">", 105)]) for k in keys], ["s", "id"])


def test_conflicting_column_types_are_refused(spark: SparkSession, local: ParquetDatasetStore) -> None:
    local.write_dataset(pa.table({"id": pa.array([1], pa.int64())}), "a")
    local.write_dataset(pa.table({"id": pa.array(["1"], pa.string())}), "b")
    with pytest.raises(ValueError, match=r"'id' is int64 in dataset 'a' but string in dataset 'b'"):
        read_spark_datasets(spark, local, ["a", "b"])


def test_bad_arguments(spark: SparkSession, local: ParquetDatasetStore) -> None:
    local.write_dataset(table(5).select(["id", "v"]), "a")
    local.write_dataset(table(5).select(["id", "s"]), "b")
    with pytest.raises(TypeError, match="single string"):
        read_spark_datasets(spark, local, "a")
    with pytest.raises(ValueError, match="at least one"):
        read_spark_datasets(spark, local, [])
    with pytest.raises(ValueError, match="repeats"):
        read_spark_datasets(spark, local, ["a", "b", "a"])
    with pytest.raises(ValueError, match="nope"):
        read_spark_datasets(spark, local, ["a", "b"], columns=["id", "nope"])
    with pytest.raises(ValueError, match="'v'"):  # a filter column dataset "b" lacks
        read_spark_datasets(spark, local, ["a", "b"], filters=[("v", ">", 1.0)])


# ----------------------------------------------------------------------- damaged parts


def test_missing_and_truncated_parts_name_dataset_and_file(spark: SparkSession, datasets: ParquetDatasetStore) -> None:
    datasets.write_dataset(table(30), "ok")
    datasets.write_dataset(table(30), "gone")
    datasets.write_dataset(table(30), "short")
    gone = datasets.read_manifest("gone").parts[1]
    datasets.store.delete(f"gone/{gone}")
    short = datasets.read_manifest("short").parts[2]
    data = datasets.store.read_bytes(f"short/{short}")
    datasets.store.delete(f"short/{short}")
    datasets.store.write_bytes(f"short/{short}", data[: len(data) // 2])

    with pytest.raises(DatasetIncomplete, match=rf"'gone'.*{gone}") as info:
        read_spark_datasets(spark, datasets, ["ok", "gone"])
    assert info.value.dataset_key == "gone"  # type: ignore[attr-defined]
    with pytest.raises(DatasetIncomplete, match=rf"'short'.*{short}.*truncated"):
        read_spark_datasets(spark, datasets, ["ok", "short"])
    # A filter that prunes the damaged files reads fine.
    fine = [("id", "<", 10)]
    assert datasets.plan_read("gone", filters=fine).selected[0].path != gone
    df = read_spark_datasets(spark, datasets, ["ok", "gone", "short"], filters=fine)
    assert rows(df) == expected([datasets.read_dataset("ok", filters=fine)] * 3, df.columns)


# ----------------------------------------------------------------------- the Dagster handler


def test_handler_read_many_is_one_scan(spark: SparkSession, local: ParquetDatasetStore) -> None:
    keys = [f"asset/2026-02-0{d}" for d in range(1, 5)]
    tables = [table(10, start=10 * d) for d in range(4)]
    for key, t in zip(keys, tables, strict=True):
        local.write_dataset(t, key)
    handler = SparkDataFrameHandler()
    df = handler.read_many(None, local, keys, columns=["id", "s"], filters=[("grp", "==", 1)])
    assert file_scans(df) == 1
    want = [local.read_dataset(k, columns=["id", "s"], filters=[("grp", "==", 1)]) for k in keys]
    assert rows(df) == expected(want, ["id", "s"])
    assert len(rows(df)) == 10
    every = handler.read_many(None, local, keys, columns=None)
    assert every.count() == 40 and len(every.inputFiles()) == 4


# ----------------------------------------------------------------------- through Dagster


DAILY = dg.DailyPartitionsDefinition(start_date="2026-03-01", end_date="2026-03-06")  # 01 .. 05


@dg.asset(partitions_def=DAILY)
def spark_days(context: dg.AssetExecutionContext, pyspark: PySparkResource) -> DataFrame:
    day = int(context.partition_key[-2:])
    df = pyspark.spark_session.range(day * 100, day * 100 + 10 * day, 1, 2).withColumn("day", F.lit(day))
    if day >= 4:  # a column added from the fourth day on: earlier days read it as nulls
        df = df.withColumn("note", F.concat(F.lit("n"), F.col("id").cast("string")))
    return df


SEEN: dict[str, Any] = {}


@dg.asset(ins={"spark_days": dg.AssetIn(metadata={"filters": [("day", "!=", 2)]})})
def spark_summary(spark_days: DataFrame) -> pa.Table:
    plan = spark_days._jdf.queryExecution().executedPlan().toString()
    SEEN["scans"] = plan.count("FileScan") + plan.count("MapInArrow")
    SEEN["unions"] = plan.count("Union")
    SEEN["partitions"] = spark_days.rdd.getNumPartitions()
    SEEN["rows"] = sorted((r["id"], r["day"], r["note"]) for r in spark_days.collect())
    return pa.table({"n": [spark_days.count()]})


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_downstream_spark_asset_loads_all_partitions_as_one_scan(
    spark: SparkSession, tmp_path: Any, request: pytest.FixtureRequest, backend: str
) -> None:
    if backend == "local":
        root = os.path.join(tmp_path, "lake")
        io_manager = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)
        datasets = ParquetDatasetStore(LocalStore(root), retain_versions=1)
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        bucket = make_bucket(endpoint)
        io_manager = RemoteStoreIOManager(
            store=S3StoreResource(bucket=bucket, prefix="lake", endpoint_url=endpoint), retain_versions=1
        )
        datasets = ParquetDatasetStore(S3Store(bucket, "lake", endpoint_url=endpoint), retain_versions=1)
    resources = {"io_manager": io_manager, "pyspark": PySparkResource(spark_config={})}
    SEEN.clear()
    with dg.DagsterInstance.ephemeral() as instance:
        for day in DAILY.get_partition_keys():
            result = dg.materialize([spark_days], resources=resources, instance=instance, partition_key=day)
            assert result.success
        result = dg.materialize(
            [spark_days, spark_summary], resources=resources, instance=instance, selection=[spark_summary]
        )
        assert result.success

    day_keys = [f"spark_days/{day}" for day in DAILY.get_partition_keys()]
    assert all(datasets.dataset_exists(k) for k in day_keys)
    files = sum(len(datasets.read_manifest(k).parts) for k in day_keys if not k.endswith("03-02"))
    assert SEEN["scans"] == 1 and SEEN["unions"] == 0  # one scan over the files of all partitions
    if backend == "s3":
        assert SEEN["partitions"] == files  # the executor read: one task per selected file
    want = sorted(
        (r["id"], r["day"], r.get("note"))
        for k in day_keys
        for r in datasets.read_dataset(k).to_pylist()
        if r["day"] != 2
    )
    assert SEEN["rows"] == want
    assert len(want) == 10 * (1 + 3 + 4 + 5)
    assert any(note is None for _, _, note in want) and any(note is not None for _, _, note in want)


@pytest.mark.parametrize("mode", ["native", "arrow"])
def test_part_swapped_for_another_of_the_same_size_is_caught(
    spark: SparkSession, local: ParquetDatasetStore, mode: str
) -> None:
    local.write_dataset(pa.table({"id": pa.array(range(40), pa.int64())}), "t")
    first, second = local.read_manifest("t").file_entries()[:2]
    assert first.size_bytes == second.size_bytes and first.row_count == second.row_count  # only content differs
    swapped = local.store.read_bytes(f"t/{second.path}")
    local.store.delete(f"t/{first.path}")
    local.store.write_bytes(f"t/{first.path}", swapped)
    with pytest.raises(DatasetIncomplete):
        local.read_dataset("t")  # the dataset layer's verdict
    if mode == "native":
        with pytest.raises(DatasetIncomplete, match="moved or swapped"):
            read_spark_datasets(spark, local, ["t"], mode="native")
    else:
        df = read_spark_datasets(spark, local, ["t"], mode="arrow")
        with pytest.raises(Exception, match="DatasetIncomplete"):
            df.collect()
