"""A Spark ``partition_expr`` asset (the example's ``marts/daily_event_stats`` style) gets a preview per partition.

Real ``local[2,2]`` session, ``materialize`` on a ``LocalStore``: a one-partition
run and a single-run backfill over a range (overwrite) both show each
partition's own rows in its ``preview``.
"""

import os
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pytest
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-01")


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


@dg.asset(partitions_def=DAILY, backfill_policy=dg.BackfillPolicy.single_run(), metadata={"partition_expr": "day"})
def stats(context: dg.AssetExecutionContext, pyspark: PySparkResource) -> DataFrame:
    days = [str(k) for k in context.partition_keys]
    day = F.element_at(F.array(*[F.lit(d) for d in days]), (F.col("id") % len(days) + 1).cast("int"))
    return (
        pyspark.spark_session.range(0, 4 * len(days), 1, 2)
        .withColumn("day", F.to_date(day))
        .withColumn("value", F.concat(day, F.lit("#"), F.col("id").cast("string")))
        .select("day", "value")
    )


def _run(root: str, instance: dg.DagsterInstance, **kw: Any) -> Any:
    io_manager = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)
    resources = {"io_manager": io_manager, "pyspark": PySparkResource(spark_config={})}
    return dg.materialize([stats], resources=resources, instance=instance, **kw)


def _preview_days(md: dg.MetadataValue) -> set[str]:
    lines = md.md_str.splitlines()  # type: ignore[attr-defined]
    assert lines[0] == "| day | value |"
    return {line.split(" | ")[0].lstrip("| ") for line in lines[2:] if line.startswith("| ")}


def test_one_partition_spark_run_has_a_preview(
    spark: SparkSession, tmp_path: Any, instance: dg.DagsterInstance
) -> None:
    result = _run(os.path.join(tmp_path, "store"), instance, partition_key="2024-01-07")
    (mat,) = result.asset_materializations_for_node("stats")
    assert _preview_days(mat.metadata["preview"]) == {"2024-01-07"}
    assert [c.name for c in mat.metadata["dagster/column_schema"].schema.columns] == ["day", "value"]


def test_spark_range_run_has_a_preview_per_partition(
    spark: SparkSession, tmp_path: Any, instance: dg.DagsterInstance
) -> None:
    tags = {"dagster/asset_partition_range_start": "2024-01-02", "dagster/asset_partition_range_end": "2024-01-04"}
    result = _run(os.path.join(tmp_path, "store"), instance, tags=tags)
    mats = {m.partition: m.metadata for m in result.asset_materializations_for_node("stats")}
    assert sorted(mats) == ["2024-01-02", "2024-01-03", "2024-01-04"]
    for day, md in mats.items():
        assert _preview_days(md["preview"]) == {day}
