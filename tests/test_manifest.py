"""DatasetManifest (PDS-004): fields, canonical JSON, strict parsing."""

from __future__ import annotations

import dataclasses
import json

import pyarrow as pa
import pytest

from dagster_parquet_dataset import DatasetManifest, FileEntry, ManifestCorrupted
from dagster_parquet_dataset.dataset.manifest import encode_schema, schema_hash

SPEC = {
    "dataset_key": "silver/orders",
    "parts": ["data.parquet"],
    "row_count": 3,
    "schema_hash": "0123456789abcdef",
    "compression": "zstd",
    "created_at_utc": "2026-01-01T00:00:00+00:00",
}


def test_built_from_spec_fields_alone_and_serializes_to_them() -> None:
    manifest = DatasetManifest(**SPEC)  # type: ignore[arg-type]
    assert dataclasses.is_dataclass(manifest)
    with pytest.raises(dataclasses.FrozenInstanceError):
        manifest.row_count = 4  # type: ignore[misc]
    assert json.loads(manifest.to_json()) == {**SPEC, "run_id": None, "metadata": None}
    assert manifest.to_json() == json.dumps(json.loads(manifest.to_json()), sort_keys=True, indent=2)
    assert DatasetManifest.from_json(manifest.to_json()) == manifest


def test_extensions_round_trip() -> None:
    schema = pa.schema([("a", pa.int64())])
    manifest = DatasetManifest(
        **{**SPEC, "row_count": 3},  # type: ignore[arg-type]
        run_id="r",
        metadata={"k": "v"},
        format_version=1,
        version=7,
        files=(FileEntry("data.parquet", 3, 100),),
        arrow_schema=encode_schema(schema),
        obsolete=("old.parquet",),
    )
    again = DatasetManifest.from_json(manifest.to_json())
    assert again == manifest and again.schema == schema


def test_schema_hash_is_deterministic_and_16_hex() -> None:
    a = pa.schema([("x", pa.int64()), ("y", pa.string())])
    b = pa.schema([("x", pa.int64()), ("y", pa.string())])
    assert schema_hash(a) == schema_hash(b)
    assert len(schema_hash(a)) == 16 and int(schema_hash(a), 16) >= 0
    assert schema_hash(a) != schema_hash(pa.schema([("x", pa.int32()), ("y", pa.string())]))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"parts": "data.parquet"}, "bad parts"),
        ({"row_count": "3"}, "bad row_count"),
        ({"row_count": True}, "bad row_count"),
        ({"metadata": {"k": 1}}, "bad metadata"),
        ({"parts": ["/etc/passwd"]}, "unsafe part"),
        ({"format_version": 1, "files": [{"path": "other.parquet", "row_count": 3}]}, "files/parts mismatch"),
        ({"format_version": 1, "files": [{"path": "data.parquet", "row_count": 2}]}, "row_count mismatch"),
        ({"arrow_schema": "not base64!"}, "bad arrow_schema"),
    ],
)
def test_structural_errors_name_the_reason(change: dict, reason: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ManifestCorrupted) as info:
        DatasetManifest.from_json(json.dumps({**SPEC, **change}))
    assert info.value.reason == reason


@pytest.mark.parametrize("bad", ["", ".", "..", "a\x00b", "a\\b", "a/../b", "a//b", "a/"])
def test_an_unsafe_part_among_many_flat_parts_is_refused(bad: str) -> None:
    """The fast check of parts without a '/' (an unpartitioned dataset) still refuses what validate_key refuses,
    and ordinary names, even with a newline or a leading dot, stay accepted."""
    parts = [f"part-{i:05d}-3f9c0a1b2c3d4e5f.parquet" for i in range(2_000)]
    for good in (".hidden.parquet", "a\n..", "a\nb"):
        DatasetManifest.from_json(json.dumps({**SPEC, "parts": [*parts, good]}))
    with pytest.raises(ManifestCorrupted) as info:
        DatasetManifest.from_json(json.dumps({**SPEC, "parts": [*parts[:1_000], bad, *parts[1_000:]]}))
    assert info.value.reason == "unsafe part"


@pytest.mark.parametrize("field", sorted(SPEC))
def test_each_missing_spec_field_is_reported(field: str) -> None:
    raw = {k: v for k, v in SPEC.items() if k != field}
    with pytest.raises(ManifestCorrupted, match=field) as info:
        DatasetManifest.from_json(json.dumps(raw))
    assert info.value.reason == f"missing {field}"


@pytest.mark.parametrize(
    "extra",
    [[], ["day=2026-01-01/part-00000.parquet", "a b.parquet"], ['q"uote', "tab\tx", "é", "del\x7f"]],
)
def test_a_long_parts_list_is_written_exactly_as_json_dumps_writes_it(extra: list[str]) -> None:
    """to_json renders a long ``parts`` with orjson: the bytes stay json.dumps(sort_keys, indent=2)'s, whatever
    the names hold, and a metadata value that looks like the placeholder changes nothing."""
    parts = [f"part-{i:05d}-3f9c0a1b2c3d4e5f.parquet" for i in range(3_000)] + extra
    raw = {**SPEC, "parts": parts, "metadata": {"k": "\x00parts\x00", "j": '\n  "parts": "\\u0000parts\\u0000"'}}
    manifest = DatasetManifest.from_json(json.dumps(raw))
    assert manifest.to_json() == json.dumps(manifest.to_dict(), sort_keys=True, indent=2, ensure_ascii=False)
    assert DatasetManifest.from_json(manifest.to_json()) == manifest
