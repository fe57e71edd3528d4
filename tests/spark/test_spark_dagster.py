"""Spark DataFrames through ``RemoteStoreIOManager`` with dagster-pyspark's ``PySparkResource``.

``PySparkResource`` calls ``SparkSession.builder.getOrCreate()``, which returns
the shared test session. Everything a run writes is checked by reading the
store back with an independent ``ParquetDatasetStore``.
"""

import os
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa
import pytest
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, S3Store
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager, S3StoreResource
from dagster_parquet_dataset.spark.handler import SparkDataFrameHandler

from ..conftest import make_bucket


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


def _run(assets: list[Any], io_manager: RemoteStoreIOManager, instance: dg.DagsterInstance, **kwargs: Any) -> Any:
    result = dg.materialize(
        assets,
        resources={"io_manager": io_manager, "pyspark": PySparkResource(spark_config={})},
        instance=instance,
        **kwargs,
    )
    assert result.success
    return result


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Any) -> tuple[RemoteStoreIOManager, ParquetDatasetStore]:
    """The IO manager on a LocalStore (Spark's own writer) or on moto S3 (the executor path)."""
    if request.param == "local":
        root = os.path.join(tmp_path, "store")
        return RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1), ParquetDatasetStore(
            LocalStore(root), retain_versions=1
        )
    endpoint = request.getfixturevalue("moto_endpoint")
    bucket = make_bucket(endpoint)
    io_manager = RemoteStoreIOManager(
        store=S3StoreResource(bucket=bucket, prefix="lake", endpoint_url=endpoint), retain_versions=1
    )
    return io_manager, ParquetDatasetStore(S3Store(bucket, "lake", endpoint_url=endpoint), retain_versions=1)


def test_spark_output_loads_as_spark_pandas_and_arrow(
    spark: SparkSession, backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    io_manager, datasets = backend
    seen: dict[str, Any] = {}

    @dg.asset
    def events(pyspark: PySparkResource) -> DataFrame:
        session = pyspark.spark_session
        return session.range(20).withColumn("label", F.concat(F.lit("e"), F.col("id").cast("string"))).repartition(2)

    @dg.asset
    def in_spark(events: DataFrame) -> pa.Table:
        seen["spark"] = (type(events), sorted(r.id for r in events.collect()))
        return pa.table({"n": [events.count()]})

    @dg.asset
    def in_pandas(events: pd.DataFrame) -> pd.DataFrame:
        seen["pandas"] = sorted(events["id"].tolist())
        return events

    @dg.asset
    def in_arrow(events: pa.Table) -> pa.Table:
        seen["arrow"] = sorted(events.column("id").to_pylist())
        return events

    @dg.asset
    def as_written(events):  # type: ignore[no-untyped-def]  # unannotated: loaded as the type that was written
        seen["as_written"] = type(events)
        return pa.table({"small": sorted(r.id for r in events.where("id < 5").collect())})

    @dg.asset(ins={"events": dg.AssetIn(metadata={"columns": ["label"]})})
    def projected(events: DataFrame) -> pa.Table:
        seen["projected"] = events.columns
        return pa.table({"n": [events.count()]})

    result = _run([events, in_spark, in_pandas, in_arrow, as_written, projected], io_manager, instance)

    manifest = datasets.read_manifest("events")
    assert manifest.row_count == 20
    assert manifest.metadata is not None and manifest.metadata["dagster.python_type"] == "pyspark.sql.DataFrame"
    assert manifest.metadata["dagster.asset_key"] == "events"
    assert manifest.run_id == result.run_id
    materialization = result.asset_materializations_for_node("events")[0]
    assert materialization.metadata["dagster/row_count"].value == 20

    assert issubclass(seen["spark"][0], DataFrame) and seen["spark"][1] == list(range(20))
    assert seen["pandas"] == list(range(20))
    assert seen["arrow"] == list(range(20))
    assert issubclass(seen["as_written"], DataFrame)
    assert seen["projected"] == ["label"]
    assert datasets.read_dataset("as_written").column("small").to_pylist() == list(range(5))
    assert datasets.read_dataset("in_spark").to_pydict() == {"n": [20]}


def test_pandas_output_loads_as_spark(spark: SparkSession, tmp_path: Any, instance: dg.DagsterInstance) -> None:
    root = os.path.join(tmp_path, "store")
    io_manager = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)

    @dg.asset
    def orders() -> pd.DataFrame:
        return pd.DataFrame(
            {
                "order": [1, 2, 3],
                "amount": [9.5, 3.25, 7.0],
                "at": pd.to_datetime(["2024-01-01 10:00", "2024-01-02 11:30", "2024-01-03 12:00"], utc=True),
            }
        )

    @dg.asset
    def big_orders(orders: DataFrame) -> DataFrame:
        return orders.where(F.col("amount") > 5)

    _run([orders, big_orders], io_manager, instance)
    datasets = ParquetDatasetStore(LocalStore(root), retain_versions=1)
    out = datasets.read_dataset("big_orders").sort_by("order")
    assert out.column("order").to_pylist() == [1, 3]
    assert out.column("at").to_pylist()[0] == pd.Timestamp("2024-01-01 10:00", tz="UTC").to_pydatetime()
    assert (datasets.read_manifest("big_orders").metadata or {})["dagster.python_type"] == "pyspark.sql.DataFrame"


