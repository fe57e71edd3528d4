"""``RemoteStoreIOManager(delta_log=True)``: a partitioned asset is also ONE Delta table, ``<asset>/_delta_log/``,
over every partition dataset's live files (issue 29, item 4), read back through ``deltalake`` and polars."""

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import dagster as dg
import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, Store
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager, S3StoreResource
from dagster_parquet_dataset.dagster_io.resources import StoreResource
from tests._stores import WrappingStore
from tests.conftest import make_bucket

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-01")


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


def _by_day(table: pa.Table, column: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for row in table.to_pylist():
        out.setdefault(str(row[column]), []).append(row["n"])
    return {k: sorted(v) for k, v in sorted(out.items())}


def test_a_daily_asset_with_a_single_run_backfill_reads_as_one_delta_table(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    rows: dict[str, list[int]] = {"2024-01-01": [1, 2], "2024-01-02": [3], "2024-01-03": [4, 5, 6]}

    @dg.asset(partitions_def=DAILY, backfill_policy=dg.BackfillPolicy.single_run(), metadata={"partition_expr": "day"})
    def sales(context: dg.AssetExecutionContext) -> pa.Table:
        keys = [str(k) for k in context.partition_keys]
        days = [dt.date.fromisoformat(k) for k in keys for _ in rows[k]]
        return pa.table({"day": pa.array(days, pa.date32()), "n": [n for k in keys for n in rows[k]]})

    manager = RemoteStoreIOManager(store=LocalStoreResource(root=str(tmp_path)), delta_log=True)
    range_tags = {
        "dagster/asset_partition_range_start": "2024-01-01",
        "dagster/asset_partition_range_end": "2024-01-02",
    }
    backfill = dg.materialize([sales], resources={"io_manager": manager}, instance=instance, tags=range_tags)
    third = dg.materialize([sales], resources={"io_manager": manager}, instance=instance, partition_key="2024-01-03")
    rows["2024-01-02"] = [7, 8]  # one day materialized again, replacing its rows
    again = dg.materialize([sales], resources={"io_manager": manager}, instance=instance, partition_key="2024-01-02")
    assert backfill.success and third.success and again.success

    table = DeltaTable(str(tmp_path / "sales"))
    assert _by_day(table.to_pyarrow_table(), "day") == {
        "2024-01-01": [1, 2],
        "2024-01-02": [7, 8],
        "2024-01-03": [4, 5, 6],
    }
    # The asset table lists exactly the partitions' live files, relative to the asset's folder.
    datasets = ParquetDatasetStore(LocalStore(str(tmp_path)))
    live = {f"{d}/{p}" for d in rows for p in datasets.read_manifest(f"sales/{d}").parts}
    assert set(table.get_add_actions(flatten=True).column("path").to_pylist()) == live
    # One version per handled output (the backfill's two partitions in one), with its run id.
    assert table.version() == 2
    assert [h.get("runId") for h in table.history()] == [again.run_id, third.run_id, backfill.run_id]
    # Time travel: before the re-materialization, 2024-01-02 had its first rows.
    table.load_as_version(1)
    assert _by_day(table.to_pyarrow_table(), "day")["2024-01-02"] == [3]
    # ``day`` is a data column (the backfill's partition_expr), so polars' native reader gets it from the files.
    polars = pl.scan_delta(str(tmp_path / "sales")).collect()
    assert _by_day(polars.to_arrow(), "day") == _by_day(DeltaTable(str(tmp_path / "sales")).to_pyarrow_table(), "day")


class FailingAssetLog(WrappingStore):
    """Fails every write under the asset's folder ``sales/`` that is not a partition dataset's own (the asset
    log ``sales/_delta_log/`` and, with ``markers_too``, the hand-over markers ``sales/_delta_manifests/``)."""

    armed: ClassVar[bool] = False
    markers_too: ClassVar[bool] = False

    def _check(self, path: str) -> None:
        if FailingAssetLog.armed and path.startswith("sales/_delta_log/"):
            raise OSError("injected: the asset log write failed")
        if FailingAssetLog.armed and FailingAssetLog.markers_too and path.startswith("sales/_delta_manifests/"):
            raise OSError("injected: the hand-over marker write failed")

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        self._check(path)
        return super().write_if(path, data, expected=expected)

    def write_bytes(self, path: str, data: bytes) -> None:
        self._check(path)
        super().write_bytes(path, data)


class FailingAssetLogResource(StoreResource):
    root: str

    def get_store(self) -> Store:
        return FailingAssetLog(LocalStore(self.root))


@pytest.mark.timeout(300)
def test_a_failed_asset_log_write_never_fails_the_run_and_heals(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    @dg.asset(partitions_def=DAILY)
    def sales(context: dg.AssetExecutionContext) -> pa.Table:
        day = int(context.partition_key[-2:])
        return pa.table({"n": [day * 10, day * 10 + 1]})

    manager = RemoteStoreIOManager(store=FailingAssetLogResource(root=str(tmp_path)), delta_log=True)
    datasets = ParquetDatasetStore(LocalStore(str(tmp_path)))
    uri = str(tmp_path / "sales")

    def run(day: str, *, fail: bool = False, markers_too: bool = False) -> None:
        FailingAssetLog.armed, FailingAssetLog.markers_too = fail, markers_too
        try:
            result = dg.materialize([sales], resources={"io_manager": manager}, instance=instance, partition_key=day)
        finally:
            FailingAssetLog.armed = FailingAssetLog.markers_too = False
        assert result.success  # the partition is committed whatever happened to the asset table
        assert datasets.read_dataset(f"sales/{day}").column("n").to_pylist() == [int(day[-2:]) * 10 + i for i in (0, 1)]

    def days() -> dict[str, list[int]]:
        return _by_day(DeltaTable(uri).to_pyarrow_table(), "partition")

    run("2024-01-01")
    run("2024-01-02", fail=True)
    assert days() == {"2024-01-01": [10, 11]}  # lags
    run("2024-01-03")  # the next output of the asset takes the partition whose update failed too
    assert days() == {"2024-01-01": [10, 11], "2024-01-02": [20, 21], "2024-01-03": [30, 31]}
    run("2024-01-04", fail=True, markers_too=True)  # nothing under the asset's folder can be written
    assert "2024-01-04" not in days()
    version = datasets.sync_asset_delta_log("sales")  # the repair over the asset's folder
    healed = {"2024-01-01": [10, 11], "2024-01-02": [20, 21], "2024-01-03": [30, 31], "2024-01-04": [40, 41]}
    assert days() == healed
    assert datasets.sync_asset_delta_log("sales") == version  # a second call changes nothing
    assert DeltaTable(uri).version() == version
    assert not list(datasets.store.list_files("sales/_delta_manifests"))  # hand-over markers are cleared
    # Without partition_expr the dimension is the partition column ``partition``, read from the log.
    assert DeltaTable(uri).metadata().partition_columns == ["partition"]
    polars = pl.scan_delta(uri, use_pyarrow=True).collect()
    assert _by_day(polars.to_arrow(), "partition") == healed


@pytest.mark.timeout(300)
def test_delta_log_on_the_s3_store_resource_turns_it_on_for_the_io_manager(moto_endpoint: str) -> None:
    """``S3StoreResource(delta_log=True)``: the IO manager (without its own ``delta_log``) keeps the partition
    datasets' logs and the asset's one table, on moto S3."""
    bucket = make_bucket(moto_endpoint)

    @dg.asset(partitions_def=DAILY)
    def sales(context: dg.AssetExecutionContext) -> pa.Table:
        return pa.table({"n": [int(context.partition_key[-2:])]})

    resource = S3StoreResource(bucket=bucket, prefix="lake", endpoint_url=moto_endpoint, delta_log=True)
    manager = RemoteStoreIOManager(store=resource)
    assert manager.keeps_delta_log and manager.datasets.delta_log
    for day in ("2024-01-01", "2024-01-02"):
        assert dg.materialize([sales], resources={"io_manager": manager}, partition_key=day).success
    options = {
        "AWS_ENDPOINT_URL": moto_endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
    }
    partition = DeltaTable(f"s3://{bucket}/lake/sales/2024-01-02", storage_options=options)
    assert partition.to_pyarrow_table().column("n").to_pylist() == [2]
    asset = DeltaTable(f"s3://{bucket}/lake/sales", storage_options=options)
    assert _by_day(asset.to_pyarrow_table(), "partition") == {"2024-01-01": [1], "2024-01-02": [2]}
    assert not RemoteStoreIOManager(store=S3StoreResource(bucket=bucket, endpoint_url=moto_endpoint)).keeps_delta_log


def test_a_multi_partitioned_asset_has_one_column_per_dimension(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    partitions = dg.MultiPartitionsDefinition({"region": dg.StaticPartitionsDefinition(["eu", "us"]), "day": DAILY})

    @dg.asset(partitions_def=partitions)
    def sales(context: dg.AssetExecutionContext) -> pa.Table:
        keys = context.partition_key.keys_by_dimension
        return pa.table({"n": [int(keys["day"][-2:]) * (1 if keys["region"] == "eu" else 100)]})

    manager = RemoteStoreIOManager(store=LocalStoreResource(root=str(tmp_path)), delta_log=True)
    for region, day in (("eu", "2024-01-01"), ("us", "2024-01-01"), ("us", "2024-01-02")):
        key = dg.MultiPartitionKey({"region": region, "day": day})
        assert dg.materialize([sales], resources={"io_manager": manager}, instance=instance, partition_key=key).success
    table = DeltaTable(str(tmp_path / "sales"))
    assert table.metadata().partition_columns == ["day", "region"]  # folder order: dimensions sorted by name
    rows = sorted((r["region"], r["day"], r["n"]) for r in table.to_pyarrow_table().to_pylist())
    assert rows == [("eu", "2024-01-01", 1), ("us", "2024-01-01", 100), ("us", "2024-01-02", 200)]
