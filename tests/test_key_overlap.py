"""Dataset keys that overlap another dataset's files (issue 18, #2).

A key inside another dataset's folder that is one of its partition folders,
one of its listed files, or a name a dataset keeps for itself (``_versions``,
``manifest.json``, ...) is refused with a ``ValueError`` naming the other
dataset, before anything is written or deleted; a partitioned write whose
partition folder already holds another dataset is refused too. Plain nested
datasets stay allowed.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore, Store
from dagster_parquet_dataset.dataset.format import segments
from tests._stores import ThreadRecordingStore, WrappingStore

RESERVED = [
    "_versions",
    "_segments",
    "manifest.json",
    "_SUCCESS",
    "_claim",
    "_spark_staging-0123abcd",
    ".manifest.json.lock",
]


def events(days: list[int], start: int = 0) -> pa.Table:
    return pa.table(
        {
            "day": pa.array(days, pa.int64()),
            "id": pa.array(range(start, start + len(days)), pa.int64()),
        }
    )


def plain(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def snapshot(store: Store, folder: str) -> dict[str, bytes]:
    """Every file under ``folder`` with its content."""
    return {f.path: store.read_bytes(f.path) for f in store.list_files(folder)}


@pytest.fixture
def ev(store: Store) -> ParquetDatasetStore:
    """``ev`` partitioned by ``day``, one row per part, so its parts carry the Spec names."""
    datasets = ParquetDatasetStore(store, max_rows_per_file=1)
    datasets.write_dataset(events([1, 1, 2]), "ev", partition_by=["day"])
    assert "day=1/part-00000.parquet" in datasets.read_manifest("ev").parts
    return datasets


# ------------------------------------------------------------------------- partition folders of another dataset


@pytest.mark.parametrize("key", ["ev/day=1", "ev/day=1/sub", "ev/day=9"])
def test_write_into_a_partition_folder_is_refused(ev: ParquetDatasetStore, store: Store, key: str) -> None:
    before = snapshot(store, "ev")
    with pytest.raises(ValueError, match=r"inside the dataset 'ev'.*partition folders.*\['day'\]"):
        ev.write_dataset(plain(2), key)
    with pytest.raises(ValueError, match=r"inside the dataset 'ev'"):
        ev.write_dataset(plain(2), key, overwrite=True)
    assert snapshot(store, "ev") == before
    assert sorted(ev.read_dataset("ev")["id"].to_pylist()) == [0, 1, 2]


def test_append_and_merge_into_a_partition_folder_are_refused(ev: ParquetDatasetStore, store: Store) -> None:
    before = snapshot(store, "ev")
    with pytest.raises(ValueError, match=r"inside the dataset 'ev'"):
        ev.append_dataset(plain(2), "ev/day=1")
    with pytest.raises(ValueError, match=r"inside the dataset 'ev'"):
        ev.merge_dataset(plain(2), "ev/day=1", key_columns=["id"])
    assert snapshot(store, "ev") == before


def test_external_writes_into_a_partition_folder_are_refused(ev: ParquetDatasetStore, store: Store) -> None:
    before = snapshot(store, "ev")
    schema = plain(1).schema
    with pytest.raises(ValueError, match=r"inside the dataset 'ev'"):
        ev.begin_write("ev/day=2")
    with pytest.raises(ValueError, match=r"inside the dataset 'ev'"):
        ev.begin_append("ev/day=2", schema)
    with pytest.raises(ValueError, match=r"inside the dataset 'ev'"):
        ev.plan_merge("ev/day=2", source_schema=schema, key_columns=["id"], key_ranges={"id": (0, 1)})
    assert snapshot(store, "ev") == before


def test_key_naming_a_listed_file_of_another_dataset_is_refused(store: Store) -> None:
    datasets = ParquetDatasetStore(store, max_rows_per_file=2)
    datasets.write_dataset(plain(4), "a")
    before = snapshot(store, "a")
    with pytest.raises(ValueError, match=r"inside the dataset 'a'.*lists the file 'part-00000.parquet'"):
        datasets.write_dataset(plain(1), "a/part-00000.parquet")
    with pytest.raises(ValueError, match=r"inside the dataset 'a'.*lists the file 'part-00001.parquet'"):
        datasets.write_dataset(plain(1), "a/part-00001.parquet/below")
    assert snapshot(store, "a") == before


def test_every_ancestor_is_checked(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(events([1, 2]), "x/ev", partition_by=["day"])
    datasets.write_dataset(plain(1), "x/ev/plain")  # a nested dataset, not a partition folder
    with pytest.raises(ValueError, match=r"inside the dataset 'x/ev'"):
        datasets.write_dataset(plain(1), "x/ev/day=2/deeper/still")


# ----------------------------------------------------------------------------------------------- reserved names


@pytest.mark.parametrize("name", RESERVED)
def test_reserved_names_are_refused_without_io(store: Store, name: str) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(plain(3), "a")
    before = snapshot(store, "a")
    counting = WrappingStore(store)
    with pytest.raises(ValueError, match=rf"uses the name '{name}', inside the folder of 'a'"):
        ParquetDatasetStore(counting).write_dataset(plain(1), f"a/{name}")
    with pytest.raises(ValueError, match=rf"uses the name '{name}'"):
        ParquetDatasetStore(counting).merge_dataset(plain(1), f"{name}/b", key_columns=["id"])
    assert counting.log == []
    with pytest.raises(ValueError, match=rf"uses the name '{name}'"):
        ParquetDatasetStore(counting).append_dataset(plain(1), f"a/{name}/b")
    assert {op for op, _path in counting.log} <= {"exists", "read_bytes", "read_versioned", "size"}
    assert snapshot(store, "a") == before


def test_retained_versions_are_not_a_dataset_key(store: Store) -> None:
    datasets = ParquetDatasetStore(store, retain_versions=3)
    datasets.write_dataset(plain(2), "a")
    datasets.append_dataset(plain(2, start=2), "a")
    before = snapshot(store, "a")
    assert any("/_versions/" in p for p in before)
    with pytest.raises(ValueError, match=r"uses the name '_versions', inside the folder of 'a'"):
        datasets.delete_dataset("a/_versions")
    with pytest.raises(ValueError, match=r"uses the name '_versions'"):
        datasets.vacuum("a/_versions")
    assert snapshot(store, "a") == before
    assert [m.version for m in datasets.history("a")] == [2, 1]


def test_segments_are_not_a_dataset_key(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """``_segments`` is reserved like ``_versions``: deleting, writing or vacuuming ``a/_segments`` would
    remove ``a``'s manifest segments (issue 26, #3)."""
    monkeypatch.setattr(segments, "INLINE_ENTRIES", 32)  # so 40 files need a segment (the default inlines up to 256)
    datasets = ParquetDatasetStore(store, max_rows_per_file=1)
    datasets.write_dataset(plain(40), "a")  # more than 32 files: the entries live in a segment
    before = snapshot(store, "a")
    assert any("/_segments/" in p for p in before)
    with pytest.raises(ValueError, match=r"uses the name '_segments', inside the folder of 'a'"):
        datasets.delete_dataset("a/_segments")
    with pytest.raises(ValueError, match=r"uses the name '_segments', inside the folder of 'a'"):
        datasets.write_dataset(plain(1), "a/_segments")
    with pytest.raises(ValueError, match=r"uses the name '_segments'"):
        datasets.write_dataset(plain(1), "a/_segments", overwrite=True)
    with pytest.raises(ValueError, match=r"uses the name '_segments'"):
        datasets.vacuum("a/_segments")
    with pytest.raises(ValueError, match=r"uses the name '_segments'"):
        datasets.compact_dataset("a/_segments")
    assert snapshot(store, "a") == before
    assert sorted(ParquetDatasetStore(store).read_dataset("a")["id"].to_pylist()) == list(range(40))


