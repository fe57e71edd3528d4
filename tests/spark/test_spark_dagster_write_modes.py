"""Spark DataFrame outputs with ``write_mode`` append/merge and ``partition_by`` through ``materialize``.

The IO manager hands these writes to the Spark handler, which runs them on the
executors; the results are read back with an independent ``ParquetDatasetStore``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pytest
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, S3Store
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager, S3StoreResource

from ..conftest import make_bucket


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Any) -> tuple[RemoteStoreIOManager, ParquetDatasetStore]:
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


def _materialize(asset: Any, io_manager: RemoteStoreIOManager, instance: dg.DagsterInstance) -> dict[str, Any]:
    result = dg.materialize(
        [asset], resources={"io_manager": io_manager, "pyspark": PySparkResource(spark_config={})}, instance=instance
    )
    assert result.success
    (mat,) = result.asset_materializations_for_node(asset.op.name)
    return {k: v.value for k, v in mat.metadata.items()}


def test_append_merge_and_partition_by_run_on_the_executors(
    spark: SparkSession,
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore],
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    io_manager, datasets = backend
    # Nothing may collect a Spark DataFrame to the driver: make every collection path fail loudly.
    for name in ("toArrow", "toPandas"):
        monkeypatch.setattr(DataFrame, name, lambda *a, **k: pytest.fail("a DataFrame was collected to the driver"))
    batch = {"lo": 0, "hi": 100}

    def frame(pyspark: PySparkResource) -> DataFrame:
        session = pyspark.spark_session
        return session.range(batch["lo"], batch["hi"], 1, 2).select(
            "id", (F.col("id") % 3).cast("string").alias("day"), (F.col("id") * 2).alias("v")
        )

    @dg.asset(name="log", metadata={"write_mode": "append", "partition_by": ["day"], "spark_repartition": True})
    def log(pyspark: PySparkResource) -> DataFrame:
        return frame(pyspark)

    first = _materialize(log, io_manager, instance)
    batch.update(lo=100, hi=150)
    second = _materialize(log, io_manager, instance)
    assert (first["rows_appended"], second["rows_appended"]) == (100, 50)
    manifest = datasets.read_manifest("log")
    assert manifest.partition_by == ("day",) and manifest.row_count == 150 and manifest.version == 2
    # spark_repartition: one part per folder per append
    assert len(manifest.parts) == 6 and {p.split("/")[0] for p in manifest.parts} == {"day=0", "day=1", "day=2"}

    @dg.asset(name="table", metadata={"write_mode": "merge", "key_columns": ["id"]})
    def table(pyspark: PySparkResource) -> DataFrame:
        return frame(pyspark)

    batch.update(lo=0, hi=100)
    _materialize(table, io_manager, instance)
    batch.update(lo=90, hi=120)
    merged = _materialize(table, io_manager, instance)
    assert (merged["rows_inserted"], merged["rows_updated"]) == (20, 10)
    assert sorted(datasets.read_dataset("table").column("id").to_pylist()) == list(range(120))

    @dg.asset(name="snap", metadata={"partition_by": ["day"]})
    def snap(pyspark: PySparkResource) -> DataFrame:
        return frame(pyspark)

    snapped = _materialize(snap, io_manager, instance)
    assert snapped["partition_by"] == ["day"]
    assert datasets.read_dataset("snap", filters=[("day", "==", "1")]).num_rows == 10


def test_bad_spark_repartition_value_is_refused(
    spark: SparkSession, tmp_path: Any, instance: dg.DagsterInstance
) -> None:
    root = os.path.join(tmp_path, "s")

    @dg.asset(metadata={"partition_by": ["day"], "spark_repartition": "yes"})
    def odd(pyspark: PySparkResource) -> DataFrame:
        return pyspark.spark_session.range(4).select("id", F.lit("d").alias("day"))

    result = dg.materialize(
        [odd],
        resources={
            "io_manager": RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1),
            "pyspark": PySparkResource(spark_config={}),
        },
        instance=instance,
        raise_on_error=False,
    )
    assert not result.success
    assert "spark_repartition" in str(result.get_step_failure_events()[0].event_specific_data.error)
    assert not ParquetDatasetStore(LocalStore(root), retain_versions=1).dataset_exists("odd")
