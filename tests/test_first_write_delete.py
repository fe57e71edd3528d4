"""A first write racing a whole ``delete_dataset`` (issue 18 #13), forced at exact points by wrapping the store.

A first write (no manifest when it began) creates its parts, then swaps in its manifest with
``expected=None``. A ``delete_dataset`` that runs from start to end before that swap removes the
parts and leaves the key empty, so the swap lands: the writer then finds its parts gone, takes its
manifest back (a tombstone, by compare-and-swap) and raises ``CommitConflict``. No ordering leaves a
visible manifest listing missing parts, and no ordering deletes the data of a commit that stands.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

from dagster_parquet_dataset import CommitConflict, DatasetNotFound, ParquetDatasetStore, Store
from tests._stores import InjectedCrash, WrappingStore

KEY = "t"
NEW = pa.table({"day": [3, 3], "v": ["x", "y"]})
MORE = pa.table({"day": [4], "v": ["z"]})


class _AroundSwap(WrappingStore):
    """Runs ``before`` right before, and ``after`` right after, the first swap of ``t/manifest.json``."""

    def __init__(self, inner: Store, before: Callable[[], object] | None, after: Callable[[], object] | None) -> None:
        super().__init__(inner)
        self.before, self.after = before, after
        self.swaps = 0

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        if path != f"{KEY}/manifest.json" or self.swaps:
            return super().write_if(path, data, expected=expected)
        self.swaps += 1
        if self.before is not None:
            self.before()
        token = super().write_if(path, data, expected=expected)
        if self.after is not None:
            self.after()
        return token


class _CrashAfterTombstone(WrappingStore):
    """A delete that dies right after its tombstone landed (its files are still there)."""

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        token = super().write_if(path, data, expected=expected)
        raise InjectedCrash(f"delete dies after its tombstone ({path}, {token})")


def _delete(store: Store) -> Callable[[], None]:
    return lambda: ParquetDatasetStore(store).delete_dataset(KEY)


def _parquet(store: Store) -> list[str]:
    return sorted(f.path for f in store.list_files(KEY) if f.path.endswith(".parquet"))


def _assert_absent_then_writable(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    with pytest.raises(DatasetNotFound):
        datasets.read_dataset(KEY)
    assert not datasets.dataset_exists(KEY)
    datasets.write_dataset(MORE, KEY, overwrite=True)  # the key is usable again
    assert datasets.read_dataset(KEY).to_pydict() == MORE.to_pydict()


def test_a_whole_delete_before_the_swap_takes_the_manifest_back(store: Store) -> None:
    racing = _AroundSwap(store, before=_delete(store), after=None)
    with pytest.raises(CommitConflict, match="deleted while this write ran.*taken back"):
        ParquetDatasetStore(racing).write_dataset(NEW, KEY)
    assert racing.swaps == 1, "the delete must have run inside the window"
    assert _parquet(store) == [], "no part of the taken-back write stays"
    _assert_absent_then_writable(store)


def test_a_delete_after_the_swap_leaves_a_commit_that_stood(store: Store) -> None:
    """The commit landed whole, then a delete removed it: the write reports its commit, nothing is taken back."""
    racing = _AroundSwap(store, before=None, after=_delete(store))
    manifest = ParquetDatasetStore(racing).write_dataset(NEW, KEY)
    assert manifest.row_count == 2 and racing.swaps == 1
    assert _parquet(store) == []
    _assert_absent_then_writable(store)


def test_a_delete_whose_tombstone_lands_before_the_swap(store: Store) -> None:
    def dying_delete() -> None:
        with pytest.raises(InjectedCrash):
            ParquetDatasetStore(_CrashAfterTombstone(store)).delete_dataset(KEY)

    racing = _AroundSwap(store, before=dying_delete, after=None)
    with pytest.raises(CommitConflict, match="deleted while this write ran"):
        ParquetDatasetStore(racing).write_dataset(NEW, KEY)
    assert _parquet(store) == []
    _assert_absent_then_writable(store)


def test_a_commit_built_on_the_broken_manifest_is_taken_back_too(store: Store) -> None:
    """A whole delete before the swap, then another writer appends on top of the swapped-in manifest before
    the first writer checks its parts: the version listing the vanished parts is replaced by a tombstone."""
    other = ParquetDatasetStore(store)
    racing = _AroundSwap(store, before=_delete(store), after=lambda: other.append_dataset(MORE, KEY))
    with pytest.raises(CommitConflict, match="taken back"):
        ParquetDatasetStore(racing).write_dataset(NEW, KEY)
    with pytest.raises(DatasetNotFound):
        ParquetDatasetStore(store).read_dataset(KEY)
    _assert_absent_then_writable(store)
