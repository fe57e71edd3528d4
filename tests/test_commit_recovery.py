"""Issue 9, items 4-9: lost commit responses, races with delete, crashes after the
commit, version numbering, history after crashes, and backoff under contention.

Every test runs on memory, local disk and the moto S3 server. The faults are
injected in a store wrapper around the real backend: the wrapped call really
happens, then the wrapper behaves as the network would (a response that never
arrives). ``test_s3_lost_responses.py`` does the same on the wire.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dagster_parquet_dataset import (
    AlreadyExists,
    CommitConflict,
    CommitOutcomeUnknown,
    ManifestCorrupted,
    ParquetDatasetStore,
    Store,
)
from dagster_parquet_dataset.dataset.format import segments
from tests._stores import CrashingStore, InjectedCrash, WrappingStore


def rows(start: int, n: int, tag: str = "x") -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "tag": pa.array([tag] * n, pa.string())})


def sorted_ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


class LostResponseStore(WrappingStore):
    """Applies the chosen ``write_if`` calls of ``manifest.json``, then loses their response.

    ``answer`` is what the caller gets instead of the response: ``"conflict"``
    (the 412 a client's own retry of the applied request gets) or ``"timeout"``
    (an ``OSError``, as ``Store.write_if`` reports a missing answer).
    ``lose`` says which manifest commits (1-based) lose their response; ``None``
    loses all of them. ``meanwhile`` runs after the applied write, before the
    caller hears anything (another writer committing on top, say).
    """

    def __init__(
        self,
        inner: Store,
        answer: str,
        lose: set[int] | None = frozenset({1}),  # type: ignore[assignment]
        meanwhile: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(inner)
        self.answer = answer
        self.lose = lose
        self.meanwhile = meanwhile
        self.manifest_commits = 0

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        token = super().write_if(path, data, expected=expected)
        if not path.endswith("/manifest.json"):
            return token
        self.manifest_commits += 1
        if self.lose is not None and self.manifest_commits not in self.lose:
            return token
        if self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()
        if self.answer == "conflict":
            from dagster_parquet_dataset import CommitConflict as Conflict

            raise Conflict(f"{path!r} changed since it was read (the retry of an applied request)")
        raise ConnectionError(f"no answer for the conditional write of {path!r}")


ANSWERS = ["conflict", "timeout"]


@pytest.fixture(autouse=True, params=["inline", "segments"])
def layout(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs twice: entries inline in the root, and (format 2) always in segment files."""
    if request.param == "segments":
        monkeypatch.setattr(segments, "INLINE_ENTRIES", 0)
    return str(request.param)


@pytest.mark.parametrize("answer", ANSWERS)
def test_lost_response_of_an_append_commits_its_rows_once(store: Store, answer: str) -> None:
    ParquetDatasetStore(store).write_dataset(rows(0, 5), "t")
    lossy = ParquetDatasetStore(LostResponseStore(store, answer))
    manifest = lossy.append_dataset(rows(5, 3), "t")
    got = ParquetDatasetStore(store).read_dataset("t")
    assert sorted_ids(got) == list(range(8))
    assert manifest.version == 2 and manifest.row_count == 8


@pytest.mark.parametrize("answer", ANSWERS)
def test_lost_response_of_a_first_write_reports_success(store: Store, answer: str) -> None:
    lossy = ParquetDatasetStore(LostResponseStore(store, answer))
    manifest = lossy.write_dataset(rows(0, 4), "new")
    assert manifest.parts == ["data.parquet"]
    plain = ParquetDatasetStore(store)
    assert sorted_ids(plain.read_dataset("new")) == [0, 1, 2, 3]
    assert plain.dataset_exists("new")


@pytest.mark.parametrize("answer", ANSWERS)
def test_lost_response_of_a_merge_keeps_the_dataset_readable(store: Store, answer: str) -> None:
    ParquetDatasetStore(store, max_rows_per_file=5).write_dataset(rows(0, 10), "m")
    lossy = ParquetDatasetStore(LostResponseStore(store, answer))
    result = lossy.merge_dataset(rows(3, 4, tag="new"), "m", key_columns=["id"])
    got = ParquetDatasetStore(store).read_dataset("m")
    assert sorted_ids(got) == list(range(10))
    assert sorted(got.filter(pc.equal(got["tag"], "new"))["id"].to_pylist()) == [3, 4, 5, 6]
    assert result.updated == 4 and result.inserted == 0


@pytest.mark.parametrize("answer", ANSWERS)
def test_overwrite_whose_every_commit_response_is_lost(store: Store, answer: str) -> None:
    ParquetDatasetStore(store).write_dataset(rows(0, 6), "o")
    lossy = ParquetDatasetStore(LostResponseStore(store, answer, lose=None))
    lossy.write_dataset(rows(100, 2), "o", overwrite=True)
    assert sorted_ids(ParquetDatasetStore(store).read_dataset("o")) == [100, 101]


@pytest.mark.parametrize("answer", ANSWERS)
def test_lost_response_while_another_writer_commits_on_top(store: Store, answer: str) -> None:
    plain = ParquetDatasetStore(store)
    plain.write_dataset(rows(0, 2), "a")
    lossy = ParquetDatasetStore(
        LostResponseStore(store, answer, meanwhile=lambda: plain.append_dataset(rows(50, 2, tag="other"), "a"))
    )
    lossy.append_dataset(rows(10, 3), "a")
    assert sorted_ids(plain.read_dataset("a")) == [0, 1, 10, 11, 12, 50, 51]


def test_unanswered_commit_that_did_not_land_keeps_parts_and_says_so(store: Store, layout: str) -> None:
    class Unanswered(WrappingStore):
        """Every manifest commit times out without being applied."""

        def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
            if path.endswith("/manifest.json"):
                self._before("write_if", path)
                raise TimeoutError("read timeout")
            return super().write_if(path, data, expected=expected)

    plain = ParquetDatasetStore(store, retain_versions=1)
    plain.write_dataset(rows(0, 3), "u")
    before = {f.path for f in store.list_files("u")}
    with pytest.raises(CommitOutcomeUnknown, match="parts were kept"):
        ParquetDatasetStore(Unanswered(store), commit_timeout=1, retain_versions=1).append_dataset(rows(3, 3), "u")
    assert sorted_ids(plain.read_dataset("u")) == [0, 1, 2]
    # Its part (and segment) may still be committed by a request in flight, so it was not deleted.
    new = {f.path for f in store.list_files("u")} - before
    assert len([p for p in new if "/_segments/" not in p]) == 1
    assert len([p for p in new if "/_segments/" in p]) == (layout == "segments")  # one, re-sent unchanged


# Item 5 --------------------------------------------------------------------


class DeleteBeforeCommit(WrappingStore):
    """Runs ``delete_dataset`` (and optionally a re-create) just before the first manifest commit."""

    def __init__(self, inner: Store, key: str, recreate: pa.Table | None = None) -> None:
        super().__init__(inner)
        self.key = key
        self.recreate = recreate
        self.done = False

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        if path == f"{self.key}/manifest.json" and not self.done:
            self.done = True
            other = ParquetDatasetStore(self.inner)
            other.delete_dataset(self.key)
            if self.recreate is not None:
                other.write_dataset(self.recreate, self.key)
        return super().write_if(path, data, expected=expected)


@pytest.mark.parametrize("recreate", [False, True], ids=["deleted", "recreated"])
@pytest.mark.parametrize("operation", ["append", "overwrite"])
def test_writer_racing_delete_never_commits_vanished_parts(store: Store, operation: str, recreate: bool) -> None:
    plain = ParquetDatasetStore(store)
    plain.write_dataset(rows(0, 3), "d")
    racing = ParquetDatasetStore(DeleteBeforeCommit(store, "d", rows(500, 1) if recreate else None))
    with pytest.raises(CommitConflict, match="deleted or replaced while this write ran"):
        if operation == "append":
            racing.append_dataset(rows(10, 2), "d")
        else:
            racing.write_dataset(rows(10, 2), "d", overwrite=True)
    if recreate:
        assert sorted_ids(plain.read_dataset("d")) == [500]
    else:
        assert not plain.dataset_exists("d")
    # Nothing it wrote is left behind.
    assert not [f.path for f in store.list_files("d") if "part" in f.path or "data-" in f.path]


# Item 6 --------------------------------------------------------------------


def test_crash_between_commit_and_success_of_a_first_write_is_repaired(store: Store) -> None:
    class CrashAtSuccess(WrappingStore):
        def write_bytes(self, path: str, data: bytes) -> None:
            if path.endswith("/_SUCCESS"):
                raise InjectedCrash("crash before _SUCCESS")
            super().write_bytes(path, data)

    with pytest.raises(InjectedCrash):
        ParquetDatasetStore(CrashAtSuccess(store)).write_dataset(rows(0, 4), "c")
    assert not store.exists("c/_SUCCESS")
    plain = ParquetDatasetStore(store)
    # The retried create sees the dataset that did commit, and makes it whole.
    with pytest.raises(AlreadyExists):
        plain.write_dataset(rows(0, 4), "c")
    assert store.exists("c/_SUCCESS")
    assert plain.dataset_exists("c")
    assert sorted_ids(plain.read_dataset("c")) == [0, 1, 2, 3]


def test_a_missing_success_marker_is_read_through_and_repaired_by_dataset_exists(store: Store) -> None:
    """A manifest with a write token proves its commit: a read needs no ``_SUCCESS`` and does not look
    for it (issue 25: a pruned read is the manifest and the data); ``dataset_exists`` writes it back."""
    plain = ParquetDatasetStore(store)
    plain.write_dataset(rows(0, 4), "r")
    store.delete("r/_SUCCESS")
    assert sorted_ids(plain.read_dataset("r")) == [0, 1, 2, 3]
    assert plain.dataset_exists("r")
    assert store.exists("r/_SUCCESS")


# Items 7 and 8 -------------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncate", "delete"])
def test_versions_never_go_backwards_after_a_repair(store: Store, damage: str) -> None:
    ds = ParquetDatasetStore(store, retain_versions=3)
    for i in range(3):
        ds.write_dataset(rows(i * 10, 2), "v", overwrite=True)
    assert [m.version for m in ds.history("v")] == [3, 2, 1]
    if damage == "truncate":
        store.write_bytes("v/manifest.json", store.read_bytes("v/manifest.json")[:40])
    else:
        store.delete("v/manifest.json")
    repaired = ds.write_dataset(rows(100, 2), "v", overwrite=True)
    assert repaired.version == 4
    history = ds.history("v")
    assert history[0].version == 4 and history[0].parts == repaired.parts
    assert [m.version for m in history] == sorted((m.version for m in history), reverse=True)
    ds.vacuum("v", grace_period=0)
    assert sorted_ids(ds.read_dataset("v")) == [100, 101]


def test_history_skips_stale_copies_above_the_live_version(store: Store) -> None:
    # A manifest repaired by older code restarted numbering below its _versions/ copies.
    ds = ParquetDatasetStore(store, retain_versions=None)
    for i in range(3):
        ds.write_dataset(rows(i * 10, 2), "s", overwrite=True)
    stale = store.read_bytes("s/_versions/00000000000000000002.json")
    store.write_bytes("s/_versions/00000000000000000009.json", stale.replace(b'"version": 2', b'"version": 9'))
    assert [m.version for m in ds.history("s")] == [3, 2, 1]
    ds.vacuum("s", retain_versions=1, grace_period=0)
    assert sorted_ids(ds.read_dataset("s")) == [20, 21]


def test_history_lists_only_complete_versions(store: Store) -> None:
    ds = ParquetDatasetStore(store, retain_versions=None)
    for i in range(3):
        ds.write_dataset(rows(i * 10, 2), "h", overwrite=True)
    store.write_bytes("h/_versions/.tmp-00000000000000000007.json", b"{")
    store.write_bytes("h/_versions/00000000000000000008.json.tmp", b"{")
    first = ds.read_manifest("h", version=1)
    store.delete(f"h/{first.parts[0]}")
    assert [m.version for m in ds.history("h")] == [3, 2]


def test_dropped_version_copy_goes_before_its_files(store: Store) -> None:
    """A crash while dropping a version never leaves history listing a version without files."""
    crash_at = 1
    while True:
        key = f"drop{crash_at}"
        ds = ParquetDatasetStore(store, retain_versions=2)
        ds.write_dataset(rows(0, 2), key)
        ds.write_dataset(rows(10, 2), key, overwrite=True)
        crashing = CrashingStore(store, crash_at=crash_at)
        try:
            ParquetDatasetStore(crashing, retain_versions=2).write_dataset(rows(20, 2), key, overwrite=True)
        except InjectedCrash:
            pass
        for manifest in ds.history(key):
            ds.read_dataset(key, version=manifest.version)  # every listed version opens
        if not crashing.crashed:
            break
        crash_at += 1
    assert crash_at > 5


# Item 9 --------------------------------------------------------------------


@pytest.mark.parametrize("retention", ["retain_versions=1", "default"])
def test_many_concurrent_appenders_all_commit(store: Store, retention: str) -> None:
    writers, per = 24, 5
    options: dict[str, Any] = {"retain_versions": 1} if retention == "retain_versions=1" else {}
    ParquetDatasetStore(store).write_dataset(rows(0, 0), "hot")
    errors: list[BaseException] = []
    start = threading.Barrier(writers)

    def appender(w: int) -> None:
        # retain_versions=1 (the default until replaced versions were kept 7 days) and the default retention,
        # whose commits also keep the replaced version's manifest copy (written once per version and process).
        ds = ParquetDatasetStore(store, max_workers=1, **options)
        start.wait()
        for i in range(per):
            try:
                ds.append_dataset(rows((w * per + i) * 2, 2), "hot")
            except BaseException as exc:  # collected and reported below
                errors.append(exc)

    threads = [threading.Thread(target=appender, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, f"{len(errors)} of {writers * per} appends failed: {errors[0]!r}"
    assert sorted_ids(ParquetDatasetStore(store).read_dataset("hot")) == list(range(writers * per * 2))


def test_commit_timeout_bounds_the_wait(store: Store) -> None:
    class AlwaysLoses(WrappingStore):
        def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
            if path.endswith("/manifest.json"):
                # Another writer always commits first.
                ParquetDatasetStore(self.inner).append_dataset(rows(900, 1), "busy")
            return super().write_if(path, data, expected=expected)

    ParquetDatasetStore(store).write_dataset(rows(0, 1), "busy")
    with pytest.raises(CommitConflict, match="commit_timeout"):
        ParquetDatasetStore(AlwaysLoses(store), commit_timeout=0.2).append_dataset(rows(1, 1), "busy")
    got = ParquetDatasetStore(store).read_dataset("busy")
    assert 1 not in got.column("id").to_pylist()


def test_commit_timeout_is_validated() -> None:
    from dagster_parquet_dataset import MemoryStore

    with pytest.raises(ValueError, match="commit_timeout"):
        ParquetDatasetStore(MemoryStore(), commit_timeout=-1)


def test_corrupt_manifest_is_not_silently_replaced_by_an_append(store: Store) -> None:
    plain = ParquetDatasetStore(store)
    plain.write_dataset(rows(0, 2), "bad")
    store.write_bytes("bad/manifest.json", b"{not json")
    with pytest.raises(ManifestCorrupted):
        plain.append_dataset(rows(2, 2), "bad")
    assert store.read_bytes("bad/manifest.json") == b"{not json"
