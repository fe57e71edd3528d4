"""Spark outputs: the ``preview`` (``df.limit(n)``), column descriptions and the dataset checks."""

import os
from typing import Any

import dagster as dg
import pyarrow.parquet as pq
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, build_dataset_checks
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager

COLUMNS = dg.TableSchema(
    columns=[dg.TableColumn("id", "int64", description="row id"), dg.TableColumn("half", "double", description="id/2")]
)


def _frame(pyspark: PySparkResource) -> DataFrame:
    return pyspark.spark_session.range(1000, numPartitions=4).withColumn("half", F.col("id") / 2)


def test_spark_preview_descriptions_and_checks(spark: SparkSession, tmp_path: Any) -> None:
    root = os.path.join(tmp_path, "store")

    @dg.asset(metadata={"dagster/column_schema": COLUMNS})
    def numbers(pyspark: PySparkResource) -> DataFrame:
        return _frame(pyspark)

    @dg.asset(metadata={"dagster/column_schema": COLUMNS, "write_mode": "append"})
    def appended(pyspark: PySparkResource) -> DataFrame:
        return _frame(pyspark)

    checks = build_dataset_checks([numbers, appended])
    resources = {
        "io_manager": RemoteStoreIOManager(store=LocalStoreResource(root=root), preview_rows=4, retain_versions=1),
        "pyspark": PySparkResource(spark_config={}),
    }
    with dg.instance_for_test() as instance:
        result = dg.materialize([numbers, appended, *checks], resources=resources, instance=instance)
    assert result.success
    assert all(e.passed for e in result.get_asset_check_evaluations())
    assert len(result.get_asset_check_evaluations()) == 6
    datasets = ParquetDatasetStore(LocalStore(root), retain_versions=1)
    for name in ("numbers", "appended"):
        metadata = result.asset_materializations_for_node(name)[0].metadata
        rows = [line for line in metadata["preview"].md_str.splitlines() if line.startswith("|")][2:]
        assert len(rows) == 4
        assert "first 4 of 1000 rows" in metadata["preview"].md_str
        described = {c.name: c.description for c in metadata["dagster/column_schema"].schema.columns}
        assert described == {"id": "row id", "half": "id/2"}
    # every Spark write (default and append) runs on the executors (the Spark layer): no descriptions in
    # its files (documented gap), while the materializations above still carry them
    for name in ("numbers", "appended"):
        for part in datasets.read_manifest(name).parts:
            assert not pq.read_schema(os.path.join(root, name, part)).field("id").metadata
