"""Issue 12, item 2: ``compact_dataset`` rewrites small files into target-size files.

Every test runs on memory, local disk and the moto S3 server (the ``store``
fixture). Concurrency is real: threads appending and reading while compaction
runs, and a store wrapper that commits another writer's change at a chosen
moment of the compaction (between reading the files and committing). Crashes
come from the fault-injecting store of ``tests/_faults.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dagster_parquet_dataset import (
    Capability,
    CapabilityNotSupported,
    CommitConflict,
    CompactResult,
    DatasetIncomplete,
    DatasetNotFound,
    ManifestCorrupted,
    ParquetDatasetStore,
    Store,
)
from dagster_parquet_dataset.dataset.io.encode import PART_PATH_KEY
from tests._faults import Fault, FaultyStore
from tests._stores import InjectedCrash, WrappingStore


def batch(start: int, n: int, p: int | None = None, tag: str = "x") -> pa.Table:
    ids = list(range(start, start + n))
    columns: dict[str, pa.Array] = {
        "id": pa.array(ids, pa.int64()),
        "tag": pa.array([f"{tag}{i % 7}" for i in ids], pa.string()),
        "x": pa.array([i * 0.5 for i in ids], pa.float64()),
    }
    if p is not None:
        columns["p"] = pa.array([p] * n, pa.int64())
    return pa.table(columns)


def appended(ds: ParquetDatasetStore, key: str, sizes: list[int], partitions: int | None = None) -> pa.Table:
    """Append one batch per size (rotating over ``partitions`` if given); returns what a read gives."""
    start = 0
    for i, n in enumerate(sizes):
        p = None if partitions is None else i % partitions
        ds.append_dataset(batch(start, n, p), key, partition_by=None if partitions is None else ["p"])
        start += n
    return ds.read_dataset(key)


def store_files(store: Store, key: str) -> set[str]:
    return {f.path[len(key) + 1 :] for f in store.list_files(key)}


def data_files(store: Store, key: str) -> set[str]:
    return {p for p in store_files(store, key) if p.endswith(".parquet")}


# ---------------------------------------------------------------- correctness


def test_compaction_keeps_rows_order_and_statistics(store: Store) -> None:
    ds = ParquetDatasetStore(store, retain_versions=1)
    before = appended(ds, "k", [30, 0, 17, 45, 1, 22, 8, 60, 13, 5])
    old = ds.read_manifest("k")
    result = ds.compact_dataset("k", run_id="run-7")
    assert isinstance(result, CompactResult)
    new = ds.read_manifest("k")
    after = ds.read_dataset("k")
    assert after.equals(before)  # same rows, same order, same schema
    assert new.row_count == old.row_count == before.num_rows == result.rows
    assert new.version == old.version + 1 == result.version
    assert new.operation == "compact" and new.run_id == "run-7"
    assert result.files_read == len(old.parts) and result.read_paths == tuple(old.parts)
    assert result.bytes_before == sum(f.size_bytes or 0 for f in old.files)
    assert result.files_written == len(new.parts) == 1 and result.written_paths == tuple(new.parts)
    assert result.bytes_after == new.files[0].size_bytes == store.size(f"k/{new.parts[0]}")
    assert not result.dry_run
    entry = new.files[0]
    assert set(entry.stats or {}) == {"id", "tag", "x"}
    assert entry.stats["id"]["min"] == 0 and entry.stats["id"]["max"] == before.num_rows - 1  # type: ignore[index]
    # The footer names the part's own path, as for any other write (verified reads rely on it).
    import pyarrow.parquet as pq

    with store.open_input(f"k/{entry.path}") as f:
        assert pq.ParquetFile(f).metadata.metadata[PART_PATH_KEY.encode()] == entry.path.encode()
    # With the default retention, the replaced small files are gone from storage.
    assert data_files(store, "k") == set(new.parts)
    # Statistics pruning works on the new file.
    assert ds.plan_read("k", filters=[("id", ">", before.num_rows)]).selected == ()
    assert ds.read_dataset("k", filters=[("id", ">=", 150)]).equals(before.filter(pc.field("id") >= 150))


def test_nothing_to_compact_makes_no_version(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(batch(0, 50), "one")
    version = ds.read_manifest("one").version
    result = ds.compact_dataset("one")
    assert (result.files_read, result.files_written, result.version) == (0, 0, None)
    assert ds.read_manifest("one").version == version
    # Compacting twice: the second run finds nothing left to do.
    appended(ds, "many", [10, 10, 10])
    first = ds.compact_dataset("many")
    assert first.version is not None
    second = ds.compact_dataset("many")
    assert second.version is None and second.files_read == 0
    assert ds.read_manifest("many").version == first.version


def test_target_packs_consecutive_small_files_and_leaves_big_ones(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    sizes = [200] * 6 + [20_000] + [200] * 5
    before = appended(ds, "t", sizes)
    old = ds.read_manifest("t")
    small = old.files[0].size_bytes or 0
    big = old.files[6]
    target = 3 * small + small // 2  # three small files fit, four do not; the big file is "near" it
    assert (big.size_bytes or 0) * 2 >= target
    result = ds.compact_dataset("t", target_file_bytes=target)
    new = ds.read_manifest("t")
    assert ds.read_dataset("t").equals(before)
    assert big.path in new.parts  # left alone, in its place between the two runs
    assert result.files_read == len(old.parts) - 1
    assert new.parts.index(big.path) == len(result.written_paths) // 2
    by_path = {f.path: f for f in old.files}
    assert all(by_path[p].size_bytes is not None for p in result.read_paths)
    # No new file was made from more than the target's worth of input bytes.
    groups = [old.parts[0:3], old.parts[3:6], old.parts[7:10], old.parts[10:12]]
    assert list(result.read_paths) == [p for g in groups for p in g]
    assert len(new.parts) == len(groups) + 1
    for group in groups:
        assert sum(by_path[p].size_bytes or 0 for p in group) <= target


def test_partition_folders_are_never_mixed(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    before = appended(ds, "pt", [10, 20, 30, 40, 50, 60, 70, 5, 3], partitions=3)
    result = ds.compact_dataset("pt")
    new = ds.read_manifest("pt")
    assert result.files_written == len(new.parts) == 3
    after = ds.read_dataset("pt")
    assert after.num_rows == before.num_rows
    for p in range(3):
        assert after.filter(pc.field("p") == p).equals(before.filter(pc.field("p") == p))
    for entry in new.files:
        value = (entry.partition_values or {})["p"]
        assert entry.path.startswith(f"p={value}/")
        rows = ds.read_dataset("pt", filters=[("p", "=", value)])
        assert set(rows.column("p").to_pylist()) == {value}
        assert entry.row_count == rows.num_rows
    # Partition pruning and statistics pruning still work.
    plan = ds.plan_read("pt", filters=[("p", "=", 1)])
    assert [e.partition_values for e in plan.selected] == [{"p": 1}]
    assert ds.plan_read("pt", filters=[("id", ">", before.num_rows + 5)]).selected == ()


def test_filters_restrict_compaction_to_selected_files(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    before = appended(ds, "f", [10, 10, 10, 10, 10, 10], partitions=2)
    old = ds.read_manifest("f")
    untouched = [f.path for f in old.files if f.partition_values == {"p": 1}]
    result = ds.compact_dataset("f", filters=[("p", "=", 0)])
    new = ds.read_manifest("f")
    assert result.files_read == 3 and result.files_written == 1
    assert all(p in new.parts for p in untouched)
    by_path = {f.path: f for f in new.files}
    assert all(by_path[p].partition_values == {"p": 0} for p in result.written_paths)
    after = ds.read_dataset("f")
    for p in range(2):
        assert after.filter(pc.field("p") == p).equals(before.filter(pc.field("p") == p))
    # A filter on statistics: only the files that can hold id >= 30 (the last three appends).
    ds2 = ParquetDatasetStore(store)
    appended(ds2, "s", [10] * 6)
    plain = ds2.read_manifest("s")
    result = ds2.compact_dataset("s", filters=[("id", ">=", 30)])
    assert result.read_paths == tuple(plain.parts[3:])
    assert ds2.read_manifest("s").parts[:3] == plain.parts[:3]


def test_columns_added_later_become_nulls_in_the_compacted_file(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    appended(ds, "e", [10, 10])
    ds.append_dataset(batch(20, 10).append_column("note", pa.array(["n"] * 10)), "e", allow_new_columns=True)
    before = ds.read_dataset("e")
    assert before.column("note").null_count == 20
    old_schema = ds.read_manifest("e").schema
    ds.compact_dataset("e")
    new = ds.read_manifest("e")
    assert new.schema is not None and old_schema is not None and new.schema.equals(old_schema)
    assert new.files[0].missing_columns == ()
    assert ds.read_dataset("e").equals(before)
    assert ds.plan_read("e", filters=[("note", "=", "n")]).selected != ()


def test_dry_run_plans_without_writing(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    appended(ds, "d", [10, 20, 30, 40], partitions=2)
    files = store_files(store, "d")
    manifest = store.read_bytes("d/manifest.json")
    plan = ds.compact_dataset("d", dry_run=True)
    assert plan.dry_run and plan.version is None and plan.bytes_after is None and plan.written_paths == ()
    assert store_files(store, "d") == files and store.read_bytes("d/manifest.json") == manifest
    done = ds.compact_dataset("d")
    assert (plan.files_read, plan.files_written, plan.bytes_before, plan.rows, plan.read_paths) == (
        done.files_read,
        done.files_written,
        done.bytes_before,
        done.rows,
        done.read_paths,
    )


def test_bad_input_changes_nothing(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    with pytest.raises(DatasetNotFound):
        ds.compact_dataset("nope")
    appended(ds, "b", [10, 10, 10])
    files = store_files(store, "b")
    for bad in (0, -5, 1.5, True, "128MiB", None):
        with pytest.raises(ValueError, match="target_file_bytes"):
            ds.compact_dataset("b", target_file_bytes=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nope"):
        ds.compact_dataset("b", filters=[("nope", "=", 1)])
    with pytest.raises(ValueError):
        ds.compact_dataset("../b")
    assert store_files(store, "b") == files
    store.write_bytes("b/manifest.json", b'{"dataset_key": "b", "parts": [')
    with pytest.raises(ManifestCorrupted):
        ds.compact_dataset("b")
    assert store_files(store, "b") == files


# ---------------------------------------------------------------- concurrency


class DuringCompaction(WrappingStore):
    """Runs ``meanwhile`` (another writer, on the inner store) once the compaction
    starts writing its new file: after it planned and read, before it commits.
    With ``every``, runs it before every such write (so every attempt loses)."""

    def __init__(self, inner: Store, meanwhile: Callable[[], object], every: bool = False) -> None:
        super().__init__(inner)
        self.meanwhile = meanwhile
        self.every = every
        self.runs = 0

    def open_output(self, path: str):  # type: ignore[no-untyped-def]
        if path.endswith("-c.parquet") and (self.every or self.runs == 0):
            self.runs += 1
            self.meanwhile()
        return super().open_output(path)


def test_append_committed_during_compaction_is_kept(store: Store) -> None:
    plain = ParquetDatasetStore(store, retain_versions=1)
    before = appended(plain, "a", [10, 11, 12, 13])
    other = ParquetDatasetStore(store, retain_versions=1)
    wrapped = DuringCompaction(store, lambda: other.append_dataset(batch(100, 9), "a"))
    result = ParquetDatasetStore(wrapped, retain_versions=1).compact_dataset("a")
    assert wrapped.runs == 1
    manifest = plain.read_manifest("a")
    assert manifest.operation == "compact" and manifest.version == result.version
    # The compacted file comes first (where the files it replaced were), the append after it.
    assert manifest.parts[0] == result.written_paths[0] and len(manifest.parts) == 2
    assert plain.read_dataset("a").equals(pa.concat_tables([before, batch(100, 9)]))
    assert data_files(store, "a") == set(manifest.parts)


def test_append_with_new_column_during_compaction_is_kept(store: Store) -> None:
    plain = ParquetDatasetStore(store)
    appended(plain, "n", [10, 10, 10])
    extra = batch(30, 5).append_column("note", pa.array(["z"] * 5))
    wrapped = DuringCompaction(store, lambda: plain.append_dataset(extra, "n", allow_new_columns=True))
    ParquetDatasetStore(wrapped).compact_dataset("n")
    manifest = plain.read_manifest("n")
    assert manifest.operation == "compact" and manifest.files[0].missing_columns == ("note",)
    got = plain.read_dataset("n")
    assert got.column("id").to_pylist() == list(range(35))
    assert got.column("note").to_pylist() == [None] * 30 + ["z"] * 5


def test_overwrite_during_compaction_makes_it_plan_again(store: Store) -> None:
    plain = ParquetDatasetStore(store, retain_versions=1)
    appended(plain, "o", [10, 10, 10])
    replacement = batch(500, 7)
    replaced: list[str] = []

    def overwrite_with_appends() -> None:
        plain.write_dataset(replacement.slice(0, 3), "o", overwrite=True)
        replaced.extend(plain.append_dataset(replacement.slice(3), "o").parts)

    wrapped = DuringCompaction(store, overwrite_with_appends)
    result = ParquetDatasetStore(wrapped, retain_versions=1).compact_dataset("o")
    # The first attempt read files the overwrite removed: it planned again on the new version.
    assert result.read_paths == tuple(replaced) and len(replaced) == 2
    assert plain.read_dataset("o").equals(replacement)
    assert data_files(store, "o") == set(plain.read_manifest("o").parts)


def test_merge_during_compaction_loses_no_update(store: Store) -> None:
    plain = ParquetDatasetStore(store)
    appended(plain, "m", [10, 10, 10])
    update = batch(12, 3, tag="updated")  # ids 12..14 live in the second file
    wrapped = DuringCompaction(store, lambda: plain.merge_dataset(update, "m", key_columns=["id"]))
    result = ParquetDatasetStore(wrapped).compact_dataset("m")
    assert result.version is not None
    got = plain.read_dataset("m")
    assert sorted(got.column("id").to_pylist()) == list(range(30))
    updated = got.filter(pc.field("id").isin([12, 13, 14]))
    assert set(updated.column("tag").to_pylist()) <= {f"updated{i % 7}" for i in range(12, 15)}
    assert updated.num_rows == 3


def test_compaction_gives_up_with_commit_conflict_and_changes_nothing(store: Store) -> None:
    plain = ParquetDatasetStore(store, retain_versions=1)
    appended(plain, "g", [10, 10, 10])
    counter = iter(range(1000, 10_000, 10))

    def overwrite() -> None:
        start = next(counter)
        plain.write_dataset(batch(start, 2), "g", overwrite=True)
        plain.append_dataset(batch(start + 2, 2), "g")

    wrapped = DuringCompaction(store, overwrite, every=True)
    with pytest.raises(CommitConflict, match="compact"):
        ParquetDatasetStore(wrapped, commit_timeout=0.2, retain_versions=1).compact_dataset("g")
    assert wrapped.runs >= 1
    last = plain.read_dataset("g")
    assert last.num_rows == 4 and plain.read_manifest("g").operation == "append"
    assert data_files(store, "g") == set(plain.read_manifest("g").parts)  # the compaction's files are gone


def test_concurrent_appenders_and_readers_see_whole_versions(store: Store) -> None:
    """Four appenders, a reader and two compactors at once."""
    ds = ParquetDatasetStore(store, max_workers=2)
    batches = 4 * 6
    rows_per = 5
    ds.append_dataset(batch(0, rows_per), "c")
    stop = threading.Event()
    errors: list[BaseException] = []
    seen_versions: list[int] = []

    def check_whole(table: pa.Table) -> None:
        ids = table.column("id").to_pylist()
        assert len(ids) == len(set(ids)), "a row appears twice"
        present = {i // rows_per for i in ids}
        for b in present:  # every batch is there whole, in order, or not at all
            start = ids.index(b * rows_per)
            assert ids[start : start + rows_per] == list(range(b * rows_per, (b + 1) * rows_per))

    def appender(w: int) -> None:
        try:
            for n in range(w + 1, batches, 4):
                if n == 0:
                    continue
                ds.append_dataset(batch(n * rows_per, rows_per), "c")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def reader() -> None:
        try:
            while not stop.is_set():
                check_whole(ParquetDatasetStore(store).read_dataset("c"))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def compactor() -> None:
        try:
            while not stop.is_set():
                result = ds.compact_dataset("c")
                if result.version is not None:
                    seen_versions.append(result.version)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    appenders = [threading.Thread(target=appender, args=(w,)) for w in range(-1, 3)]
    others = [threading.Thread(target=reader), threading.Thread(target=compactor), threading.Thread(target=compactor)]
    for t in [*appenders, *others]:
        t.start()
    for t in appenders:
        t.join()
    stop.set()
    for t in others:
        t.join()
    assert not errors, errors
    final = ds.read_dataset("c")
    check_whole(final)
    assert sorted(final.column("id").to_pylist()) == list(range(batches * rows_per))
    assert seen_versions, "compaction never committed while appends ran"
    ds.compact_dataset("c")
    assert ds.read_dataset("c").column("id").to_pylist() == final.column("id").to_pylist()
    assert len(ds.read_manifest("c").parts) == 1


# ---------------------------------------------------------------- crashes, history, vacuum


def test_crash_at_every_store_call_keeps_old_or_new_version(store: Store) -> None:
    faulty = FaultyStore(store)
    crashing = ParquetDatasetStore(faulty, max_workers=1, retain_versions=1)
    plain = ParquetDatasetStore(store, retain_versions=1)
    at = 0
    outcomes: set[str] = set()
    while True:
        at += 1
        key = f"x{at}"
        before = appended(plain, key, [10, 0, 12, 7], partitions=2)
        old = plain.read_manifest(key)
        faulty.arm(Fault("crash", at))
        try:
            crashing.compact_dataset(key)
        except InjectedCrash:
            pass
        finally:
            crashed = faulty.crashed
            faulty.disarm()
        live = plain.read_manifest(key)
        assert live.version in (old.version, old.version + 1), f"crash at call {at}"
        after = plain.read_dataset(key)
        for p in range(2):
            assert after.filter(pc.field("p") == p).equals(before.filter(pc.field("p") == p)), f"crash at call {at}"
        outcomes.add("new" if live.version > old.version else "old")
        # A later compaction and a vacuum leave exactly the live version's files.
        plain.compact_dataset(key)
        plain.vacuum(key, grace_period=0)
        final = plain.read_manifest(key)
        assert len(final.parts) == 2
        assert data_files(store, key) == set(final.parts), f"crash at call {at}"
        for p in range(2):
            got = plain.read_dataset(key).filter(pc.field("p") == p)
            assert got.equals(before.filter(pc.field("p") == p)), f"crash at call {at}"
        if not crashed:
            break
    assert at > 5 and outcomes == {"old", "new"}


def test_history_and_vacuum_after_compaction(store: Store) -> None:
    ds = ParquetDatasetStore(store, retain_versions=None)
    before = appended(ds, "h", [10, 20, 30])
    old = ds.read_manifest("h")
    result = ds.compact_dataset("h")
    history = ds.history("h")
    assert [m.version for m in history][:2] == [old.version + 1, old.version]
    assert history[0].operation == "compact"
    # The version before compaction stays readable, from its own small files.
    assert ds.read_dataset("h", version=old.version).equals(before)
    assert set(result.read_paths) <= data_files(store, "h")
    dry = ds.vacuum("h", retain_versions=1, dry_run=True)
    assert {f"h/{p}" for p in result.read_paths} <= set(dry.deleted)
    done = ds.vacuum("h", retain_versions=1)
    assert done.retained_versions == (result.version,)
    assert data_files(store, "h") == set(result.written_paths)
    assert ds.read_dataset("h").equals(before)


def test_retained_versions_keep_replaced_files_until_they_drop_out(store: Store) -> None:
    ds = ParquetDatasetStore(store, retain_versions=2)
    before = appended(ds, "r", [10, 10, 10])
    result = ds.compact_dataset("r")
    assert set(result.read_paths) <= data_files(store, "r")  # the previous version is retained
    ds.append_dataset(batch(30, 5), "r")  # the pre-compaction version drops out
    assert not set(result.read_paths) & data_files(store, "r")
    assert ds.read_dataset("r").equals(pa.concat_tables([before, batch(30, 5)]))


def test_lost_commit_response_is_recognised_not_repeated(store: Store) -> None:
    plain = ParquetDatasetStore(store, retain_versions=1)
    before = appended(plain, "l", [10, 10, 10])
    old = plain.read_manifest("l")
    for lost_as in ("conflict", "timeout"):
        plain.append_dataset(batch(1000, 1), "l")
        plain.append_dataset(batch(1001, 1), "l")
        before = plain.read_dataset("l")
        faulty = FaultyStore(store)
        faulty.arm(Fault("lost", 1, op="write_if", suffix="manifest.json", lost_as=lost_as))
        result = ParquetDatasetStore(faulty, retain_versions=1).compact_dataset("l")
        assert faulty.lost
        live = plain.read_manifest("l")
        assert live.version == result.version and live.operation == "compact"
        assert plain.read_dataset("l").equals(before)
        assert data_files(store, "l") == set(live.parts)
    assert live.version == old.version + 6


def test_store_without_delete_cannot_compact_but_can_plan(store: Store) -> None:
    appended(ParquetDatasetStore(store), "w", [10, 10])
    files = store_files(store, "w")
    limited = ParquetDatasetStore(WrappingStore(store, capabilities=frozenset(Capability) - {Capability.DELETE}))
    assert limited.compact_dataset("w", dry_run=True).files_read == 2
    with pytest.raises(CapabilityNotSupported, match="DELETE"):
        limited.compact_dataset("w")
    assert store_files(store, "w") == files


def test_filters_that_select_nothing_make_no_version(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    appended(ds, "z", [10, 10, 10], partitions=3)
    version = ds.read_manifest("z").version
    result = ds.compact_dataset("z", filters=[("p", "=", 99)])
    assert (result.files_read, result.version) == (0, None)
    # One file per partition folder: nothing to pack either.
    assert ds.compact_dataset("z").version is None
    assert ds.read_manifest("z").version == version


def test_plan_groups_packs_only_consecutive_files_of_one_folder() -> None:
    from dagster_parquet_dataset import FileEntry
    from dagster_parquet_dataset.dataset.ops.compact import plan_groups

    def f(name: str, size: int | None, p: int | None = None) -> FileEntry:
        folder = f"p={p}/" if p is not None else ""
        return FileEntry(f"{folder}{name}", 1, size, {"p": p} if p is not None else None)

    flat = [f("a", 10), f("b", 10), f("c", 10), f("big", 60), f("d", 10), f("e", None), f("g", 10), f("h", 10)]
    every = {e.path for e in flat}
    groups = plan_groups(flat, (), every, 100)
    assert [[e.path for e in g.entries] for g in groups] == [["a", "b", "c"], ["g", "h"]]
    # A file the filters did not select ends the run like a big one.
    groups = plan_groups(flat, (), every - {"b"}, 100)
    assert [[e.path for e in g.entries] for g in groups] == [["g", "h"]]
    # The target caps a group's bytes.
    groups = plan_groups(flat, (), every, 25)
    assert [[e.path for e in g.entries] for g in groups] == [["a", "b"], ["g", "h"]]
    # Partition folders interleave in the manifest but are packed separately, each in its own order.
    parted = [f("a", 10, 0), f("b", 10, 1), f("c", 10, 0), f("d", 60, 1), f("e", 10, 1), f("g", 10, 0)]
    groups = plan_groups(parted, ("p",), {e.path for e in parted}, 100)
    assert [(g.folder, [e.path for e in g.entries]) for g in groups] == [("p=0", ["p=0/a", "p=0/c", "p=0/g"])]


@pytest.mark.timeout(60)
def test_a_deleted_part_fails_compaction_at_once_not_after_commit_timeout(store: Store) -> None:
    ds = ParquetDatasetStore(store, commit_timeout=30)
    appended(ds, "k", [10, 10, 10])
    manifest = ds.read_manifest("k")
    store.delete(f"k/{manifest.files[1].path}")
    with pytest.raises(DatasetIncomplete, match="missing"):
        ds.compact_dataset("k")
    assert ds.read_manifest("k").version == manifest.version
    assert data_files(store, "k") == {f.path for f in manifest.files} - {manifest.files[1].path}
