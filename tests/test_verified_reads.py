"""Reads check that each file is the part the manifest means (issue 9 item 10), and still
read parts that earlier versions committed with a schema the manifest recorded differently."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dagster_parquet_dataset import (
    DatasetIncomplete,
    DatasetManifest,
    LocalStore,
    ManifestCorrupted,
    ParquetDatasetStore,
    Store,
)
from dagster_parquet_dataset.dataset.engine import PartCheck, PartsVanished, file_column_stats
from dagster_parquet_dataset.dataset.manifest import FileEntry, encode_schema, schema_hash


def _swap(store: Store, a: str, b: str) -> None:
    first, second = store.read_bytes(a), store.read_bytes(b)
    store.write_bytes(a, second)
    store.write_bytes(b, first)


def _two_equal_parts(datasets: ParquetDatasetStore) -> tuple[FileEntry, FileEntry]:
    datasets.write_dataset(pa.table({"p": [1, 2], "v": [10, 20]}), "t", partition_by=["p"])
    a, b = datasets.read_manifest("t").files
    assert (a.size_bytes, a.row_count) == (b.size_bytes, b.row_count)  # nothing but content tells them apart
    return a, b


def test_swapped_parts_are_an_error_not_rows_under_the_wrong_partition(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    a, b = _two_equal_parts(datasets)
    _swap(store, f"t/{a.path}", f"t/{b.path}")

    with pytest.raises(DatasetIncomplete, match="moved or swapped"):
        datasets.read_dataset("t")
    with pytest.raises(DatasetIncomplete, match="moved or swapped"):
        datasets.read_dataset("t", filters=[("v", "==", 10)])


def test_parts_swapped_on_a_local_disk_are_detected(tmp_path: os.PathLike[str]) -> None:
    datasets = ParquetDatasetStore(LocalStore(str(tmp_path)))
    a, b = _two_equal_parts(datasets)
    path_a, path_b = (os.path.join(str(tmp_path), "t", *e.path.split("/")) for e in (a, b))
    os.replace(path_a, path_a + ".tmp")
    os.replace(path_b, path_a)
    os.replace(path_a + ".tmp", path_b)

    with pytest.raises(DatasetIncomplete):
        datasets.read_dataset("t", filters=[("p", "==", 1)])


def _commit_untagged(datasets: ParquetDatasetStore, tables: list[pa.Table]) -> list[FileEntry]:
    """Parts written by another writer (no identity tag), committed with their footer statistics."""
    pending = datasets.begin_write("t")
    entries = []
    for i, table in enumerate(tables):
        name = pending.part_name(i)
        with datasets.store.open_output(f"t/{name}") as sink:
            pq.write_table(table, sink)
        with datasets.store.open_input(f"t/{name}") as source:
            size, meta = source.size(), pq.read_metadata(source)
        entries.append(FileEntry(name, meta.num_rows, size, stats=file_column_stats(meta, table.schema)))
    datasets.commit_write(pending, entries, tables[0].schema)
    return entries


def test_untagged_parts_are_read_and_checked_by_their_statistics(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    a, b = _commit_untagged(datasets, [pa.table({"v": [10, 11]}), pa.table({"v": [20, 21]})])
    assert sorted(datasets.read_dataset("t").column("v").to_pylist()) == [10, 11, 20, 21]  # no tag needed

    _swap(store, f"t/{a.path}", f"t/{b.path}")
    with pytest.raises(DatasetIncomplete, match="statistics"):
        datasets.read_dataset("t", filters=[("v", "<", 15)])


def test_a_manifest_listing_a_part_twice_is_corrupted(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(pa.table({"v": [1, 2]}), "t")
    raw = json.loads(store.read_bytes("t/manifest.json"))
    raw["parts"] *= 2
    raw["files"] *= 2
    raw["row_count"] *= 2
    store.write_bytes("t/manifest.json", json.dumps(raw).encode())

    with pytest.raises(ManifestCorrupted) as info:
        datasets.read_dataset("t")
    assert info.value.reason == "duplicate part"
    with pytest.raises(ManifestCorrupted, match="data.parquet"):
        DatasetManifest.from_json(json.dumps(raw))


# ------------------------------------------------------------------- datasets committed before the fix


def _record_schema(store: Store, key: str, schema: pa.Schema, *, restat: bool = False) -> None:
    """Rewrite the manifest as earlier versions committed it: with ``schema`` as given."""
    raw = json.loads(store.read_bytes(f"{key}/manifest.json"))
    raw["arrow_schema"], raw["schema_hash"] = encode_schema(schema), schema_hash(schema)
    if restat:  # statistics in the recorded schema's units, as they were computed then
        for entry in raw["files"]:
            with store.open_input(f"{key}/{entry['path']}") as source:
                entry["stats"] = file_column_stats(pq.read_metadata(source), schema)
    store.write_bytes(f"{key}/manifest.json", json.dumps(raw).encode())


def test_parts_committed_with_in_memory_types_in_the_manifest_still_read(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    legacy = pa.schema([("ts", pa.timestamp("s")), ("day", pa.date64())])
    table = pa.table(
        [pa.array([0, 86_400], pa.int64()).cast(pa.timestamp("s")), pa.array([0, 86_400_000]).cast(pa.date64())],
        schema=legacy,
    )
    datasets.write_dataset(table, "t")
    _record_schema(store, "t", legacy, restat=True)

    back = datasets.read_dataset("t")
    assert back.equals(table)
    assert datasets.read_dataset("t", filters=[("ts", ">", 0)]).num_rows == 1


def test_parts_committed_with_another_column_order_or_nullability_still_read(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    strict = pa.schema([pa.field("b", pa.string(), nullable=False), pa.field("a", pa.int64(), nullable=False)])
    datasets.write_dataset(pa.table({"b": ["x"], "a": [1]}, schema=strict), "t")
    _record_schema(store, "t", pa.schema([("a", pa.int64()), ("b", pa.string())]))

    back = datasets.read_dataset("t")
    assert back.column_names == ["a", "b"]
    assert back.to_pylist() == [{"a": 1, "b": "x"}]


def test_the_part_check_reads_raise_and_verify_reports_are_one(store: Store) -> None:
    """``engine.PartCheck`` (what Spark uses) finds what verify finds, raises what reads raise, and pickles."""
    import pickle
    import re

    datasets = ParquetDatasetStore(store)
    a, b = _two_equal_parts(datasets)
    manifest = datasets.read_manifest("t")
    check = pickle.loads(pickle.dumps(PartCheck.of("t", manifest)))
    assert check.problems(store, a) == [] and check.problems(store, b) == []

    _swap(store, f"t/{a.path}", f"t/{b.path}")
    found = check.problems(store, a)
    assert [p.kind for p in found] == ["path", "statistics"]
    assert found == [p for p in datasets.verify_dataset("t").problems if p.path == a.path]
    with pytest.raises(DatasetIncomplete, match=re.escape(f"dataset 't': {found[0].message}")):
        check.check(store, a)
    with pytest.raises(DatasetIncomplete, match="moved or swapped"):
        check.open(store, a)

    store.delete(f"t/{b.path}")
    assert [p.kind for p in check.problems(store, b)] == ["missing"]
    with pytest.raises(PartsVanished) as info:
        check.check(store, b)
    assert info.value.missing == [b.path]
