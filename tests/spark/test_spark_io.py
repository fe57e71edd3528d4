"""The Spark layer on the shared ``local[2,2]`` session: both write paths, both read paths, S3, retries.

Everything written through Spark is also read back with the plain dataset
layer (pyarrow), and what Spark reads back is compared with what Spark wrote.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dagster_parquet_dataset import (
    AlreadyExists,
    CapabilityNotSupported,
    DatasetIncomplete,
    DatasetNotFound,
    LocalStore,
    MemoryStore,
    ParquetDatasetStore,
    S3Store,
)
from dagster_parquet_dataset.spark import read_spark_dataset, spark_schema_to_arrow, write_spark_dataset

from ._faults import FailAfterPartStore

MARKERS = {"manifest.json", "_SUCCESS", "_claim"}
WRITE_MODES = ["native", "arrow"]


def wide_df(spark: SparkSession, n: int = 40, partitions: int = 3) -> DataFrame:
    """Every column kind the layer promises to keep: nulls, UTC and local timestamps, decimals, nesting."""
    return spark.sql(
        f"""
        select id,
               cast(id as int) as i,
               case when id % 5 = 0 then null else concat('s', cast(id as string)) end as s,
               timestamp'2024-03-01 12:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) as ts,
               timestamp_ntz'2024-03-01 12:00:00' + make_interval(0, 0, 0, 0, 0, id) as tsn,
               cast(id * 1.125 as decimal(20, 3)) as d,
               date_add(date'2024-01-01', cast(id as int)) as dt,
               array(id, id + 1) as arr,
               map('k', id) as m,
               named_struct('x', id, 'y', cast(id as string)) as st,
               cast(cast(id as string) as binary) as b
        from range({n})
        """
    ).repartition(partitions)


def rows(df: DataFrame) -> list[Any]:
    return sorted(df.collect(), key=lambda r: r["id"])


def files_under(store: LocalStore | S3Store, key: str) -> set[str]:
    prefix = key + "/"
    return {f.path[len(prefix) :] for f in store.list_files(key)}


def visible_files(store: LocalStore | S3Store, key: str) -> set[str]:
    """Stored objects, leaving out LocalStore's hidden lock files."""
    return {p for p in files_under(store, key) if not p.split("/")[-1].startswith(".")}


@pytest.fixture
def local(tmp_path: Any) -> ParquetDatasetStore:
    """Keeps only the live version: the tests assert a replaced version's files go at once."""
    return ParquetDatasetStore(LocalStore(os.path.join(tmp_path, "store")), retain_versions=1)


# ----------------------------------------------------------------------------- write


@pytest.mark.parametrize("mode", WRITE_MODES)
def test_write_then_read_back_everywhere(spark: SparkSession, local: ParquetDatasetStore, mode: str) -> None:
    df = wide_df(spark)
    expected = rows(df)
    manifest = write_spark_dataset(df, local, "wide", mode=mode, run_id="r1", metadata={"who": "test"})

    # The format: Spec names for a new dataset, counts per file from the footers, the faithful schema.
    assert manifest.parts == [f"part-{i:05d}.parquet" for i in range(len(manifest.parts))]
    assert 1 <= len(manifest.parts) <= 3
    assert manifest.row_count == 40 and manifest.run_id == "r1" and manifest.metadata == {"who": "test"}
    assert visible_files(local.store, "wide") == set(manifest.parts) | MARKERS  # no staging, no attempts
    for entry in manifest.files:
        path = os.path.join(local.store.root, "wide", entry.path)
        assert pq.read_metadata(path).num_rows == entry.row_count
        assert os.stat(path).st_size == entry.size_bytes
    assert sum(e.row_count for e in manifest.files) == 40
    stored = manifest.schema
    assert stored is not None and stored.equals(spark_schema_to_arrow(df.schema))
    assert stored.field("ts").type == pa.timestamp("us", tz="UTC")
    assert stored.field("tsn").type == pa.timestamp("us")
    assert stored.field("d").type == pa.decimal128(20, 3)

    # The plain dataset layer reads it (verified) with the same values Spark has.
    table = local.read_dataset("wide").sort_by("id")
    assert table.column("id").to_pylist() == list(range(40))
    assert table.column("ts").to_pylist()[3] == datetime(2024, 3, 1, 12, 0, 3, tzinfo=timezone.utc)
    assert table.column("tsn").to_pylist()[3] == datetime(2024, 3, 1, 12, 3)
    assert table.column("d").to_pylist()[3] == Decimal("3.375")
    assert table.column("m").to_pylist()[3] == [("k", 3)]
    assert table.column("s").null_count == 8

    # Spark reads it back, through both read paths, as the same rows.
    for read_mode in ("native", "arrow"):
        back = read_spark_dataset(spark, local, "wide", mode=read_mode)
        assert back.columns == df.columns
        # Same types; Spark's own file reader marks every column nullable, so compare without nullability.
        assert [f.dataType.simpleString() for f in back.schema] == [f.dataType.simpleString() for f in df.schema]
        assert rows(back) == expected


