"""Lazy inputs: ``pyarrow.dataset.Dataset``, ``polars.LazyFrame`` and ``pyarrow.RecordBatchReader`` over
every partition an input asks for, as one scan; eager types built from one scan, equal to per-key reads.

A daily-partitioned upstream (a column added on the third day) feeds unpartitioned
downstream assets through ``dagster.materialize``; results are compared with reads
of each partition by an independent ``ParquetDatasetStore``.
"""

import os
from typing import Any

import dagster as dg
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

from dagster_parquet_dataset import ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import RemoteStoreIOManager

from .conftest import parquet_files, read

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-05")  # 01 .. 04
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]
FILTERS = [("d", ">=", 3)]  # days 01 and 02 are pruned by their statistics


@dg.asset(partitions_def=DAILY)
def up(context: dg.AssetExecutionContext) -> pa.Table:
    d = int(context.partition_key[-2:])
    cols: dict[str, Any] = {"day": [context.partition_key] * 3, "d": [d] * 3, "n": [d * 10 + i for i in range(3)]}
    if d >= 3:  # added on the third day: earlier days read it as nulls
        cols["extra"] = [f"{d}-{i}" for i in range(3)]
    return pa.table(cols)


def _as_table(value: Any) -> pa.Table:
    if isinstance(value, pads.Dataset):
        return value.to_table()
    if isinstance(value, pl.LazyFrame):
        return value.collect().to_arrow()
    if isinstance(value, pa.RecordBatchReader):
        return value.read_all()
    raise AssertionError(f"not lazy: {type(value)}")


@dg.asset
def as_dataset(up: pads.Dataset) -> pa.Table:
    assert isinstance(up, pads.Dataset)
    return _as_table(up)


@dg.asset
def as_lazyframe(up: pl.LazyFrame) -> pa.Table:
    assert isinstance(up, pl.LazyFrame)
    return _as_table(up)


@dg.asset
def as_reader(up: pa.RecordBatchReader) -> pa.Table:
    assert isinstance(up, pa.RecordBatchReader)
    return _as_table(up)


@dg.asset
def as_table(up: pa.Table) -> pa.Table:
    return up


PUSHED = {"columns": ["day", "n"], "filters": FILTERS}


@dg.asset(ins={"up": dg.AssetIn(metadata=PUSHED)})
def pushed_dataset(up: pads.Dataset) -> pa.Table:
    return up.to_table().select(["day", "n"])  # the filter's column may be carried after the columns


@dg.asset(ins={"up": dg.AssetIn(metadata=PUSHED)})
def pushed_lazyframe(up: pl.LazyFrame) -> pa.Table:
    return up.collect().to_arrow()


@dg.asset(ins={"up": dg.AssetIn(metadata=PUSHED)})
def pushed_reader(up: pa.RecordBatchReader) -> pa.Table:
    return up.read_all()


@dg.asset(ins={"up": dg.AssetIn(metadata=PUSHED)})
def pushed_table(up: pa.Table) -> pa.Table:
    return up


LENIENT = {"allow_missing_partitions": True, "filters": [("n", "!=", 31)]}


@dg.asset(ins={"up": dg.AssetIn(metadata=LENIENT)})
def lenient_table(up: pa.Table) -> pa.Table:
    return up


@dg.asset(ins={"up": dg.AssetIn(metadata=LENIENT)})
def lenient_pandas(up: pd.DataFrame) -> pd.DataFrame:
    return up


@dg.asset(ins={"up": dg.AssetIn(metadata=LENIENT)})
def lenient_polars(up: pl.DataFrame) -> pl.DataFrame:
    return up


@dg.asset(ins={"up": dg.AssetIn(metadata={"allow_missing_partitions": True})})
def lenient_lazyframe(up: pl.LazyFrame) -> pa.Table:
    return up.collect().to_arrow()


LAZY = [as_dataset, as_lazyframe, as_reader]
ALL = [
    up,
    *LAZY,
    as_table,
    pushed_dataset,
    pushed_lazyframe,
    pushed_reader,
    pushed_table,
    lenient_table,
    lenient_pandas,
    lenient_polars,
    lenient_lazyframe,
]


def _materialize_days(io_manager: RemoteStoreIOManager, instance: dg.DagsterInstance, days: list[str]) -> None:
    for day in days:
        result = dg.materialize(
            [up], resources={"io_manager": io_manager}, instance=instance, selection=[up], partition_key=day
        )
        assert result.success


