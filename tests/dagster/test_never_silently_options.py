"""A metadata key meant as an option but that would be ignored fails before anything is written or read,
naming the option meant; users' own keys pass (issue 30 point 2), through ``materialize``."""

from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import RemoteStoreIOManager

from ._snapshot import snapshot


def _failure(result: Any) -> str:
    assert not result.success
    failures = result.get_step_failure_events()
    assert failures, "expected a step failure"
    return str(failures[0].step_failure_data.error)


def _asset(metadata: dict[str, Any]) -> Any:
    @dg.asset(name="orders", metadata=metadata)
    def orders() -> pa.Table:
        return pa.table({"id": [3, 4]})

    return orders


@pytest.mark.parametrize(
    ("metadata", "meant"),
    [
        ({"mode": "append"}, "write_mode"),
        ({"Mode": "append"}, "write_mode"),
        ({"schema_mode": "merge", "write_mode": "append"}, "allow_new_columns"),
        ({"write_mod": "append"}, "did you mean 'write_mode'"),
        ({"key_column": ["id"], "write_mode": "merge", "key_columns": ["id"]}, "did you mean 'key_columns'"),
        ({"merge_predicate": "s.id = t.id"}, "key_columns"),
        ({"root_uri": "s3://bucket"}, "RemoteStoreIOManager(base_dir=...)"),
        ({"compression": "snappy"}, "RemoteStoreIOManager(compression=...)"),
        ({"filters": [("id", "==", 1)]}, "input option"),
    ],
)
def test_an_output_key_meant_as_an_option_fails_before_anything_is_written(
    io_manager: RemoteStoreIOManager,
    datasets: ParquetDatasetStore,
    instance: dg.DagsterInstance,
    metadata: dict[str, Any],
    meant: str,
) -> None:
    datasets.write_dataset(pa.table({"id": [1, 2]}), "orders")
    before = snapshot(datasets.store)
    result = dg.materialize(
        [_asset(metadata)], resources={"io_manager": io_manager}, instance=instance, raise_on_error=False
    )
    message = _failure(result)
    assert "ValueError" in message and "asset orders" in message
    assert f"output metadata key {next(iter(metadata))!r}" in message and meant in message
    assert snapshot(datasets.store) == before


def test_users_own_keys_pass(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    mine = {"owner": "sales", "team": "data", "description": "x", "columns": ["id"], "dagster/table_name": "o"}
    result = dg.materialize([_asset(mine)], resources={"io_manager": io_manager}, instance=instance)
    assert result.success
    assert datasets.read_dataset("orders").to_pylist() == [{"id": 3}, {"id": 4}]


@dg.asset
def events() -> pa.Table:
    return pa.table({"id": [1, 2, 3], "kind": ["a", "b", "a"]})


def _reader(metadata: dict[str, Any]) -> Any:
    @dg.asset(ins={"events": dg.AssetIn(metadata=metadata)})
    def counts(events: pa.Table) -> pa.Table:
        return pa.table({"n": [events.num_rows]})

    return counts


@pytest.mark.parametrize(
    ("metadata", "meant"),
    [
        ({"filter": [("kind", "==", "a")]}, "use filters"),
        ({"partition_filters": [("kind", "==", "a")]}, "use filters"),
        ({"filtres": [("kind", "==", "a")]}, "did you mean 'filters'"),
        ({"asof": "2026-01-01T00:00:00+00:00"}, "did you mean 'as_of'"),
        ({"write_mode": "append"}, "output option"),
    ],
)
def test_an_input_key_meant_as_an_option_fails_before_anything_is_read(
    io_manager: RemoteStoreIOManager,
    datasets: ParquetDatasetStore,
    instance: dg.DagsterInstance,
    metadata: dict[str, Any],
    meant: str,
) -> None:
    resources = {"io_manager": io_manager}
    assert dg.materialize([events], resources=resources, instance=instance).success
    before = snapshot(datasets.store)
    counts = _reader(metadata)
    result = dg.materialize(
        [counts, events], selection=[counts], resources=resources, instance=instance, raise_on_error=False
    )
    message = _failure(result)
    assert "ValueError" in message
    assert f"input metadata key {next(iter(metadata))!r}" in message and meant in message
    assert snapshot(datasets.store) == before
    assert not datasets.dataset_exists("counts")