@pytest.mark.parametrize("mode", WRITE_MODES)
def test_keys_with_spaces_percent_signs_and_glob_characters(spark: SparkSession, tmp_path: Any, mode: str) -> None:
    """Dagster keys keep such characters (``echo[first]``, partition values); Spark must not reinterpret them."""
    root = os.path.join(tmp_path, "odd")
    datasets = ParquetDatasetStore(LocalStore(root), retain_versions=1)
    key = "run/echo[first]/a b%25{x,y}*?é"
    manifest = write_spark_dataset(spark.range(10).repartition(2), datasets, key, mode=mode)
    assert manifest.row_count == 10 and len(manifest.parts) == 2
    assert os.listdir(root) == ["run"] and os.listdir(os.path.join(root, "run")) == ["echo[first]"]  # nothing stray
    for read_mode in ("native", "arrow"):
        assert sorted(r.id for r in read_spark_dataset(spark, datasets, key, mode=read_mode).collect()) == list(
            range(10)
        )


@pytest.mark.parametrize("mode", WRITE_MODES)
def test_max_rows_per_file_splits_each_partition(spark: SparkSession, tmp_path: Any, mode: str) -> None:
    datasets = ParquetDatasetStore(LocalStore(os.path.join(tmp_path, "s")), max_rows_per_file=7, retain_versions=1)
    manifest = write_spark_dataset(spark.range(50).repartition(2), datasets, "split", mode=mode)
    assert manifest.row_count == 50
    assert all(e.row_count is not None and 0 < e.row_count <= 7 for e in manifest.files)
    assert manifest.parts == [f"part-{i:05d}.parquet" for i in range(len(manifest.parts))]
    assert sorted(datasets.read_dataset("split").column("id").to_pylist()) == list(range(50))


@pytest.mark.parametrize("mode", WRITE_MODES)
def test_overwrite_replaces_the_version_and_its_files(
    spark: SparkSession, local: ParquetDatasetStore, mode: str
) -> None:
    first = write_spark_dataset(spark.range(10), local, "ow", mode=mode)
    with pytest.raises(AlreadyExists, match="overwrite=True"):
        write_spark_dataset(spark.range(5), local, "ow", mode=mode)
    second = write_spark_dataset(spark.range(100, 105).repartition(2), local, "ow", overwrite=True, mode=mode)
    assert second.version == first.version + 1
    assert not set(first.parts) & set(second.parts)  # a later version never reuses a live file's name
    assert visible_files(local.store, "ow") == set(second.parts) | MARKERS  # the old parts are gone
    assert sorted(local.read_dataset("ow").column("id").to_pylist()) == list(range(100, 105))
    assert sorted(r.id for r in read_spark_dataset(spark, local, "ow").collect()) == list(range(100, 105))


@pytest.mark.parametrize("mode", WRITE_MODES)
def test_empty_dataframe_is_an_empty_dataset_with_its_schema(
    spark: SparkSession, local: ParquetDatasetStore, mode: str
) -> None:
    df = wide_df(spark).where("id < 0")
    manifest = write_spark_dataset(df, local, "empty", mode=mode)
    assert manifest.row_count == 0
    assert manifest.schema is not None and manifest.schema.names == df.columns
    assert local.read_dataset("empty").num_rows == 0
    back = read_spark_dataset(spark, local, "empty")
    assert back.columns == df.columns and back.count() == 0


@pytest.mark.parametrize("mode", WRITE_MODES)
def test_timestamps_are_stored_as_utc_whatever_the_session_time_zone(
    spark: SparkSession, local: ParquetDatasetStore, mode: str
) -> None:
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        df = spark.sql("select timestamp'2024-03-01 12:00:00' as ts")  # noon in New York = 17:00 UTC
        manifest = write_spark_dataset(df, local, "tz", mode=mode)
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
    assert manifest.schema is not None and manifest.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert local.read_dataset("tz").column("ts").to_pylist() == [datetime(2024, 3, 1, 17, tzinfo=timezone.utc)]


# ------------------------------------------------------------------ S3 through executors


