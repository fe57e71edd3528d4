"""The run tag ``dagster_parquet_dataset/as_of`` loads every input without its own ``version``/``as_of`` as of
an instant; a value without a time zone, in the tag or in an input's ``as_of`` metadata, fails the run before
any step computes and leaves the store byte-identical (issue 30 point 4), through ``materialize``."""

from datetime import datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager
from dagster_parquet_dataset.dagster_io.options import AS_OF_TAG

from ._snapshot import snapshot


@pytest.fixture
def io(tmp_path: Path) -> RemoteStoreIOManager:
    return RemoteStoreIOManager(store=LocalStoreResource(root=str(tmp_path / "store")), retain_versions=None)


@pytest.fixture
def reader(tmp_path: Path) -> ParquetDatasetStore:
    return ParquetDatasetStore(LocalStore(str(tmp_path / "store")), retain_versions=1)


def _prices(price: float) -> dg.AssetsDefinition:
    @dg.asset(name="prices")
    def prices() -> pa.Table:
        return pa.table({"price": [price]})

    return prices


@dg.asset
def seen(prices: pa.Table) -> pa.Table:
    return prices


@dg.asset(ins={"prices": dg.AssetIn(metadata={"version": 3})})
def pinned(prices: pa.Table) -> pa.Table:
    return prices


def _three(io: RemoteStoreIOManager, reader: ParquetDatasetStore, instance: Any) -> list[datetime]:
    for price in (1.0, 2.0, 3.0):
        assert dg.materialize([_prices(price)], resources={"io_manager": io}, instance=instance).success
    return [datetime.fromisoformat(m.created_at_utc) for m in reversed(reader.history("prices"))]


def test_the_run_tag_applies_to_inputs_without_their_own_version(
    io: RemoteStoreIOManager, reader: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    times = _three(io, reader, instance)
    between = times[0] + (times[1] - times[0]) / 2
    result = dg.materialize(
        [_prices(9.0), seen, pinned],
        selection=[seen, pinned],
        resources={"io_manager": io},
        instance=instance,
        tags={AS_OF_TAG: between.isoformat()},
    )
    assert result.success
    assert reader.read_dataset("seen").to_pylist() == [{"price": 1.0}]
    assert reader.read_dataset("pinned").to_pylist() == [{"price": 3.0}]


@pytest.mark.parametrize("value", ["2026-03-01T12:00:00", "yesterday"])
def test_a_run_tag_without_a_zone_fails_the_run_before_any_step(
    io: RemoteStoreIOManager, reader: ParquetDatasetStore, instance: dg.DagsterInstance, value: str
) -> None:
    _three(io, reader, instance)
    before = snapshot(reader.store)
    result = dg.materialize(
        [_prices(9.0), seen],
        resources={"io_manager": io},
        instance=instance,
        tags={AS_OF_TAG: value},
        raise_on_error=False,
    )
    assert not result.success
    assert not result.get_step_success_events()
    assert not [e for e in result.all_events if e.event_type_value == "STEP_START"]
    messages = " ".join(str(e.event_specific_data) for e in result.all_events if e.is_failure)
    assert AS_OF_TAG in messages and "time zone" in messages
    assert snapshot(reader.store) == before


@dg.asset(ins={"prices": dg.AssetIn(metadata={"as_of": "2026-03-01T12:00:00"})})
def naive(prices: pa.Table) -> pa.Table:
    return prices


def test_a_naive_as_of_in_input_metadata_fails_the_run_before_any_step(
    io: RemoteStoreIOManager, reader: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    _three(io, reader, instance)
    before = snapshot(reader.store)
    result = dg.materialize(
        [_prices(9.0), naive], resources={"io_manager": io}, instance=instance, raise_on_error=False
    )
    assert not result.success
    assert not [e for e in result.all_events if e.event_type_value == "STEP_START"]
    messages = " ".join(str(e.event_specific_data) for e in result.all_events if e.is_failure)
    assert "input 'prices'" in messages and "has no time zone" in messages
    assert snapshot(reader.store) == before
