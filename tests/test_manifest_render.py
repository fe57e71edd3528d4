"""The root manifest's text: orjson renders it when that gives exactly ``json.dumps``'s bytes (issue 28).

A root with a few hundred inline entries took the pure-Python ``indent`` encoder 0.15 s per commit,
twice per append (the version copy and the swap), so successive appends slowed down as the inline
entries grew. orjson writes the same bytes except for escapes and floats below 1e-4, which go to
``json.dumps``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore
from dagster_parquet_dataset.dataset.commit.conditional import read_raw
from dagster_parquet_dataset.dataset.format import manifest_json, segments
from dagster_parquet_dataset.dataset.format.manifest_json import render_manifest
from dagster_parquet_dataset.dataset.manifest import DatasetManifest, FileEntry
from dagster_parquet_dataset.storage.memory import MemoryStore


def _canonical(document: dict[str, Any]) -> str:
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False)


def _entry(i: int, **stats: Any) -> dict[str, Any]:
    return {
        "path": f"part-{i:05d}-3f9c0a1b2c3d4e5f.parquet",
        "row_count": 10,
        "size_bytes": 1950,
        "stats": {"id": {"max": i * 10 + 9, "min": i * 10, "null_count": 0}, **stats},
    }


TRICKY = [
    {"x": 1e-05},
    {"x": 1.5e-07},
    {"x": 0.0001},
    {"x": 1e16},
    {"x": 1e300},
    {"x": -0.0},
    {"x": 123456789.123},
    {"x": 2**63 + 5},
    {"x": "tab\there"},
    {"x": 'quote " and back \\ slash'},
    {"x": "é ü 日本 \u2028"},
    {"x": "\x7f"},
    {"x": [], "y": {}, "z": [{}], "w": None, "v": True},
    {"b": 1, "a": {"d": [1, 2], "c": "x"}, "ä": 2, "Z": 3},
    {"x": math.nan},
    {"x": math.inf},
]


@pytest.mark.parametrize("value", TRICKY, ids=[repr(t) for t in TRICKY])
def test_the_text_is_json_dumps_byte_for_byte(value: dict[str, Any]) -> None:
    document = {"dataset_key": "t", "parts": ["a.parquet"], "files": [_entry(0, amount={"max": value})], **value}
    assert render_manifest(document) == _canonical(document)


def test_a_root_with_hundreds_of_inline_entries_is_not_rendered_by_the_pure_python_encoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = [_entry(i, amount={"max": i / 7, "min": 0.5, "null_count": 0}) for i in range(500)]
    document = {"dataset_key": "t", "parts": [f["path"] for f in files], "files": files, "segments": []}
    expected = _canonical(document)

    def refuse(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("json.dumps rendered the root")

    monkeypatch.setattr(manifest_json.json, "dumps", refuse)
    assert render_manifest(document) == expected


def test_inline_entries_carried_over_from_the_version_read_are_not_walked_for_nan_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 28: every commit walked every inline entry for NaN; the ones orjson parsed cannot hold one.
    store = MemoryStore()
    datasets = ParquetDatasetStore(store)
    for i in range(30):
        datasets.append_dataset(pa.table({"x": [i / 7]}), "t")
    live, _token = read_raw(store, "t")
    assert live is not None and len(live.added) == 30
    new = FileEntry("extra.parquet", 1, 10, stats={"x": {"min": 0.5, "max": 2.5, "null_count": 0}})
    candidate = live.evolve(added=(*live.added, new))
    walked: list[Any] = []
    real = manifest_json._finite
    monkeypatch.setattr(manifest_json, "_finite", lambda value: walked.append(value) or real(value))
    assert candidate.to_json() == _canonical(candidate.to_dict())
    seen = json.dumps(walked, default=str)
    assert "extra.parquet" in seen and not any(e.path in seen for e in live.added)
    # An entry parsed by json (orjson refuses NaN) is still walked: the text keeps json.dumps's NaN.
    document = json.loads(store.read_bytes("t/manifest.json"))
    document["files"][0]["stats"]["x"]["max"] = math.nan
    with_nan = DatasetManifest.from_json(_canonical(document))
    assert with_nan.to_json() == _canonical(with_nan.to_dict()) and "NaN" in with_nan.to_json()


def test_a_writers_next_commit_does_not_parse_the_root_it_just_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 28: each append parsed the few hundred inline entries the previous append of this process had written.
    monkeypatch.setattr(segments, "INLINE_ENTRIES", 2)  # entries move into a segment: roots of the common form
    store = MemoryStore()
    datasets = ParquetDatasetStore(store)
    for x in (-3.5, -2.5, -1.5, 0.5):
        datasets.append_dataset(pa.table({"x": [x]}), "t")
    parsed: list[bytes] = []
    real = DatasetManifest.from_json.__func__  # type: ignore[attr-defined]

    def counting(cls: type[DatasetManifest], text: str | bytes, *args: Any, **kwargs: Any) -> DatasetManifest:
        parsed.append(text.encode() if isinstance(text, str) else bytes(text))
        return real(cls, text, *args, **kwargs)

    monkeypatch.setattr(DatasetManifest, "from_json", classmethod(counting))
    for i in range(3):
        assert DatasetManifest.from_json(store.read_bytes("t/manifest.json")).segments
        parsed.clear()
        written = store.read_bytes("t/manifest.json")
        datasets.append_dataset(pa.table({"x": [i + 1.5]}), "t")
        assert written not in parsed
    # Bytes this process did not write are parsed: a hand-edited root (other whitespace) is read as it is.
    document = json.loads(store.read_bytes("t/manifest.json"))
    store.write_bytes("t/manifest.json", json.dumps(document, indent=1).encode())
    datasets.append_dataset(pa.table({"x": [9.5]}), "t")
    assert json.dumps(document, indent=1).encode() in parsed
    assert sorted(datasets.read_dataset("t").column("x").to_pylist()) == [-3.5, -2.5, -1.5, 0.5, 1.5, 2.5, 3.5, 9.5]
