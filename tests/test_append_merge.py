"""Append, merge by key columns, versions and vacuum (issue 5, items 4-7)."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import threading
import time

import pyarrow as pa
import pytest

from dagster_parquet_dataset import DatasetNotFound, LocalStore, NotFound, ParquetDatasetStore, Store
from tests._stores import CrashingStore, InjectedCrash


def rows(ids: range | list[int], value: str = "v0", day: dt.date | None = None) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "value": pa.array([f"{value}-{i}" for i in ids], pa.string()),
            "day": pa.array([day or dt.date(2025, 1, 1 + i % 2) for i in ids], pa.date32()),
        }
    )


def by_id(table: pa.Table) -> dict[int, dict]:  # type: ignore[type-arg]
    return {r["id"]: r for r in table.to_pylist()}


# Append ----------------------------------------------------------------------


def test_append_adds_rows_and_keeps_files(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    first = ds.append_dataset(rows(range(5)), "t")  # creates
    second = ds.append_dataset(rows(range(5, 8)), "t")
    assert second.version == first.version + 1 and second.operation == "append"
    assert set(first.parts) < set(second.parts)
    assert ds.read_dataset("t").sort_by("id").equals(rows(range(8)))


def test_append_schema_mismatch_names_the_columns(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(rows(range(3)), "t")
    bad = rows(range(3)).set_column(1, "value", pa.array([1, 2, 3], pa.int32()))
    with pytest.raises(ValueError, match="'value' is int32"):
        ds.append_dataset(bad, "t")
    with pytest.raises(ValueError, match=r"missing columns \['day'\]"):
        ds.append_dataset(rows(range(3)).drop_columns(["day"]), "t")
    extra = rows(range(3, 5)).append_column("note", pa.array(["x", None]))
    with pytest.raises(ValueError, match="allow_new_columns"):
        ds.append_dataset(extra, "t")
    assert ds.read_manifest("t").version == 1
    ds.append_dataset(extra, "t", allow_new_columns=True)
    got = ds.read_dataset("t").sort_by("id")
    assert got.column_names == ["id", "value", "day", "note"]
    assert got.column("note").to_pylist() == [None, None, None, "x", None]
    assert ds.read_dataset("t", filters=[("note", "is null", None)]).num_rows == 4


def test_append_to_partitioned_dataset_keeps_partitioning(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(rows(range(4)), "t", partition_by=["day"])
    manifest = ds.append_dataset(rows(range(4, 6)), "t")
    assert all(p.startswith("day=") for p in manifest.parts)
    with pytest.raises(ValueError, match="partitioned by"):
        ds.append_dataset(rows(range(6, 7)), "t", partition_by=["id"])
    assert ds.read_dataset("t").sort_by("id").equals(rows(range(6)))


def test_concurrent_appenders_in_threads_lose_no_rows(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(rows(range(0)), "t")
    writers, per = 4, 3
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def append(w: int) -> None:
        barrier.wait()
        try:
            for j in range(per):
                start = 1000 * w + 10 * j
                ParquetDatasetStore(store).append_dataset(rows(range(start, start + 5)), "t")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    got = ds.read_dataset("t")
    assert got.num_rows == writers * per * 5
    assert len(set(got.column("id").to_pylist())) == got.num_rows
    assert ds.read_manifest("t").version == 1 + writers * per


def _append_in_process(root: str, worker: int) -> None:
    ds = ParquetDatasetStore(LocalStore(root))
    for j in range(3):
        start = 1000 * worker + 10 * j
        ds.append_dataset(rows(range(start, start + 4)), "t")


def test_concurrent_appenders_in_processes_lose_no_rows(tmp_path) -> None:
    root = str(tmp_path / "store")
    ParquetDatasetStore(LocalStore(root)).write_dataset(rows(range(0)), "t")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_in_process, args=(root, w)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    got = ParquetDatasetStore(LocalStore(root)).read_dataset("t")
    assert got.num_rows == 3 * 3 * 4 and len(set(got.column("id").to_pylist())) == got.num_rows


# Merge by key columns --------------------------------------------------------


def test_upsert_replaces_full_rows_and_inserts_new(store: Store) -> None:
    ds = ParquetDatasetStore(store, max_rows_per_file=10)
    ds.write_dataset(rows(range(30)), "t")
    source = pa.table(
        {
            "id": pa.array([12, 15, 100], pa.int64()),
            "value": ["new-12", None, "new-100"],
            "day": pa.array([dt.date(2025, 1, 1)] * 3, pa.date32()),
        }
    )
    before = ds.read_manifest("t")
    result = ds.merge_dataset(source, "t", key_columns=["id"])
    assert (result.inserted, result.updated) == (1, 2)
    assert result.rewritten_files == ("part-00001.parquet",)  # only the file holding ids 10..19
    assert set(result.preserved_files) == {"part-00000.parquet", "part-00002.parquet"}
    got = by_id(ds.read_dataset("t"))
    assert len(got) == 31
    assert got[12] == {"id": 12, "value": "new-12", "day": dt.date(2025, 1, 1)}
    assert got[15]["value"] is None  # full-row replacement, nulls included
    assert got[13] == by_id(rows(range(30)))[13]
    assert ds.read_manifest("t").version == before.version + 1


def test_statistics_pruning_excludes_non_overlapping_files(store: Store) -> None:
    recorder_store = store
    ds = ParquetDatasetStore(recorder_store, max_rows_per_file=10)
    ds.write_dataset(rows(range(100)), "t")
    result = ds.merge_dataset(rows([55], value="x"), "t", key_columns=["id"])
    assert result.rewritten_files == ("part-00005.parquet",)
    assert len(result.preserved_files) == 9


def test_missing_statistics_make_files_candidates_but_result_is_right(store: Store) -> None:
    import json

    ds = ParquetDatasetStore(store, max_rows_per_file=10)
    ds.write_dataset(rows(range(30)), "t")
    raw = json.loads(store.read_bytes("t/manifest.json"))
    for f in raw["files"]:
        f.pop("stats")
    store.write_bytes("t/manifest.json", json.dumps(raw).encode())
    result = ds.merge_dataset(rows([25], value="x"), "t", key_columns=["id"])
    assert result.rewritten_files == ("part-00002.parquet",)  # confirmed by reading keys
    assert by_id(ds.read_dataset("t"))[25]["value"] == "x-25"


def test_partition_pruning_and_partition_move_rejected(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(rows(range(10)), "t", partition_by=["day"])  # even ids on day 1, odd on day 2
    ok = ds.merge_dataset(
        rows([2, 4], value="u", day=dt.date(2025, 1, 1)), "t", key_columns=["id"], partition_by=["day"]
    )
    assert all(p.startswith("day=2025-01-01") for p in ok.rewritten_files)
    assert all(p.startswith("day=2025-01-02") for p in ok.preserved_files)
    version = ds.read_manifest("t").version
    with pytest.raises(ValueError, match="partition columns cannot change"):
        ds.merge_dataset(rows([3], value="m", day=dt.date(2025, 1, 1)), "t", key_columns=["id"], partition_by=["day"])
    assert ds.read_manifest("t").version == version
    assert by_id(ds.read_dataset("t"))[3]["day"] == dt.date(2025, 1, 2)


def test_merge_rejects_bad_sources(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(rows(range(5)), "t")
    with pytest.raises(ValueError, match="duplicate"):
        ds.merge_dataset(rows([1, 1]), "t", key_columns=["id"])
    nulls = pa.table({"id": pa.array([None], pa.int64()), "value": ["x"], "day": pa.array([None], pa.date32())})
    with pytest.raises(ValueError, match="null"):
        ds.merge_dataset(nulls, "t", key_columns=["id"])
    with pytest.raises(ValueError, match="strategy"):
        ds.merge_dataset(rows([1]), "t", key_columns=["id"], strategy="replace")
    with pytest.raises(ValueError, match="'nope'"):
        ds.merge_dataset(rows([1]), "t", key_columns=["nope"])
    assert ds.read_manifest("t").version == 1


def test_insert_and_update_strategies(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(rows(range(3)), "t")
    r = ds.merge_dataset(rows([1, 7], value="i"), "t", key_columns=["id"], strategy="insert")
    assert (r.inserted, r.updated, r.rewritten_files) == (1, 0, ())
    got = by_id(ds.read_dataset("t"))
    assert got[1]["value"] == "v0-1" and got[7]["value"] == "i-7"
    r = ds.merge_dataset(rows([2, 9], value="u"), "t", key_columns=["id"], strategy="update")
    assert (r.inserted, r.updated) == (0, 1)
    got = by_id(ds.read_dataset("t"))
    assert got[2]["value"] == "u-2" and 9 not in got
    with pytest.raises(DatasetNotFound):
        ds.merge_dataset(rows([1]), "absent", key_columns=["id"], strategy="update")
    created = ds.merge_dataset(rows([1, 2]), "fresh", key_columns=["id"])
    assert created.inserted == 2 and ds.read_dataset("fresh").num_rows == 2


def test_composite_keys(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    base = pa.table({"a": [1, 1, 2], "b": ["x", "y", "x"], "v": [1, 2, 3]})
    ds.write_dataset(base, "t")
    ds.merge_dataset(pa.table({"a": [1, 3], "b": ["y", "x"], "v": [20, 30]}), "t", key_columns=["a", "b"])
    got = sorted((r["a"], r["b"], r["v"]) for r in ds.read_dataset("t").to_pylist())
    assert got == [(1, "x", 1), (1, "y", 20), (2, "x", 3), (3, "x", 30)]


def test_concurrent_merges_of_disjoint_keys_all_apply(store: Store) -> None:
    ds = ParquetDatasetStore(store, max_rows_per_file=10)
    ds.write_dataset(rows(range(40)), "t")
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def merge(w: int) -> None:
        barrier.wait()
        try:
            ParquetDatasetStore(store, max_rows_per_file=10).merge_dataset(
                rows([w * 10 + 1, 100 + w], value=f"w{w}"), "t", key_columns=["id"]
            )
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=merge, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    got = by_id(ds.read_dataset("t"))
    assert len(got) == 44
    for w in range(4):
        assert got[w * 10 + 1]["value"] == f"w{w}-{w * 10 + 1}"
        assert got[100 + w]["value"] == f"w{w}-{100 + w}"


def test_concurrent_upserts_of_the_same_new_key_never_duplicate(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(rows(range(5)), "t")
    barrier = threading.Barrier(3)

    def merge(w: int) -> None:
        barrier.wait()
        ParquetDatasetStore(store).merge_dataset(rows([50], value=f"w{w}"), "t", key_columns=["id"])

    threads = [threading.Thread(target=merge, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = ds.read_dataset("t").column("id").to_pylist()
    assert sorted(ids) == [0, 1, 2, 3, 4, 50]


def test_crash_at_every_step_of_a_merge_keeps_the_previous_version(store: Store) -> None:
    base = rows(range(20))
    source = rows([3, 15, 99], value="m")
    crash_at = 1
    while True:
        key = f"m{crash_at}"
        ParquetDatasetStore(store, max_rows_per_file=8).write_dataset(base, key)
        crashing = CrashingStore(store, crash_at=crash_at)
        try:
            ParquetDatasetStore(crashing, max_rows_per_file=8).merge_dataset(source, key, key_columns=["id"])
        except InjectedCrash:
            pass
        got = by_id(ParquetDatasetStore(store).read_dataset(key))
        committed = crashing.committed_before_crash(f"{key}/manifest.json")
        if not crashing.crashed:
            assert got[99]["value"] == "m-99"
            break
        if committed:
            assert got[3]["value"] == "m-3" and len(got) == 21
        else:
            assert got == by_id(base), f"crash at call {crash_at} ({crashing.log[crash_at - 1]}) changed the data"
        crash_at += 1
    assert crash_at > 5


# Versions and vacuum -----------------------------------------------------------


def test_history_and_reading_retained_versions(store: Store) -> None:
    ds = ParquetDatasetStore(store, retain_versions=3)
    for i in range(5):
        ds.write_dataset(rows(range(i + 1)), "t", overwrite=True)
    history = ds.history("t")
    assert [m.version for m in history] == [5, 4, 3]
    for v in (3, 4, 5):
        assert ds.read_dataset("t", version=v).num_rows == v
    with pytest.raises(NotFound, match="not retained"):
        ds.read_dataset("t", version=2)
    live = {f"t/{p}" for m in history for p in m.parts}
    data_files = {f.path for f in store.list_files("t") if f.path.endswith(".parquet")}
    assert data_files == live  # versions 1 and 2's files are gone


def test_default_retention_keeps_only_the_newest_files(store: Store) -> None:
    ds = ParquetDatasetStore(store, retain_versions=1)
    ds.write_dataset(rows(range(3)), "t")
    ds.append_dataset(rows(range(3, 5)), "t")
    ds.merge_dataset(rows([1], value="x"), "t", key_columns=["id"])
    assert [m.version for m in ds.history("t")] == [3]
    parts = set(ds.read_manifest("t").parts)
    assert {f.path[2:] for f in store.list_files("t") if f.path.endswith(".parquet")} == parts


def test_vacuum_removes_unreferenced_files_but_not_young_leftovers(store: Store) -> None:
    ds = ParquetDatasetStore(store, retain_versions=None)
    for i in range(3):
        ds.write_dataset(rows(range(i + 2)), "t", overwrite=True)
    store.write_bytes("t/part-00000-deadbeefdeadbeef.parquet", b"in-flight write")  # unknown, young
    plan = ds.vacuum("t", retain_versions=1, dry_run=True)
    assert plan.dry_run and plan.retained_versions == (3,)
    assert "t/part-00000-deadbeefdeadbeef.parquet" not in plan.deleted
    assert ds.read_dataset("t", version=1).num_rows == 2  # dry run deleted nothing
    result = ds.vacuum("t", retain_versions=1)
    assert set(result.deleted) == set(plan.deleted)
    with pytest.raises(NotFound):
        ds.read_dataset("t", version=1)
    assert ds.read_dataset("t").num_rows == 4
    assert store.exists("t/part-00000-deadbeefdeadbeef.parquet")
    old = ds.vacuum("t", grace_period=0)
    assert old.deleted == ("t/part-00000-deadbeefdeadbeef.parquet",)
    assert ds.read_dataset("t").num_rows == 4


def test_vacuum_older_than_keeps_the_live_version(store: Store) -> None:
    ds = ParquetDatasetStore(store, retain_versions=None)
    ds.write_dataset(rows(range(2)), "t")
    ds.write_dataset(rows(range(3)), "t", overwrite=True)
    time.sleep(0.05)
    result = ds.vacuum("t", older_than=0.01)
    assert result.retained_versions == (2,)
    assert ds.read_dataset("t").num_rows == 3
