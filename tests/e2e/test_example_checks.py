"""The example project's dataset checks and its compaction job, in-process on a temp data root."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from dagster_parquet_dataset import ParquetDatasetStore

DAY1, DAY2, DAY3 = "2024-06-01", "2024-06-02", "2024-06-03"


@pytest.fixture
def instance() -> Any:
    with dg.instance_for_test() as inst:
        yield inst


def _evaluations(result: dg.ExecuteInProcessResult) -> dict[tuple[str, str], dg.AssetCheckEvaluation]:
    return {(e.asset_key.to_user_string(), e.check_name): e for e in result.get_asset_check_evaluations()}


def test_definitions_hold_the_checks_and_the_compaction_schedule(example_resources: dict[str, Any]) -> None:
    from example_project.assets import ALL_ASSETS
    from example_project.definitions import build_definitions

    defs = build_definitions({"PDS_STORE": "local", "PDS_DATA_ROOT": "/tmp/unused"})
    graph = defs.resolve_asset_graph()
    asset_keys = {spec.key for asset in ALL_ASSETS for spec in asset.specs}
    check_keys = graph.asset_check_keys
    assert {(k.asset_key, k.name) for k in check_keys} == {
        (key, name) for key in asset_keys for name in ("dataset_integrity", "schema_unchanged", "row_count_change")
    }
    schedule = defs.resolve_schedule_def("compact_dim_customers_schedule")
    assert schedule.job_name == "compact_dim_customers_job"
    assert schedule.cron_schedule == "0 3 * * 0"


def test_the_checks_pass_after_materializing_and_after_compaction(
    example_resources: dict[str, Any], datasets: ParquetDatasetStore, data_root: Path, instance: Any
) -> None:
    from example_project.assets import ALL_ASSETS, clean_events, dim_customers, raw_customer_updates, raw_events
    from example_project.checks import DATASET_CHECKS
    from example_project.maintenance import compact_dim_customers_job

    daily = [raw_events, raw_customer_updates, clean_events]  # the Spark aggregate is covered by the e2e suite
    for day in (DAY1, DAY2, DAY3):
        result = dg.materialize(
            [*ALL_ASSETS, *DATASET_CHECKS],
            selection=dg.AssetSelection.assets(*daily).without_checks() | dg.AssetSelection.checks_for_assets(*daily),
            partition_key=day,
            resources=example_resources,
            instance=instance,
        )
        found = _evaluations(result)
        assert len(found) == 9
        assert all(e.passed for e in found.values()), {k: e.description for k, e in found.items() if not e.passed}
        assert all(e.partition == day for e in found.values())
        merged = dg.materialize(
            [*ALL_ASSETS, *DATASET_CHECKS],
            selection=dg.AssetSelection.assets(dim_customers),  # the asset with its checks
            resources=example_resources,
            instance=instance,
        )
        found = _evaluations(merged)
        assert {name for _key, name in found} == {"dataset_integrity", "schema_unchanged", "row_count_change"}
        assert all(e.passed for e in found.values()), {k: e.description for k, e in found.items() if not e.passed}

    before = datasets.read_manifest("marts/dim_customers")
    table_before = datasets.read_dataset("marts/dim_customers").sort_by("customer_id")
    assert len(before.parts) > 1, "three daily merges left several files"

    job = dg.Definitions(jobs=[compact_dim_customers_job], resources=example_resources).resolve_job_def(
        "compact_dim_customers_job"
    )
    compacted = job.execute_in_process(instance=instance)
    assert compacted.success
    after = datasets.read_manifest("marts/dim_customers")
    assert after.operation == "compact" and after.version == before.version + 1
    assert len(after.parts) == 1
    assert datasets.read_dataset("marts/dim_customers").sort_by("customer_id").equals(table_before)
    on_disk = [p for p in os.listdir(data_root / "marts" / "dim_customers") if p.endswith(".parquet")]
    assert len(on_disk) == 1, "the compacted files were removed (retain_versions=1)"
    [record] = instance.fetch_observations(dg.AssetKey(["marts", "dim_customers"]), limit=1).records
    observed = record.asset_observation.metadata
    assert (observed["compaction_files_before"].value, observed["compaction_files_after"].value) == (
        len(before.parts),
        1,
    )

    checks_only = dg.materialize(
        [*ALL_ASSETS, *DATASET_CHECKS],
        selection=dg.AssetSelection.checks_for_assets(dim_customers),
        resources=example_resources,
        instance=instance,
    )
    found = _evaluations(checks_only)
    assert len(found) == 3
    assert all(e.passed for e in found.values()), {k: e.description for k, e in found.items() if not e.passed}
    assert found[("marts/dim_customers", "row_count_change")].metadata["ratio"].value == 1.0
