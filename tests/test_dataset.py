"""Spec 042 (PDS-001 .. PDS-012) and the guarantees of docs/guarantees.md on every backend."""

from __future__ import annotations

import io
import json
import os
from dataclasses import replace

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from dagster_parquet_dataset import (
    AlreadyExists,
    Capability,
    CapabilityNotSupported,
    DatasetIncomplete,
    DatasetManifest,
    DatasetNotFound,
    LocalStore,
    ManifestCorrupted,
    MemoryStore,
    NotFound,
    ParquetDatasetStore,
    Store,
)
from dagster_parquet_dataset.dataset.manifest import schema_hash
from tests._stores import WrappingStore

SPEC_FIELDS = {
    "dataset_key",
    "parts",
    "row_count",
    "schema_hash",
    "compression",
    "created_at_utc",
    "run_id",
    "metadata",
}


def sample(n: int = 10, offset: int = 0) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(offset, offset + n), pa.int64()),
            "name": [f"row-{i}" for i in range(offset, offset + n)],
            "score": [i * 0.5 for i in range(offset, offset + n)],
        }
    )


def names(store: Store, key: str) -> list[str]:
    return sorted(f.path[len(key) + 1 :] for f in store.list_files(key))


# PDS-001 -------------------------------------------------------------------


def test_constructor_defaults_and_no_io() -> None:
    recorder = WrappingStore(MemoryStore())
    ds = ParquetDatasetStore(recorder)
    assert (ds.store, ds.compression, ds.row_group_size, ds.max_rows_per_file) == (recorder, "zstd", None, None)
    assert sum(recorder.calls.values()) == 0


@pytest.mark.parametrize("bad", [0, -1])
def test_constructor_rejects_non_positive_sizes(bad: int) -> None:
    with pytest.raises(ValueError, match="max_rows_per_file"):
        ParquetDatasetStore(MemoryStore(), max_rows_per_file=bad)
    with pytest.raises(ValueError, match="row_group_size"):
        ParquetDatasetStore(MemoryStore(), row_group_size=bad)


def test_constructor_rejects_bad_store_and_codec() -> None:
    with pytest.raises(TypeError, match="Store"):
        ParquetDatasetStore("s3://bucket")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="compression"):
        ParquetDatasetStore(MemoryStore(), compression="zip")


# PDS-002 / PDS-005 ---------------------------------------------------------


def test_single_file_layout_and_returned_manifest(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    table = sample(25)
    manifest = ds.write_dataset(table, "silver/orders", run_id="run-1", metadata={"source": "crm"})
    assert names(store, "silver/orders") == ["_SUCCESS", "_claim", "data.parquet", "manifest.json"]
    assert manifest.parts == ["data.parquet"]
    assert manifest.row_count == 25 and manifest.run_id == "run-1"
    assert manifest.metadata == {"source": "crm"}
    assert manifest.schema_hash == schema_hash(table.schema)
    assert manifest.compression == "zstd"
    assert manifest == ds.read_manifest("silver/orders")
    assert store.read_bytes("silver/orders/_SUCCESS") == b""
    footer = pq.ParquetFile(io.BytesIO(store.read_bytes("silver/orders/data.parquet")))
    assert footer.metadata.row_group(0).column(0).compression == "ZSTD"


def test_multi_part_layout(store: Store) -> None:
    ds = ParquetDatasetStore(store, max_rows_per_file=4)
    manifest = ds.write_dataset(sample(10), "k")
    assert manifest.parts == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert [f.row_count for f in manifest.files] == [4, 4, 2]
    for entry in manifest.files:
        assert entry.size_bytes == store.size(f"k/{entry.path}")
    assert ds.read_dataset("k").equals(sample(10))


def test_empty_table_round_trips(store: Store) -> None:
    for rows in (None, 3):
        ds = ParquetDatasetStore(store, max_rows_per_file=rows)
        key = f"empty-{rows}"
        manifest = ds.write_dataset(sample(0), key)
        assert manifest.row_count == 0 and len(manifest.parts) == 1
        back = ds.read_dataset(key)
        assert back.num_rows == 0 and back.schema.equals(sample(0).schema, check_metadata=False)


def test_write_refuses_existing_dataset(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(sample(3), "k")
    with pytest.raises(AlreadyExists, match="overwrite=True"):
        ds.write_dataset(sample(5), "k")
    assert ds.read_dataset("k").equals(sample(3))


def test_record_batch_reader_is_streamed(store: Store) -> None:
    table = sample(1000)
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=37))
    manifest = ParquetDatasetStore(store, max_rows_per_file=300).write_dataset(reader, "stream")
    assert [f.row_count for f in manifest.files] == [300, 300, 300, 100]
    assert ParquetDatasetStore(store).read_dataset("stream").equals(table)