@pytest.mark.parametrize("name", ["_delta_log", "_delta_manifests"])
def test_delta_log_is_not_a_dataset_key(store: Store, name: str) -> None:
    """``_delta_log`` (and ``_delta_manifests``) are reserved like ``_segments``: deleting, writing or
    vacuuming ``a/_delta_log`` would remove ``a``'s Delta log (issue 29)."""
    datasets = ParquetDatasetStore(store, delta_log=True)
    datasets.write_dataset(plain(3), "a")
    datasets.append_dataset(plain(1, 3), "a")
    if name == "_delta_manifests":  # a saved manifest, as a commit whose log write found the log behind leaves
        store.write_bytes(f"a/{name}/00000000000000000009.json", b"{}")
    before = snapshot(store, "a")
    assert any(f"/{name}/" in p for p in before)
    with pytest.raises(ValueError, match=rf"uses the name '{name}', inside the folder of 'a'"):
        datasets.delete_dataset(f"a/{name}")
    with pytest.raises(ValueError, match=rf"uses the name '{name}', inside the folder of 'a'"):
        datasets.write_dataset(plain(1), f"a/{name}")
    with pytest.raises(ValueError, match=rf"uses the name '{name}'"):
        datasets.write_dataset(plain(1), f"a/{name}", overwrite=True)
    with pytest.raises(ValueError, match=rf"uses the name '{name}'"):
        datasets.vacuum(f"a/{name}")
    with pytest.raises(ValueError, match=rf"uses the name '{name}'"):
        datasets.compact_dataset(f"a/{name}")
    assert snapshot(store, "a") == before
    assert sorted(ParquetDatasetStore(store).read_dataset("a")["id"].to_pylist()) == [0, 1, 2, 3]


