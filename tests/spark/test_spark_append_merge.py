"""Spark append, merge and ``partition_by`` on the executors (real ``local[2,2]`` session, LocalStore and moto S3).

Results are compared with what the Arrow dataset layer (``append_dataset``,
``merge_dataset``, ``write_dataset(partition_by=...)``) produces for the same
rows, and the driver's memory is watched while millions of rows move.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psutil
import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dagster_parquet_dataset import CapabilityNotSupported, LocalStore, MemoryStore, ParquetDatasetStore, Store
from dagster_parquet_dataset.dataset import MergeReplanNeeded
from dagster_parquet_dataset.errors import DatasetNotFound
from dagster_parquet_dataset.spark import (
    append_spark_dataset,
    merge_spark_dataset,
    write_spark_dataset,
)
from dagster_parquet_dataset.spark.handler import SparkDataFrameHandler

from ._faults import FailAfterPartStore
from .test_spark_io import _failed_tasks

MARKERS = {"manifest.json", "_SUCCESS", "_claim"}


@pytest.fixture(params=["local", "s3"])
def datasets(request: pytest.FixtureRequest, tmp_path: Any) -> ParquetDatasetStore:
    # Only the live version is kept: the tests compare the files stored with the live manifest's.
    if request.param == "local":
        return ParquetDatasetStore(LocalStore(os.path.join(tmp_path, "store")), retain_versions=1)
    return ParquetDatasetStore(request.getfixturevalue("s3_store"), retain_versions=1)


def files(store: Store, key: str) -> set[str]:
    prefix = key + "/"
    return {
        f.path[len(prefix) :] for f in store.list_files(key) if not f.path.rsplit("/", 1)[-1].startswith(".")
    } - MARKERS


def sorted_rows(table: pa.Table, by: str = "id") -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: r[by])


def events(spark: SparkSession, lo: int, hi: int, parts: int = 3) -> DataFrame:
    """Rows with a region (null, empty, non-ASCII and escaped values among them) and a payload."""
    region = (
        F.when(F.col("id") % 6 == 0, F.lit(None))
        .when(F.col("id") % 6 == 1, F.lit(""))
        .when(F.col("id") % 6 == 2, F.lit("Zürich/Nord"))
        .when(F.col("id") % 6 == 3, F.lit("東京"))
        .when(F.col("id") % 6 == 4, F.lit("a=b%c"))
        .otherwise(F.lit("eu"))
    )
    return spark.range(lo, hi, 1, parts).select(
        "id", region.alias("region"), (F.col("id") * 10).alias("v"), F.concat(F.lit("s"), F.col("id")).alias("s")
    )


# --------------------------------------------------------------------------- partition_by


@pytest.mark.parametrize("repartition", [False, True])
def test_partition_by_write_lands_in_the_arrow_paths_folders(
    spark: SparkSession, datasets: ParquetDatasetStore, repartition: bool
) -> None:
    df = events(spark, 0, 600)
    manifest = write_spark_dataset(df, datasets, "sp", partition_by=["region"], repartition=repartition)
    arrow = pa.table(
        {
            "id": pa.array(range(600), pa.int64()),
            "region": [[None, "", "Zürich/Nord", "東京", "a=b%c", "eu"][i % 6] for i in range(600)],
            "v": pa.array([i * 10 for i in range(600)], pa.int64()),
            "s": [f"s{i}" for i in range(600)],
        }
    )
    reference = datasets.write_dataset(arrow, "ar", partition_by=["region"])

    def folders(m: Any) -> set[tuple[str, str]]:
        return {(e.path.rsplit("/", 1)[0], str(sorted((e.partition_values or {}).items()))) for e in m.files}

    assert folders(manifest) == folders(reference)
    assert {f.rsplit("/", 1)[0] for f in files(datasets.store, "sp")} == {
        f.rsplit("/", 1)[0] for f in files(datasets.store, "ar")
    }
    assert "region=Z\u00fcrich%2FNord" in {e.path.rsplit("/", 1)[0] for e in manifest.files}
    assert manifest.partition_by == ("region",) and manifest.row_count == 600
    assert manifest.schema is not None and reference.schema is not None
    assert [(f.name, f.type) for f in manifest.schema] == [(f.name, f.type) for f in reference.schema]
    assert sorted_rows(datasets.read_dataset("sp")) == sorted_rows(datasets.read_dataset("ar"))
    # Each task writes one part per folder it touches; repartitioning gives one part per folder.
    per_folder: dict[str, int] = {}
    for e in manifest.files:
        per_folder[e.path.rsplit("/", 1)[0]] = per_folder.get(e.path.rsplit("/", 1)[0], 0) + 1
    # null and "" share a folder but are different partition values (as in the Arrow path)
    assert max(per_folder.values()) <= (2 if repartition else 6)
    assert files(datasets.store, "sp") == {e.path for e in manifest.files}
    # Filters prune by the manifest's partition values.
    assert datasets.read_dataset("sp", filters=[("region", "==", "東京")]).num_rows == 100


def test_partition_by_bad_column_writes_nothing(spark: SparkSession, tmp_path: Any) -> None:
    datasets = ParquetDatasetStore(LocalStore(os.path.join(tmp_path, "s")), retain_versions=1)
    with pytest.raises(ValueError, match="no such column"):
        write_spark_dataset(events(spark, 0, 10), datasets, "bad", partition_by=["nope"])
    assert not datasets.dataset_exists("bad") and files(datasets.store, "bad") == set()


# -------------------------------------------------------------------------------- append


def test_append_matches_the_arrow_layer(spark: SparkSession, datasets: ParquetDatasetStore) -> None:
    first, second = events(spark, 0, 300), events(spark, 300, 500, parts=2)
    m1 = append_spark_dataset(first, datasets, "a", run_id="r1")
    m2 = append_spark_dataset(second.select("s", "v", "region", "id"), datasets, "a", run_id="r2")  # column order
    datasets.append_dataset(first.toArrow(), "ref")
    datasets.append_dataset(second.toArrow(), "ref")
    assert sorted_rows(datasets.read_dataset("a")) == sorted_rows(datasets.read_dataset("ref"))
    assert m2.version == m1.version + 1 and m2.operation == "append" and m2.run_id == "r2"
    assert set(m1.parts) < set(m2.parts)  # existing files stay by name
    assert files(datasets.store, "a") == set(m2.parts)  # nothing else left behind


def test_append_to_partitioned_dataset_with_new_column(spark: SparkSession, datasets: ParquetDatasetStore) -> None:
    append_spark_dataset(events(spark, 0, 120), datasets, "pa", partition_by=["region"])
    extra = events(spark, 120, 240).withColumn("note", F.when(F.col("id") >= 0, F.lit("late")))
    with pytest.raises(ValueError, match="new columns"):
        append_spark_dataset(extra, datasets, "pa")
    with pytest.raises(ValueError, match="partitioned by"):
        append_spark_dataset(events(spark, 120, 240), datasets, "pa", partition_by=["s"])
    manifest = append_spark_dataset(extra, datasets, "pa", allow_new_columns=True, repartition=True)
    table = datasets.read_dataset("pa")
    assert table.num_rows == 240 and manifest.partition_by == ("region",)
    notes = {r["id"]: r["note"] for r in table.to_pylist()}
    assert notes[5] is None and notes[200] == "late"
    assert files(datasets.store, "pa") == set(manifest.parts)


def test_append_rebases_on_a_concurrent_append(spark: SparkSession, datasets: ParquetDatasetStore) -> None:
    """Another writer commits between this append's start and its commit: both appends' rows survive."""
    append_spark_dataset(events(spark, 0, 50), datasets, "c")
    pending = datasets.begin_append("c", events(spark, 0, 1).toArrow().schema)  # version 1 is what we plan on
    datasets.append_dataset(events(spark, 50, 60).toArrow(), "c")  # the concurrent append: version 2

    from dagster_parquet_dataset.spark._parts import Destination, entries_of, write_spark_parts

    written = write_spark_parts(
        events(spark, 60, 100), datasets, [Destination("c")], schema=pending.schema, txn=pending.txn
    )
    manifest = datasets.commit_append(pending, entries_of(written))
    assert manifest.version == 3
    assert sorted(datasets.read_dataset("c").column("id").to_pylist()) == list(range(100))


@pytest.mark.parametrize("partitioned", [False, True])
def test_task_retry_during_append_leaves_one_attempts_rows(
    spark: SparkSession, datasets: ParquetDatasetStore, partitioned: bool
) -> None:
    datasets = ParquetDatasetStore(datasets.store, max_rows_per_file=7, retain_versions=1)
    append_spark_dataset(events(spark, 0, 10), datasets, "r", partition_by=["region"] if partitioned else None)
    sc = spark.sparkContext
    group = f"retry-{uuid.uuid4().hex[:8]}"
    sc.setJobGroup(group, "append retry")
    failing = ParquetDatasetStore(
        FailAfterPartStore(datasets.store, partition=0), max_rows_per_file=7, retain_versions=1
    )
    try:
        manifest = append_spark_dataset(events(spark, 10, 90), failing, "r", mode="arrow")
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert _failed_tasks(spark, group) == 1
    assert sorted(datasets.read_dataset("r").column("id").to_pylist()) == list(range(90))
    assert files(datasets.store, "r") == set(manifest.parts)  # the failed attempt's files are gone


def test_memory_store_is_refused(spark: SparkSession) -> None:
    with pytest.raises(CapabilityNotSupported, match="MemoryStore"):
        append_spark_dataset(events(spark, 0, 3), ParquetDatasetStore(MemoryStore(), retain_versions=1), "m")
    with pytest.raises(CapabilityNotSupported, match="MemoryStore"):
        merge_spark_dataset(
            events(spark, 0, 3), ParquetDatasetStore(MemoryStore(), retain_versions=1), "m", key_columns=["id"]
        )


# --------------------------------------------------------------------------------- merge


def _base(spark: SparkSession, datasets: ParquetDatasetStore, key: str, files_: int = 5, per: int = 100) -> None:
    """``files_`` files of ``per`` consecutive ids each (so each file's key range is its own)."""
    write_spark_dataset(
        events(spark, 0, files_ * per, parts=files_).sortWithinPartitions("id"), datasets, key, mode="arrow"
    )


@pytest.mark.parametrize("strategy", ["upsert", "insert", "update"])
def test_merge_matches_the_arrow_layer_and_rewrites_only_matched_files(
    spark: SparkSession, datasets: ParquetDatasetStore, strategy: str
) -> None:
    _base(spark, datasets, "m")
    datasets.write_dataset(datasets.read_dataset("m"), "ref", overwrite=True)
    before = datasets.read_manifest("m")
    # Changes: ids 150..169 (inside file 1's range) and 1000..1009 (new).
    changes = (
        spark.range(150, 170, 1, 2)
        .union(spark.range(1000, 1010, 1, 1))
        .select("id", F.lit("eu").alias("region"), (-F.col("id")).alias("v"), F.lit("changed").alias("s"))
    )
    result = merge_spark_dataset(changes, datasets, "m", key_columns=["id"], strategy=strategy)
    expected = datasets.merge_dataset(changes.toArrow(), "ref", key_columns=["id"], strategy=strategy)
    assert sorted_rows(datasets.read_dataset("m")) == sorted_rows(datasets.read_dataset("ref"))
    assert (result.inserted, result.updated) == (expected.inserted, expected.updated)
    owner = [e.path for e in before.files if e.stats and e.stats["id"]["min"] <= 150 <= e.stats["id"]["max"]]
    assert len(owner) == 1
    if strategy == "insert":
        assert result.rewritten_files == ()
    else:
        assert result.rewritten_files == tuple(owner)  # exactly the file that held matched keys
    kept = [p for p in before.parts if p not in owner or strategy == "insert"]
    after = datasets.read_manifest("m")
    assert all(p in after.parts for p in kept)  # all other files kept by name
    assert files(datasets.store, "m") == set(after.parts)


def test_merge_into_partitioned_dataset(spark: SparkSession, datasets: ParquetDatasetStore) -> None:
    base = events(spark, 0, 300)
    write_spark_dataset(base, datasets, "pm", partition_by=["region"])
    datasets.write_dataset(base.toArrow(), "ref", partition_by=["region"])
    changes = events(spark, 290, 320, parts=2).withColumn("v", F.lit(-1).cast("long"))
    result = merge_spark_dataset(changes, datasets, "pm", key_columns=["id"])
    expected = datasets.merge_dataset(changes.toArrow(), "ref", key_columns=["id"])
    assert sorted_rows(datasets.read_dataset("pm")) == sorted_rows(datasets.read_dataset("ref"))
    assert (result.inserted, result.updated) == (expected.inserted, expected.updated) == (20, 10)
    # A key may not move to another partition.
    moved = events(spark, 5, 6).withColumn("region", F.lit("elsewhere"))
    version = datasets.read_manifest("pm").version
    with pytest.raises(ValueError, match="partition columns cannot change"):
        merge_spark_dataset(moved, datasets, "pm", key_columns=["id"])
    assert datasets.read_manifest("pm").version == version
    assert files(datasets.store, "pm") == set(datasets.read_manifest("pm").parts)


@pytest.mark.parametrize("bad", ["duplicate", "null"])
def test_merge_rejects_bad_keys_before_writing(spark: SparkSession, datasets: ParquetDatasetStore, bad: str) -> None:
    _base(spark, datasets, "k", files_=2)
    before = files(datasets.store, "k")
    if bad == "duplicate":
        changes = events(spark, 10, 20).union(events(spark, 15, 16))
        message = r"the source has 1 duplicate keys \(e.g. \{'id': 15\} appears 2 times\)"
    else:
        changes = events(spark, 10, 20).withColumn("id", F.when(F.col("id") == 12, None).otherwise(F.col("id")))
        message = "key column 'id' has 1 null values in the source"
    with pytest.raises(ValueError, match=message):
        merge_spark_dataset(changes, datasets, "k", key_columns=["id"])
    with pytest.raises(ValueError, match=message):  # the dataset layer says the same
        datasets.merge_dataset(changes.toArrow(), "k", key_columns=["id"])
    assert files(datasets.store, "k") == before and datasets.read_manifest("k").version == 1


def test_merge_update_of_missing_dataset_and_creation(spark: SparkSession, datasets: ParquetDatasetStore) -> None:
    with pytest.raises(DatasetNotFound):
        merge_spark_dataset(events(spark, 0, 5), datasets, "new", key_columns=["id"], strategy="update")
    result = merge_spark_dataset(events(spark, 0, 5), datasets, "new", key_columns=["id"], partition_by=["region"])
    assert result.inserted == 5 and datasets.read_manifest("new").partition_by == ("region",)


def test_merge_replans_after_a_concurrent_commit_on_its_files(
    spark: SparkSession, datasets: ParquetDatasetStore
) -> None:
    """A commit that replaces the planned-on file makes commit_merge refuse; the merge plans again."""
    _base(spark, datasets, "rp", files_=3)
    changes = events(spark, 150, 160).withColumn("v", F.lit(-5).cast("long"))
    schema = changes.toArrow().schema
    plan = datasets.plan_merge("rp", source_schema=schema, key_columns=["id"], key_ranges={"id": (150, 159)})
    owner = [e.path for e in datasets.read_manifest("rp").files if e.stats and e.stats["id"]["min"] == 100]
    assert [e.path for e in plan.candidates] == owner and len(owner) == 1
    # A concurrent merge rewrites that very file.
    datasets.merge_dataset(events(spark, 151, 152).toArrow(), "rp", key_columns=["id"])
    with pytest.raises(MergeReplanNeeded):
        datasets.commit_merge(plan, rewritten=owner, new_entries=[], inserted=0, updated=0)
    # The Spark merge (which plans on the live version) is right.
    merge_spark_dataset(changes, datasets, "rp", key_columns=["id"])
    got = {r["id"]: r["v"] for r in datasets.read_dataset("rp").to_pylist()}
    assert all(got[i] == -5 for i in range(150, 160)) and got[149] == 1490 and len(got) == 300


def test_spark_handler_never_collects() -> None:
    with pytest.raises(TypeError, match="never collected"):
        SparkDataFrameHandler().to_arrow(object())


# ------------------------------------------------------------------------ driver memory


class _PeakRss:
    """Samples this process's RSS every 20 ms in a thread; ``growth`` is peak minus the start."""

    def __init__(self) -> None:
        self._proc = psutil.Process()
        self._stop = threading.Event()
        self.start = self.peak = self._proc.memory_info().rss
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __enter__(self) -> _PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.start) / 2**20


