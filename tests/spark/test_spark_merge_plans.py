"""The Spark merge job's two plans (issue 27, item 4: merge at <= 0.2x the plain-Spark rewrite).

A small merge (few candidate rows) takes the direct plan: the changes are read
in one task per core, each of which reads the candidates' keys itself, so the
job has two stages (one shuffle). Larger merges shuffle the keys first (three
stages). Both must give what the dataset layer's merge gives, refuse the same
duplicate keys and leave nothing behind when they do. Stages and tasks are
counted on Spark's status tracker for the job group set around the call.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.spark import _merge_job, merge_spark_dataset, write_spark_dataset

from .test_spark_append_merge import events, files, sorted_rows


@pytest.fixture
def datasets(tmp_path: Any) -> ParquetDatasetStore:
    return ParquetDatasetStore(LocalStore(os.path.join(tmp_path, "store")), retain_versions=1)


def _stages_of(spark: SparkSession, action: Any) -> tuple[Any, list[list[int]]]:
    """``action()``'s result and, per Spark job it ran (in order), the task count of each stage."""
    sc = spark.sparkContext
    group = f"plans-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "counting a merge's stages")
    try:
        result = action()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    tracker = sc.statusTracker()
    jobs = []
    for job in sorted(tracker.getJobIdsForGroup(group)):
        info = tracker.getJobInfo(job)
        assert info is not None
        stages = [tracker.getStageInfo(s) for s in sorted(info.stageIds)]
        jobs.append([s.numTasks for s in stages if s is not None])
    return result, jobs


def _changes(spark: SparkSession) -> DataFrame:
    """Updates inside the existing ids (150..169) and inserts (1000..1009), in 6 Spark partitions."""
    return events(spark, 150, 170, parts=4).union(events(spark, 1000, 1010, parts=2)).withColumn("v", -F.col("v"))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("partitioned", [False, True])
def test_a_small_merge_reads_its_changes_once_per_core_in_a_two_stage_job(
    spark: SparkSession, datasets: ParquetDatasetStore, partitioned: bool
) -> None:
    partition_by = ["region"] if partitioned else None
    write_spark_dataset(
        events(spark, 0, 500, parts=5).sortWithinPartitions("id"), datasets, "m", partition_by=partition_by
    )
    datasets.write_dataset(datasets.read_dataset("m"), "ref", partition_by=partition_by)
    changes = _changes(spark)
    result, jobs = _stages_of(spark, lambda: merge_spark_dataset(changes, datasets, "m", key_columns=["id"]))
    expected = datasets.merge_dataset(changes.toArrow(), "ref", key_columns=["id"])
    assert (result.updated, result.inserted) == (expected.updated, expected.inserted) == (20, 10)
    assert sorted_rows(datasets.read_dataset("m")) == sorted_rows(datasets.read_dataset("ref"))
    cores = spark.sparkContext.defaultParallelism
    assert len(jobs) == 2, jobs  # the check, then the merge job
    check, merge = jobs
    assert check == [cores], f"the check job's tasks: {check} (one per core expected)"
    assert len(merge) == 2, f"the merge job's stages (tasks each): {merge}"
    assert merge[0] == cores, f"the merge job read the changes in {merge[0]} tasks, not one per core"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("plan", ["direct", "shuffled"])
@pytest.mark.parametrize("strategy", ["upsert", "insert", "update"])
def test_both_plans_merge_as_the_dataset_layer_does(
    spark: SparkSession, datasets: ParquetDatasetStore, monkeypatch: pytest.MonkeyPatch, plan: str, strategy: str
) -> None:
    if plan == "shuffled":
        monkeypatch.setattr(_merge_job, "DIRECT_CANDIDATE_ROWS", 0)
    write_spark_dataset(events(spark, 0, 500, parts=5).sortWithinPartitions("id"), datasets, "m", mode="arrow")
    datasets.write_dataset(datasets.read_dataset("m"), "ref")
    changes = _changes(spark)
    result, jobs = _stages_of(
        spark, lambda: merge_spark_dataset(changes, datasets, "m", key_columns=["id"], strategy=strategy)
    )
    expected = datasets.merge_dataset(changes.toArrow(), "ref", key_columns=["id"], strategy=strategy)
    assert (result.updated, result.inserted) == (expected.updated, expected.inserted)
    assert sorted_rows(datasets.read_dataset("m")) == sorted_rows(datasets.read_dataset("ref"))
    assert len(jobs[-1]) == (2 if plan == "direct" else 3), jobs


@pytest.mark.timeout(900)
@pytest.mark.parametrize("plan", ["direct", "shuffled"])
@pytest.mark.parametrize(
    ("strategy", "duplicated"),
    [
        ("upsert", 160),  # a matched key: its rows meet in the file's group
        ("upsert", 1003),  # an inserted key
        ("insert", 160),  # a matched key the insert drops: still checked
        ("update", 1003),  # a new key the update drops: still checked
    ],
)
def test_both_plans_refuse_duplicate_keys_and_leave_nothing(
    spark: SparkSession,
    datasets: ParquetDatasetStore,
    monkeypatch: pytest.MonkeyPatch,
    plan: str,
    strategy: str,
    duplicated: int,
) -> None:
    if plan == "shuffled":
        monkeypatch.setattr(_merge_job, "DIRECT_CANDIDATE_ROWS", 0)
    write_spark_dataset(events(spark, 0, 500, parts=5).sortWithinPartitions("id"), datasets, "m", mode="arrow")
    before = files(datasets.store, "m")
    # The second row of the duplicated key comes from a Spark partition of its own.
    changes = _changes(spark).union(events(spark, duplicated, duplicated + 1, parts=1))
    message = rf"the source has 1 duplicate keys \(e.g. \{{'id': {duplicated}\}} appears 2 times\)"
    with pytest.raises(ValueError, match=message):
        merge_spark_dataset(changes, datasets, "m", key_columns=["id"], strategy=strategy)
    with pytest.raises(ValueError, match=message):  # the dataset layer says the same
        datasets.merge_dataset(changes.toArrow(), "m", key_columns=["id"], strategy=strategy)
    assert files(datasets.store, "m") == before and datasets.read_manifest("m").version == 1
