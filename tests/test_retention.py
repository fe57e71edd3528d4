"""Retention (issue 26): replaced versions stay readable for ``retain_for`` (7 days by default), later
commits delete expired versions' files a few versions at a time, ``retain_versions=1`` deletes at once."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta

import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore
from dagster_parquet_dataset.storage.base import Store
from dagster_parquet_dataset.storage.memory import MemoryStore
from tests._stores import InjectedCrash, WrappingStore


def _table(n: int) -> pa.Table:
    return pa.table({"x": pa.array([n] * 3, pa.int64())})


def _copies(store: Store, key: str = "t") -> list[str]:
    return sorted(f.path.rsplit("/", 1)[1] for f in store.list_files(f"{key}/_versions"))


def _parts_of(ds: ParquetDatasetStore, version: int) -> set[str]:
    return {f"t/{p}" for p in ds.read_manifest("t", version=version).parts}


def test_by_default_a_replaced_version_stays_readable(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    assert ds.retain_versions is None and ds.retain_for == timedelta(days=7)
    ds.write_dataset(_table(1), "t")
    first = _parts_of(ds, 1)
    ds.write_dataset(_table(2), "t", overwrite=True)
    assert all(store.exists(p) for p in first)
    assert ds.read_dataset("t", version=1).equals(_table(1))
    instant = datetime.fromisoformat(ds.read_manifest("t", version=1).created_at_utc)
    assert ds.read_dataset("t", as_of=instant).equals(_table(1))
    assert ParquetDatasetStore(store).vacuum("t", grace_period=0).deleted == ()  # nothing is 7 days old


def test_retain_versions_1_deletes_at_once_whatever_retain_for_says(store: Store) -> None:
    ds = ParquetDatasetStore(store, retain_versions=1, retain_for=timedelta(days=30))
    ds.write_dataset(_table(1), "t")
    first = _parts_of(ds, 1)
    ds.write_dataset(_table(2), "t", overwrite=True)
    assert not any(store.exists(p) for p in first) and _copies(store) == []


def test_an_expired_version_goes_with_a_later_commit(store: Store) -> None:
    ds = ParquetDatasetStore(store, retain_for=0)
    ds.write_dataset(_table(1), "t")
    first = _parts_of(ds, 1)
    ds.write_dataset(_table(2), "t", overwrite=True)
    # Replaced just now: the commit that replaced it keeps it (a reader that read it a moment ago finds it).
    assert all(store.exists(p) for p in first) and ds.read_dataset("t", version=1).equals(_table(1))
    second = _parts_of(ds, 2)
    ds.write_dataset(_table(3), "t", overwrite=True)
    assert not any(store.exists(p) for p in first) and all(store.exists(p) for p in second)
    assert [c[-7:] for c in _copies(store)] == ["02.json"]
    assert ds.read_dataset("t").equals(_table(3)) and ds.read_dataset("t", version=2).equals(_table(2))


def test_each_commit_deletes_a_bounded_number_of_expired_versions(store: Store) -> None:
    keeping = ParquetDatasetStore(store, retain_for=None)
    keeping.write_dataset(_table(0), "t")
    for n in range(1, 7):
        keeping.write_dataset(_table(n), "t", overwrite=True)
    assert len(_copies(store)) == 6  # versions 1..6 replaced, 7 live
    old = {v: _parts_of(keeping, v) for v in range(1, 7)}
    expiring = ParquetDatasetStore(store, retain_for=0)
    expiring.append_dataset(_table(100), "t")  # version 8: versions 1 and 2 expire, 3..6 wait
    assert [int(c[:-5]) for c in _copies(store)] == [3, 4, 5, 6, 7]
    assert not any(store.exists(p) for v in (1, 2) for p in old[v])
    assert all(store.exists(p) for v in (3, 4, 5, 6) for p in old[v])
    expiring.append_dataset(_table(101), "t")
    assert [int(c[:-5]) for c in _copies(store)] == [5, 6, 7, 8]
    assert sorted(expiring.read_dataset("t").column("x").to_pylist()) == [6] * 3 + [100] * 3 + [101] * 3


def test_vacuum_uses_the_store_retention_by_default(store: Store) -> None:
    keeping = ParquetDatasetStore(store, retain_for=None)
    keeping.write_dataset(_table(1), "t")
    keeping.write_dataset(_table(2), "t", overwrite=True)
    keeping.write_dataset(_table(3), "t", overwrite=True)
    assert ParquetDatasetStore(store).vacuum("t", grace_period=0, dry_run=True).retained_versions == (3, 2, 1)
    result = ParquetDatasetStore(store, retain_for=timedelta(0)).vacuum("t", grace_period=0)
    assert result.retained_versions == (3,)
    assert ParquetDatasetStore(store).read_dataset("t").equals(_table(3)) and _copies(store) == []


@pytest.mark.parametrize(("value", "error"), [(-1, ValueError), (float("nan"), ValueError), ("7d", TypeError)])
def test_a_bad_retain_for_is_refused(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="retain_for"):
        ParquetDatasetStore(MemoryStore(), retain_for=value)  # type: ignore[arg-type]


def test_the_io_manager_threads_retain_for_hours_through() -> None:
    from dagster_parquet_dataset.dagster_io import InMemoryStoreResource, RemoteStoreIOManager

    default = RemoteStoreIOManager(store=InMemoryStoreResource()).datasets
    assert default.retain_versions is None and default.retain_for == timedelta(days=7)
    hourly = RemoteStoreIOManager(store=InMemoryStoreResource(), retain_for_hours=1.5, retain_versions=3).datasets
    assert hourly.retain_for == timedelta(hours=1.5) and hourly.retain_versions == 3
    assert RemoteStoreIOManager(store=InMemoryStoreResource(), retain_for_hours=None).datasets.retain_for is None


class _RacedOnce(WrappingStore):
    """The first swap of ``t/manifest.json`` through it is preceded by another writer's append through this very
    store object (same process), so two writers build on one version."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.raced = False

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        if path == "t/manifest.json" and not self.raced:
            self.raced = True
            ParquetDatasetStore(self).append_dataset(_table(7), "t")
        return super().write_if(path, data, expected=expected)


