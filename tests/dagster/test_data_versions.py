# ruff: noqa: F811  (the imported ``backend`` fixture is a parameter of each test)
"""Data versions from storage (issue 19, item 4): through ``materialize``, on a local store and moto S3."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from dagster._core.definitions.data_version import DATA_VERSION_TAG, CachingStaleStatusResolver, StaleStatus
from dagster._core.definitions.observe import observe
from dagster._core.loader import LoadingContextForTest  # what dagster's own tests use; not in dagster's __all__

from dagster_parquet_dataset import ParquetDatasetStore, observable_dataset
from dagster_parquet_dataset.dagster_io import RemoteStoreIOManager
from dagster_parquet_dataset.dataset import data_version

from .test_parity import backend  # noqa: F401  (the local / moto S3 fixture)

Backend = tuple[RemoteStoreIOManager, ParquetDatasetStore]


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


def _version_tag(instance: dg.DagsterInstance, key: str) -> str:
    [record] = instance.fetch_materializations(dg.AssetKey(key), limit=1).records
    materialization = record.event_log_entry.dagster_event.event_specific_data.materialization
    return materialization.tags[DATA_VERSION_TAG]


def _assets(rows: dict[str, list[int]], **upstream_kwargs: Any) -> list[Any]:
    @dg.asset(**upstream_kwargs)
    def events() -> pa.Table:
        return pa.table({"x": rows["x"]})

    @dg.asset
    def total(events: pa.Table) -> pa.Table:
        return pa.table({"total": [sum(events.column("x").to_pylist())]})

    return [events, total]


def _status(instance: dg.DagsterInstance, assets: list[Any], key: str) -> StaleStatus:
    graph = dg.Definitions(assets=assets).resolve_asset_graph()
    resolver = CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance))
    return resolver.get_status(dg.AssetKey(key))


def test_equal_data_keeps_the_data_version_and_downstream_fresh(backend: Backend, instance: dg.DagsterInstance) -> None:
    io, datasets = backend
    rows = {"x": [1, 2, 3]}
    assets = _assets(rows)
    resources = {"io_manager": io}
    assert dg.materialize(assets, instance=instance, resources=resources).success
    first = _version_tag(instance, "events")
    assert first == data_version(datasets.read_manifest("events"))

    assert dg.materialize(assets, instance=instance, resources=resources, selection=["events"]).success
    assert datasets.read_manifest("events").version == 2
    assert _version_tag(instance, "events") == first  # another run, another version number: same data version
    assert _status(instance, assets, "total") == StaleStatus.FRESH

    rows["x"] = [1, 2, 4]
    assert dg.materialize(assets, instance=instance, resources=resources, selection=["events"]).success
    changed = _version_tag(instance, "events")
    assert changed != first and changed == data_version(datasets.read_manifest("events"))
    assert _status(instance, assets, "total") == StaleStatus.STALE


def test_an_append_records_the_data_version_of_the_whole_dataset(
    backend: Backend, instance: dg.DagsterInstance
) -> None:
    io, datasets = backend
    assets = _assets({"x": [1, 2]}, metadata={"write_mode": "append"})
    resources = {"io_manager": io}
    for _ in range(2):
        assert dg.materialize(assets[:1], instance=instance, resources=resources).success
    manifest = datasets.read_manifest("events")
    assert manifest.row_count == 4
    assert _version_tag(instance, "events") == data_version(manifest)
    [record] = instance.fetch_materializations(dg.AssetKey("events"), limit=1).records
    assert record.asset_materialization.metadata["data_version"].value == data_version(manifest)


def test_an_asset_s_own_data_version_wins(backend: Backend, instance: dg.DagsterInstance) -> None:
    io, _datasets = backend

    @dg.asset
    def events() -> dg.Output[pa.Table]:
        return dg.Output(pa.table({"x": [1]}), data_version=dg.DataVersion("mine"))

    assert dg.materialize([events], instance=instance, resources={"io_manager": io}).success
    assert _version_tag(instance, "events") == "mine"


def test_an_observation_reports_the_materialized_data_version(backend: Backend, instance: dg.DagsterInstance) -> None:
    io, datasets = backend
    assets = _assets({"x": [5, 6]})
    assert dg.materialize(assets[:1], instance=instance, resources={"io_manager": io}).success
    watched = observable_dataset("watched", dataset_key=io.dataset_key_for(dg.AssetKey("events")))
    assert observe([watched], instance=instance, resources={"io_manager": io}).success
    [record] = instance.fetch_observations(watched.key, limit=1).records
    assert record.asset_observation.data_version == _version_tag(instance, "events")
    assert record.asset_observation.data_version == data_version(datasets.read_manifest("events"))