def test_s3_store_goes_through_the_executors(spark: SparkSession, s3_store: S3Store) -> None:
    datasets = ParquetDatasetStore(s3_store, retain_versions=1)
    df = wide_df(spark, n=30, partitions=2)
    manifest = write_spark_dataset(df, datasets, "events/wide")  # auto: arrow on S3
    assert manifest.row_count == 30
    assert visible_files(s3_store, "events/wide") == set(manifest.parts) | MARKERS
    assert all(manifest.parts.count(p) == 1 for p in manifest.parts)
    assert sorted(datasets.read_dataset("events/wide").column("id").to_pylist()) == list(range(30))
    assert rows(read_spark_dataset(spark, datasets, "events/wide")) == rows(df)
    projected = read_spark_dataset(spark, datasets, "events/wide", columns=["s", "id"])
    assert projected.columns == ["s", "id"]
    assert sorted(projected.collect(), key=lambda r: r.id) == [(r.s, r.id) for r in rows(df)]


def test_native_mode_needs_a_store_spark_can_reach(spark: SparkSession, s3_store: S3Store, tmp_path: Any) -> None:
    with pytest.raises(CapabilityNotSupported, match="hadoop-aws"):
        write_spark_dataset(spark.range(3), ParquetDatasetStore(s3_store, retain_versions=1), "x", mode="native")
    brotli = ParquetDatasetStore(LocalStore(os.path.join(tmp_path, "b")), compression="brotli", retain_versions=1)
    with pytest.raises(CapabilityNotSupported, match="brotli"):
        write_spark_dataset(spark.range(3), brotli, "x", mode="native")
    manifest = write_spark_dataset(spark.range(3), brotli, "x")  # auto falls back to the executor path
    assert manifest.compression == "brotli" and manifest.row_count == 3
    assert not s3_store.exists("x/_claim")  # the refused write touched nothing


def test_memory_store_is_refused_with_the_reason(spark: SparkSession) -> None:
    datasets = ParquetDatasetStore(MemoryStore(), retain_versions=1)
    with pytest.raises(CapabilityNotSupported, match="separate Python worker processes"):
        write_spark_dataset(spark.range(3), datasets, "m")
    datasets.write_dataset(pa.table({"a": [1]}), "m")
    with pytest.raises(CapabilityNotSupported, match="MemoryStore"):
        read_spark_dataset(spark, datasets, "m")


# ----------------------------------------------------------------------------- retries


def _failed_tasks(spark: SparkSession, group: str) -> int:
    tracker = spark.sparkContext.statusTracker()
    failed = 0
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else []:
            stage_info = tracker.getStageInfo(stage)
            failed += stage_info.numFailedTasks if stage_info else 0
    return failed


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_task_that_fails_after_writing_a_part_is_retried_without_duplicates(
    spark: SparkSession, tmp_path: Any, backend: str, request: pytest.FixtureRequest
) -> None:
    """A real Spark task retry (the session is ``local[2,2]``: one retry per task).

    Attempt 0 of partition 0 publishes its part to the store and then fails
    (the wrapping :class:`FailAfterPartStore` raises); Spark runs
    attempt 1, which writes its own part. Only the successful attempt may be
    committed, and the failed attempt's file must be gone.
    """
    store = LocalStore(os.path.join(tmp_path, "r")) if backend == "local" else request.getfixturevalue("s3_store")
    datasets = ParquetDatasetStore(FailAfterPartStore(store, partition=0), max_rows_per_file=4, retain_versions=1)
    df = spark.range(40).repartition(3)
    sc = spark.sparkContext
    group = f"retry-{uuid.uuid4().hex[:8]}"
    sc.setJobGroup(group, "task retry test")
    try:
        manifest = write_spark_dataset(df, datasets, "retry", mode="arrow")
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert _failed_tasks(spark, group) == 1  # the retry really happened
    ids = datasets.read_dataset("retry").column("id").to_pylist()
    assert sorted(ids) == list(range(40))  # every row exactly once
    assert manifest.row_count == 40
    assert visible_files(store, "retry") == set(manifest.parts) | MARKERS  # the failed attempt's part is gone


