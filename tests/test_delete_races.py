"""``delete_dataset`` is a committed operation (issue 18 #4, #11, #13): races forced at exact points.

- A delete commits a tombstone by compare-and-swap first, so on a local disk it waits for a commit
  whose check has passed and whose manifest is being published (#4), and a writer whose commit comes
  after it fails cleanly or commits a complete dataset, never a manifest listing deleted parts.
- A folder holding a symlinked folder, or a part published while the folder is removed, neither
  raises a raw OS error nor leaves a half-deleted dataset: readers get ``DatasetNotFound`` (#11).
- A writer whose part is being published when the dataset is deleted gets ``CommitConflict`` (#11).
- A delete that dies after its tombstone leaves the dataset absent, and the next write succeeds.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dagster_parquet_dataset import (
    CommitConflict,
    DatasetIncomplete,
    DatasetNotFound,
    LocalStore,
    ParquetDatasetStore,
    Store,
)
from dagster_parquet_dataset.dataset import FileEntry
from tests._stores import InjectedCrash, WrappingStore

OLD = pa.table({"day": [1, 1, 2], "v": ["a", "b", "c"]})
NEW = pa.table({"day": [3, 3], "v": ["x", "y"]})


def _absent(store: Store, key: str) -> None:
    with pytest.raises(DatasetNotFound):
        ParquetDatasetStore(store).read_dataset(key)
    assert not ParquetDatasetStore(store).dataset_exists(key)


class _DeleteDuringManifestPublish(LocalStore):
    """A local store that starts ``delete_dataset`` in another thread at the moment a commit holds the
    manifest's lock and publishes the new manifest (inside ``write_if``, after its check)."""

    armed = False
    delete_thread: threading.Thread | None = None
    blocked = False

    @contextmanager
    def open_output(self, path: str) -> Iterator[pa.NativeFile]:
        if self.armed and path.endswith("/manifest.json"):
            self.armed = False
            plain = LocalStore(self.root)
            self.delete_thread = threading.Thread(target=ParquetDatasetStore(plain).delete_dataset, args=("t",))
            self.delete_thread.start()
            self.delete_thread.join(timeout=1.0)
            self.blocked = self.delete_thread.is_alive()  # it waits for the lock this commit holds
        with super().open_output(path) as sink:
            yield sink


def test_local_delete_waits_for_a_commit_being_published(tmp_path: os.PathLike[str]) -> None:
    store = _DeleteDuringManifestPublish(os.path.join(tmp_path, "store"))
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, "t")
    store.armed = True
    ds.write_dataset(NEW, "t", overwrite=True)
    assert store.delete_thread is not None
    store.delete_thread.join()
    assert store.blocked
    # The overwrite committed first; the delete, ordered after it, removed it whole.
    _absent(LocalStore(store.root), "t")
    assert list(LocalStore(store.root).list_files("t")) == []


