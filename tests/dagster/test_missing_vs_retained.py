"""A missing dataset and a version that is no longer retained are distinct errors (issue 13, item 1)."""

from collections.abc import Iterator
from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa
import pytest

from dagster_parquet_dataset import (
    DatasetNotFound,
    LocalStore,
    NotFound,
    ParquetDatasetStore,
    VersionNotRetained,
)
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager

days = dg.DailyPartitionsDefinition(start_date="2024-06-01", end_date="2024-06-04")


@pytest.fixture
def io_manager(root: str) -> RemoteStoreIOManager:
    """``retain_versions=1``: a replaced version is dropped at once (these tests read dropped versions)."""
    return RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)


@pytest.fixture
def datasets(root: str) -> ParquetDatasetStore:
    return ParquetDatasetStore(LocalStore(root), retain_versions=1)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


@dg.asset(partitions_def=days)
def events(context: dg.AssetExecutionContext) -> pd.DataFrame:
    day = context.partition_key
    return pd.DataFrame({"day": [day, day], "amount": [1, 2], "note": ["x", "y"]})


def test_columns_pandas_and_missing_partitions_skip_the_missing_one(
    io_manager: RemoteStoreIOManager, instance: dg.DagsterInstance
) -> None:
    seen: dict[str, Any] = {}

    @dg.asset(ins={"events": dg.AssetIn(metadata={"columns": ["day", "amount"], "allow_missing_partitions": True})})
    def summary(events: pd.DataFrame) -> pd.DataFrame:
        seen["events"] = events
        return events

    for day in ("2024-06-01", "2024-06-02"):  # 2024-06-03 is never materialized
        assert dg.materialize(
            [events], partition_key=day, resources={"io_manager": io_manager}, instance=instance
        ).success
    result = dg.materialize(
        [events, summary], selection=[summary], resources={"io_manager": io_manager}, instance=instance
    )
    assert result.success
    loaded = seen["events"]
    assert list(loaded.columns) == ["day", "amount"]
    assert loaded["day"].tolist() == ["2024-06-01", "2024-06-01", "2024-06-02", "2024-06-02"]


def _input_context(io_manager: RemoteStoreIOManager, asset: str, metadata: dict[str, Any]) -> dg.InputContext:
    return dg.build_input_context(
        name=asset,
        asset_key=dg.AssetKey([asset]),
        definition_metadata=metadata,
        dagster_type=dg.PythonObjectDagsterType(pd.DataFrame),
    )


def _write(io_manager: RemoteStoreIOManager, asset: str, amounts: list[int]) -> None:
    io_manager.handle_output(dg.build_output_context(asset_key=dg.AssetKey([asset])), pa.table({"amount": amounts}))


def test_a_missing_dataset_with_columns_and_version_is_reported_missing(io_manager: RemoteStoreIOManager) -> None:
    context = _input_context(io_manager, "never_written", {"columns": ["amount"], "version": 1})
    with pytest.raises(DatasetNotFound) as info:
        io_manager.load_input(context)
    message = str(info.value)
    assert "'never_written' is absent" in message and "materialize it first" in message
    assert "retain" not in message


def test_a_dropped_version_is_version_not_retained(io_manager: RemoteStoreIOManager) -> None:
    _write(io_manager, "amounts", [1])
    _write(io_manager, "amounts", [2])  # retain_versions=1 drops version 1
    context = _input_context(io_manager, "amounts", {"columns": ["amount"], "version": 1})
    with pytest.raises(VersionNotRetained) as info:
        io_manager.load_input(context)
    assert "version 1" in str(info.value) and "retain_versions" in str(info.value)


def test_a_version_newer_than_the_latest_is_not_called_not_retained(io_manager: RemoteStoreIOManager) -> None:
    _write(io_manager, "amounts", [1])
    context = _input_context(io_manager, "amounts", {"columns": ["amount"], "version": 5})
    with pytest.raises(NotFound) as info:
        io_manager.load_input(context)
    assert not isinstance(info.value, VersionNotRetained)
    assert "no version 5" in str(info.value) and "retain_versions" not in str(info.value)


def test_dataset_layer_raises_version_not_retained_only_for_dropped_versions(datasets: ParquetDatasetStore) -> None:
    datasets.write_dataset(pa.table({"a": [1]}), "t")
    datasets.write_dataset(pa.table({"a": [2]}), "t", overwrite=True)
    with pytest.raises(VersionNotRetained, match="version 1 of dataset 't' is not retained"):
        datasets.read_manifest("t", version=1)
    with pytest.raises(NotFound) as info:
        datasets.read_manifest("t", version=3)
    assert not isinstance(info.value, VersionNotRetained)
    with pytest.raises(NotFound) as missing:
        datasets.read_manifest("absent", version=1)
    assert not isinstance(missing.value, VersionNotRetained)
