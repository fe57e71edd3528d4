"""Content hashes of parts and the data version of a dataset version (issue 19, item 4)."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore, Store
from dagster_parquet_dataset.dataset import DatasetManifest, FileEntry, data_version
from dagster_parquet_dataset.errors import ManifestCorrupted


def table(ids: list[int], label: str = "a") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "label": pa.array([f"{label}{i}" for i in ids])})


def test_content_hash_is_sha256_of_the_bytes_before_the_footer(store: Store) -> None:
    manifest = ParquetDatasetStore(store).write_dataset(table(list(range(100))), "t")
    (entry,) = manifest.file_entries()
    data = store.read_bytes(f"t/{entry.path}")
    footer_length = int.from_bytes(data[-8:-4], "little")
    assert entry.content_hash == "sha256:" + hashlib.sha256(data[: len(data) - 8 - footer_length]).hexdigest()


def test_rewriting_equal_data_keeps_the_data_version(store: Store) -> None:
    ds = ParquetDatasetStore(store, max_rows_per_file=40)
    first = ds.write_dataset(table(list(range(100))), "t")
    second = ds.write_dataset(table(list(range(100))), "t", overwrite=True, run_id="another run")
    assert second.version == first.version + 1 and set(first.parts) != set(second.parts)
    assert len(second.parts) == 3
    assert data_version(first) is not None and data_version(first) == data_version(second)
    other = ds.write_dataset(table(list(range(100))), "u", partition_by=None)  # another key, same content
    assert data_version(other) == data_version(first)


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(lambda ds: ds.write_dataset(table([1, 2, 4]), "t", overwrite=True), id="rows"),
        pytest.param(lambda ds: ds.write_dataset(table([2, 1, 3]), "t", overwrite=True), id="order"),
        pytest.param(
            lambda ds: ds.write_dataset(table([1, 2, 3]).rename_columns(["id", "name"]), "t", overwrite=True),
            id="schema",
        ),
        pytest.param(
            lambda ds: ParquetDatasetStore(ds.store, compression="snappy").write_dataset(
                table([1, 2, 3]), "t", overwrite=True
            ),
            id="compression",
        ),
        pytest.param(lambda ds: ds.append_dataset(table([4]), "t"), id="append"),
    ],
)
def test_a_change_of_content_or_encoding_changes_the_data_version(store: Store, changed) -> None:  # type: ignore[no-untyped-def]
    ds = ParquetDatasetStore(store)
    before = ds.write_dataset(table([1, 2, 3]), "t")
    after = changed(ds)
    assert data_version(after) is not None and data_version(after) != data_version(before)


def test_appends_of_equal_data_give_equal_versions_and_keep_old_hashes(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    for key in ("a", "b"):
        ds.write_dataset(table([1, 2]), key)
    a, b = ds.append_dataset(table([3]), "a"), ds.append_dataset(table([3]), "b")
    assert data_version(a) == data_version(b) is not None
    assert all(e.content_hash for e in a.file_entries())


def test_partitioned_and_compacted_versions_are_hashed(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    data = pa.table({"id": [1, 2, 3, 4], "day": ["x", "y", "x", "y"]})
    first = ds.write_dataset(data, "p", partition_by=["day"])
    assert len(first.parts) == 2 and all(e.content_hash for e in first.file_entries())
    appended = ds.append_dataset(pa.table({"id": [5], "day": ["x"]}), "p")
    ds.compact_dataset("p")
    compacted = ds.read_manifest("p")
    assert compacted.version == appended.version + 1 and len(compacted.parts) == 2
    assert data_version(compacted) is not None and data_version(compacted) != data_version(appended)


def test_manifest_round_trip_and_old_manifests() -> None:
    entry = FileEntry("part-00000.parquet", 3, 10, content_hash="sha256:00ff")
    assert FileEntry.from_dict(entry.to_dict()) == entry
    assert "content_hash" not in FileEntry("x.parquet", 1, 1).to_dict()
    with pytest.raises(ManifestCorrupted, match="content_hash is not a string"):
        FileEntry.from_dict({"path": "x.parquet", "content_hash": 5})
    spec_only = {
        "dataset_key": "t",
        "parts": ["part-00000.parquet"],
        "row_count": 1,
        "schema_hash": "0" * 16,
        "compression": "zstd",
        "created_at_utc": "2026-01-01T00:00:00+00:00",
    }
    assert data_version(DatasetManifest.from_json(json.dumps(spec_only))) is None
    hashed = {
        **spec_only,
        "format_version": 1,
        "files": [{"path": "part-00000.parquet", "row_count": 1, "content_hash": 7}],
    }
    with pytest.raises(ManifestCorrupted, match="content_hash"):
        DatasetManifest.from_json(json.dumps(hashed))