class _DeleteWhilePartIsWritten(WrappingStore):
    """Runs ``delete_dataset`` (on the inner store) once a part of the dataset has been written but
    before it is published."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.armed = False

    def _before(self, op: str, path: str) -> None:
        super()._before(op, path)
        if self.armed and op == "open_output:close" and path.endswith(".parquet"):
            self.armed = False
            ParquetDatasetStore(self.inner).delete_dataset("t")


def test_writer_whose_part_is_published_while_the_dataset_is_deleted(store: Store) -> None:
    ParquetDatasetStore(store).write_dataset(OLD, "t")
    wrapped = _DeleteWhilePartIsWritten(store)
    wrapped.armed = True
    try:
        ParquetDatasetStore(wrapped).write_dataset(NEW, "t", overwrite=True)
    except CommitConflict as exc:
        assert "deleted" in str(exc)
        assert ".tmp" not in str(exc)
        _absent(store, "t")
        assert [f.path for f in store.list_files("") if f.path.startswith("t/")] == []
    else:
        # The part was published after the delete had listed the folder: the write commits a complete dataset.
        assert not isinstance(store, LocalStore), "on a local disk the delete takes the part being written"
        assert ParquetDatasetStore(store).read_dataset("t").column("v").to_pylist() == ["x", "y"]


def test_delete_of_a_folder_holding_a_symlinked_folder(tmp_path: os.PathLike[str]) -> None:
    store = LocalStore(os.path.join(tmp_path, "store"))
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, "t", partition_by=["day"])
    outside = os.path.join(tmp_path, "outside")
    os.makedirs(outside)
    with open(os.path.join(outside, "keep.txt"), "w") as f:
        f.write("not the dataset's")
    os.symlink(outside, os.path.join(store.root, "t", "linked"))
    ds.delete_dataset("t")
    _absent(store, "t")
    assert not os.path.exists(os.path.join(store.root, "t"))
    assert os.path.exists(os.path.join(outside, "keep.txt"))


def test_part_published_while_the_folder_is_removed(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalStore(os.path.join(tmp_path, "store"))
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, "t", partition_by=["day"])
    real_rmdir = os.rmdir
    published: list[str] = []

    def rmdir(path: str, *args: object, **kwargs: object) -> None:
        if not published and os.path.basename(path).startswith("day="):
            late = os.path.join(path, "part-late.parquet")  # a writer publishes into the folder right now
            with open(late, "wb") as f:
                f.write(b"PAR1")
            published.append(late)
        real_rmdir(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rmdir", rmdir)
    ds.delete_dataset("t")  # no raw ENOTEMPTY
    monkeypatch.undo()
    assert published
    _absent(store, "t")
    assert list(store.list_files("t")) == []


def test_enotempty_is_what_the_forced_race_produces(tmp_path: os.PathLike[str]) -> None:
    # Guard for the test above: a file in a folder makes rmdir fail with ENOTEMPTY on this platform.
    folder = os.path.join(tmp_path, "d")
    os.makedirs(folder)
    open(os.path.join(folder, "f"), "wb").close()
    with pytest.raises(OSError) as info:
        os.rmdir(folder)
    assert info.value.errno in (errno.ENOTEMPTY, errno.EEXIST)


class _CrashAfterTombstone(WrappingStore):
    def _before(self, op: str, path: str) -> None:
        super()._before(op, path)
        if op == "delete" and path.endswith(".parquet"):
            raise InjectedCrash(f"crash at {op} {path}")


def test_delete_that_dies_after_its_tombstone(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, "t")
    with pytest.raises(InjectedCrash):
        ParquetDatasetStore(_CrashAfterTombstone(store)).delete_dataset("t")
    _absent(store, "t")
    assert ds.list_datasets() == []
    ds.write_dataset(NEW, "t")  # a create replaces the dead delete's tombstone
    assert ds.read_dataset("t").column("v").to_pylist() == ["x", "y"]
    ds.delete_dataset("t")
    _absent(store, "t")


def test_external_append_whose_parts_a_delete_took_commits_nothing(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, "t")
    pending = ds.begin_append("t", OLD.schema)
    name = f"part-00000-{pending.txn}.parquet"
    with store.open_output(f"t/{name}") as sink:
        pq.write_table(OLD, sink)
    entry = FileEntry(path=name, row_count=OLD.num_rows, size_bytes=store.size(f"t/{name}"))
    ds.delete_dataset("t")
    ds.write_dataset(NEW, "t")  # created again meanwhile
    with pytest.raises(DatasetIncomplete, match=name):
        ds.commit_append(pending, [entry])
    assert ds.read_dataset("t").column("v").to_pylist() == ["x", "y"]


# -------------------------------------------------- readers see a delete from its first step on (issue 26, #9)

_MUTATING = ("delete", "write_if", "write_bytes", "delete_folder")


class _AfterFirstDeleteStep(WrappingStore):
    """Runs ``probe`` once, right after the first call of a ``delete_dataset`` that changes the store."""

    def __init__(self, inner: Store, probe: object) -> None:
        super().__init__(inner)
        self.probe = probe
        self.fired_after: tuple[str, str] | None = None

    def _after(self, op: str, path: str) -> None:
        if self.fired_after is None:
            self.fired_after = (op, path)
            self.probe()  # type: ignore[operator]

    def delete(self, path: str, *, missing_ok: bool = False) -> None:
        super().delete(path, missing_ok=missing_ok)
        self._after("delete", path)

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        token = super().write_if(path, data, expected=expected)
        self._after("write_if", path)
        return token


def test_a_read_after_the_first_step_of_a_delete_finds_nothing(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, "t")
    seen: list[object] = []

    def probe() -> None:
        try:
            seen.append(ParquetDatasetStore(store).read_dataset("t").num_rows)
        except DatasetNotFound as exc:
            seen.append(exc)
        seen.append(ParquetDatasetStore(store).dataset_exists("t"))

    wrapped = _AfterFirstDeleteStep(store, probe)
    ParquetDatasetStore(wrapped).delete_dataset("t")
    assert wrapped.fired_after is not None
    assert isinstance(seen[0], DatasetNotFound), (wrapped.fired_after, seen)
    assert seen[1] is False
    _absent(store, "t")
    assert list(store.list_files("t")) == []


class _CrashAtMutation(WrappingStore):
    def __init__(self, inner: Store, at: int) -> None:
        super().__init__(inner)
        self.at = at
        self.seen = 0

    def _before(self, op: str, path: str) -> None:
        super()._before(op, path)
        if op in _MUTATING:
            self.seen += 1
            if self.seen >= self.at:
                raise InjectedCrash(f"crash at {op} {path}")


@pytest.mark.parametrize("at", [2, 3])
def test_a_delete_interrupted_after_its_first_step_leaves_the_dataset_absent(store: Store, at: int) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, "t")
    with pytest.raises(InjectedCrash):
        ParquetDatasetStore(_CrashAtMutation(store, at)).delete_dataset("t")
    _absent(store, "t")
    _absent(store, "t")  # the first read repaired nothing
    assert ds.list_datasets() == []
    ds.write_dataset(NEW, "t")  # a create replaces the dead delete's tombstone
    assert ds.read_dataset("t").column("v").to_pylist() == ["x", "y"]


class _PublishBeforeTheLastCheck(WrappingStore):
    """A writer publishes a part into the folder after the delete removed the files it listed, right
    before the delete's last listing (issue 26, #11: what the user sees, as docs/guarantees.md says)."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.deleted_part = self.fired = False

    def _before(self, op: str, path: str) -> None:
        super()._before(op, path)
        if op == "delete" and path.endswith(".parquet"):
            self.deleted_part = True
        if op == "list_files" and path == "t" and self.deleted_part and not self.fired:
            self.fired = True
            with self.inner.open_output("t/part-late.parquet") as sink:
                pq.write_table(NEW, sink)


def test_a_part_published_during_the_delete_reads_absent_until_written_or_deleted(store: Store) -> None:
    # Issue 26 #11's last part: this read DatasetIncomplete (the delete removed its tombstone and left the
    # writer's part alone in the folder); now the tombstone stays over it and the key reads as absent.
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, "t")
    wrapped = _PublishBeforeTheLastCheck(store)
    ParquetDatasetStore(wrapped).delete_dataset("t")
    assert wrapped.fired
    # Only the writer's part, under the delete's tombstone.
    assert [f.path for f in store.list_files("t")] == ["t/manifest.json", "t/part-late.parquet"]
    with pytest.raises(DatasetNotFound):
        ds.read_dataset("t")
    assert not ds.dataset_exists("t")
    assert ds.list_datasets() == []
    ds.write_dataset(NEW, "t")  # a new write of the key succeeds; the stray part is in no manifest
    assert ds.read_dataset("t").column("v").to_pylist() == ["x", "y"]
    ds.delete_dataset("t")  # and a delete removes everything
    assert list(store.list_files("t")) == []
    _absent(store, "t")