def test_failed_job_leaves_no_dataset_and_no_files(spark: SparkSession, local: ParquetDatasetStore) -> None:
    """Partition 1 writes its part; partition 0 fails (twice) only once that part is on disk.

    The driver waits for the failed job's tasks to stop before it cleans up, then abandons the write:
    no file and no ``_claim`` stay behind, and the key reads as absent.
    """
    root = local.store.root

    @F.udf("long")
    def fail_in_partition_0(x: int) -> int:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == 0:
            key = ctx.getLocalProperty("test.key")
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not any(
                name.endswith(".parquet") for _d, _s, names in os.walk(os.path.join(root, key)) for name in names
            ):
                time.sleep(0.01)  # waits for a condition (partition 1's part on disk), not for time to pass
            raise ValueError("boom in partition 0")
        return x

    df = spark.range(0, 20, 1, 2).select(fail_in_partition_0("id").alias("id"))
    for mode in WRITE_MODES:
        spark.sparkContext.setLocalProperty("test.key", f"failed-{mode}")
        try:
            with pytest.raises(Exception, match="boom in partition 0"):
                write_spark_dataset(df, local, f"failed-{mode}", mode=mode)
        finally:
            spark.sparkContext.setLocalProperty("test.key", None)  # type: ignore[arg-type]
        assert not local.dataset_exists(f"failed-{mode}")
        assert visible_files(local.store, f"failed-{mode}") == set()
        # The failed first write released its claim: readers are told there is no dataset.
        with pytest.raises(DatasetNotFound):
            read_spark_dataset(spark, local, f"failed-{mode}")


# ----------------------------------------------------------------------------- reading


@pytest.mark.parametrize("mode", ["native", "arrow"])
def test_projection_reads_only_those_columns_in_that_order(
    spark: SparkSession, local: ParquetDatasetStore, mode: str
) -> None:
    df = wide_df(spark, n=12, partitions=2)
    write_spark_dataset(df, local, "p")
    back = read_spark_dataset(spark, local, "p", columns=["st", "id"], mode=mode)
    assert back.columns == ["st", "id"]
    assert sorted(back.collect(), key=lambda r: r.id) == [(r.st, r.id) for r in rows(df)]
    with pytest.raises(ValueError, match="has no column 'nope'"):
        read_spark_dataset(spark, local, "p", columns=["id", "nope"], mode=mode)
    with pytest.raises(ValueError, match="at least one column"):
        read_spark_dataset(spark, local, "p", columns=[], mode=mode)


