"""``build_maintenance_jobs``: compaction and vacuum of every partition of assets, run through Dagster."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import dagster as dg
import pyarrow as pa
import pytest

from dagster_parquet_dataset import CompactOptions, VacuumOptions, build_maintenance_jobs
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager, S3StoreResource

PARTS = dg.StaticPartitionsDefinition(["eu", "us", "ch"])
ROUNDS = 3


@dg.asset(partitions_def=PARTS, metadata={"write_mode": "append"})
def readings(context) -> pa.Table:  # type: ignore[no-untyped-def]  # Dagster reads the annotation
    return pa.table({"region": [context.partition_key] * 2, "n": [1, 2]})


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


def _fill(io: RemoteStoreIOManager, instance: dg.DagsterInstance) -> None:
    """Each partition gets ``ROUNDS`` appended files."""
    for _ in range(ROUNDS):
        for partition in PARTS.get_partition_keys():
            result = dg.materialize(
                [readings], partition_key=partition, resources={"io_manager": io}, instance=instance
            )
            assert result.success


def _execute(job: dg.JobDefinition, io: RemoteStoreIOManager, instance: Any, config: dict | None = None) -> Any:
    resolved = dg.Definitions(jobs=[job], resources={"io_manager": io}).resolve_job_def(job.name)
    run_config = {"ops": {job.nodes[0].name: {"config": config}}} if config else None
    return resolved.execute_in_process(instance=instance, raise_on_error=False, run_config=run_config)


def _observations(instance: dg.DagsterInstance, partition: str) -> list[dg.AssetObservation]:
    records = instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=readings.key, asset_partitions=[partition]), limit=10
    ).records
    return [r.asset_observation for r in records if r.asset_observation is not None]


def _files(io: RemoteStoreIOManager, key: str) -> list[str]:
    return sorted(f.path for f in io.datasets.store.list_files(key) if f.path.endswith(".parquet"))


def test_every_partition_is_compacted_and_vacuumed_with_observations(root: str, instance: Any) -> None:
    io = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=None)
    _fill(io, instance)
    before = {p: io.datasets.read_dataset(f"readings/{p}") for p in PARTS.get_partition_keys()}
    assert all(len(_files(io, f"readings/{p}")) == ROUNDS for p in before)
    [job], schedules = build_maintenance_jobs([readings], cron_schedule="0 3 * * *", name="readings_maintenance")
    assert job.name == "readings_maintenance_job"
    assert [(s.name, s.cron_schedule, s.job_name) for s in schedules] == [
        ("readings_maintenance_schedule", "0 3 * * *", "readings_maintenance_job")
    ]

    result = _execute(job, io, instance)
    assert result.success
    for partition, table in before.items():
        key = f"readings/{partition}"
        assert len(io.datasets.read_manifest(key).parts) == 1
        assert io.datasets.read_dataset(key).equals(table)
        assert len(_files(io, key)) == 1, "vacuum removed the small files the compacted version replaced"
        assert [m.version for m in io.datasets.history(key)] == [ROUNDS + 1]
        [observation] = _observations(instance, partition)
        md = observation.metadata
        assert md["dataset_key"].value == key
        assert (md["compaction_files_before"].value, md["compaction_files_after"].value) == (ROUNDS, 1)
        assert md["vacuum_versions_deleted"].value == ROUNDS
        assert md["vacuum_files_deleted"].value >= ROUNDS
    [summary] = [m for m in result.get_step_success_events()]
    assert summary.step_key == "readings_maintenance"


def test_a_damaged_partition_fails_the_run_and_the_others_are_maintained(root: str, instance: Any) -> None:
    io = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)
    _fill(io, instance)
    broken = "readings/us/" + io.datasets.read_manifest("readings/us").parts[0]
    io.datasets.store.write_bytes(broken, b"x" * io.datasets.store.size(broken))  # no Parquet footer any more
    [job], _ = build_maintenance_jobs([readings], vacuum=None, compact=CompactOptions(target_file_bytes=1 << 20))

    result = _execute(job, io, instance)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    text = failure.step_failure_data.user_failure_data.description
    assert "1 of 3 datasets" in text and "readings/us" in text and "DatasetIncomplete" in text
    for partition in ("eu", "ch"):
        assert len(io.datasets.read_manifest(f"readings/{partition}").parts) == 1
        assert _observations(instance, partition)[0].metadata["compaction_files_after"].value == 1
    assert len(io.datasets.read_manifest("readings/us").parts) == ROUNDS, "the damaged partition is untouched"
    assert "error" in _observations(instance, "us")[0].metadata


def test_the_safety_floor_refuses_a_short_retention(root: str, instance: Any) -> None:
    with pytest.raises(ValueError, match="safety floor"):
        build_maintenance_jobs([readings], vacuum=VacuumOptions(older_than=timedelta(minutes=5)))
    with pytest.raises(ValueError, match="safety floor"):
        build_maintenance_jobs([readings], vacuum=VacuumOptions(grace_period=timedelta(0)))
    build_maintenance_jobs(
        [readings], vacuum=VacuumOptions(grace_period=timedelta(0), allow_under_safety_floor=True)
    )  # explicitly allowed

    io = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=None)
    _fill(io, instance)
    files = {p: _files(io, f"readings/{p}") for p in PARTS.get_partition_keys()}
    [job], _ = build_maintenance_jobs([readings], compact=None, vacuum=VacuumOptions(retain_versions=None))
    refused = _execute(job, io, instance, {"older_than_hours": 0.1})
    assert not refused.success
    [failure] = [e for e in refused.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert "safety floor" in failure.step_failure_data.user_failure_data.description
    assert {p: _files(io, f"readings/{p}") for p in files} == files, "nothing was deleted"

    allowed = _execute(
        job, io, instance, {"retain_versions": 1, "grace_period_hours": 0.0, "allow_under_safety_floor": True}
    )
    assert allowed.success
    assert all(len(io.datasets.history(f"readings/{p}")) == 1 for p in files)


def test_dry_run_and_prefix_selection_change_nothing(root: str, instance: Any) -> None:
    io = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)
    _fill(io, instance)
    [job], schedules = build_maintenance_jobs(prefix="readings", vacuum=None, name="lake")
    assert schedules == []
    result = _execute(job, io, instance, {"dry_run": True})
    assert result.success
    assert all(len(io.datasets.read_manifest(f"readings/{p}").parts) == ROUNDS for p in PARTS.get_partition_keys())
    # the manifests record the asset and partition, so a prefix run reports on the asset pages too
    assert _observations(instance, "eu")[0].metadata["maintenance_dry_run"].value is True


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="assets or a prefix"):
        build_maintenance_jobs([])
    with pytest.raises(ValueError, match="both None"):
        build_maintenance_jobs([readings], compact=None, vacuum=None)
    with pytest.raises(ValueError, match="target_file_bytes"):
        build_maintenance_jobs([readings], compact=CompactOptions(target_file_bytes=0))
    with pytest.raises(TypeError, match="build_maintenance_jobs takes"):
        build_maintenance_jobs([42])  # type: ignore[list-item]


def test_on_s3(moto_endpoint: str, instance: Any) -> None:
    from ..conftest import make_bucket

    bucket = make_bucket(moto_endpoint)
    io = RemoteStoreIOManager(
        store=S3StoreResource(bucket=bucket, prefix="lake", endpoint_url=moto_endpoint), retain_versions=None
    )
    _fill(io, instance)
    before = io.datasets.read_dataset("readings/eu")
    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    broken = io.datasets.read_manifest("readings/ch").parts[0]
    s3.put_object(Bucket=bucket, Key=f"lake/readings/ch/{broken}", Body=b"not parquet")
    [job], _ = build_maintenance_jobs([readings])

    result = _execute(job, io, instance)
    assert not result.success
    assert io.datasets.read_dataset("readings/eu").equals(before)
    for partition in ("eu", "us"):
        key = f"readings/{partition}"
        assert len(io.datasets.read_manifest(key).parts) == 1
        assert len(_files(io, key)) == 1
    assert len(io.datasets.read_manifest("readings/ch").parts) == ROUNDS
