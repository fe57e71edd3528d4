"""A Spark merge into an existing dataset runs at most two Spark jobs (issue 27, item 4).

Counted on Spark's status tracker: every job the merge starts (adaptive query
stages included, as Spark submits each as a job) carries the job group set
around the call.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.spark import merge_spark_dataset, write_spark_dataset

from .test_spark_append_merge import events, sorted_rows


def _jobs_of(spark: SparkSession, action: Any) -> tuple[Any, int]:
    sc = spark.sparkContext
    group = f"merge-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "counting a merge's Spark jobs")
    try:
        result = action()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return result, len(sc.statusTracker().getJobIdsForGroup(group))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("partitioned", [False, True])
@pytest.mark.parametrize("keyed", [False, True])
def test_a_merge_runs_at_most_two_spark_jobs(
    spark: SparkSession, tmp_path: Any, partitioned: bool, keyed: bool
) -> None:
    datasets = ParquetDatasetStore(LocalStore(os.path.join(tmp_path, "store")), retain_versions=1)
    base = events(spark, 0, 500, parts=5).sortWithinPartitions("id")
    write_spark_dataset(base, datasets, "m", partition_by=["region"] if partitioned else None)
    datasets.write_dataset(datasets.read_dataset("m"), "ref", partition_by=["region"] if partitioned else None)
    # Updates inside the existing ids, and inserts.
    changes = events(spark, 150, 170, parts=2).union(events(spark, 1000, 1010, parts=1)).withColumn("v", -F.col("v"))
    result, jobs = _jobs_of(
        spark,
        lambda: merge_spark_dataset(changes, datasets, "m", key_columns=["id"], idempotency_key="k" if keyed else None),
    )
    expected = datasets.merge_dataset(changes.toArrow(), "ref", key_columns=["id"])
    assert (result.updated, result.inserted) == (expected.updated, expected.inserted) == (20, 10)
    assert sorted_rows(datasets.read_dataset("m")) == sorted_rows(datasets.read_dataset("ref"))
    assert jobs <= 2, f"the merge ran {jobs} Spark jobs"
