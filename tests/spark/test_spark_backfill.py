"""Single-run backfills of Spark DataFrames: one Spark job writes every partition, the driver commits each.

Real ``local[2,2]`` session, ``materialize`` with the range tags and
``BackfillPolicy.single_run()``, on a ``LocalStore`` and on moto S3 (the
executor path writes through the ``S3Store``). Everything is checked by
reading the store back with an independent ``ParquetDatasetStore``.
"""

import datetime as dt
import os
import uuid
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, S3Store, Store
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager, S3StoreResource

from ..conftest import make_bucket
from ._faults import FailAfterPartStore, SuccessWriteFails

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-01")
RANGE = ["2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]
TAGS = {"dagster/asset_partition_range_start": RANGE[0], "dagster/asset_partition_range_end": RANGE[-1]}
MARKERS = {"manifest.json", "_SUCCESS", "_claim"}


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


class _FailingLocalStore(LocalStoreResource):
    """The local store, with attempt 0 of Spark partition ``fail_partition`` failing after its first part."""

    fail_partition: int

    def get_store(self) -> Store:
        return FailAfterPartStore(super().get_store(), self.fail_partition)


class _FailingS3Store(S3StoreResource):
    """The S3 store, with attempt 0 of Spark partition ``fail_partition`` failing after its first part."""

    fail_partition: int

    def get_store(self) -> Store:
        return FailAfterPartStore(super().get_store(), self.fail_partition)


def _failing(io_manager: RemoteStoreIOManager, partition: int) -> RemoteStoreIOManager:
    """``io_manager`` over the same store, wrapped in :class:`FailAfterPartStore`."""
    store = io_manager.store
    if isinstance(store, LocalStoreResource):
        return RemoteStoreIOManager(
            store=_FailingLocalStore(root=store.root, fail_partition=partition), retain_versions=1
        )
    assert isinstance(store, S3StoreResource)
    return RemoteStoreIOManager(
        store=_FailingS3Store(
            bucket=store.bucket, prefix=store.prefix, endpoint_url=store.endpoint_url, fail_partition=partition
        ),
        retain_versions=1,
    )


def _run(assets: list[Any], io_manager: RemoteStoreIOManager, instance: dg.DagsterInstance, **kw: Any) -> Any:
    return dg.materialize(
        assets,
        resources={"io_manager": io_manager, "pyspark": PySparkResource(spark_config={})},
        instance=instance,
        tags=kw.pop("tags", TAGS),
        **kw,
    )


def _events(session: SparkSession, days: list[str], per_day: int = 25, partitions: int = 3) -> DataFrame:
    """``per_day`` rows per day, spread over ``partitions`` Spark partitions (every task holds every day)."""
    n = per_day * len(days)
    day = F.element_at(F.array(*[F.lit(d) for d in days]), (F.col("id") % len(days) + 1).cast("int"))
    return (
        session.range(0, n, 1, partitions)
        .withColumn("day", F.to_date(day))
        .withColumn("value", F.concat(day, F.lit("#"), F.col("id").cast("string")))
    )


def _asset(make: Any, metadata: dict[str, Any] | None = None) -> dg.AssetsDefinition:
    @dg.asset(
        partitions_def=DAILY,
        backfill_policy=dg.BackfillPolicy.single_run(),
        metadata={"partition_expr": "day"} if metadata is None else metadata,
    )
    def sales(context: dg.AssetExecutionContext, pyspark: PySparkResource) -> DataFrame:
        return make(pyspark.spark_session, [str(k) for k in context.partition_keys])

    return sales


def _files(datasets: ParquetDatasetStore, key: str) -> set[str]:
    return {f.path[len(key) + 1 :] for f in datasets.store.list_files(key)}


def _check_partition(datasets: ParquetDatasetStore, day: str, count: int) -> None:
    table = datasets.read_dataset(f"sales/{day}")
    assert table.num_rows == count
    assert set(table.column("day").to_pylist()) <= {dt.date.fromisoformat(day)}
    values = table.column("value").to_pylist()
    assert len(set(values)) == len(values) and all(v.startswith(day + "#") for v in values)
    manifest = datasets.read_manifest(f"sales/{day}")
    assert _files(datasets, f"sales/{day}") - MARKERS == set(manifest.parts)  # no staging, no stray attempts


def test_spark_backfill_writes_every_partition_in_one_job(
    spark: SparkSession, backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    io_manager, datasets = backend
    result = _run([_asset(_events)], io_manager, instance)
    assert result.success
    for day in RANGE:
        _check_partition(datasets, day, 25)
        m = datasets.read_manifest(f"sales/{day}")
        assert m.run_id == result.run_id
        assert m.metadata["dagster.partition_key"] == day
        assert m.metadata["dagster.python_type"] == "pyspark.sql.DataFrame"
        assert datasets.read_dataset(f"sales/{day}").schema.field("day").type == pa.date32()
    counts = {
        m.partition: m.metadata["dagster/partition_row_count"].value
        for m in result.asset_materializations_for_node("sales")
    }
    assert counts == dict.fromkeys(RANGE, 25)
    assert not datasets.dataset_exists("sales/2024-01-01") and not datasets.dataset_exists("sales/2024-01-06")

    # Re-running is idempotent: same rows, one new version each, the old files gone.
    before = {d: sorted(datasets.read_dataset(f"sales/{d}").column("value").to_pylist()) for d in RANGE}
    _run([_asset(_events)], io_manager, instance)
    for day in RANGE:
        _check_partition(datasets, day, 25)
        assert sorted(datasets.read_dataset(f"sales/{day}").column("value").to_pylist()) == before[day]
        assert datasets.read_manifest(f"sales/{day}").version == 2


@pytest.mark.parametrize("bad", ["outside", "null"])
def test_spark_rows_outside_the_run_commit_nothing(
    spark: SparkSession,
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore],
    instance: dg.DagsterInstance,
    bad: str,
) -> None:
    io_manager, datasets = backend
    _run([_asset(_events)], io_manager, instance, tags={**TAGS, "dagster/asset_partition_range_end": RANGE[1]})
    before = {d: datasets.read_manifest(f"sales/{d}").version for d in RANGE[:2]}

    def make(session: SparkSession, days: list[str]) -> DataFrame:
        odd = "DATE'2024-01-09'" if bad == "outside" else "CAST(NULL AS DATE)"
        return _events(session, days).withColumn("day", F.expr(f"CASE WHEN id = 37 THEN {odd} ELSE day END"))

    result = _run([_asset(make)], io_manager, instance, raise_on_error=False)
    assert not result.success
    error = result.failure_data_for_node("sales").error
    text = (error.cause or error).message
    assert "ValueError" in (error.cause or error).cls_name and "'day'" in text
    assert ("2024, 1, 9" in text) if bad == "outside" else ("null" in text)
    assert {d: datasets.read_manifest(f"sales/{d}").version for d in RANGE[:2]} == before
    for day in RANGE[:2]:
        assert _files(datasets, f"sales/{day}") - MARKERS == set(datasets.read_manifest(f"sales/{day}").parts)
    for day in RANGE[2:]:
        assert not datasets.dataset_exists(f"sales/{day}")
        assert _files(datasets, f"sales/{day}") <= {"_claim"}  # the parts the tasks wrote are gone


def test_spark_key_without_rows_gets_an_empty_dataset(
    spark: SparkSession, backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    io_manager, datasets = backend
    result = _run([_asset(lambda s, days: _events(s, [d for d in days if d != "2024-01-04"]))], io_manager, instance)
    empty = datasets.read_dataset("sales/2024-01-04")
    assert empty.num_rows == 0 and empty.schema.names == ["id", "day", "value"]
    counts = {
        m.partition: m.metadata["dagster/partition_row_count"].value
        for m in result.asset_materializations_for_node("sales")
    }
    assert counts["2024-01-04"] == 0 and counts["2024-01-03"] == 25


def _failed_tasks(spark: SparkSession, group: str) -> int:
    tracker = spark.sparkContext.statusTracker()
    failed = 0
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else []:
            stage_info = tracker.getStageInfo(stage)
            failed += stage_info.numFailedTasks if stage_info else 0
    return failed


def test_spark_task_retry_leaves_exactly_one_attempts_rows(
    spark: SparkSession, backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    """Attempt 0 of Spark partition 1 writes a part into one partition's dataset, then fails;
    Spark retries it (``local[2,2]``). Only the successful attempt's parts are committed."""
    io_manager, datasets = backend
    group = f"backfill-retry-{uuid.uuid4().hex[:8]}"

    def make(session: SparkSession, days: list[str]) -> DataFrame:
        session.sparkContext.setJobGroup(group, "backfill task retry test")
        return _events(session, days)

    try:
        result = _run([_asset(make)], _failing(io_manager, 1), instance)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert result.success
    assert _failed_tasks(spark, group) == 1  # the retry really happened
    for day in RANGE:
        _check_partition(datasets, day, 25)  # every row exactly once, the failed attempt's part is gone


class _SuccessFailsLocal(LocalStoreResource):
    fail_key: str

    def get_store(self) -> Store:
        return SuccessWriteFails(super().get_store(), self.fail_key)


class _SuccessFailsS3(S3StoreResource):
    fail_key: str

    def get_store(self) -> Store:
        return SuccessWriteFails(super().get_store(), self.fail_key)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", ["overwrite", "append"])
def test_spark_partition_whose_commit_fails_after_its_swap_keeps_its_parts(
    spark: SparkSession,
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore],
    instance: dg.DagsterInstance,
    mode: str,
) -> None:
    """Issue 26, #14: one partition's commit raises after its manifest swap landed (its ``_SUCCESS``
    write fails). The backfill fails, but never deletes the parts the live manifest lists."""
    io_manager, datasets = backend
    failing_day = RANGE[1]
    store = io_manager.store
    if isinstance(store, LocalStoreResource):
        resource: Any = _SuccessFailsLocal(root=store.root, fail_key=f"sales/{failing_day}")
    else:
        assert isinstance(store, S3StoreResource)
        resource = _SuccessFailsS3(
            bucket=store.bucket, prefix=store.prefix, endpoint_url=store.endpoint_url, fail_key=f"sales/{failing_day}"
        )
    metadata = {"partition_expr": "day", "write_mode": mode}
    result = _run(
        [_asset(_events, metadata)],
        RemoteStoreIOManager(store=resource, retain_versions=1),
        instance,
        raise_on_error=False,
    )
    assert not result.success
    manifest = datasets.read_manifest(f"sales/{failing_day}")  # its swap landed
    missing = [p for p in manifest.parts if not datasets.store.exists(f"sales/{failing_day}/{p}")]
    assert not missing, f"the backfill deleted parts the live manifest lists: {missing}"
    _check_partition(datasets, failing_day, 25)  # a read writes the missing _SUCCESS and finds every part


def test_spark_downstream_reads_the_range_and_append_mode_appends(
    spark: SparkSession, backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    io_manager, datasets = backend
    seen: dict[str, Any] = {}

    @dg.asset(partitions_def=DAILY, backfill_policy=dg.BackfillPolicy.single_run())
    def totals(sales: DataFrame) -> None:
        seen["rows"] = sales.count()
        seen["days"] = sorted(str(r.day) for r in sales.select("day").distinct().collect())

    assert _run([_asset(_events), totals], io_manager, instance).success
    assert seen == {"rows": 100, "days": RANGE}

    # An append backfill of a Spark DataFrame runs on the executors too: every partition gets its rows once more.
    appended = _asset(_events, {"partition_expr": "day", "write_mode": "append"})
    assert _run([appended], io_manager, instance).success
    for day in RANGE:
        assert datasets.read_manifest(f"sales/{day}").row_count == 50


def test_spark_multi_partitions(
    spark: SparkSession, backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    io_manager, datasets = backend
    multi = dg.MultiPartitionsDefinition(
        {"region": dg.StaticPartitionsDefinition(["eu", "us"]), "date": dg.DailyPartitionsDefinition("2024-01-01")}
    )

    @dg.asset(
        partitions_def=multi,
        backfill_policy=dg.BackfillPolicy.single_run(),
        metadata={"partition_expr": {"date": "ts", "region": "region"}},
    )
    def sales(pyspark: PySparkResource) -> DataFrame:
        return pyspark.spark_session.createDataFrame(
            [
                (dt.datetime(2024, 1, 1, 5, tzinfo=dt.timezone.utc), "eu", "a"),
                (dt.datetime(2024, 1, 2, 23, tzinfo=dt.timezone.utc), "us", "b"),
                (dt.datetime(2024, 1, 2, 1, tzinfo=dt.timezone.utc), "us", "c"),
            ],
            "ts timestamp, region string, value string",
        ).repartition(2)

    tags = {
        "dagster/asset_partition_range_start": "2024-01-01|eu",
        "dagster/asset_partition_range_end": "2024-01-02|us",
    }
    assert _run([sales], io_manager, instance, tags=tags).success
    assert datasets.read_dataset("sales/2024-01-01/eu").column("value").to_pylist() == ["a"]
    assert sorted(datasets.read_dataset("sales/2024-01-02/us").column("value").to_pylist()) == ["b", "c"]
    assert datasets.read_dataset("sales/2024-01-01/us").num_rows == 0


# ------------------------------------------------------------- append, merge and partition_by backfills

WRITE_OPTIONS = {
    "append": {"partition_expr": "day", "write_mode": "append"},
    "merge": {"partition_expr": "day", "write_mode": "merge", "key_columns": ["id"]},
    "partition_by": {"partition_expr": "day", "partition_by": ["bucket"]},
    "append_partition_by": {"partition_expr": "day", "write_mode": "append", "partition_by": ["bucket"]},
}


def _bucketed(session: SparkSession, days: list[str]) -> DataFrame:
    return _events(session, days).withColumn("bucket", (F.floor(F.col("id") / 4) % 2).cast("int"))


def _check_option_partition(datasets: ParquetDatasetStore, day: str, count: int, mode: str) -> None:
    table = datasets.read_dataset(f"sales/{day}")
    assert table.num_rows == count
    assert set(table.column("day").to_pylist()) == {dt.date.fromisoformat(day)}
    values = table.column("value").to_pylist()
    assert all(v.startswith(day + "#") for v in values)
    copies = 2 if mode.startswith("append") else 1  # an append adds the rows again; the others replace them
    assert len(values) == copies * len(set(values))
    manifest = datasets.read_manifest(f"sales/{day}")
    assert _files(datasets, f"sales/{day}") - MARKERS == set(manifest.parts)  # no staging, no stray attempts
    if "partition_by" in mode:
        assert manifest.partition_by == ("bucket",)
        assert {p.split("/")[0] for p in manifest.parts} == {"bucket=0", "bucket=1"}


@pytest.fixture(params=sorted(WRITE_OPTIONS))
def mode(request: pytest.FixtureRequest, spark: SparkSession) -> str:
    """A write mode of :data:`WRITE_OPTIONS` (with the shared SparkSession started)."""
    return str(request.param)


Backend = tuple[RemoteStoreIOManager, ParquetDatasetStore]


def test_spark_backfill_with_write_options_runs_on_the_executors(mode: str, backend: Backend, instance: Any) -> None:
    """Append, merge and partition_by backfills: one run over the range, then the same run again."""
    io_manager, datasets = backend
    asset = _asset(_bucketed, WRITE_OPTIONS[mode])
    assert _run([asset], io_manager, instance).success
    for day in RANGE:
        _check_option_partition(datasets, day, 25, "first")
    versions = {d: datasets.read_manifest(f"sales/{d}").version for d in RANGE}

    assert _run([asset], io_manager, instance).success  # the same run again
    for day in RANGE:
        _check_option_partition(datasets, day, 50 if mode.startswith("append") else 25, mode)
    if mode == "merge":  # upserting the same rows: same rows, by key
        for day in RANGE:
            ids = datasets.read_dataset(f"sales/{day}").column("id").to_pylist()
            assert len(ids) == len(set(ids)) == 25
    assert all(datasets.read_manifest(f"sales/{d}").version >= versions[d] for d in RANGE)
    assert not datasets.dataset_exists("sales/2024-01-01") and not datasets.dataset_exists("sales/2024-01-06")


def test_spark_backfill_with_write_options_writes_nothing_for_a_row_outside_the_run(
    mode: str, backend: Backend, instance: Any
) -> None:
    io_manager, datasets = backend
    tags = {**TAGS, "dagster/asset_partition_range_end": RANGE[1]}
    assert _run([_asset(_bucketed, WRITE_OPTIONS[mode])], io_manager, instance, tags=tags).success
    before = {d: datasets.read_manifest(f"sales/{d}") for d in RANGE[:2]}

    def make(session: SparkSession, days: list[str]) -> DataFrame:
        return _bucketed(session, days).withColumn(
            "day", F.expr("CASE WHEN id = 37 THEN DATE'2024-01-09' ELSE day END")
        )

    result = _run([_asset(make, WRITE_OPTIONS[mode])], io_manager, instance, raise_on_error=False)
    assert not result.success
    error = result.failure_data_for_node("sales").error
    cause = error.cause or error
    assert "ValueError" in cause.cls_name and "'day'" in cause.message and "2024, 1, 9" in cause.message
    for day in RANGE[:2]:
        manifest = datasets.read_manifest(f"sales/{day}")
        assert (manifest.version, manifest.parts) == (before[day].version, before[day].parts)
        assert _files(datasets, f"sales/{day}") - MARKERS == set(manifest.parts)
    for day in RANGE[2:]:
        assert not datasets.dataset_exists(f"sales/{day}")
        assert _files(datasets, f"sales/{day}") == set()


def test_spark_backfill_append_and_partition_by_keep_driver_rss_flat(
    spark: SparkSession, tmp_path: Any, instance: dg.DagsterInstance
) -> None:
    """5M rows over the run's 4 days, appended and written into partition_by folders: the driver's RSS stays flat."""
    from .test_spark_append_merge import _PeakRss

    root = os.path.join(tmp_path, "store")
    io_manager = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)
    datasets = ParquetDatasetStore(LocalStore(root), retain_versions=1)
    days = F.array(*[F.lit(d) for d in RANGE])

    def make(rows: int) -> Any:
        def build(session: SparkSession, _days: list[str]) -> DataFrame:
            return session.range(0, rows, 1, 4).select(
                "id",
                F.to_date(F.element_at(days, (F.col("id") % len(RANGE) + 1).cast("int"))).alias("day"),
                (F.col("id") % 2).cast("int").alias("bucket"),
                F.sha1(F.col("id").cast("string")).alias("h"),
            )

        return build

    def clear() -> None:
        for day in RANGE:
            if datasets.dataset_exists(f"sales/{day}"):
                datasets.delete_dataset(f"sales/{day}")

    for mode in ("append", "append_partition_by"):
        clear()
        assert _run([_asset(make(1000), WRITE_OPTIONS[mode])], io_manager, instance).success  # warm: imports, caches
        clear()
        with _PeakRss() as rss:
            assert _run([_asset(make(5_000_000), WRITE_OPTIONS[mode])], io_manager, instance).success
        assert sum(datasets.read_manifest(f"sales/{d}").row_count for d in RANGE) == 5_000_000
        assert rss.growth_mb <= 64, f"{mode}: driver RSS grew by {rss.growth_mb:.0f} MB"
