"""``Store.delete_if`` (a delete only on the token ``read_versioned``/``write_if`` use) and the last step of
``delete_dataset`` it makes safe (issue 26, the delete / first-write window).

A first write that began on the delete's tombstone, published its parts after the delete's last listing and
finished its compare-and-swap and its check before the delete's last step used to report success, and then
that last step removed its manifest and its files. Now the delete removes its tombstone only by its token:
the writer's version stays whole (the delete happened first, the write after). Races forced at exact store
calls by wrapping the public stores (memory, local disk, moto S3); no sleeps.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dagster_parquet_dataset import (
    Capability,
    CommitConflict,
    DatasetNotFound,
    LocalStore,
    ParquetDatasetStore,
    Store,
)
from dagster_parquet_dataset.dataset import FileEntry
from dagster_parquet_dataset.errors import CapabilityNotSupported, NotFound
from dagster_parquet_dataset.storage.base import FileInfo
from tests._stores import WrappingStore

KEY = "t"
OLD = pa.table({"day": [1, 1, 2], "v": ["a", "b", "c"]})
NEW = pa.table({"day": [3, 3], "v": ["x", "y"]})


class _WriteAtTheLastListing(WrappingStore):
    """Runs ``write`` once, right after the delete's last listing of the folder returned: the first listing
    of ``t`` that follows a read of the manifest that follows the deletion of a part (the delete has removed
    the files it listed and checked its tombstone is still live; only its last step is left)."""

    def __init__(self, inner: Store, write: Callable[[], object]) -> None:
        super().__init__(inner)
        self.write = write
        self.deleted_part = self.checked = self.fired = False

    def delete(self, path: str, *, missing_ok: bool = False) -> None:
        super().delete(path, missing_ok=missing_ok)
        self.deleted_part = self.deleted_part or path.endswith(".parquet")

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        self.checked = self.checked or self.deleted_part
        return super().read_versioned(path)

    def list_files(self, path: str) -> Iterator[FileInfo]:
        listed = list(super().list_files(path))
        if path == KEY and self.checked and not self.fired:
            self.fired = True
            self.write()
        return iter(listed)


def _parquet(store: Store) -> list[str]:
    return sorted(f.path for f in store.list_files(KEY) if f.path.endswith(".parquet"))


def test_a_first_write_that_committed_before_the_deletes_last_step_stays_whole(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, KEY)
    written: list[object] = []

    def first_write() -> None:  # begins on the delete's tombstone: the key reads as absent
        assert not ParquetDatasetStore(store).dataset_exists(KEY)
        written.append(ParquetDatasetStore(store).write_dataset(NEW, KEY))  # swap and check: success

    wrapped = _WriteAtTheLastListing(store, first_write)
    ParquetDatasetStore(wrapped).delete_dataset(KEY)
    assert wrapped.fired and written, "the write must have run inside the delete's last window"
    # The write reported success, so its version is live with every part it lists.
    assert ds.read_dataset(KEY).to_pydict() == NEW.to_pydict()
    assert ds.dataset_exists(KEY)
    parts = {f"{KEY}/{e.path}" for e in ds.read_manifest(KEY).file_entries()}
    assert parts and parts <= set(_parquet(store))
    assert _parquet(store) == sorted(parts)  # the old dataset's parts went with the delete
    ds.delete_dataset(KEY)  # and a later delete removes it whole
    with pytest.raises(DatasetNotFound):
        ds.read_dataset(KEY)
    assert list(store.list_files(KEY)) == []


def test_without_conditional_deletes_a_delete_still_works(store: Store) -> None:
    """A ``Store`` without :attr:`Capability.CONDITIONAL_DELETE` gets the documented fallback (read the token,
    then delete): deletes succeed, and the forced interleaving above still leaves the writer's version."""
    plain = WrappingStore(store, capabilities=store.capabilities - {Capability.CONDITIONAL_DELETE})
    ds = ParquetDatasetStore(plain)
    ds.write_dataset(OLD, KEY, partition_by=["day"])
    ds.delete_dataset(KEY)
    with pytest.raises(DatasetNotFound):
        ds.read_dataset(KEY)
    assert list(store.list_files(KEY)) == []
    assert plain.calls["delete_if"] == 0
    ds.write_dataset(OLD, KEY)
    wrapped = _WriteAtTheLastListing(plain, lambda: ParquetDatasetStore(store).write_dataset(NEW, KEY))
    ParquetDatasetStore(wrapped).delete_dataset(KEY)
    assert wrapped.fired
    assert ds.read_dataset(KEY).to_pydict() == NEW.to_pydict()


