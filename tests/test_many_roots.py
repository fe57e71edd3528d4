"""Many datasets at once (issue 21, item 5): N committed manifests fetched in parallel, one request each.

The store is wrapped to count requests and to hold every manifest read at a
barrier that only N concurrent readers pass: a serial fetch would break the
barrier (its timeout is the watchdog), so passing proves the N fetches overlapped.
"""

from __future__ import annotations

import faulthandler
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from dagster_parquet_dataset import (
    DatasetIncomplete,
    DatasetNotFound,
    ManifestCorrupted,
    ParquetDatasetStore,
    S3Store,
    Store,
)
from dagster_parquet_dataset.dataset import (
    DatasetManifest,
    PinnedDatasets,
    pin_manifests,
    read_committed_manifests,
)

from ._stores import ThreadRecordingStore, WrappingStore

N = 6
KEYS = [f"daily/2025-01-0{d + 1}" for d in range(N)]


class CountingStore(WrappingStore):
    """Counts requests; holds manifest reads at ``barrier`` (when set) so that only concurrent readers pass."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.barrier: threading.Barrier | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["barrier"] = None  # a copy sent to a Spark executor reads without waiting
        return state

    def read_bytes(self, path: str) -> bytes:
        data = super().read_bytes(path)
        if self.barrier is not None and path.endswith("/manifest.json"):
            self.barrier.wait(timeout=60)  # raises BrokenBarrierError if the reads do not overlap
        return data

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        return self.inner.arrow_filesystem()

    def requests(self) -> list[tuple[str, str]]:
        """Every request but those on data parts (a ``MemoryStore`` scan copies them when it is created, a
        Spec-only manifest's schema is its first part's footer)."""
        return [(op, path) for op, path in self.log if not path.endswith(".parquet")]


@pytest.fixture(autouse=True)
def _watchdog() -> Iterator[None]:
    faulthandler.dump_traceback_later(240, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def _write_days(store: Store) -> ParquetDatasetStore:
    datasets = ParquetDatasetStore(store)
    for i, key in enumerate(KEYS):
        datasets.write_dataset(pa.table({"day": [i] * (i + 1), "v": list(range(i + 1))}), key)
    return datasets


def _counting(store: Store) -> CountingStore:
    counting = CountingStore(store)
    counting.barrier = threading.Barrier(N)
    return counting


def test_scan_datasets_fetches_each_root_once_in_parallel_and_nothing_else(store: Store) -> None:
    _write_days(store)
    counting = _counting(store)
    scan = ParquetDatasetStore(counting).scan_datasets(KEYS)
    assert sorted(counting.requests()) == sorted(("read_bytes", f"{k}/manifest.json") for k in KEYS)
    assert scan.count_rows() == sum(range(1, N + 1))
    assert scan.to_table().column("day").to_pylist() == [i for i in range(N) for _ in range(i + 1)]


def test_read_committed_manifests_then_a_pinned_scan_fetches_nothing_again(store: Store) -> None:
    _write_days(store)
    counting = _counting(store)
    datasets = ParquetDatasetStore(counting)
    committed = read_committed_manifests(datasets, KEYS)
    assert set(committed.found) == set(KEYS) and not committed.failed
    assert sorted(counting.requests()) == sorted(("read_bytes", f"{k}/manifest.json") for k in KEYS)
    counting.barrier = None
    pinned = pin_manifests(datasets, committed)
    assert isinstance(pinned, PinnedDatasets)
    assert pinned.scan_datasets(KEYS[::-1]).count_rows() == sum(range(1, N + 1))
    assert pinned.plan_read(KEYS[2]).version == committed.manifest(KEYS[2]).version
    assert pinned.read_manifest(KEYS[3]) is committed.manifest(KEYS[3])
    assert read_committed_manifests(pinned, KEYS).found == committed.found  # taken from the view
    assert sorted(counting.requests()) == sorted(("read_bytes", f"{k}/manifest.json") for k in KEYS)


def test_a_spec_only_manifest_needs_its_success_and_costs_one_check(store: Store) -> None:
    datasets = _write_days(store)
    spec_key = KEYS[1]
    spec_only = replace(datasets.read_manifest(spec_key), format_version=0, txn=None, txns=())
    store.write_bytes(f"{spec_key}/manifest.json", spec_only.to_json().encode())
    counting = _counting(store)
    assert ParquetDatasetStore(counting).scan_datasets(KEYS).count_rows() == sum(range(1, N + 1))
    expected = [*(("read_bytes", f"{k}/manifest.json") for k in KEYS), ("exists", f"{spec_key}/_SUCCESS")]
    assert sorted(counting.requests()) == sorted(expected)

    store.delete(f"{spec_key}/_SUCCESS")  # PDS-003: a Spec-only manifest without _SUCCESS is not committed
    counting.barrier = None
    with pytest.raises(DatasetIncomplete, match="_SUCCESS") as info:
        ParquetDatasetStore(counting).scan_datasets(KEYS)
    assert spec_key in str(info.value)
    assert not store.exists(f"{spec_key}/_SUCCESS")


def test_a_committed_manifest_without_success_is_read_and_not_written(store: Store) -> None:
    # The compare-and-swap that put a manifest with a write token there is the commit (repair_success's rule).
    _write_days(store)
    store.delete(f"{KEYS[0]}/_SUCCESS")
    counting = _counting(store)
    assert ParquetDatasetStore(counting).scan_datasets(KEYS).count_rows() == sum(range(1, N + 1))
    assert sorted(counting.requests()) == sorted(("read_bytes", f"{k}/manifest.json") for k in KEYS)
    assert not store.exists(f"{KEYS[0]}/_SUCCESS")


def test_a_corrupt_manifest_among_many_is_named_and_the_others_are_read(store: Store) -> None:
    datasets = _write_days(store)
    bad = KEYS[4]
    store.write_bytes(f"{bad}/manifest.json", b"{not json")
    committed = read_committed_manifests(datasets, KEYS)
    assert set(committed.found) == set(KEYS) - {bad}
    error = committed.failed[bad]
    assert isinstance(error, ManifestCorrupted) and error.dataset_key == bad  # type: ignore[attr-defined]
    with pytest.raises(ManifestCorrupted, match=bad):
        datasets.scan_datasets(KEYS)
    with pytest.raises(ManifestCorrupted):
        pin_manifests(datasets, committed).read_manifest(bad)


def test_a_dataset_deleted_between_listing_and_reading(store: Store) -> None:
    datasets = _write_days(store)
    listed = [d.key for d in datasets.list_datasets("daily")]
    assert listed == KEYS
    gone = KEYS[2]
    committed = read_committed_manifests(datasets, listed)
    datasets.delete_dataset(gone)
    # Read afresh: absent, named.
    with pytest.raises(DatasetNotFound, match=gone):
        datasets.scan_datasets(listed)
    again = read_committed_manifests(datasets, listed)
    assert isinstance(again.failed[gone], DatasetNotFound) and set(again.found) == set(KEYS) - {gone}
    # From manifests read before the delete: the parts it listed are gone, and the scan says so.
    with pytest.raises(DatasetIncomplete, match=gone):
        pin_manifests(datasets, committed).scan_datasets(listed)
    # A later version of a pinned dataset replaces its pin.
    datasets.write_dataset(pa.table({"day": [9], "v": [9]}), KEYS[0], overwrite=True)
    newer = committed.with_manifest(KEYS[0], datasets.read_manifest(KEYS[0]))
    assert newer.manifest(KEYS[0]).version == committed.manifest(KEYS[0]).version + 1


def test_an_absent_dataset_is_recorded_not_raised(store: Store) -> None:
    datasets = _write_days(store)
    committed = read_committed_manifests(datasets, [*KEYS, "daily/never"])
    assert isinstance(committed.failed["daily/never"], DatasetNotFound)
    with pytest.raises(DatasetNotFound, match="daily/never"):
        committed.manifests()
    with pytest.raises(TypeError, match="single string"):
        read_committed_manifests(datasets, "daily/x")
    with pytest.raises(TypeError, match="read_committed_manifests"):
        pin_manifests(datasets, {"daily/x": DatasetManifest})  # type: ignore[arg-type]


def test_reading_many_roots_again_starts_no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifests are fetched on one pool per process (issue 28): ten reads of 40 roots start
    at most the pool's 32 threads in all, not up to 32 per read."""
    from dagster_parquet_dataset import MemoryStore

    datasets = ParquetDatasetStore(MemoryStore())
    keys = [f"daily/{d:02d}" for d in range(40)]
    for key in keys:
        datasets.write_dataset(pa.table({"v": [1]}), key)
    started: list[str] = []
    start = threading.Thread.start

    def counting_start(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counting_start)
    for _ in range(10):
        committed = read_committed_manifests(datasets, keys)
        assert set(committed.found) == set(keys)
    assert len(started) <= 32, started


