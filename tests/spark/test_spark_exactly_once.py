"""Exactly-once Spark appends and merges (issue 27, item 2): a step that dies right after its Spark
append or merge committed is retried (``RetryPolicy``, or re-executed from failure after its process
died) and its rows are applied once; so is a single-run backfill retried after some days committed.
Real ``local[2,2]`` Spark, a real instance, on a local store and moto S3."""

import faulthandler
import os
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dagster_parquet_dataset import ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager, S3StoreResource
from dagster_parquet_dataset.dataset import data_version

from .. import _multiprocess
from ..conftest import make_bucket
from ..dagster.retry_defs import DyingLocal, DyingS3
from . import retry_spark_defs

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(params=["local", "s3"])
def dying(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[RemoteStoreIOManager, ParquetDatasetStore, str]:
    """An IO manager whose store dies once right after an append/merge commit, a reader, and the marker file."""
    marker = os.path.join(tmp_path, "died")
    if request.param == "local":
        resource: Any = DyingLocal(root=os.path.join(tmp_path, "store"), marker=marker)
        reader = ParquetDatasetStore(LocalStoreResource(root=resource.root).get_store(), retain_versions=1)
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        bucket = make_bucket(endpoint)
        resource = DyingS3(bucket=bucket, prefix="lake", endpoint_url=endpoint, marker=marker)
        reader = ParquetDatasetStore(
            S3StoreResource(bucket=bucket, prefix="lake", endpoint_url=endpoint).get_store(), retain_versions=1
        )
    return RemoteStoreIOManager(store=resource, retain_versions=1), reader, marker


def _attempts(result: Any) -> int:
    return sum(1 for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY) + 1


def _resources(io: RemoteStoreIOManager) -> dict[str, Any]:
    return {"io_manager": io, "pyspark": PySparkResource(spark_config={})}


@pytest.mark.parametrize("mode", ["append", "merge"])
def test_a_retried_spark_step_applies_its_rows_once(spark: SparkSession, dying: Any, mode: str) -> None:
    io, reader, marker = dying
    reader.write_dataset(pa.table({"id": [0], "v": ["seed"]}), "events")
    metadata: dict[str, Any] = {"write_mode": mode}
    if mode == "merge":
        metadata["key_columns"] = ["id"]

    @dg.asset(metadata=metadata, retry_policy=dg.RetryPolicy(max_retries=2))
    def events(pyspark: PySparkResource) -> DataFrame:
        return pyspark.spark_session.createDataFrame([(1, "a"), (2, "b")], "id long, v string")

    with dg.instance_for_test() as instance:
        result = dg.materialize([events], resources=_resources(io), instance=instance)
        assert result.success and os.path.exists(marker)  # it died once, after committing
        assert _attempts(result) == 2
        [record] = instance.fetch_materializations(dg.AssetKey("events"), limit=1).records
        out = record.asset_materialization.metadata
    assert sorted(reader.read_dataset("events").column("id").to_pylist()) == [0, 1, 2]
    assert reader.read_manifest("events").version == 2  # the seed, then one commit: the retry added none
    assert "recognized retry" in out["exactly_once"].value
    assert out["data_version"].value == data_version(reader.read_manifest("events"))


@pytest.mark.parametrize("backend_kind", ["local", "s3"])
@pytest.mark.parametrize("mode", ["append", "merge"])
def test_a_spark_re_execution_from_failure_after_the_step_process_died(
    spark: SparkSession,
    backend_kind: str,
    mode: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    faulthandler.dump_traceback_later(840, exit=True)  # a run that hangs on a dead step process fails the test
    monkeypatch.setenv("PDS_RETRY_MARKER", os.path.join(tmp_path, "died"))
    if backend_kind == "local":
        monkeypatch.setenv("PDS_RETRY_ROOT", os.path.join(tmp_path, "store"))
        reader = ParquetDatasetStore(
            LocalStoreResource(root=os.path.join(tmp_path, "store")).get_store(), retain_versions=1
        )
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        bucket = make_bucket(endpoint)
        monkeypatch.setenv("PDS_RETRY_BUCKET", bucket)
        monkeypatch.setenv("PDS_RETRY_ENDPOINT", endpoint)
        reader = ParquetDatasetStore(
            S3StoreResource(bucket=bucket, prefix="lake", endpoint_url=endpoint).get_store(), retain_versions=1
        )
    key = "spark_retry_events" if mode == "append" else "spark_retry_merged"
    reader.write_dataset(pa.table({"id": [0], "v": ["seed"]}) if mode == "merge" else pa.table({"id": [0]}), key)
    job = dg.reconstructable(getattr(retry_spark_defs, f"get_{mode}_job" + ("_s3" if backend_kind == "s3" else "")))
    home = tmp_path / "dagster_home"
    home.mkdir()
    try:
        with dg.instance_for_test(temp_dir=str(home)) as instance:
            ok, failed_run, _errors = _multiprocess.execute(job, instance)
            assert not ok and os.path.exists(os.path.join(tmp_path, "died"))
            assert sorted(reader.read_dataset(key).column("id").to_pylist()) == [0, 1, 2]  # the commit landed
            assert not instance.fetch_materializations(dg.AssetKey(key), limit=1).records  # Dagster never knew

            again = dg.ReexecutionOptions.from_failure(failed_run, instance)
            ok, _run, errors = _multiprocess.execute(job, instance, reexecution_options=again)
            assert ok, errors
            [record] = instance.fetch_materializations(dg.AssetKey(key), limit=1).records
            assert "recognized retry" in record.asset_materialization.metadata["exactly_once"].value
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert sorted(reader.read_dataset(key).column("id").to_pylist()) == [0, 1, 2]
    assert reader.read_manifest(key).version == 2


DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]
DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-01")


@pytest.mark.parametrize("mode", ["append", "merge"])
def test_a_retried_spark_backfill_writes_every_day_once(spark: SparkSession, dying: Any, mode: str) -> None:
    io, reader, marker = dying
    metadata: dict[str, Any] = {"partition_expr": "day", "write_mode": mode}
    if mode == "merge":
        metadata["key_columns"] = ["id"]

    @dg.asset(
        partitions_def=DAILY,
        backfill_policy=dg.BackfillPolicy.single_run(),
        metadata=metadata,
        retry_policy=dg.RetryPolicy(max_retries=2),
    )
    def events(context: dg.AssetExecutionContext, pyspark: PySparkResource) -> DataFrame:
        days = [str(k) for k in context.partition_keys]
        day = F.element_at(F.array(*[F.lit(d) for d in days]), (F.col("id") % len(days) + 1).cast("int"))
        return pyspark.spark_session.range(0, 6, 1, 2).withColumn("day", F.to_date(day))

    for d in DAYS:  # every day exists already (a merge of a new dataset is a plain write)
        seed = pa.table({"id": pa.array([100], pa.int64()), "day": pa.array([pa.scalar(d).cast(pa.date32())])})
        reader.write_dataset(seed, io.dataset_key_for("events", d))
    tags = {"dagster/asset_partition_range_start": DAYS[0], "dagster/asset_partition_range_end": DAYS[-1]}
    with dg.instance_for_test() as instance:
        result = dg.materialize([events], resources=_resources(io), instance=instance, tags=tags)
        assert result.success and os.path.exists(marker)  # died once, after a day's commit
        assert _attempts(result) == 2
        mats = {m.partition: m.metadata for m in result.asset_materializations_for_node("events")}
    assert sorted(mats) == DAYS
    for i, d in enumerate(DAYS):
        key = io.dataset_key_for("events", d)
        manifest = reader.read_manifest(key)
        assert sorted(reader.read_dataset(key).column("id").to_pylist()) == [i, i + 3, 100]
        assert manifest.version == 2  # the seed, then one commit per day: the retry added none
        assert mats[d]["data_version"].value == data_version(manifest)