# ------------------------------------------------------------------------------------ the protocol itself


def test_delete_if_on_the_token_deletes(store: Store) -> None:
    token = store.write_if("a/obj", b"one", expected=None)
    assert store.read_versioned("a/obj") == (b"one", token)
    store.delete_if("a/obj", expected=token)
    assert not store.exists("a/obj")
    assert store.write_if("a/obj", b"two", expected=None)  # the key is free again


def test_delete_if_on_another_token_raises_and_keeps_the_object(store: Store) -> None:
    old = store.write_if("a/obj", b"one", expected=None)
    new = store.write_if("a/obj", b"two", expected=old)
    with pytest.raises(CommitConflict):
        store.delete_if("a/obj", expected=old)
    assert store.read_versioned("a/obj") == (b"two", new)
    store.delete_if("a/obj", expected=new)
    assert not store.exists("a/obj")


def test_delete_if_of_a_missing_object_raises_not_found(store: Store) -> None:
    token = store.write_if("a/obj", b"one", expected=None)
    store.delete_if("a/obj", expected=token)
    with pytest.raises(NotFound):
        store.delete_if("a/obj", expected=token)
    with pytest.raises(NotFound):
        store.delete_if("never/written", expected=token)
    assert list(store.list_files("never")) == []  # nothing was created for it


def test_every_backend_offers_conditional_deletes(store: Store) -> None:
    assert store.supports(Capability.CONDITIONAL_DELETE)


def test_a_store_without_the_capability_refuses_delete_if(store: Store) -> None:
    class Plain(Store):  # a custom store that predates delete_if: only the abstract methods
        exists = store.exists
        size = store.size
        read_bytes = store.read_bytes
        open_input = store.open_input
        open_output = store.open_output
        delete = store.delete
        delete_folder = store.delete_folder
        list_files = store.list_files
        read_versioned = store.read_versioned
        write_if = store.write_if

    plain = Plain()
    assert not plain.supports(Capability.CONDITIONAL_DELETE)
    with pytest.raises(CapabilityNotSupported):
        plain.delete_if("a/obj", expected="x")
    assert plain.prune_folders("a") is True  # no folders of its own: nothing to do


class _RacingWriteInsideDelete(LocalStore):
    """A local store whose ``delete_if`` starts a ``write_if`` expecting the same token in another thread right
    after it read the file's token and before it unlinks the file, and gives it a second to get through."""

    racer: threading.Thread | None = None
    blocked = False

    def _token_at(self, full: str) -> str | None:
        token = super()._token_at(full)
        if self.racer is None and full.endswith("obj") and token is not None:
            self.racer = threading.Thread(target=self._race, args=(token,))
            self.racer.start()
            self.racer.join(timeout=1.0)
            self.blocked = self.racer.is_alive()  # it waits for the lock this delete holds
        return token

    outcome: list[object] = []

    def _race(self, token: str) -> None:
        try:
            self.outcome.append(LocalStore(self.root).write_if("a/obj", b"racer", expected=token))
        except CommitConflict as exc:
            self.outcome.append(exc)