def test_writers_racing_on_one_version_write_its_copy_once(store: Store) -> None:
    """The default retention's cost under contention: a version's ``_versions/`` copy is written once per
    process, not once per commit attempt of every writer that built on it."""
    ParquetDatasetStore(store).write_dataset(_table(1), "t")
    racing = _RacedOnce(store)
    ParquetDatasetStore(racing).append_dataset(_table(2), "t")  # loses once to the injected append, then commits
    copies = Counter(path for op, path in racing.log if op == "write_bytes" and "/_versions/" in path)
    assert copies == {"t/_versions/00000000000000000001.json": 1, "t/_versions/00000000000000000002.json": 1}
    ds = ParquetDatasetStore(store)
    assert sorted(ds.read_dataset("t").column("x").to_pylist()) == [1, 1, 1, 2, 2, 2, 7, 7, 7]
    assert ds.read_dataset("t", version=1).equals(_table(1))


def test_vacuum_keeps_the_live_versions_copy_a_writer_wrote_ahead(store: Store) -> None:
    """A writer writes the live version's copy before its swap, once per process; a vacuum between that and the
    commit that replaces the version must not delete it, or the replaced version could not be read."""
    ParquetDatasetStore(store).write_dataset(_table(1), "t")

    class CrashAtSwap(WrappingStore):
        def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
            if path == "t/manifest.json" and not getattr(self, "crashed", False):
                self.crashed = True
                raise InjectedCrash("the first swap never happens")
            return super().write_if(path, data, expected=expected)

    wrapped = CrashAtSwap(store)
    with pytest.raises(InjectedCrash):
        ParquetDatasetStore(wrapped).append_dataset(_table(2), "t")  # wrote version 1's copy, then died
    assert "00000000000000000001.json" in _copies(store)
    ParquetDatasetStore(store).vacuum("t", grace_period=0)
    ParquetDatasetStore(wrapped).append_dataset(_table(3), "t")  # this process already wrote version 1's copy
    assert ParquetDatasetStore(store).read_dataset("t", version=1).equals(_table(1))


def test_the_retained_copy_is_the_replaced_manifest_byte_for_byte(store: Store) -> None:
    # Issue 28: the copy is the bytes the commit read, not a re-rendering (an older renderer's whitespace stays).
    ds = ParquetDatasetStore(store)
    ds.write_dataset(_table(1), "t")
    rendered = store.read_bytes("t/manifest.json")
    older = json.dumps(json.loads(rendered), indent=4, sort_keys=False).encode("utf-8") + b"\n"
    assert older != rendered
    store.write_bytes("t/manifest.json", older)  # as an older renderer would have written it
    ds.append_dataset(_table(2), "t")
    assert store.read_bytes("t/_versions/00000000000000000001.json") == older
    assert ds.read_dataset("t", version=1).equals(_table(1))
    instant = datetime.fromisoformat(ds.read_manifest("t", version=1).created_at_utc)
    assert ds.read_dataset("t", as_of=instant).equals(_table(1))
    replaced = store.read_bytes("t/manifest.json")
    ds.write_dataset(_table(3), "t", overwrite=True)
    assert store.read_bytes("t/_versions/00000000000000000002.json") == replaced
