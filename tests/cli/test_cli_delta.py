"""The command line's Delta log: ``sync-delta-log`` over a key, a prefix or ``--all``; ``--delta-log``."""

from __future__ import annotations

import json

import pyarrow as pa
from deltalake import DeltaTable

from dagster_parquet_dataset import ParquetDatasetStore

from ._cli import Target


def test_sync_delta_log_over_a_key_a_prefix_and_all(local: Target) -> None:
    ds = ParquetDatasetStore(local.store)  # written before delta_log was on
    for key in ("sales/a", "sales/b", "other/c"):
        ds.write_dataset(pa.table({"x": [1]}), key)
    ds.append_dataset(pa.table({"x": [2]}), "sales/a")

    one = local.cli("sync-delta-log", "sales/a")
    assert one.returncode == 0, one.stderr
    assert one.stdout.strip() == "sales/a: Delta version 2"
    assert DeltaTable(local.store.uri("sales/a")).version() == 2

    prefix = local.cli("sync-delta-log", "sales", "--json")
    assert prefix.returncode == 0, prefix.stderr
    assert {d["key"]: d["delta_version"] for d in json.loads(prefix.stdout)["datasets"]} == {"sales/a": 2, "sales/b": 1}
    assert not local.store.exists("other/c/_delta_log/00000000000000000000.json")

    every = local.cli("sync-delta-log", "--all")
    assert every.returncode == 0, every.stderr
    assert sorted(DeltaTable(local.store.uri(k)).version() for k in ("sales/a", "sales/b", "other/c")) == [1, 1, 2]


def test_delta_log_option_makes_the_cli_s_commits_write_the_log(local: Target) -> None:
    ds = ParquetDatasetStore(local.store, delta_log=True, max_rows_per_file=1)
    ds.write_dataset(pa.table({"x": [1, 2, 3]}), "t")
    compacted = local.cli("compact", "t", "--delta-log")
    assert compacted.returncode == 0, compacted.stderr
    live = ds.read_manifest("t")
    assert live.version == 2
    assert DeltaTable(local.store.uri("t")).version() == 2
    assert sorted(DeltaTable(local.store.uri("t")).to_pyarrow_table().column("x").to_pylist()) == [1, 2, 3]


def test_sync_delta_log_over_an_asset_folder_repairs_its_one_table(local: Target) -> None:
    ds = ParquetDatasetStore(local.store)
    for day, n in (("2024-01-01", 1), ("2024-01-02", 2)):
        ds.write_dataset(pa.table({"n": [n]}), f"sales/{day}")
    first = local.cli("sync-delta-log", "--asset", "sales", "--partition-column", "day")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "sales: asset Delta version 0"
    ds.write_dataset(pa.table({"n": [3]}), "sales/2024-01-03")
    again = local.cli("sync-delta-log", "--asset", "sales", "--json")  # the columns the table was made with
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {"ok": True, "assets": [{"asset": "sales", "delta_version": 1}]}
    rows = DeltaTable(local.store.uri("sales")).to_pyarrow_table().to_pylist()
    assert sorted((r["day"], r["n"]) for r in rows) == [("2024-01-01", 1), ("2024-01-02", 2), ("2024-01-03", 3)]
    both = local.cli("sync-delta-log", "sales", "--asset", "sales")
    assert both.returncode != 0 and "not both" in both.stderr
    # The asset's prefix: its partition datasets' own logs, and its one table, which takes in a new partition.
    ds.write_dataset(pa.table({"n": [4]}), "sales/2024-01-04")
    prefix = local.cli("sync-delta-log", "sales", "--json")
    assert prefix.returncode == 0, prefix.stderr
    document = json.loads(prefix.stdout)
    assert {d["key"] for d in document["datasets"]} == {f"sales/2024-01-0{i}" for i in range(1, 5)}
    assert document["assets"] == [{"asset": "sales", "delta_version": 2}]
    assert DeltaTable(local.store.uri("sales")).to_pyarrow_table().num_rows == 4