def _run(
    io_manager: RemoteStoreIOManager, instance: dg.DagsterInstance, selection: list[Any]
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        ALL, resources={"io_manager": io_manager}, instance=instance, selection=selection, raise_on_error=False
    )


def _expected(
    datasets: ParquetDatasetStore,
    days: list[str],
    columns: list[str] | None = None,
    filters: Any = None,
    asset: str = "up",
) -> pa.Table:
    """Each partition read on its own, then concatenated (what loading meant before scans)."""
    tables = [datasets.read_dataset(f"{asset}/{d}", filters=filters) for d in days]
    whole = pa.concat_tables(tables, promote_options="default")
    return whole.select(columns) if columns is not None else whole


def _same(got: pa.Table, expected: pa.Table) -> bool:
    """Equal values, column names and order; polars writes strings as large_string, so types are compared
    after casting to the expected ones (a cast that would lose data fails)."""
    return got.schema.names == expected.schema.names and got.cast(expected.schema).equals(expected)


def test_lazy_types_load_every_partition_as_one_scan(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore
) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        _materialize_days(io_manager, instance, DAYS)
        result = _run(io_manager, instance, [*LAZY, as_table])
        assert result.success, [e.step_failure_data.error for e in result.get_step_failure_events()]
    expected = _expected(datasets, DAYS)
    assert expected.column("extra").null_count == 6
    for asset in ("as_dataset", "as_lazyframe", "as_reader", "as_table"):
        assert _same(read(datasets, asset), expected), asset


def test_columns_and_filters_are_pushed_down(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, root: str
) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        _materialize_days(io_manager, instance, DAYS)
        # A part of a pruned day disappears: a pruned read never opens it; a read that needs it fails.
        (pruned_part,) = parquet_files(datasets, "up/2024-01-01")
        os.remove(os.path.join(root, pruned_part))
        pushed = [pushed_dataset, pushed_lazyframe, pushed_reader, pushed_table]
        result = _run(io_manager, instance, pushed)
        assert result.success, [e.step_failure_data.error for e in result.get_step_failure_events()]
        for asset in LAZY:
            failed = _run(io_manager, instance, [asset])
            assert not failed.success
            message = str(failed.get_step_failure_events()[0].step_failure_data.error)
            assert "DatasetIncomplete" in message and "2024-01-01" in message, message
    expected = _expected(datasets, DAYS[2:], ["day", "n"], FILTERS)
    assert expected.num_rows == 6
    for asset in ("pushed_dataset", "pushed_lazyframe", "pushed_reader", "pushed_table"):
        assert _same(read(datasets, asset), expected), asset


def test_eager_types_equal_per_partition_reads_with_missing_partitions(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore
) -> None:
    present = ["2024-01-01", "2024-01-03", "2024-01-04"]  # 02 never written
    with dg.DagsterInstance.ephemeral() as instance:
        _materialize_days(io_manager, instance, present)
        result = _run(io_manager, instance, [lenient_table, lenient_pandas, lenient_polars, lenient_lazyframe])
        assert result.success, [e.step_failure_data.error for e in result.get_step_failure_events()]
    expected = _expected(datasets, present, filters=LENIENT["filters"])
    assert expected.num_rows == 8 and expected.column("extra").null_count == 3
    assert read(datasets, "lenient_table").equals(expected)
    assert _same(read(datasets, "lenient_polars"), expected)
    assert _same(read(datasets, "lenient_lazyframe"), _expected(datasets, present))
    # The partitions' frames under one fresh RangeIndex (issue 30), as pandas.concat(..., ignore_index=True) gives.
    frames = [datasets.read_dataset(f"up/{d}", filters=LENIENT["filters"]).to_pandas() for d in present]
    pd.testing.assert_frame_equal(
        datasets.read_dataset("lenient_pandas").to_pandas(), pd.concat(frames, ignore_index=True)
    )


@dg.asset
def consumed_late(context: dg.AssetExecutionContext, up: pads.Dataset) -> pa.Table:
    """Deletes a part after load_input returned (which checked every part), then scans: the scan must fail,
    with pyarrow's own error naming the file (no Python code runs on Arrow's I/O threads to translate it)."""
    root = context.resources.io_manager.store.root
    part = sorted(
        os.path.join(dirpath, name)
        for dirpath, _dirs, names in os.walk(os.path.join(root, "up", "2024-01-02"))
        for name in names
        if name.endswith(".parquet")
    )[0]
    os.remove(part)
    with pytest.raises(FileNotFoundError, match="up/2024-01-02/") as info:
        up.to_table()
    return pa.table({"error": [str(info.value)]})