def test_many_roots_go_to_the_threads_in_runs_of_consecutive_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """70 keys on 32 threads are 24 runs of 3 consecutive keys, one hand-off to a thread each, not 70 (a
    wake-up per local manifest cost more than its read, issue 28); each run is read in order on one thread."""
    from dagster_parquet_dataset import MemoryStore
    from dagster_parquet_dataset.dataset.io import parallel
    from dagster_parquet_dataset.dataset.ops import many

    class ThreadRecording(WrappingStore):
        def __init__(self, inner: Store) -> None:
            super().__init__(inner)
            self.readers: list[tuple[str, int]] = []

        def read_bytes(self, path: str) -> bytes:
            self.readers.append((path.rsplit("/", 1)[0], threading.get_ident()))
            return super().read_bytes(path)

    datasets = ParquetDatasetStore(MemoryStore())
    keys = [f"daily/{d:02d}" for d in range(70)]
    for key in keys[:3]:
        datasets.write_dataset(pa.table({"v": [1]}), key)
    tasks: list[int] = []

    def recording_map(fn: Any, items: Any, threads: int = 16) -> list[Any]:
        tasks.append(len(items))
        return parallel.parallel_map(fn, items, threads)

    monkeypatch.setattr(many, "parallel_map", recording_map)
    store = ThreadRecording(datasets.store)
    committed = read_committed_manifests(ParquetDatasetStore(store), keys)
    assert set(committed.found) == set(keys[:3]) and set(committed.failed) == set(keys[3:])
    assert tasks == [24]
    manifest_reads = [(k, t) for k, t in store.readers if k in keys]
    for run in range(24):
        run_keys = keys[run * 3 : run * 3 + 3]
        threads = {t for k, t in manifest_reads if k in run_keys}
        assert len(threads) == 1, (run_keys, threads)
        assert list(dict.fromkeys(k for k, _ in manifest_reads if k in run_keys)) == run_keys


