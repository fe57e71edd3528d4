"""``ParquetDatasetStore.list_datasets`` and listing a whole store with ``list_files("")``."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dagster_parquet_dataset import DatasetListing, ParquetDatasetStore, Store

from ._stores import WrappingStore


def _table(n: int) -> pa.Table:
    return pa.table({"id": list(range(n)), "g": [i % 2 for i in range(n)]})


def test_list_files_of_the_root_lists_every_object(store: Store) -> None:
    store.write_bytes("top", b"1")
    store.write_bytes("a/b/c", b"22")
    store.write_bytes("a/d", b"333")
    assert [(f.path, f.size) for f in store.list_files("")] == [("a/b/c", 2), ("a/d", 3), ("top", 1)]
    assert [f.path for f in store.list_files("a")] == ["a/b/c", "a/d"]


def test_lists_datasets_under_a_prefix_with_their_manifests(store: Store) -> None:
    ds = ParquetDatasetStore(store, retain_versions=2)
    ds.write_dataset(_table(3), "sales/orders")
    ds.write_dataset(_table(4), "sales/orders", overwrite=True)  # leaves a _versions/ copy, not a dataset
    ds.write_dataset(_table(5), "sales/eu/daily", partition_by=["g"])
    ds.write_dataset(_table(6), "salesman")  # shares a name prefix, not a folder
    ds.write_dataset(_table(7), "events")

    everything = ds.list_datasets()
    assert [d.key for d in everything] == ["events", "sales/eu/daily", "sales/orders", "salesman"]
    assert all(isinstance(d, DatasetListing) and d.complete and d.error is None for d in everything)
    for d in everything:
        assert d.manifest == ds.read_manifest(d.key)

    under = ds.list_datasets("sales")
    assert [d.key for d in under] == ["sales/eu/daily", "sales/orders"]
    assert [d.key for d in ds.list_datasets("sales/orders")] == ["sales/orders"]
    assert ds.list_datasets("nothing") == []


def test_broken_and_unfinished_datasets_are_listed_as_such(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(_table(3), "good")
    ds.write_dataset(_table(3), "broken")
    ds.write_dataset(_table(3), "unfinished")
    store.write_bytes("broken/manifest.json", b"[]")
    store.delete("unfinished/_SUCCESS")
    listed = {d.key: d for d in ds.list_datasets()}
    assert listed["good"].complete and listed["good"].manifest is not None
    assert listed["broken"].manifest is None and listed["broken"].complete
    assert listed["broken"].error and "\n" not in listed["broken"].error
    assert listed["unfinished"].manifest is not None and not listed["unfinished"].complete


def test_costs_one_listing_and_one_read_per_dataset(store: Store) -> None:
    ParquetDatasetStore(store, max_rows_per_file=2).write_dataset(_table(10), "a")
    for key in ("b", "c/d", "c/e"):
        ParquetDatasetStore(store).write_dataset(_table(3), key)
    counting = WrappingStore(store)
    assert len(ParquetDatasetStore(counting).list_datasets()) == 4
    assert dict(counting.calls) == {"list_files": 1, "read_bytes": 4}


def test_bad_prefix() -> None:
    from dagster_parquet_dataset import MemoryStore

    with pytest.raises(ValueError, match="'..'"):
        ParquetDatasetStore(MemoryStore()).list_datasets("a/../b")