# ------------------------------------------------------------------- delete, vacuum, compact of an overlapping key


def test_delete_vacuum_and_compact_of_a_partition_folder_are_refused(ev: ParquetDatasetStore, store: Store) -> None:
    before = snapshot(store, "ev")
    with pytest.raises(ValueError, match=r"inside the dataset 'ev'"):
        ev.delete_dataset("ev/day=1")
    with pytest.raises(ValueError, match=r"inside the dataset 'ev'"):
        ev.vacuum("ev/day=1", grace_period=0)
    with pytest.raises(ValueError, match=r"inside the dataset 'ev'"):
        ev.compact_dataset("ev/day=1")
    assert snapshot(store, "ev") == before
    assert sorted(ev.read_dataset("ev")["id"].to_pylist()) == [0, 1, 2]


# --------------------------------------------------------------------------- the reverse: a folder holding a dataset


def test_partitioned_create_over_a_nested_dataset_is_refused_before_writing(store: Store) -> None:
    datasets = ParquetDatasetStore(store, max_rows_per_file=1)
    datasets.write_dataset(plain(2), "q/day=2")
    before = snapshot(store, "q")
    with pytest.raises(ValueError, match=r"partition folder 'day=2' already holds the dataset 'q/day=2'"):
        datasets.write_dataset(events([1, 2, 3]), "q", partition_by=["day"])
    assert snapshot(store, "q") == before  # nothing written: no part, no _claim
    assert datasets.read_dataset("q/day=2")["id"].to_pylist() == [0, 1]


def test_partitioned_stream_over_a_nested_dataset_leaves_only_that_dataset(store: Store) -> None:
    datasets = ParquetDatasetStore(store, max_rows_per_file=1)
    datasets.write_dataset(plain(2), "q/day=2")
    before = snapshot(store, "q")
    stream = pa.RecordBatchReader.from_batches(events([1]).schema, events([1, 1, 2, 3]).to_batches(max_chunksize=1))
    with pytest.raises(ValueError, match=r"already holds the dataset 'q/day=2'"):
        datasets.write_dataset(stream, "q", partition_by=["day"])
    assert snapshot(store, "q") == before
    assert not datasets.dataset_exists("q")


