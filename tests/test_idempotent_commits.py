"""Idempotent appends and merges: the commit window of (key, content hash) (issue 19, item 3)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore, Store
from dagster_parquet_dataset.dataset import DatasetManifest
from dagster_parquet_dataset.errors import ManifestCorrupted
from tests._stores import InjectedCrash, WrappingStore


def table(ids: list[int], label: str = "a") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "label": pa.array([f"{label}{i}" for i in ids])})


def parquet_files(store: Store, key: str) -> list[str]:
    return sorted(f.path for f in store.list_files(key) if f.path.endswith(".parquet"))


def test_an_append_retried_with_the_same_key_and_data_commits_once(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(table([0]), "t")
    first = ds.append_dataset(table([1, 2]), "t", idempotency_key="run/step/out/")
    files = parquet_files(store, "t")
    again = ds.append_dataset(table([1, 2]), "t", idempotency_key="run/step/out/")
    assert again == first  # the version the first attempt committed, not a new one
    assert sorted(ds.read_dataset("t").column("id").to_pylist()) == [0, 1, 2]
    assert parquet_files(store, "t") == files  # the retry's own parts were deleted
    assert first.idempotency[0][:1] == ("run/step/out/",) and first.idempotency[0][2] == first.txn


def test_the_same_key_with_other_data_commits_normally(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    first = ds.append_dataset(table([1]), "t", idempotency_key="k")
    second = ds.append_dataset(table([2]), "t", idempotency_key="k")  # a non-deterministic asset
    assert second.version == first.version + 1
    assert sorted(ds.read_dataset("t").column("id").to_pylist()) == [1, 2]
    assert [e[0] for e in second.idempotency] == ["k", "k"] and second.idempotency[0][2] == second.txn
    third = ds.append_dataset(table([1]), "t", idempotency_key="other")  # same data, another key
    assert third.version == second.version + 1


def test_the_window_survives_other_commits_and_is_bounded(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.append_dataset(table([1]), "t", idempotency_key="k")
    ds.append_dataset(table([5]), "t")  # another writer, no key
    ds.compact_dataset("t")
    live = ds.read_manifest("t")
    assert ds.append_dataset(table([1]), "t", idempotency_key="k") == live
    assert DatasetManifest.from_json(live.to_json()).idempotency == live.idempotency


def test_a_merge_retried_with_the_same_key_and_source_commits_once(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(table([1, 2]), "t")
    source = table([2, 3], label="b")
    first = ds.merge_dataset(source, "t", key_columns=["id"], idempotency_key="k")
    assert (first.inserted, first.updated) == (1, 1)
    files = parquet_files(store, "t")
    again = ds.merge_dataset(source, "t", key_columns=["id"], idempotency_key="k")
    assert again.version == first.version and (again.inserted, again.updated, again.new_files) == (0, 0, ())
    assert parquet_files(store, "t") == files
    changed = ds.merge_dataset(table([3], label="c"), "t", key_columns=["id"], idempotency_key="k")
    assert changed.version == first.version + 1
    assert dict(zip(*ds.read_dataset("t").select(["id", "label"]).to_pydict().values(), strict=True)) == {
        1: "a1",
        2: "b2",
        3: "c3",
    }


def test_a_bad_idempotency_window_is_refused() -> None:
    manifest = DatasetManifest(
        "t",
        [],
        0,
        "0" * 16,
        "zstd",
        "2026-01-01T00:00:00+00:00",
        format_version=1,
        txn="x",
        idempotency=(("k", "c", "x"),),
    )
    text = manifest.to_json()
    assert DatasetManifest.from_json(text).idempotency == (("k", "c", "x"),)
    with pytest.raises(ManifestCorrupted, match="idempotency"):
        DatasetManifest.from_json(text.replace('"content": "c"', '"content": 3'))


class _DieBeforeSuccess(WrappingStore):
    """Raises at the first ``_SUCCESS`` write: the append committed, then its process died."""

    def write_bytes(self, path: str, data: bytes) -> None:
        if path.endswith("/_SUCCESS"):
            raise InjectedCrash(f"died before writing {path}")
        super().write_bytes(path, data)


def test_a_recognised_retry_of_the_append_that_created_the_dataset_writes_its_success(store: Store) -> None:
    """Issue 26, #8: the retry writes the ``_SUCCESS`` the first attempt never wrote (a Spec 042 reader
    needs it), and the earlier attempt's version is known from its token even after others committed."""
    with pytest.raises(InjectedCrash):
        ParquetDatasetStore(_DieBeforeSuccess(store)).append_dataset(table([1, 2]), "t", idempotency_key="k")
    assert not store.exists("t/_SUCCESS")
    ds = ParquetDatasetStore(store)
    raw = DatasetManifest.from_json(store.read_bytes("t/manifest.json"))
    assert raw.version == 1
    again = ds.append_dataset(table([1, 2]), "t", idempotency_key="k")
    assert again.version == 1 and again.txn == raw.txn  # recognised: nothing committed again
    assert store.exists("t/_SUCCESS")
    assert parquet_files(store, "t") == sorted(f"t/{p}" for p in raw.parts)
    ds.append_dataset(table([5]), "t")  # another writer moves the dataset on
    ds.append_dataset(table([6]), "t")
    live = ds.append_dataset(table([1, 2]), "t", idempotency_key="k")
    assert live.version == 3  # the live version is returned ...
    assert live.version_of(raw.txn) == 1  # ... and the earlier attempt's version is found from its token
    assert live.version_of("not-a-token") is None
    assert sorted(ds.read_dataset("t").column("id").to_pylist()) == [1, 2, 5, 6]
