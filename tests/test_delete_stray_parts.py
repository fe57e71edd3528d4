"""Issue 26 #11 (last part): a writer that publishes a part while ``delete_dataset`` runs never leaves a
half-deleted folder. After the delete, the key reads as absent (``DatasetNotFound``, never
``DatasetIncomplete``); the writer's commit either lands on a new dataset (it began on the delete's
tombstone and its parts are all there) or fails with ``CommitConflict``, and its part is never left as a
half dataset. Races forced at exact store calls by wrapping the store (threads ordered by events, no sleeps).
"""

from __future__ import annotations

import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dagster_parquet_dataset import CommitConflict, DatasetNotFound, ParquetDatasetStore, Store
from dagster_parquet_dataset.dataset import FileEntry
from dagster_parquet_dataset.dataset.commit.transaction import PendingWrite
from tests._stores import WrappingStore

KEY = "t"
OLD = pa.table({"day": [1, 1, 2], "v": ["a", "b", "c"]})
NEW = pa.table({"day": [3, 3], "v": ["x", "y"]})
WAIT = 30.0


def _absent(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    with pytest.raises(DatasetNotFound):
        ds.read_dataset(KEY)
    assert not ds.dataset_exists(KEY)
    assert ds.list_datasets() == []


def _publish(store: Store, pending: PendingWrite) -> FileEntry:
    """The writer's part, published (the writer's ``commit_write`` comes later)."""
    name = pending.part_name(0)
    with store.open_output(f"{KEY}/{name}") as sink:
        pq.write_table(NEW, sink)
    return FileEntry(path=name, row_count=NEW.num_rows, size_bytes=store.size(f"{KEY}/{name}"))


def _parquet(store: Store) -> list[str]:
    return sorted(f.path for f in store.list_files(KEY) if f.path.endswith(".parquet"))


class _PublishAt(WrappingStore):
    """Runs ``publish`` once, at the delete's last listing of the folder (after it deleted the files it listed),
    or right after its ``delete_folder``."""

    def __init__(self, inner: Store, at: str, publish: object) -> None:
        super().__init__(inner)
        self.at, self.publish = at, publish
        self.deleted_part = self.fired = False

    def _before(self, op: str, path: str) -> None:
        super()._before(op, path)
        if op == "delete" and path.endswith(".parquet"):
            self.deleted_part = True
        if self.at == "last listing" and op == "list_files" and path == KEY and self.deleted_part:
            self._fire()

    def delete_folder(self, path: str) -> None:
        super().delete_folder(path)
        if self.at == "folder removed":
            self._fire()

    def prune_folders(self, path: str) -> bool:
        gone = super().prune_folders(path)  # the folder's removal, once the tombstone went by its token
        if self.at == "folder removed":
            self._fire()
        return gone

    def _fire(self) -> None:
        if not self.fired:
            self.fired = True
            self.publish()  # type: ignore[operator]


@pytest.mark.parametrize("at", ["last listing", "folder removed"])
def test_a_part_published_while_the_delete_runs_leaves_the_key_absent(store: Store, at: str) -> None:
    """The writer began before the delete: after the delete the key reads as absent, and the writer's commit
    loses to the tombstone, raises ``CommitConflict`` and removes its part."""
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, KEY)
    pending = ds.begin_write(KEY, overwrite=True)
    entries: list[FileEntry] = []
    wrapped = _PublishAt(store, at, lambda: entries.append(_publish(store, pending)))
    ParquetDatasetStore(wrapped).delete_dataset(KEY)
    assert wrapped.fired and _parquet(store) == [f"{KEY}/{pending.part_name(0)}"]  # the writer's part is there
    _absent(store)  # not DatasetIncomplete
    with pytest.raises(CommitConflict, match="deleted"):
        ds.commit_write(pending, entries, NEW.schema)
    assert _parquet(store) == []  # the writer removed its own part
    _absent(store)
    ds.write_dataset(NEW, KEY)  # a new write of the key replaces the tombstone
    assert ds.read_dataset(KEY).column("v").to_pylist() == ["x", "y"]
    ds.delete_dataset(KEY)
    assert list(store.list_files(KEY)) == []
    _absent(store)


def test_a_part_published_while_the_delete_runs_by_a_writer_that_died(store: Store) -> None:
    """The writer never commits: the key still reads as absent, and a later write or delete succeeds."""
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, KEY)
    pending = ds.begin_write(KEY, overwrite=True)
    wrapped = _PublishAt(store, "last listing", lambda: _publish(store, pending))
    ParquetDatasetStore(wrapped).delete_dataset(KEY)
    _absent(store)
    ds.delete_dataset(KEY)  # the delete removes the stray part and its marker
    assert list(store.list_files(KEY)) == []


class _Delete(WrappingStore):
    """The delete: right after its tombstone landed it lets the writer begin (and waits until the writer sent
    its swap); right before it checks whether a writer committed on top of its tombstone (after it deleted
    the files it listed), it lets the writer's swap go and waits for it."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.tombstone_landed = threading.Event()
        self.writer_swapping = threading.Event()
        self.checking = threading.Event()
        self.writer_swapped = threading.Event()
        self.deleted_part = False

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        token = super().write_if(path, data, expected=expected)
        if not self.tombstone_landed.is_set():
            self.tombstone_landed.set()
            assert self.writer_swapping.wait(WAIT)
        return token

    def delete(self, path: str, *, missing_ok: bool = False) -> None:
        super().delete(path, missing_ok=missing_ok)
        self.deleted_part = self.deleted_part or path.endswith(".parquet")

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        if self.deleted_part and not self.checking.is_set():
            self.checking.set()
            assert self.writer_swapped.wait(WAIT)
        return super().read_versioned(path)


class _Writer(WrappingStore):
    """The writer's swap waits until the delete took its part and is about to check its tombstone."""

    def __init__(self, inner: Store, delete: _Delete) -> None:
        super().__init__(inner)
        self.delete_ = delete

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        if path != f"{KEY}/manifest.json" or self.delete_.writer_swapped.is_set():
            return super().write_if(path, data, expected=expected)
        self.delete_.writer_swapping.set()
        assert self.delete_.checking.wait(WAIT)
        try:
            return super().write_if(path, data, expected=expected)
        finally:
            self.delete_.writer_swapped.set()


@pytest.mark.timeout(120)
def test_a_writer_that_began_on_the_tombstone_and_lost_its_part_commits_nothing(store: Store) -> None:
    """The writer began on the delete's tombstone; the delete took its part after the writer checked it, and
    the writer's swap landed before the delete looked again: the writer takes its manifest back and raises
    ``CommitConflict`` (never a committed dataset listing a deleted part)."""
    ParquetDatasetStore(store).write_dataset(OLD, KEY)
    delete = _Delete(store)
    errors: list[BaseException] = []

    def run_delete() -> None:
        try:
            ParquetDatasetStore(delete).delete_dataset(KEY)
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=run_delete)
    thread.start()
    try:
        assert delete.tombstone_landed.wait(WAIT)
        writer = ParquetDatasetStore(_Writer(store, delete))
        pending = writer.begin_write(KEY)  # on the tombstone
        entry = _publish(store, pending)
        with pytest.raises(CommitConflict, match="deleted"):
            writer.commit_write(pending, [entry], NEW.schema)
    finally:
        delete.writer_swapping.set()
        delete.writer_swapped.set()
        thread.join(WAIT)
    assert not thread.is_alive() and not errors, errors
    _absent(store)
    assert _parquet(store) == []