@pytest.fixture
def warm(spark: SparkSession, tmp_path: Any) -> Iterator[ParquetDatasetStore]:
    """A LocalStore after one small run of every path (so imports and JIT caches are not counted)."""
    datasets = ParquetDatasetStore(LocalStore(os.path.join(tmp_path, "big")), retain_versions=1)
    small = spark.range(0, 1000, 1, 2).select("id", (F.col("id") % 30).alias("day"), F.rand(1).alias("x"))
    append_spark_dataset(small, datasets, "warm")
    append_spark_dataset(small, datasets, "warmp", partition_by=["day"])
    merge_spark_dataset(small.limit(10), datasets, "warm", key_columns=["id"])
    yield datasets


def test_driver_rss_stays_flat_while_millions_of_rows_are_appended_and_merged(
    spark: SparkSession, warm: ParquetDatasetStore
) -> None:
    """2M rows appended, 2M partitioned, and 750k changed rows merged into 2M: the driver's Python RSS stays flat.

    The rows come from ``spark.range``, so they never exist in this process;
    collecting them (``toArrow``) would grow RSS by well over 100 MB.
    """
    datasets = warm
    n = 2_000_000

    def big(lo: int, hi: int) -> DataFrame:
        return spark.range(lo, hi, 1, 4).select(
            "id", (F.col("id") % 30).alias("day"), F.rand(7).alias("x"), F.sha1(F.col("id").cast("string")).alias("h")
        )

    with _PeakRss() as append_rss:
        manifest = append_spark_dataset(big(0, n), datasets, "big")
    with _PeakRss() as part_rss:
        parted = write_spark_dataset(big(0, n), datasets, "bigp", partition_by=["day"])
    with _PeakRss() as merge_rss:
        result = merge_spark_dataset(big(n - 500_000, n + 250_000), datasets, "big", key_columns=["id"])
    assert manifest.row_count == n and parted.row_count == n and len({e.path.split("/")[0] for e in parted.files}) == 30
    assert (result.updated, result.inserted) == (500_000, 250_000)
    assert datasets.read_manifest("big").row_count == n + 250_000
    for name, rss in (("append", append_rss), ("partition_by", part_rss), ("merge", merge_rss)):
        assert rss.growth_mb <= 64, f"{name}: driver RSS grew by {rss.growth_mb:.0f} MB"
