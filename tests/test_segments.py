"""Manifest format 2: per-file entries in immutable segment files (issue 21).

A dataset with more than ``INLINE_ENTRIES`` files keeps its entries in ``_segments/``; these
tests build such datasets through the public API and check commits, reads, versions, vacuum,
verification, and that a missing or damaged segment is a ``ManifestCorrupted`` naming it.
"""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dagster_parquet_dataset import ManifestCorrupted, ParquetDatasetStore
from dagster_parquet_dataset.dataset.format import segments
from dagster_parquet_dataset.storage.base import Store

from ._stores import WrappingStore

FILES = 40  # more than INLINE_ENTRIES (set to 32 below): the entries go to a segment


@pytest.fixture(autouse=True)
def _inline_32(monkeypatch: pytest.MonkeyPatch) -> None:
    """At most 32 entries inline (the fixed limit these tests were written for; the byte budget
    would keep 40 small entries inline)."""
    monkeypatch.setattr(segments, "INLINE_ENTRIES", 32)


def _table(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": [f"r{i}" for i in range(n)]})


def _root(store: Store, key: str = "t") -> dict:
    return json.loads(store.read_bytes(f"{key}/manifest.json"))


def _segmented(store: Store, **options: object) -> ParquetDatasetStore:
    ds = ParquetDatasetStore(store, max_rows_per_file=1, **{"retain_versions": 1, **options})  # type: ignore[arg-type]
    ds.write_dataset(_table(0, FILES), "t")
    return ds


def test_entries_live_in_a_segment_and_read_back(store: Store) -> None:
    _segmented(store)
    raw = _root(store)
    assert raw["format_version"] == 2 and raw["files"] == [] and len(raw["parts"]) == FILES
    [segment] = raw["segments"]
    assert segment["path"].startswith("_segments/") and segment["files"] == FILES and segment["rows"] == FILES
    assert len(store.read_bytes(f"t/{segment['path']}")) == segment["size_bytes"]
    cold = ParquetDatasetStore(WrappingStore(store))  # no cached segment
    assert cold.read_dataset("t").sort_by("id").equals(_table(0, FILES))
    files = cold.read_manifest("t").files
    assert [f.path for f in files] == raw["parts"] and sum(f.row_count for f in files) == FILES
    plan = cold.plan_read("t", filters=[("id", "==", 7)])
    assert len(plan.selected) == 1 and len(plan.pruned) == FILES - 1
    assert cold.read_dataset("t", filters=[("id", ">=", 38)]).column("id").to_pylist() == [38, 39]


def test_append_writes_only_its_own_entries(store: Store) -> None:
    ds = _segmented(store)
    before = _root(store)
    ds.append_dataset(_table(FILES, 3), "t")
    after = _root(store)
    assert after["segments"] == before["segments"]  # the big segment is shared, not rewritten
    assert len(after["files"]) == 3 and after["parts"][:FILES] == before["parts"]
    for n in range(12):  # 33 inline entries overflow, and merge with the segment of similar size
        ds.append_dataset(_table(FILES + 3 + 3 * n, 3), "t")
    last = _root(store)
    assert [s["files"] for s in last["segments"]] == [FILES + 33] and len(last["files"]) == 6
    cold = ParquetDatasetStore(WrappingStore(store))
    assert cold.read_dataset("t").column("id").to_pylist() == list(range(FILES + 39))
    assert cold.verify_dataset("t").ok


def test_retained_versions_keep_their_segments_and_vacuum_drops_unused_ones(store: Store) -> None:
    ds = _segmented(store, retain_versions=None)
    first = _root(store)["segments"][0]["path"]
    ds.write_dataset(_table(100, FILES), "t", overwrite=True)
    assert store.exists(f"t/{first}")  # version 1 is retained and lists it
    old = ParquetDatasetStore(WrappingStore(store)).read_dataset("t", version=1)
    assert old.sort_by("id").equals(_table(0, FILES))
    ds.vacuum("t", retain_versions=1)
    assert not store.exists(f"t/{first}")
    assert ParquetDatasetStore(WrappingStore(store)).read_dataset("t").sort_by("id").equals(_table(100, FILES))


def test_overwrite_with_one_version_deletes_the_old_segment(store: Store) -> None:
    ds = _segmented(store)
    first = _root(store)["segments"][0]["path"]
    ds.write_dataset(_table(0, 2), "t", overwrite=True)
    assert not store.exists(f"t/{first}") and _root(store)["segments"] == []
    assert not [f for f in store.list_files("t") if "_segments/" in f.path]


@pytest.mark.parametrize("damage", ["missing", "truncated", "corrupt"])
def test_a_damaged_segment_is_an_error_naming_it(store: Store, damage: str) -> None:
    _segmented(store)
    path = "t/" + _root(store)["segments"][0]["path"]
    data = store.read_bytes(path)
    if damage == "missing":
        store.delete(path)
    elif damage == "truncated":
        store.write_bytes(path, data[: len(data) // 2])
    else:
        store.write_bytes(path, data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    cold = ParquetDatasetStore(WrappingStore(store))
    with pytest.raises(ManifestCorrupted, match=path.split("/", 1)[1]) as info:
        cold.read_dataset("t")
    assert damage in info.value.reason
    with pytest.raises(ManifestCorrupted, match="_segments/"):
        ParquetDatasetStore(WrappingStore(store)).plan_read("t", filters=[("id", "==", 1)])
    report = ParquetDatasetStore(WrappingStore(store)).verify_dataset("t")
    assert not report.ok and "_segments/" in str(report.problems[0])


def test_an_append_checks_the_segments_it_inherits_without_decoding_them(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh process's append (each Dagster step) reads every inherited segment once and checks its
    size and SHA-256, but decodes none (decoding cost a 50,000-file append 100 ms of its 130-160);
    a read from the same store still decodes and checks each segment, and a damaged one is refused
    (``test_nothing_commits_on_top_of_a_damaged_segment``)."""
    _segmented(store)
    refs = [s["path"] for s in _root(store)["segments"]]
    decoded: list[int] = []
    read_table = pq.read_table

    def counting_read_table(source: object, *args: object, **kwargs: object) -> pa.Table:
        decoded.append(1)
        return read_table(source, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(segments.pq, "read_table", counting_read_table)
    counting = WrappingStore(store)
    fresh = ParquetDatasetStore(counting, max_rows_per_file=1, retain_versions=1)
    fresh.append_dataset(_table(FILES, 1), "t")
    fresh.append_dataset(_table(FILES + 1, 1), "t")  # checked once per store: not read again
    segment_reads = [p for op, p in counting.log if op == "read_bytes" and "/_segments/" in p]
    assert sorted(segment_reads) == sorted(f"t/{r}" for r in refs)
    assert decoded == []
    assert sorted(fresh.read_dataset("t").column("id").to_pylist()) == list(range(FILES + 2))
    assert len(decoded) == len(refs)


def test_format_1_reads_as_before_and_its_next_commit_upgrades(store: Store) -> None:
    ds = _segmented(store)
    manifest = ds.read_manifest("t")
    raw = manifest.to_dict() | {"format_version": 1, "files": [f.to_dict() for f in manifest.files]}
    del raw["segments"]
    store.write_bytes("t/manifest.json", json.dumps(raw).encode())
    for f in store.list_files("t/_segments"):
        store.delete(f.path)  # a format-1 dataset has none
    cold = ParquetDatasetStore(WrappingStore(store))
    assert cold.read_dataset("t").sort_by("id").equals(_table(0, FILES))
    assert _root(store)["format_version"] == 1  # reading rewrites nothing
    cold.append_dataset(_table(FILES, 1), "t")
    upgraded = _root(store)
    assert upgraded["format_version"] == 2 and upgraded["segments"] and "files" in upgraded
    assert ParquetDatasetStore(WrappingStore(store)).read_dataset("t").num_rows == FILES + 1


def test_a_spec_reader_reads_a_segmented_dataset_through_parts(store: Store) -> None:
    _segmented(store)
    raw = _root(store)
    spec = pa.concat_tables(pq.read_table(io.BytesIO(store.read_bytes(f"t/{p}"))) for p in raw["parts"])
    assert spec.sort_by("id").equals(_table(0, FILES)) and raw["row_count"] == FILES
