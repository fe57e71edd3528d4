"""Smaller frictions at the Dagster boundary (issue 30 point 6), through ``materialize``: a pandas input over
several partitions gets a fresh ``RangeIndex`` (a named index is kept); the append error for a new column names
the output metadata a Dagster user writes, and leaves the store byte-identical."""

from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa

from dagster_parquet_dataset import ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import RemoteStoreIOManager

from ._snapshot import snapshot

DAYS = dg.StaticPartitionsDefinition(["2024-06-01", "2024-06-02", "2024-06-03"])


@dg.asset(partitions_def=DAYS)
def plain_days(context: dg.AssetExecutionContext) -> pd.DataFrame:
    return pd.DataFrame({"day": [context.partition_key] * 3, "n": [1, 2, 3]})


@dg.asset(partitions_def=DAYS)
def keyed_days(context: dg.AssetExecutionContext) -> pd.DataFrame:
    start = 10 * int(context.partition_key[-1])
    return pd.DataFrame({"order_id": range(start, start + 3), "n": [1, 2, 3]}).set_index("order_id")


@dg.asset
def all_plain(plain_days: pd.DataFrame) -> pa.Table:
    return pa.table({"index": list(plain_days.index), "kind": [type(plain_days.index).__name__] * len(plain_days)})


@dg.asset
def all_keyed(keyed_days: pd.DataFrame) -> pa.Table:
    return pa.table({"index": list(keyed_days.index), "name": [keyed_days.index.name] * len(keyed_days)})


def test_a_pandas_input_over_several_partitions_gets_a_fresh_range_index(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    resources = {"io_manager": io_manager}
    for day in DAYS.get_partition_keys():
        assert dg.materialize(
            [plain_days, keyed_days], partition_key=day, resources=resources, instance=instance
        ).success
    assets = [plain_days, keyed_days, all_plain, all_keyed]
    assert dg.materialize(assets, selection=[all_plain, all_keyed], resources=resources, instance=instance).success
    plain = datasets.read_dataset("all_plain").to_pydict()
    assert plain["index"] == list(range(9)) and set(plain["kind"]) == {"RangeIndex"}
    keyed = datasets.read_dataset("all_keyed").to_pydict()
    assert keyed["index"] == [10, 11, 12, 20, 21, 22, 30, 31, 32] and set(keyed["name"]) == {"order_id"}


class Wide(dg.Config):
    wide: bool = False


@dg.asset(metadata={"write_mode": "append"})
def grows(config: Wide) -> pa.Table:
    return pa.table({"id": [1], "extra": ["x"]} if config.wide else {"id": [1]})


def _failure(result: Any) -> str:
    assert not result.success
    return str(result.get_step_failure_events()[0].step_failure_data.error)


def test_the_append_error_for_a_new_column_names_the_output_metadata(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    resources = {"io_manager": io_manager}
    assert dg.materialize([grows], resources=resources, instance=instance).success
    before = snapshot(datasets.store)
    config = dg.RunConfig({"grows": Wide(wide=True)})
    result = dg.materialize([grows], resources=resources, instance=instance, run_config=config, raise_on_error=False)
    message = _failure(result)
    assert "new columns ['extra']" in message
    assert "output metadata {'allow_new_columns': True}" in message and "allow_new_columns=True" not in message
    assert snapshot(datasets.store) == before