def test_multi_level_partition_folders_are_checked_at_every_level(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(plain(1), "m/a=1/b=x")
    table = pa.table({"a": [1, 1], "b": ["x", "y"], "v": [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"partition folder 'a=1/b=x' already holds the dataset 'm/a=1/b=x'"):
        datasets.write_dataset(table, "m", partition_by=["a", "b"])
    datasets.write_dataset(plain(1), "n/a=1")
    with pytest.raises(ValueError, match=r"partition folder 'a=1' already holds the dataset 'n/a=1'"):
        datasets.write_dataset(table, "n", partition_by=["a", "b"])


def test_append_and_merge_into_a_folder_holding_a_dataset_are_refused(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(plain(2), "ev/day=3")  # created while "ev" did not exist
    datasets.write_dataset(events([1, 2]), "ev", partition_by=["day"])
    before = snapshot(store, "ev")
    with pytest.raises(ValueError, match=r"already holds the dataset 'ev/day=3'"):
        datasets.append_dataset(events([3], start=10), "ev")
    with pytest.raises(ValueError, match=r"already holds the dataset 'ev/day=3'"):
        datasets.merge_dataset(events([3], start=10), "ev", key_columns=["id"])
    assert snapshot(store, "ev") == before
    assert datasets.read_dataset("ev/day=3")["id"].to_pylist() == [0, 1]
    assert sorted(datasets.read_dataset("ev")["id"].to_pylist()) == [0, 1]


# ------------------------------------------------------------------------------------- what stays allowed


def test_plain_nested_datasets_stay_allowed(store: Store) -> None:
    datasets = ParquetDatasetStore(store, max_rows_per_file=1)
    datasets.write_dataset(events([1, 2]), "ev", partition_by=["day"])
    datasets.write_dataset(plain(2), "ev/sub")  # not a partition folder of "ev"
    datasets.append_dataset(plain(1, start=2), "ev/sub")
    datasets.merge_dataset(plain(1, start=5), "ev/sub", key_columns=["id"])
    datasets.write_dataset(plain(2), "flat")
    datasets.write_dataset(plain(1), "flat/day=1")  # "flat" is not partitioned: not its partition folder
    datasets.write_dataset(plain(1), "flat/day=1/deeper")
    assert sorted(datasets.read_dataset("ev/sub")["id"].to_pylist()) == [0, 1, 2, 5]
    assert sorted(datasets.read_dataset("ev")["id"].to_pylist()) == [0, 1]
    assert datasets.read_dataset("flat/day=1")["id"].to_pylist() == [0]
    assert sorted(datasets.read_dataset("flat")["id"].to_pylist()) == [0, 1]
    # A partitioned overwrite of "ev" still works beside its nested dataset.
    datasets.write_dataset(events([4, 5], start=7), "ev", partition_by=["day"], overwrite=True)
    assert sorted(datasets.read_dataset("ev")["id"].to_pylist()) == [7, 8]


def test_ancestor_check_costs_one_exists_per_level(store: Store) -> None:
    ParquetDatasetStore(store).write_dataset(plain(1), "a")
    counting = WrappingStore(store)
    ParquetDatasetStore(counting).begin_write("a/b/c/d")
    ancestors = [f"{a}/manifest.json" for a in ("a", "a/b", "a/b/c")]
    assert sorted(p for op, p in counting.log if op == "exists" and p in ancestors) == sorted(ancestors)
    # Only the manifest that exists is read, once.
    assert [p for op, p in counting.log if op in ("read_bytes", "read_versioned") and p in ancestors] == [
        "a/manifest.json"
    ]


def test_key_checks_run_in_the_calling_thread_on_a_local_store_and_on_threads_on_s3(store: Store) -> None:
    """The ``exists`` checks above a key and in a partitioned write's folders are each a thread hand-off
    on a store whose reads wait on the network (S3), and run in turn on a local one (``Store.local_reads``:
    three ``exists`` on local disk took 250 us on the pool, 27 us inline), with the same refusals."""
    import threading

    from dagster_parquet_dataset import S3Store

    ParquetDatasetStore(store).write_dataset(events([1, 2]), "lake/sales", partition_by=["day"])
    recording = ThreadRecordingStore(store)
    datasets = ParquetDatasetStore(recording)
    datasets.write_dataset(events([1, 2, 3, 4]), "lake/x/y/z", partition_by=["day"])
    with pytest.raises(ValueError, match="lake/sales"):
        datasets.write_dataset(plain(1), "lake/sales/day=1/q")
    threads = recording.threads_of("exists")
    assert threads
    on_caller = threads == {threading.get_ident()}
    assert on_caller == (not isinstance(store, S3Store))
    assert store.local_reads == on_caller