def test_local_stores_read_many_roots_in_the_calling_thread_and_remote_ones_on_threads(store: Store) -> None:
    """A store whose reads are local (``LocalStore``, ``MemoryStore``) has its 40 manifests read one after
    the other on the calling thread (issue 28: 365 local manifests took 11 ms in turn, 39 ms on 32 threads
    contending for the interpreter); ``S3Store``, whose reads wait on the network, on the pool."""

    datasets = ParquetDatasetStore(store)
    keys = [f"daily/{d:02d}" for d in range(40)]
    for d, key in enumerate(keys):
        datasets.write_dataset(pa.table({"v": [d]}), key)
    recording = ThreadRecordingStore(store)
    committed = read_committed_manifests(ParquetDatasetStore(recording), keys)
    assert set(committed.found) == set(keys) and not committed.failed
    threads = recording.threads_of("read_bytes", "/manifest.json")
    if isinstance(store, S3Store):
        assert not store.local_reads
        assert threads and threading.get_ident() not in threads
    else:
        assert store.local_reads
        assert threads == {threading.get_ident()}
    recording.threads.clear()
    scan = ParquetDatasetStore(recording).scan_datasets(keys)
    assert sorted(scan.to_table().column("v").to_pylist()) == list(range(40))
    assert (recording.threads_of("read_bytes", "/manifest.json") == {threading.get_ident()}) == store.local_reads


def test_parallel_map_on_one_thread_runs_in_the_calling_thread() -> None:
    from dagster_parquet_dataset.dataset.io.parallel import parallel_map

    here = threading.get_ident()
    assert parallel_map(lambda i: (i, threading.get_ident()), range(5), threads=1) == [(i, here) for i in range(5)]
    assert here not in set(parallel_map(lambda _: threading.get_ident(), range(5), threads=2))
