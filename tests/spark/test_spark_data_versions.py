"""Content data versions of Spark outputs (issue 27, item 1): the executors hash each part as they
write it, Spark's own writer's parts are hashed on the driver, and the commit records the hashes,
so a Spark asset written twice with the same data keeps its data version. Through ``materialize``
with a real instance, on a local store (Spark's own writer) and moto S3 (the executor path)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from dagster._core.definitions.data_version import DATA_VERSION_TAG, CachingStaleStatusResolver, StaleStatus
from dagster._core.loader import LoadingContextForTest  # what dagster's own tests use; not in dagster's __all__
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import RemoteStoreIOManager
from dagster_parquet_dataset.dataset import data_version
from dagster_parquet_dataset.spark import append_spark_dataset, write_spark_dataset

from .test_spark_dagster import backend  # noqa: F401  (the local / moto S3 fixture)

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


def _tag(instance: dg.DagsterInstance, key: str) -> str:
    [record] = instance.fetch_materializations(dg.AssetKey(key), limit=1).records
    return record.event_log_entry.dagster_event.event_specific_data.materialization.tags[DATA_VERSION_TAG]


def _status(instance: dg.DagsterInstance, assets: list[Any], key: str) -> StaleStatus:
    graph = dg.Definitions(assets=assets, resources={"pyspark": PySparkResource(spark_config={})}).resolve_asset_graph()
    return CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance)).get_status(dg.AssetKey(key))


def test_a_spark_asset_written_twice_keeps_its_data_version(
    spark: SparkSession,
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore],  # noqa: F811
    instance: dg.DagsterInstance,
) -> None:
    io, datasets = backend
    changed = {"id": -1}

    @dg.asset
    def events(pyspark: PySparkResource) -> DataFrame:
        frame = pyspark.spark_session.range(0, 40, numPartitions=2)
        value = F.when(F.col("id") == changed["id"], F.lit(999)).otherwise(F.col("id") * 10)
        return frame.withColumn("v", value).withColumn("label", F.concat(F.lit("e"), F.col("id").cast("string")))

    @dg.asset
    def total(events: pa.Table) -> pa.Table:
        return pa.table({"total": [sum(events.column("v").to_pylist())]})

    assets = [events, total]
    resources = {"io_manager": io, "pyspark": PySparkResource(spark_config={})}
    assert dg.materialize(assets, instance=instance, resources=resources).success
    first = _tag(instance, "events")
    manifest = datasets.read_manifest("events")
    assert first == data_version(manifest) and all(e.content_hash for e in manifest.file_entries())

    assert dg.materialize(assets, instance=instance, resources=resources, selection=["events"]).success
    assert datasets.read_manifest("events").version == 2
    assert _tag(instance, "events") == first  # another run, another version and part names: same data version
    assert _status(instance, assets, "total") == StaleStatus.FRESH

    changed["id"] = 7  # one value changes
    assert dg.materialize(assets, instance=instance, resources=resources, selection=["events"]).success
    again = _tag(instance, "events")
    assert again != first and again == data_version(datasets.read_manifest("events"))
    assert _status(instance, assets, "total") == StaleStatus.STALE


@pytest.mark.parametrize("mode", ["arrow", "native"])
def test_each_spark_write_path_records_content_hashes(spark: SparkSession, tmp_path: Any, mode: str) -> None:
    datasets = ParquetDatasetStore(LocalStore(str(tmp_path)), retain_versions=1)
    df = spark.range(0, 30, numPartitions=3).withColumn("s", F.col("id").cast("string"))
    versions = []
    for key in ("a", "b"):
        manifest = write_spark_dataset(df, datasets, key, mode=mode)
        assert all(e.content_hash and e.content_hash.startswith("sha256:") for e in manifest.file_entries())
        versions.append(data_version(manifest))
    assert versions[0] is not None and versions[0] == versions[1]  # other keys, tokens and names: same content

    by_day = df.withColumn("day", (F.col("id") % 2).cast("string"))
    split = write_spark_dataset(by_day, datasets, "p", partition_by=["day"])
    appended = append_spark_dataset(df, datasets, "a", mode=mode)
    assert data_version(split) is not None
    assert data_version(appended) not in (None, versions[0])  # the whole dataset version, now with more rows