@pytest.mark.parametrize("mode", ["native", "arrow"])
def test_missing_or_truncated_part_is_an_error_not_fewer_rows(
    spark: SparkSession, local: ParquetDatasetStore, mode: str
) -> None:
    manifest = write_spark_dataset(spark.range(30).repartition(3), local, "dmg", mode="arrow")
    part = os.path.join(local.store.root, "dmg", manifest.parts[1])
    with open(part, "rb") as f:
        data = f.read()
    with open(part, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(DatasetIncomplete, match="truncated"):
        read_spark_dataset(spark, local, "dmg", mode=mode)
    os.remove(part)
    with pytest.raises(DatasetIncomplete, match="missing"):
        read_spark_dataset(spark, local, "dmg", mode=mode)


def test_a_part_whose_row_count_disagrees_fails_the_read(spark: SparkSession, local: ParquetDatasetStore) -> None:
    """The manifest is edited to claim one more row in the first part (and in total)."""
    write_spark_dataset(spark.range(30).repartition(2), local, "rc", mode="arrow")
    raw = json.loads(local.store.read_bytes("rc/manifest.json"))
    raw["files"][0]["row_count"] += 1
    raw["row_count"] += 1
    local.store.write_bytes("rc/manifest.json", json.dumps(raw).encode())
    with pytest.raises(DatasetIncomplete, match="rows but the manifest records"):
        read_spark_dataset(spark, local, "rc", mode="native")  # checked on the driver
    lazy = read_spark_dataset(spark, local, "rc", mode="arrow")  # checked in the tasks
    with pytest.raises(Exception, match="rows but the manifest records"):
        lazy.collect()


def test_datasets_written_by_pyarrow_read_in_spark(spark: SparkSession, local: ParquetDatasetStore) -> None:
    table = pa.table(
        {
            "ns": pa.array([1_700_000_000_123_456_789, None], pa.timestamp("ns", tz="UTC")),
            "u64": pa.array([2**64 - 1, 0], pa.uint64()),
            "cat": pa.array(["a", "b"]).dictionary_encode(),
            "big": pa.array(["x", "y"], pa.large_string()),
        }
    )
    local.write_dataset(table, "from-arrow")
    back = read_spark_dataset(spark, local, "from-arrow")  # auto: Spark's reader rejects ns timestamps
    got = sorted(back.collect(), key=lambda r: r.big)
    assert [r.u64 for r in got] == [Decimal(2**64 - 1), Decimal(0)]
    assert [r.cat for r in got] == ["a", "b"]
    assert got[0].ns is not None and got[1].ns is None
    assert str(back.schema["ns"].dataType) == "TimestampType()"
    with pytest.raises(CapabilityNotSupported, match="mode='arrow'"):
        read_spark_dataset(spark, local, "from-arrow", mode="native")
    # A projection that leaves the unusual types out can be read by Spark itself.
    native = read_spark_dataset(spark, local, "from-arrow", columns=["big"], mode="native")
    assert sorted(r.big for r in native.collect()) == ["x", "y"]


@pytest.mark.parametrize("mode", WRITE_MODES)
def test_spark_written_parts_carry_statistics_for_pruning(
    spark: SparkSession, local: ParquetDatasetStore, mode: str
) -> None:
    manifest = write_spark_dataset(spark.range(0, 40, 1, 2), local, "stats", mode=mode)
    first, second = manifest.files
    assert first.stats is not None and second.stats is not None
    assert (first.stats["id"]["min"], first.stats["id"]["max"]) == (0, 19)
    assert (second.stats["id"]["min"], second.stats["id"]["max"]) == (20, 39)
    plan = local.plan_read("stats", filters=[("id", ">=", 30)])
    assert [e.path for e in plan.selected] == [second.path]  # the first part is pruned by its statistics


def test_partitioned_and_evolved_datasets_read_in_spark(spark: SparkSession, local: ParquetDatasetStore) -> None:
    """Files of a partitioned dataset lack the partition column; files older than a new column lack it."""
    local.write_dataset(
        pa.table({"id": [1, 2, 3, 4], "region": ["eu", "us", "eu", None]}), "parted", partition_by=["region"]
    )
    local.append_dataset(pa.table({"id": [5], "region": ["us"], "note": ["late"]}), "parted", allow_new_columns=True)
    expected = sorted(local.read_dataset("parted").to_pylist(), key=lambda r: r["id"])
    back = read_spark_dataset(spark, local, "parted")  # auto: the executor path puts the columns back
    assert [r.asDict() for r in sorted(back.collect(), key=lambda r: r.id)] == expected
    only_partition = read_spark_dataset(spark, local, "parted", columns=["region"])
    assert sorted(only_partition.collect(), key=lambda r: str(r.region)) == sorted(
        [(r["region"],) for r in expected], key=lambda r: str(r[0])
    )
    with pytest.raises(CapabilityNotSupported, match="do not hold the partition columns"):
        read_spark_dataset(spark, local, "parted", mode="native")


def test_reads_a_retained_past_version(spark: SparkSession, tmp_path: Any) -> None:
    datasets = ParquetDatasetStore(LocalStore(os.path.join(tmp_path, "v")), retain_versions=2)
    write_spark_dataset(spark.range(3), datasets, "ver")
    write_spark_dataset(spark.range(10, 12), datasets, "ver", overwrite=True)
    for mode in ("native", "arrow"):
        assert sorted(r.id for r in read_spark_dataset(spark, datasets, "ver", mode=mode).collect()) == [10, 11]
        old = read_spark_dataset(spark, datasets, "ver", version=1, mode=mode)
        assert sorted(r.id for r in old.collect()) == [0, 1, 2]


# ----------------------------------------------------------------------------- bad input


def test_bad_input_is_refused_before_anything_is_written(spark: SparkSession, local: ParquetDatasetStore) -> None:
    with pytest.raises(TypeError, match="pyspark.sql.DataFrame"):
        write_spark_dataset(pa.table({"a": [1]}), local, "bad")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode must be one of"):
        write_spark_dataset(spark.range(1), local, "bad", mode="fast")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="column 'y' has type interval year"):
        write_spark_dataset(spark.sql("select 1 as x, interval 1 year as y"), local, "bad")
    with pytest.raises(ValueError, match="duplicate column names"):
        write_spark_dataset(spark.sql("select 1 as a, 2 as a"), local, "bad")
    with pytest.raises(ValueError, match="dataset key"):
        write_spark_dataset(spark.range(1), local, "../escape")
    assert not os.path.exists(os.path.join(local.store.root, "bad"))


@pytest.mark.parametrize("mode", WRITE_MODES)
def test_a_write_leaves_no_empty_staging_folder(spark: SparkSession, local: ParquetDatasetStore, mode: str) -> None:
    """On a LocalStore the parts are staged in ``_spark_staging-<token>/`` and renamed out of it; before, the
    emptied folder of an executor-written (``arrow``) write stayed in the dataset's folder, one more per version."""
    for _ in range(2):
        write_spark_dataset(spark.range(0, 10, 1, 2), local, "daily", mode=mode, overwrite=True)
    folder = os.path.join(local.store.root, "daily")
    assert not [name for name in os.listdir(folder) if name.startswith("_spark_staging")], os.listdir(folder)
    assert local.read_dataset("daily").num_rows == 10
