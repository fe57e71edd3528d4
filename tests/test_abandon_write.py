"""``abandon_write``: giving up an externally written write deletes only what that write created."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from dagster_parquet_dataset import ParquetDatasetStore, Store


def _part(store: Store, path: str) -> None:
    buf = io.BytesIO()
    pq.write_table(pa.table({"a": [1]}), buf)
    store.write_bytes(path, buf.getvalue())


def test_abandon_keeps_the_live_versions_files(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(pa.table({"a": [1, 2]}), "k")
    pending = ds.begin_write("k", overwrite=True)
    ours = f"part-00000-{pending.txn}.parquet"
    _part(store, f"k/{ours}")
    _part(store, "k/stray.parquet")  # not this write's: no token in its name
    ds.abandon_write(pending, ["data.parquet", ours, "stray.parquet"])
    assert ds.read_dataset("k").column("a").to_pylist() == [1, 2]
    assert not store.exists(f"k/{ours}")
    assert store.exists("k/stray.parquet")


def test_abandoned_first_write_leaves_the_key_absent(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    pending = ds.begin_write("new")
    assert pending.spec_names
    _part(store, "new/part-00000.parquet")
    ds.abandon_write(pending, ["part-00000.parquet"])
    assert [f.path for f in store.list_files("new")] == []
    assert not ds.dataset_exists("new")
    ds.write_dataset(pa.table({"a": [3]}), "new", partition_by=None)
    assert ds.read_manifest("new").parts == ["data.parquet"]


def test_abandon_of_an_append_and_a_merge_plan(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(pa.table({"a": [1]}), "k")
    app = ds.begin_append("k", pa.schema([("a", pa.int64())]))
    _part(store, f"k/part-00000-{app.txn}.parquet")
    ds.abandon_write(app, [f"part-00000-{app.txn}.parquet"])
    plan = ds.plan_merge("k", source_schema=pa.schema([("a", pa.int64())]), key_columns=["a"], key_ranges={"a": (1, 1)})
    _part(store, f"k/{plan.part_name(0)}")
    ds.abandon_write(plan, [plan.part_name(0), "data.parquet"])
    assert sorted(f.path for f in store.list_files("k") if f.path.endswith(".parquet")) == ["k/data.parquet"]
    assert ds.read_dataset("k").num_rows == 1
