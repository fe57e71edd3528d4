"""``TypeHandler.read_many``: several datasets as one value, and how ``load_input`` uses it."""

import os
from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa
import pytest

from dagster_parquet_dataset import DatasetNotFound, ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import RemoteStoreIOManager
from dagster_parquet_dataset.dagster_io.handlers import ArrowTableHandler, PandasDataFrameHandler

from .conftest import parquet_files, read

KEYS = ["t/3", "t/1", "t/2"]  # deliberately not sorted: read_many keeps the caller's order


@pytest.fixture
def three(datasets: ParquetDatasetStore) -> ParquetDatasetStore:
    for i, key in enumerate(KEYS):
        datasets.write_dataset(pa.table({"k": [key, key], "v": [i * 10, i * 10 + 1]}), key)
    return datasets


def test_read_many_is_the_union_in_key_order(three: ParquetDatasetStore) -> None:
    out = ArrowTableHandler().read_many(None, three, KEYS, columns=None)
    assert out.column("k").to_pylist() == [k for k in KEYS for _ in (0, 1)]
    assert out.column("v").to_pylist() == [0, 1, 10, 11, 20, 21]
    filtered = ArrowTableHandler().read_many(None, three, KEYS, columns=["v"], filters=[("v", ">", 5)])
    assert filtered.to_pydict() == {"v": [10, 11, 20, 21]}
    df = PandasDataFrameHandler().read_many(None, three, KEYS[1:], columns=None)
    assert isinstance(df, pd.DataFrame)
    assert df["k"].tolist() == ["t/1", "t/1", "t/2", "t/2"]


def test_read_many_names_the_missing_key(three: ParquetDatasetStore) -> None:
    with pytest.raises(DatasetNotFound) as info:
        ArrowTableHandler().read_many(None, three, ["t/1", "t/9", "t/2"], columns=None)
    assert info.value.dataset_key == "t/9"  # type: ignore[attr-defined]
    assert "'t/9'" in str(info.value)


DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-05")  # 01 .. 04


@dg.asset(partitions_def=DAILY)
def days(context: dg.AssetExecutionContext) -> pa.Table:
    day = context.partition_key
    n = int(day[-2:])
    cols: dict[str, Any] = {"day": [day] * n, "n": list(range(n))}
    if n >= 3:  # a column added from the third day on: earlier days read it as nulls
        cols["extra"] = [f"x{i}" for i in range(n)]
    return pa.table(cols)


@dg.asset
def all_days(days: pa.Table) -> pa.Table:
    return days


@dg.asset(ins={"days": dg.AssetIn(metadata={"allow_missing_partitions": True})})
def lenient_days(days: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(days, preserve_index=False)


ALL = [days, all_days, lenient_days]


def _materialize(io_manager: RemoteStoreIOManager, instance: dg.DagsterInstance, *partitions: str) -> None:
    for day in partitions:
        result = dg.materialize(
            ALL, resources={"io_manager": io_manager}, instance=instance, selection=[days], partition_key=day
        )
        assert result.success


def test_damaged_partition_is_named(io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, root: str) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        _materialize(io_manager, instance, "2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04")
        (part,) = parquet_files(datasets, "days/2024-01-02")
        with open(os.path.join(root, part), "r+b") as f:
            f.truncate(20)
        result = dg.materialize(
            ALL, resources={"io_manager": io_manager}, instance=instance, selection=[all_days], raise_on_error=False
        )
    assert not result.success
    message = str(result.get_step_failure_events()[0].step_failure_data.error)
    assert "partition '2024-01-02'" in message and "incomplete" in message and "DatasetIncomplete" in message


def test_union_with_schema_evolution_and_missing_partitions(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore
) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        _materialize(io_manager, instance, "2024-01-01", "2024-01-03", "2024-01-04")  # 02 never written
        result = dg.materialize(
            ALL, resources={"io_manager": io_manager}, instance=instance, selection=[all_days], raise_on_error=False
        )
        assert not result.success
        assert "days/2024-01-02" in str(result.get_step_failure_events()[0].step_failure_data.error)
        ok = dg.materialize(ALL, resources={"io_manager": io_manager}, instance=instance, selection=[lenient_days])
        assert ok.success
    out = read(datasets, "lenient_days")
    expected = [read(datasets, f"days/2024-01-0{d}") for d in (1, 3, 4)]
    assert out.column("day").to_pylist() == [v for t in expected for v in t.column("day").to_pylist()]
    assert out.column("n").to_pylist() == [v for t in expected for v in t.column("n").to_pylist()]
    assert out.column("extra").to_pylist() == [None] + [f"x{i}" for i in range(3)] + [f"x{i}" for i in range(4)]