def test_partitioned_spark_asset_loads_as_one_dataframe(
    spark: SparkSession, tmp_path: Any, instance: dg.DagsterInstance
) -> None:
    root = os.path.join(tmp_path, "store")
    io_manager = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)
    regions = dg.StaticPartitionsDefinition(["eu", "us", "apac"])
    seen: dict[str, Any] = {}

    @dg.asset(partitions_def=regions)
    def sales(context: dg.AssetExecutionContext, pyspark: PySparkResource) -> DataFrame:
        n = {"eu": 3, "us": 5, "apac": 2}[context.partition_key]
        return pyspark.spark_session.range(n).withColumn("region", F.lit(context.partition_key))

    @dg.asset
    def all_sales(sales: DataFrame) -> DataFrame:
        seen["all"] = sorted((r.region, r.id) for r in sales.collect())
        return sales.groupBy("region").count()

    @dg.asset(ins={"sales": dg.AssetIn(key="sales")})
    def per_region(sales: dict[str, DataFrame]) -> pa.Table:
        seen["dict"] = {k: v.count() for k, v in sales.items()}
        return pa.table({"regions": sorted(sales)})

    for region in ("eu", "us", "apac"):
        _run([sales, all_sales, per_region], io_manager, instance, selection=[sales], partition_key=region)
    _run([sales, all_sales, per_region], io_manager, instance, selection=[all_sales, per_region])

    datasets = ParquetDatasetStore(LocalStore(root), retain_versions=1)
    assert datasets.read_manifest("sales/us").row_count == 5
    assert (datasets.read_manifest("sales/us").metadata or {})["dagster.partition_key"] == "us"
    assert seen["all"] == sorted(
        [("eu", i) for i in range(3)] + [("us", i) for i in range(5)] + [("apac", 0), ("apac", 1)]
    )
    assert seen["dict"] == {"eu": 3, "us": 5, "apac": 2}
    counts = dict(
        zip(*datasets.read_dataset("all_sales").select(["region", "count"]).to_pydict().values(), strict=True)
    )
    assert counts == {"eu": 3, "us": 5, "apac": 2}


def test_op_outputs_go_through_the_spark_path(spark: SparkSession, tmp_path: Any) -> None:
    root = os.path.join(tmp_path, "store")

    @dg.op
    def make(pyspark: PySparkResource) -> DataFrame:
        return pyspark.spark_session.range(7)

    @dg.op
    def total(df: DataFrame) -> pa.Table:
        return pa.table({"total": [df.agg(F.sum("id")).first()[0]]})

    @dg.job
    def spark_job() -> None:
        total(make())

    result = spark_job.execute_in_process(
        resources={
            "io_manager": RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1),
            "pyspark": PySparkResource(spark_config={}),
        }
    )
    assert result.success
    datasets = ParquetDatasetStore(LocalStore(root), retain_versions=1)
    made = datasets.read_manifest(f"{result.run_id}/make/result")
    assert made.row_count == 7 and (made.metadata or {})["dagster.python_type"] == "pyspark.sql.DataFrame"
    assert datasets.read_dataset(f"{result.run_id}/total/result").to_pydict() == {"total": [21]}


def test_partitions_that_cannot_be_unioned_are_a_clear_error(spark: SparkSession) -> None:
    handler = SparkDataFrameHandler()
    with pytest.raises(ValueError, match="cannot be unioned"):
        handler.combine([spark.range(2), spark.range(2).withColumn("extra", F.lit(1))])
    assert handler.handles(type(spark.range(1))) and not handler.handles(pd.DataFrame)
