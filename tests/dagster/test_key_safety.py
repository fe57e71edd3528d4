"""One dataset never serves two assets or two partitions (issue 9, item 11).

Asset ``["sales", "eu"]`` and partition ``"eu"`` of asset ``["sales"]`` both
map to dataset ``sales/eu`` (the published mapping of docs/dagster.md). The manifest
records which asset and partition it holds; the IO manager refuses to write
or read when that record names another one.
"""

from collections.abc import Iterator
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, Store
from dagster_parquet_dataset.dagster_io import DatasetKeyCollision, LocalStoreResource, RemoteStoreIOManager
from dagster_parquet_dataset.dagster_io.resources import StoreResource
from tests._stores import WrappingStore

from .conftest import manifest, parquet_files, read

regions = dg.StaticPartitionsDefinition(["eu", "us"])


@dg.asset(partitions_def=regions, name="sales")
def sales_by_region(context: dg.AssetExecutionContext) -> pa.Table:
    return pa.table({"source": ["sales partition"], "region": [context.partition_key]})


@dg.asset(key=["sales", "eu"])
def sales_eu() -> pa.Table:
    return pa.table({"source": ["asset sales/eu"], "region": ["eu"]})


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


def _run(assets: list[Any], io_manager: Any, instance: dg.DagsterInstance, **kwargs: Any) -> Any:
    return dg.materialize(
        assets, resources={"io_manager": io_manager}, instance=instance, raise_on_error=False, **kwargs
    )


def _error(result: Any) -> str:
    failures = result.get_step_failure_events()
    assert failures, "expected a step failure"
    error = failures[0].step_failure_data.error
    text = []
    while error is not None:
        text.append(f"{error.cls_name}: {error.message}")
        error = error.cause
    return "\n".join(text)


def _assert_names_both(error: str) -> None:
    assert "DatasetKeyCollision" in error
    assert "asset sales, partition 'eu'" in error and "asset sales/eu" in error
    assert "'prefix'" in error and "dataset 'sales/eu'" in error


def test_asset_refuses_to_overwrite_a_partition_of_another_asset(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    assert _run([sales_by_region], io_manager, instance, partition_key="eu").success
    before = manifest(datasets, "sales/eu")

    result = _run([sales_eu], io_manager, instance)
    assert not result.success
    _assert_names_both(_error(result))
    assert "Nothing was written" in _error(result)
    assert manifest(datasets, "sales/eu") == before
    assert read(datasets, "sales/eu").column("source").to_pylist() == ["sales partition"]

    # What the message suggests: another prefix for one of them.
    separate = RemoteStoreIOManager(store=io_manager.store, prefix="regional", retain_versions=1)
    assert _run([sales_eu], separate, instance).success
    assert read(datasets, "regional/sales/eu").column("source").to_pylist() == ["asset sales/eu"]
    assert read(datasets, "sales/eu").column("source").to_pylist() == ["sales partition"]


def test_partition_refuses_to_overwrite_another_asset(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    assert _run([sales_eu], io_manager, instance).success
    result = _run([sales_by_region], io_manager, instance, partition_key="eu")
    assert not result.success
    _assert_names_both(_error(result))
    assert read(datasets, "sales/eu").column("source").to_pylist() == ["asset sales/eu"]
    assert _run([sales_by_region], io_manager, instance, partition_key="us").success  # no collision there


def test_loading_a_partition_refuses_another_assets_dataset(
    io_manager: RemoteStoreIOManager, instance: dg.DagsterInstance
) -> None:
    loaded: list[Any] = []

    @dg.asset(partitions_def=regions)
    def report(sales: pa.Table) -> pa.Table:
        loaded.append(sales)
        return sales

    assert _run([sales_eu], io_manager, instance).success  # only the other asset wrote sales/eu
    result = _run([sales_by_region, report], io_manager, instance, selection=[report], partition_key="eu")
    assert not result.success
    _assert_names_both(_error(result))
    assert "nothing was loaded" in _error(result)
    assert loaded == []


def test_manifests_without_a_record_still_load_and_mismatching_ones_do_not(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore
) -> None:
    # Written outside the IO manager (or before it recorded owners): no metadata to compare.
    datasets.write_dataset(pa.table({"n": [1]}), "legacy")
    legacy = io_manager.load_input(dg.build_input_context(name="legacy", asset_key=dg.AssetKey(["legacy"])))
    assert legacy.to_pydict() == {"n": [1]}

    datasets.write_dataset(pa.table({"n": [2]}), "claimed", metadata={"dagster.asset_key": "other"})
    with pytest.raises(DatasetKeyCollision, match="dataset 'claimed' holds asset other"):
        io_manager.load_input(dg.build_input_context(name="claimed", asset_key=dg.AssetKey(["claimed"])))

    # Re-materializing over a legacy dataset is fine, and records the owner from then on.
    io_manager.handle_output(dg.build_output_context(asset_key=dg.AssetKey(["legacy"])), pa.table({"n": [3]}))
    assert manifest(datasets, "legacy").metadata["dagster.asset_key"] == "legacy"


#: What the racing store runs right before the next swap of ``sales/eu/manifest.json``.
_BEFORE_SWAP: list[Any] = []


class _OtherAssetCommitsFirst(WrappingStore):
    """A real LocalStore on which another asset's run commits right before this run's manifest swap."""

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        if path == "sales/eu/manifest.json" and _BEFORE_SWAP:
            _BEFORE_SWAP.pop()()
        return super().write_if(path, data, expected=expected)


class RacingLocalStoreResource(StoreResource):
    root: str

    def get_store(self) -> Store:
        return _OtherAssetCommitsFirst(LocalStore(self.root))


@pytest.mark.parametrize("existing", [False, True], ids=["both-create", "both-replace"])
def test_two_assets_racing_to_one_key_the_commit_refuses_the_second(
    root: str, datasets: ParquetDatasetStore, instance: dg.DagsterInstance, existing: bool
) -> None:
    """Issue 18 #13: both pass the early check; the owner in the commit's condition refuses the loser."""
    plain = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)
    if existing:  # a dataset without an owner record: both writers' early checks accept it
        datasets.write_dataset(pa.table({"source": ["unowned"], "region": ["eu"]}), "sales/eu")
    _BEFORE_SWAP[:] = [lambda: _run([sales_by_region], plain, instance, partition_key="eu")]

    result = _run(
        [sales_eu], RemoteStoreIOManager(store=RacingLocalStoreResource(root=root), retain_versions=1), instance
    )
    assert not _BEFORE_SWAP, "the other asset must have run inside the race window"
    assert not result.success
    error = _error(result)
    _assert_names_both(error)
    assert "OwnerMismatch" in error  # the commit refused it, not the early check
    assert read(datasets, "sales/eu").column("source").to_pylist() == ["sales partition"]
    live = manifest(datasets, "sales/eu")
    assert parquet_files(datasets, "sales/eu") == sorted(f"sales/eu/{p}" for p in live.parts)
