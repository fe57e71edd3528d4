"""Guarantees 1-3: atomic commits, no data loss on crash, no lost updates."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest

from dagster_parquet_dataset import (
    AlreadyExists,
    DatasetIncomplete,
    LocalStore,
    ParquetDatasetStore,
    Store,
)
from dagster_parquet_dataset.dataset import FileEntry
from dagster_parquet_dataset.dataset.format.layout import MANIFEST_NAME
from tests._stores import CrashingStore, InjectedCrash

ROWS = 12


def table_of(writer: int, rows: int = ROWS) -> pa.Table:
    return pa.table({"id": pa.array(range(rows), pa.int64()), "writer": pa.array([writer] * rows, pa.int64())})


@pytest.mark.parametrize("max_rows", [None, 5])
def test_crash_at_every_step_of_an_overwrite_keeps_a_complete_version(store: Store, max_rows: int | None) -> None:
    old, new = table_of(1), table_of(2, rows=7)
    reader = ParquetDatasetStore(store, retain_versions=1)
    crash_at = 1
    while True:
        key = f"k{crash_at}"
        ParquetDatasetStore(store, max_rows_per_file=max_rows, retain_versions=1).write_dataset(old, key)
        crashing = CrashingStore(store, crash_at=crash_at)
        try:
            ParquetDatasetStore(crashing, max_rows_per_file=max_rows, retain_versions=1).write_dataset(
                new, key, overwrite=True
            )
        except InjectedCrash:
            pass
        got = reader.read_dataset(key)
        if not crashing.crashed:
            assert got.equals(new)
            break
        committed = crashing.committed_before_crash(f"{key}/manifest.json")
        assert got.equals(new if committed else old), f"crash at call {crash_at}: {crashing.log[crash_at - 1]}"
        # The user retries: it must succeed and leave only the new version's files.
        manifest = ParquetDatasetStore(store, max_rows_per_file=max_rows, retain_versions=1).write_dataset(
            new, key, overwrite=True
        )
        assert reader.read_dataset(key).equals(new)
        live = {f"{key}/{p}" for p in manifest.parts}
        stray = {f.path for f in store.list_files(key) if f.path.endswith(".parquet")} - live
        assert not stray, f"crash at call {crash_at} left {stray}"
        crash_at += 1
    assert crash_at > 5  # the loop really walked through the write's steps


def test_crash_at_every_step_of_a_first_write(store: Store) -> None:
    new = table_of(3)
    crash_at = 1
    while True:
        key = f"n{crash_at}"
        crashing = CrashingStore(store, crash_at=crash_at)
        try:
            ParquetDatasetStore(crashing, max_rows_per_file=5).write_dataset(new, key)
        except InjectedCrash:
            pass
        reader = ParquetDatasetStore(store)
        if not crashing.crashed:
            assert reader.read_dataset(key).equals(new)
            break
        try:
            got = reader.read_dataset(key)
            assert got.equals(new), f"crash at call {crash_at} left a partial dataset"
        except DatasetIncomplete:
            pass  # absent or visibly incomplete: never a partial table
        ParquetDatasetStore(store, max_rows_per_file=5).write_dataset(new, key, overwrite=True)
        assert reader.read_dataset(key).equals(new)
        crash_at += 1


def _race(n: int, target) -> list[BaseException | object]:  # type: ignore[no-untyped-def]
    barrier = threading.Barrier(n)
    results: list[BaseException | object] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = target(i)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertions
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _assert_single_writer(table: pa.Table) -> int:
    writers = set(table.column("writer").to_pylist())
    assert len(writers) == 1, f"mixed dataset from writers {writers}"
    assert table.column("id").to_pylist() == list(range(table.num_rows))
    return writers.pop()


def test_concurrent_creates_one_wins(store: Store) -> None:
    results = _race(4, lambda i: ParquetDatasetStore(store, max_rows_per_file=4).write_dataset(table_of(i), "new"))
    winners = [i for i, r in enumerate(results) if not isinstance(r, BaseException)]
    assert len(winners) == 1, results
    assert all(isinstance(r, AlreadyExists) for i, r in enumerate(results) if i != winners[0]), results
    got = ParquetDatasetStore(store).read_dataset("new")
    assert _assert_single_writer(got) == winners[0] and got.num_rows == ROWS


@pytest.mark.parametrize("existing", [False, True])
def test_concurrent_overwrites_never_mix(store: Store, existing: bool) -> None:
    """Threads overwriting one key (new or existing) while readers read: never a mixed dataset."""
    if existing:
        ParquetDatasetStore(store, max_rows_per_file=4, retain_versions=1).write_dataset(table_of(99), "hot")
    writers, rounds = 3, 3
    stop = threading.Event()
    seen: list[int] = []
    reader_errors: list[BaseException] = []

    def reader() -> None:
        ds = ParquetDatasetStore(store, retain_versions=1)
        while not stop.is_set():
            try:
                seen.append(_assert_single_writer(ds.read_dataset("hot")))
            except DatasetIncomplete as exc:
                if existing:
                    reader_errors.append(exc)
            except BaseException as exc:  # noqa: BLE001
                reader_errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for r in readers:
        r.start()
    try:
        versions = _race(
            writers,
            lambda i: [
                ParquetDatasetStore(store, max_rows_per_file=4, retain_versions=1)
                .write_dataset(table_of(i * 10 + j), "hot", overwrite=True)
                .version
                for j in range(rounds)
            ],
        )
    finally:
        stop.set()
        for r in readers:
            r.join()
    assert not reader_errors, reader_errors[:3]
    assert not any(isinstance(v, BaseException) for v in versions), versions
    all_versions = sorted(v for vs in versions for v in vs)  # type: ignore[union-attr]
    assert len(set(all_versions)) == len(all_versions), "two commits claimed one version"
    final = ParquetDatasetStore(store, retain_versions=1).read_manifest("hot")
    assert final.version == max(all_versions)
    _assert_single_writer(ParquetDatasetStore(store, retain_versions=1).read_dataset("hot"))
    live = {f"hot/{p}" for p in final.parts}
    stray = {f.path for f in store.list_files("hot") if f.path.endswith(".parquet")} - live
    assert not stray, stray
    assert seen or not existing


def test_failed_first_write_leaves_the_key_absent(store: Store) -> None:
    """A first write that fails before committing removes its files and its claim."""
    from dagster_parquet_dataset import DatasetNotFound

    schema = pa.schema([("id", pa.int64())])

    def batches():  # type: ignore[no-untyped-def]
        yield pa.record_batch([pa.array([1, 2], pa.int64())], schema=schema)
        raise RuntimeError("source failed mid-stream")

    ds = ParquetDatasetStore(store, max_rows_per_file=1)
    with pytest.raises(RuntimeError, match="mid-stream"):
        ds.write_dataset(pa.RecordBatchReader.from_batches(schema, batches()), "k")
    with pytest.raises(DatasetNotFound):
        ds.read_dataset("k")
    assert list(store.list_files("k")) == []
    manifest = ds.write_dataset(table_of(1), "k")
    assert manifest.parts[0] == "part-00000.parquet"  # Spec names again: the claim was released


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([FileEntry(path=MANIFEST_NAME, row_count=1)], "reserved"),
        ([FileEntry(path="_versions/0001.json", row_count=1)], "reserved"),
        ([FileEntry(path="part-0.parquet", row_count=None)], "no row count"),
        ([FileEntry(path="p.parquet", row_count=1), FileEntry(path="p.parquet", row_count=1)], "more than once"),
    ],
)
def test_externally_written_entries_are_checked_by_write_and_append(
    entries: list[FileEntry], message: str, tmp_path: Path
) -> None:
    """Parts written outside the dataset layer (Spark) are refused the same way by commit_write and
    commit_append, and nothing is committed."""
    ds = ParquetDatasetStore(LocalStore(str(tmp_path)))
    schema = pa.schema([("a", pa.int64())])
    with pytest.raises(ValueError, match=message):
        ds.commit_write(ds.begin_write("w"), entries, schema)
    assert not ds.dataset_exists("w")
    ds.write_dataset(pa.table({"a": [1]}), "a")
    with pytest.raises(ValueError, match=message):
        ds.commit_append(ds.begin_append("a", schema), entries)
    assert ds.read_manifest("a").version == 1
