"""``observable_dataset``: a dataset written outside Dagster, observed with a real instance."""

from collections.abc import Iterator

import dagster as dg
import pyarrow as pa
import pytest
from dagster._core.definitions.observe import observe  # what dagster's own tests use; not in dagster's __all__

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, observable_dataset
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager
from dagster_parquet_dataset.dataset import data_version
from dagster_parquet_dataset.errors import DatasetNotFound


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


def _observed(instance: dg.DagsterInstance, key: dg.AssetKey) -> tuple[str | None, dict]:
    [record] = instance.fetch_observations(key, limit=1).records
    observation = record.asset_observation
    assert observation is not None
    return observation.data_version, dict(observation.metadata)


def test_a_new_version_written_outside_dagster_changes_the_data_version(
    root: str, instance: dg.DagsterInstance
) -> None:
    outside = ParquetDatasetStore(LocalStore(root), retain_versions=1)  # "a Spark job elsewhere"
    outside.write_dataset(pa.table({"x": [1, 2, 3]}), "prod/external/clicks", run_id="spark-1")
    clicks = observable_dataset(["external", "clicks"], description="written by Spark")
    io = RemoteStoreIOManager(store=LocalStoreResource(root=root), prefix="prod", retain_versions=1)

    assert observe([clicks], instance=instance, resources={"io_manager": io}).success
    first, metadata = _observed(instance, clicks.key)
    assert first is not None and first == data_version(outside.read_manifest("prod/external/clicks"))
    assert metadata["dagster/row_count"].value == 3
    assert metadata["dataset_key"].value == "prod/external/clicks"
    assert metadata["writer_run_id"].value == "spark-1"
    assert metadata["part_count"].value == 1
    assert [c.name for c in metadata["dagster/column_schema"].schema.columns] == ["x"]

    observe([clicks], instance=instance, resources={"io_manager": io})
    assert _observed(instance, clicks.key)[0] == first  # nothing committed: same data version

    outside.append_dataset(pa.table({"x": [4]}), "prod/external/clicks", run_id="spark-2")
    observe([clicks], instance=instance, resources={"io_manager": io})
    second, metadata = _observed(instance, clicks.key)
    assert second != first and second == data_version(outside.read_manifest("prod/external/clicks"))
    assert metadata["dagster/row_count"].value == 4

    # deleted and written again from scratch with other data: version 1 again, yet a data version never seen before
    outside.delete_dataset("prod/external/clicks")
    outside.write_dataset(pa.table({"x": [9]}), "prod/external/clicks")
    observe([clicks], instance=instance, resources={"io_manager": io})
    third, _ = _observed(instance, clicks.key)
    assert outside.read_manifest("prod/external/clicks").version == 1 and third not in (first, second)

    # written again with the first data: the data version is the first one (it is the content's)
    outside.write_dataset(pa.table({"x": [1, 2, 3]}), "prod/external/clicks", overwrite=True)
    observe([clicks], instance=instance, resources={"io_manager": io})
    assert _observed(instance, clicks.key)[0] == first


def test_a_downstream_asset_loads_it_and_becomes_stale_on_a_new_version(
    root: str, instance: dg.DagsterInstance
) -> None:
    outside = ParquetDatasetStore(LocalStore(root), retain_versions=1)
    outside.write_dataset(pa.table({"x": [1, 2]}), "clicks")
    clicks = observable_dataset("clicks")

    @dg.asset(deps=[])
    def clicks_total(clicks: pa.Table) -> pa.Table:
        return pa.table({"total": [sum(clicks.column("x").to_pylist())]})

    io = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)
    resources = {"io_manager": io}
    observe([clicks], instance=instance, resources=resources)
    assert dg.materialize(
        [clicks, clicks_total], instance=instance, resources=resources, selection=[clicks_total]
    ).success
    assert outside.read_dataset("clicks_total").column("total").to_pylist() == [3]

    observed, _ = _observed(instance, clicks.key)
    [record] = instance.fetch_materializations(clicks_total.key, limit=1).records
    tags = record.event_log_entry.dagster_event.event_specific_data.materialization.tags
    assert tags["dagster/input_data_version/clicks"] == observed  # Dagster links the input's data version
    outside.append_dataset(pa.table({"x": [10]}), "clicks")
    observe([clicks], instance=instance, resources=resources)
    newer, _ = _observed(instance, clicks.key)
    assert newer != observed  # so Dagster sees clicks_total's input changed: it is stale


def test_a_store_resource_and_an_explicit_dataset_key(root: str, instance: dg.DagsterInstance) -> None:
    ParquetDatasetStore(LocalStore(root), retain_versions=1).write_dataset(pa.table({"y": ["a"]}), "lake/events")
    events = observable_dataset("events", dataset_key="lake/events", resource_key="lake")
    observe([events], instance=instance, resources={"lake": LocalStoreResource(root=root)})
    version, metadata = _observed(instance, events.key)
    assert version is not None and version == data_version(
        ParquetDatasetStore(LocalStore(root), retain_versions=1).read_manifest("lake/events")
    )
    assert metadata["dataset_key"].value == "lake/events"


def test_observing_a_missing_dataset_fails_with_its_key(root: str, instance: dg.DagsterInstance) -> None:
    ghost = observable_dataset("ghost")
    io = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)
    with pytest.raises(DatasetNotFound, match="dataset 'ghost' does not exist"):
        observe([ghost], instance=instance, resources={"io_manager": io})
    nokey = observable_dataset("nokey", resource_key="lake")
    with pytest.raises(ValueError, match="dataset_key= must say"):
        observe([nokey], instance=instance, resources={"lake": LocalStoreResource(root=root)})
    with pytest.raises(ValueError, match="dataset key"):
        observable_dataset("bad", dataset_key="../escape")