@dg.asset
def collected_late(context: dg.AssetExecutionContext, up: pl.LazyFrame) -> pa.Table:
    root = context.resources.io_manager.store.root
    folder = os.path.join(root, "up", "2024-01-03")
    for name in os.listdir(folder):
        if name.endswith(".parquet"):
            os.remove(os.path.join(folder, name))
    try:
        up.collect()
    except Exception as exc:  # noqa: BLE001 - polars wraps the scan's error; its text must name the part
        return pa.table({"error": [f"{type(exc).__name__}: {exc}"]})
    raise AssertionError("collect() succeeded although a part was deleted after load_input")


def test_nothing_is_read_at_load_time(io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        _materialize_days(io_manager, instance, DAYS)
        for asset in (consumed_late, collected_late):
            _materialize_days(io_manager, instance, ["2024-01-02", "2024-01-03"])  # whole again
            result = dg.materialize(
                [up, consumed_late, collected_late],
                resources={"io_manager": io_manager},
                instance=instance,
                selection=[asset],
            )
            assert result.success
    assert "2024-01-02" in read(datasets, "consumed_late").column("error")[0].as_py()
    message = read(datasets, "collected_late").column("error")[0].as_py()
    assert "up/2024-01-03/" in message and "No such file" in message, message


def test_dataset_output_is_streamed_and_read_back_as_a_dataset(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore
) -> None:
    source = pa.table({"k": list(range(10)), "v": [str(i) for i in range(10)]})

    @dg.asset
    def made() -> pads.Dataset:
        return pads.dataset(source).filter(pads.field("k") >= 4)

    @dg.asset
    def used(made) -> pa.Table:  # noqa: ANN001 - unannotated: loaded as the type that was written
        assert isinstance(made, pads.Dataset)
        return made.to_table()

    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([made, used], resources={"io_manager": io_manager}, instance=instance)
        assert result.success
    assert read(datasets, "made").equals(source.filter(pa.compute.field("k") >= 4))
    assert read(datasets, "used").equals(read(datasets, "made"))
    assert datasets.read_manifest("made").metadata["dagster.python_type"] == "pyarrow.dataset.Dataset"


TEN_DAYS = dg.DailyPartitionsDefinition(start_date="2024-02-01", end_date="2024-02-11")


@dg.asset(partitions_def=TEN_DAYS)
def daily(context: dg.AssetExecutionContext) -> pa.Table:
    d = int(context.partition_key[-2:])
    return pa.table({"d": [d] * 20, "n": list(range(20)), "x": [float(d)] * 20})


@dg.asset
def daily_reader(daily: pa.RecordBatchReader) -> pa.Table:
    return daily.read_all()


@dg.asset
def daily_lazyframe(daily: pl.LazyFrame) -> pa.Table:
    return daily.collect().to_arrow()


@dg.asset
def daily_dataset(daily: pads.Dataset) -> pa.Table:
    return pa.table({"rows": [daily.count_rows()]})


@pytest.mark.timeout(180, method="thread")  # a hang dumps every thread's stack and fails the run
def test_lazy_inputs_over_ten_daily_partitions_never_hang(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore
) -> None:
    """Issue 18 #7: a ``RecordBatchReader`` input over 10 daily partitions hung in ``scanner().to_reader()``
    (a Python filesystem handler on Arrow's I/O threads waiting for the GIL). Repeated, with every lazy type."""
    assets = [daily, daily_reader, daily_lazyframe, daily_dataset]
    with dg.DagsterInstance.ephemeral() as instance:
        for day in TEN_DAYS.get_partition_keys():
            result = dg.materialize(
                assets, resources={"io_manager": io_manager}, instance=instance, selection=[daily], partition_key=day
            )
            assert result.success
        expected = _expected(datasets, TEN_DAYS.get_partition_keys(), asset="daily")
        assert expected.num_rows == 200
        for _ in range(8):
            result = dg.materialize(
                assets,
                resources={"io_manager": io_manager},
                instance=instance,
                selection=[daily_reader, daily_lazyframe, daily_dataset],
            )
            assert result.success
            assert read(datasets, "daily_reader").equals(expected)
            assert _same(read(datasets, "daily_lazyframe"), expected)
            assert read(datasets, "daily_dataset").column("rows").to_pylist() == [200]