def test_record_batch_reader_never_held_whole() -> None:
    """Bounded memory: batches are pulled only as fast as parts are finished."""
    inner = MemoryStore()
    finished: list[str] = []

    class Recording(WrappingStore):
        def _before(self, op: str, path: str) -> None:
            super()._before(op, path)
            if op == "open_output:close":
                finished.append(path)

    per_part, workers, parts = 100, 2, 20
    schema = pa.schema([("x", pa.int64())])
    max_ahead = 0

    def batches():  # type: ignore[no-untyped-def]
        nonlocal max_ahead
        for i in range(parts * per_part // 10):
            rows_pulled = i * 10
            max_ahead = max(max_ahead, rows_pulled - len(finished) * per_part)
            yield pa.record_batch([pa.array(range(i * 10, i * 10 + 10), pa.int64())], schema=schema)

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    ds = ParquetDatasetStore(Recording(inner), max_rows_per_file=per_part, max_workers=workers)
    ds.write_dataset(reader, "bounded")
    assert len(finished) == parts
    assert max_ahead <= (workers + 1) * per_part, max_ahead


# PDS-003 / PDS-006 ---------------------------------------------------------


def test_read_requires_success_marker_of_a_spec_only_writer(store: Store) -> None:
    # A Spec 042 writer's manifest without _SUCCESS may be an unfinished write (PDS-003).
    ds = ParquetDatasetStore(store)
    ds.write_dataset(sample(), "k")
    spec_only = DatasetManifest.from_json(store.read_bytes("k/manifest.json"))
    spec_only = replace(spec_only, format_version=0, txn=None, txns=())
    store.write_bytes("k/manifest.json", spec_only.to_json().encode())
    store.delete("k/_SUCCESS")
    with pytest.raises(DatasetIncomplete, match="_SUCCESS"):
        ds.read_dataset("k")
    assert not ds.dataset_exists("k")
    assert not store.exists("k/_SUCCESS")


def test_read_of_absent_dataset_is_not_found_and_incomplete(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    with pytest.raises(DatasetNotFound) as info:
        ds.read_dataset("nothing/here")
    assert isinstance(info.value, NotFound) and isinstance(info.value, DatasetIncomplete)


def test_missing_part_fails_before_any_data_is_read(store: Store) -> None:
    """Fail fast: every part's existence is checked before any part's data pages are read."""
    import numpy as np

    recorder = WrappingStore(store)
    ds = ParquetDatasetStore(recorder, max_rows_per_file=100_000, compression="none")
    ds.write_dataset(pa.table({"x": np.random.default_rng(0).random(300_000)}), "k")
    store.delete("k/part-00002.parquet")
    recorder.bytes_read = 0
    with pytest.raises(DatasetIncomplete, match="part-00002"):
        ds.read_dataset("k")
    data_bytes = sum(store.size(f"k/part-0000{i}.parquet") for i in (0, 1))
    assert recorder.bytes_read < 0.1 * data_bytes, (recorder.bytes_read, data_bytes)


def test_truncated_part_is_an_error(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(sample(100), "k")
    data = store.read_bytes("k/data.parquet")
    store.write_bytes("k/data.parquet", data[: len(data) // 2])
    with pytest.raises(DatasetIncomplete, match="truncated"):
        ds.read_dataset("k")


def test_part_with_wrong_rows_or_schema_is_an_error(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    manifest = ds.write_dataset(sample(10), "k")

    def replace_part(table: pa.Table) -> None:
        sink = io.BytesIO()
        pq.write_table(table, sink, compression="zstd")
        store.write_bytes("k/data.parquet", sink.getvalue())
        # Keep the manifest's recorded size consistent so only rows/schema differ.
        raw = json.loads(store.read_bytes("k/manifest.json"))
        raw["files"][0]["size_bytes"] = len(sink.getvalue())
        store.write_bytes("k/manifest.json", json.dumps(raw).encode())

    replace_part(sample(11))
    with pytest.raises(DatasetIncomplete, match="11 rows"):
        ds.read_dataset("k")
    replace_part(sample(10).rename_columns(["id", "name", "other"]))
    with pytest.raises(DatasetIncomplete, match="schema"):
        ds.read_dataset("k")
    assert manifest.row_count == 10


def test_column_projection(store: Store) -> None:
    ds = ParquetDatasetStore(store, max_rows_per_file=4)
    ds.write_dataset(sample(10), "k")
    back = ds.read_dataset("k", columns=["score", "id"])
    assert back.column_names == ["score", "id"]
    assert back.equals(sample(10).select(["score", "id"]))
    with pytest.raises(ValueError, match="'nope'"):
        ds.read_dataset("k", columns=["id", "nope"])
    with pytest.raises(TypeError):
        ds.read_dataset("k", columns="id")  # type: ignore[arg-type]


def test_projection_reads_only_requested_bytes(store: Store) -> None:
    """Column projection is pushed into the Parquet reader: unread columns are not fetched."""
    table = pa.table(
        {
            "small": pa.array([i % 100 for i in range(200_000)], pa.int8()),
            "big": [os.urandom(16).hex() for _ in range(200_000)],
        }
    )
    recorder = WrappingStore(store)
    ds = ParquetDatasetStore(recorder, compression="none")
    ds.write_dataset(table, "k")
    recorder.bytes_read = 0
    assert ds.read_dataset("k", columns=["small"]).equals(table.select(["small"]))
    assert recorder.bytes_read < store.size("k/data.parquet") * 0.2, recorder.bytes_read


# PDS-004 / PDS-012 ---------------------------------------------------------


def test_manifest_is_a_spec_superset(store: Store) -> None:
    ds = ParquetDatasetStore(store, max_rows_per_file=6)
    ds.write_dataset(sample(10), "k", run_id="r")
    text = store.read_bytes("k/manifest.json").decode()
    raw = json.loads(text)
    assert SPEC_FIELDS <= raw.keys()
    assert isinstance(raw["parts"], list) and all(isinstance(p, str) for p in raw["parts"])
    assert isinstance(raw["row_count"], int) and len(raw["schema_hash"]) == 16
    assert raw["format_version"] == 2 and raw["version"] == 1
    assert text == json.dumps(raw, sort_keys=True, indent=2, ensure_ascii=False)
    # A Spec-only reader: parts relative to the key, read with pq.read_table.
    spec_read = pa.concat_tables(pq.read_table(io.BytesIO(store.read_bytes(f"k/{p}"))) for p in raw["parts"])
    assert spec_read.equals(sample(10))


def test_read_manifest_errors(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    with pytest.raises(NotFound):
        ds.read_manifest("k")
    store.write_bytes("k/manifest.json", b"{not json")
    with pytest.raises(ManifestCorrupted) as info:
        ds.read_manifest("k")
    assert info.value.reason == "invalid JSON"
    store.write_bytes("k/manifest.json", json.dumps({"dataset_key": "k"}).encode())
    with pytest.raises(ManifestCorrupted, match="parts"):
        ds.read_manifest("k")


def test_manifest_listing_unsafe_part_is_corrupted(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(sample(), "k")
    raw = json.loads(store.read_bytes("k/manifest.json"))
    raw["parts"] = ["../../etc/passwd"]
    raw.pop("files")
    store.write_bytes("k/manifest.json", json.dumps(raw).encode())
    with pytest.raises(ManifestCorrupted) as info:
        ds.read_dataset("k")
    assert info.value.reason == "unsafe part"


def test_hand_built_spec_only_dataset_is_readable(store: Store) -> None:
    """A dataset written by a Spec 042-only writer (no extension keys) reads back."""
    tables = [sample(4), sample(3, offset=4)]
    for i, t in enumerate(tables):
        sink = io.BytesIO()
        pq.write_table(t, sink)
        store.write_bytes(f"legacy/part-{i:05d}.parquet", sink.getvalue())
    manifest = {
        "dataset_key": "legacy",
        "parts": ["part-00000.parquet", "part-00001.parquet"],
        "row_count": 7,
        "schema_hash": schema_hash(tables[0].schema),
        "compression": "snappy",
        "created_at_utc": "2026-03-28T00:00:00+00:00",
        "run_id": None,
        "metadata": None,
    }
    store.write_bytes("legacy/manifest.json", json.dumps(manifest).encode())
    store.write_bytes("legacy/_SUCCESS", b"")
    ds = ParquetDatasetStore(store, retain_versions=1)
    parsed = ds.read_manifest("legacy")
    assert parsed.format_version == 0 and parsed.files == ()
    assert json.loads(parsed.to_json()) == manifest
    assert ds.read_dataset("legacy").equals(pa.concat_tables(tables))
    assert ds.read_dataset("legacy", columns=["name"]).column_names == ["name"]
    with pytest.raises(ValueError, match="'nope'"):
        ds.read_dataset("legacy", columns=["nope"])
    # Overwriting a legacy dataset works and removes its parts.
    ds.write_dataset(sample(2), "legacy", overwrite=True)
    assert ds.read_dataset("legacy").equals(sample(2))
    assert not store.exists("legacy/part-00000.parquet")


def test_other_tools_read_the_dataset_folder(tmp_path) -> None:
    store = LocalStore(tmp_path)
    ParquetDatasetStore(store, max_rows_per_file=3).write_dataset(sample(10), "k")
    # Directory readers must skip manifest.json: pyarrow does with exclude_invalid_files.
    via_pyarrow = pads.dataset(str(tmp_path / "k"), format="parquet", exclude_invalid_files=True).to_table()
    assert via_pyarrow.sort_by("id").equals(sample(10))
    import duckdb

    count = tuple(duckdb.sql(f"select count(*), sum(id) from read_parquet('{tmp_path}/k/*.parquet')").fetchall()[0])
    assert count == (10, 45)


# PDS-007 / PDS-010 / PDS-011 -----------------------------------------------


def test_dataset_exists_and_delete(store: Store) -> None:
    ds = ParquetDatasetStore(store, max_rows_per_file=3)
    assert not ds.dataset_exists("a/b")
    ds.write_dataset(sample(), "a/b")
    assert ds.dataset_exists("a/b")
    ds.delete_dataset("a/b")
    assert not ds.dataset_exists("a/b")
    assert list(store.list_files("a/b")) == []
    with pytest.raises(NotFound):
        ds.delete_dataset("a/b")


def test_delete_keeps_nested_datasets(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(sample(3), "asset")
    ds.write_dataset(sample(4), "asset/child")
    ds.delete_dataset("asset")
    assert not ds.dataset_exists("asset")
    assert ds.read_dataset("asset/child").equals(sample(4))


def test_overwrite_replaces_and_cleans_up(store: Store) -> None:
    ds = ParquetDatasetStore(store, max_rows_per_file=3, retain_versions=1)
    first = ds.write_dataset(sample(10), "k")
    second = ds.write_dataset(sample(4, offset=100), "k", overwrite=True)
    assert second.version == first.version + 1
    assert not set(first.parts) & set(second.parts)
    assert ds.read_dataset("k").equals(sample(4, offset=100))
    assert names(store, "k") == sorted(["_SUCCESS", "_claim", "manifest.json", *second.parts])


# Bad input -----------------------------------------------------------------


@pytest.mark.parametrize("key", ["", "/abs", "a/../b", "..", "x\x00y", "a\\b", "a//b"])
def test_unsafe_dataset_keys_change_nothing(store: Store, key: str) -> None:
    ds = ParquetDatasetStore(store)
    with pytest.raises(ValueError):
        ds.write_dataset(sample(), key)
    for call in (ds.read_dataset, ds.read_manifest, ds.dataset_exists, ds.delete_dataset):
        with pytest.raises(ValueError):
            call(key)


def test_wrong_input_types_change_nothing(store: Store) -> None:
    import pandas as pd

    ds = ParquetDatasetStore(store)
    with pytest.raises(TypeError, match="from_pandas"):
        ds.write_dataset(pd.DataFrame({"a": [1]}), "k")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pyarrow.Table"):
        ds.write_dataset([{"a": 1}], "k")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="metadata"):
        ds.write_dataset(sample(), "k", metadata={"n": 1})  # type: ignore[dict-item]
    assert list(store.list_files("k")) == []


def test_missing_capabilities_are_reported_before_any_write() -> None:
    inner = MemoryStore()
    read_only = WrappingStore(inner, capabilities=frozenset({Capability.LIST}))
    with pytest.raises(CapabilityNotSupported, match="ATOMIC_WRITE"):
        ParquetDatasetStore(read_only).write_dataset(sample(), "k")
    no_delete = WrappingStore(inner, capabilities=frozenset(Capability) - {Capability.DELETE})
    ParquetDatasetStore(no_delete).write_dataset(sample(), "k")
    with pytest.raises(CapabilityNotSupported, match="DELETE"):
        ParquetDatasetStore(no_delete).write_dataset(sample(), "k", overwrite=True)
    assert ParquetDatasetStore(inner).read_dataset("k").equals(sample())


def test_result_types_of_public_methods_are_exported(store: Store) -> None:
    """``plan_read`` returns a ``ReadPlan`` and ``vacuum`` a ``VacuumResult``: both importable from the package."""
    import dagster_parquet_dataset
    from dagster_parquet_dataset import ReadPlan, VacuumResult
    from dagster_parquet_dataset.dataset import ReadPlan as DatasetReadPlan
    from dagster_parquet_dataset.dataset import VacuumResult as DatasetVacuumResult

    ds = ParquetDatasetStore(store)
    ds.write_dataset(pa.table({"n": [1, 2]}), "results/types")
    assert isinstance(ds.plan_read("results/types"), ReadPlan)
    assert isinstance(ds.vacuum("results/types", dry_run=True), VacuumResult)
    assert (ReadPlan, VacuumResult) == (DatasetReadPlan, DatasetVacuumResult)
    assert {"ReadPlan", "VacuumResult"} <= set(dagster_parquet_dataset.__all__)