@pytest.mark.timeout(60)
def test_local_delete_if_and_a_racing_write_if_are_serialised(tmp_path: os.PathLike[str]) -> None:
    store = _RacingWriteInsideDelete(os.path.join(tmp_path, "store"))
    store.outcome = []
    token = store.write_if("a/obj", b"one", expected=None)
    store.delete_if("a/obj", expected=token)  # checks, lets the racer try, unlinks
    assert store.racer is not None
    store.racer.join()
    assert store.blocked, "the racing write_if must wait for the delete's lock"
    # Exactly one of the two succeeded: the delete. The racer found no file and changed nothing.
    assert len(store.outcome) == 1 and isinstance(store.outcome[0], CommitConflict)
    assert not store.exists("a/obj")
    assert [f for f in os.listdir(os.path.join(store.root, "a")) if not f.startswith(".")] == []


def test_local_delete_if_loses_to_a_write_if_that_landed_first(tmp_path: os.PathLike[str]) -> None:
    store = LocalStore(os.path.join(tmp_path, "store"))
    token = store.write_if("a/obj", b"one", expected=None)
    other = LocalStore(store.root)  # another process's view of the same folder
    landed = other.write_if("a/obj", b"two", expected=token)
    with pytest.raises(CommitConflict):
        store.delete_if("a/obj", expected=token)
    assert store.read_versioned("a/obj") == (b"two", landed)


def test_local_prune_folders_removes_empty_folders_only(tmp_path: os.PathLike[str]) -> None:
    store = LocalStore(os.path.join(tmp_path, "store"))
    store.write_bytes("t/day=1/keep.parquet", b"x")
    os.makedirs(os.path.join(store.root, "t", "day=2", "deep"))
    assert store.prune_folders("t") is False  # a file is still in it
    assert store.read_bytes("t/day=1/keep.parquet") == b"x"
    assert not os.path.exists(os.path.join(store.root, "t", "day=2"))
    store.delete("t/day=1/keep.parquet")
    assert store.prune_folders("t") is True
    assert not os.path.exists(os.path.join(store.root, "t"))
    assert store.prune_folders("t") is True  # nothing there


class _WriterOnTheTombstone(WrappingStore):
    """Right after the delete's tombstone landed, a writer begins on it and publishes its part; right after the
    delete's next listing of the folder returned (which holds that part), the writer commits and checks its
    part, before the delete removes anything it listed."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.writer = ParquetDatasetStore(inner)
        self.pending: object = None
        self.entry: FileEntry | None = None
        self.committed: object = None

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        token = super().write_if(path, data, expected=expected)
        if self.pending is None:  # the tombstone
            pending = self.writer.begin_write(KEY)
            self.pending, self.entry = pending, _publish(self.inner, pending.part_name(0))
        return token

    def list_files(self, path: str) -> Iterator[FileInfo]:
        listed = list(super().list_files(path))
        if path == KEY and self.pending is not None and self.committed is None:
            assert self.entry is not None and self.entry.path in {f.path[len(KEY) + 1 :] for f in listed}
            self.committed = self.writer.commit_write(self.pending, [self.entry], NEW.schema)  # type: ignore[arg-type]
        return iter(listed)


def _publish(store: Store, name: str) -> FileEntry:
    with store.open_output(f"{KEY}/{name}") as sink:
        pq.write_table(NEW, sink)
    return FileEntry(path=name, row_count=NEW.num_rows, size_bytes=store.size(f"{KEY}/{name}"))


def test_a_writer_that_committed_on_the_tombstone_keeps_a_part_the_delete_had_listed(store: Store) -> None:
    """The delete listed the writer's part after its tombstone; the writer committed and checked it before the
    delete got to it: the delete removes nothing of that version (it renews its tombstone before removing
    files it had not listed before the tombstone, and that swap loses to the writer's)."""
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, KEY)
    wrapped = _WriterOnTheTombstone(store)
    ParquetDatasetStore(wrapped).delete_dataset(KEY)
    assert wrapped.committed is not None and wrapped.entry is not None  # the writer reported success
    assert ds.read_dataset(KEY).to_pydict() == NEW.to_pydict()
    assert _parquet(store) == [f"{KEY}/{wrapped.entry.path}"]
