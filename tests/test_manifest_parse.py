"""Manifest parsing with orjson and with the stdlib fallback: same manifests, same errors."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from dagster_parquet_dataset import ManifestCorrupted, MemoryStore, ParquetDatasetStore
from dagster_parquet_dataset.dataset import manifest as manifest_module
from dagster_parquet_dataset.dataset.manifest import DatasetManifest

PARSERS = ["orjson", "stdlib"]


@pytest.fixture(params=PARSERS)
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "stdlib":
        monkeypatch.setattr(manifest_module, "_fast_loads", None)
    else:
        assert manifest_module._fast_loads is not None, "orjson (the 'fast' extra) is not installed"
    return str(request.param)


def _real_manifest() -> DatasetManifest:
    pds = ParquetDatasetStore(MemoryStore())
    table = pa.table(
        {
            "day": ["2024-01-01", "2024-01-02", None],
            "f": [1.5, math.inf, -math.inf],
            "big": pa.array([2**63 - 1, 0, 1], pa.uint64()),
            "s": ["a", "é", "\u2028"],
        }
    )
    pds.write_dataset(table, "k", partition_by=["day"])
    pds.append_dataset(pa.table({"day": ["x"], "f": [0.0], "big": pa.array([2**64 - 1], pa.uint64()), "s": ["z"]}), "k")
    return pds.read_manifest("k")


def test_both_parsers_read_back_what_was_written(parser: str) -> None:
    manifest = _real_manifest()
    assert DatasetManifest.from_json(manifest.to_json()) == manifest
    assert DatasetManifest.from_json(manifest.to_json().encode("utf-8")) == manifest


def test_what_orjson_refuses_is_parsed_by_the_fallback(parser: str) -> None:
    """NaN literals and integers beyond 64 bits are JSON to Python's parser; orjson refuses them."""
    raw = json.loads(_real_manifest().to_json())
    raw["metadata"] = {"k": "v"}
    raw["files"][0]["stats"] = {"f": {"min": math.nan, "max": 2**70, "null_count": 0}}
    manifest = DatasetManifest.from_json(json.dumps(raw))
    assert manifest.files[0].stats["f"]["max"] == 2**70  # type: ignore[index]
    assert math.isnan(manifest.files[0].stats["f"]["min"])  # type: ignore[index]


def _edit(change: Callable[[dict[str, Any]], Any]) -> str:
    raw = json.loads(_real_manifest().to_json())
    change(raw)
    return json.dumps(raw)


def _set_file(index: int, name: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(raw: dict[str, Any]) -> None:
        raw["files"][index][name] = value

    return change


def _set(name: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda raw: raw.__setitem__(name, value)


def _part(value: Any) -> Callable[[dict[str, Any]], None]:
    def change(raw: dict[str, Any]) -> None:
        raw["parts"][-1] = value
        raw["files"][-1]["path"] = value

    return change


CORRUPT: dict[str, Callable[[], str | bytes]] = {
    "not JSON": lambda: "{not json",
    "truncated": lambda: _real_manifest().to_json()[:-40],
    "bad UTF-8": lambda: b'{"dataset_key": "\xff"}',
    "not an object": lambda: "[1, 2]",
    "missing field": lambda: _edit(lambda raw: raw.pop("schema_hash")),
    "bool row_count": lambda: _edit(_set("row_count", True)),
    "absolute part": lambda: _edit(_part("/etc/passwd")),
    "dotdot part": lambda: _edit(_part("day=x/../../y.parquet")),
    "empty segment": lambda: _edit(_part("day=x//y.parquet")),
    "dot segment": lambda: _edit(_part("./y.parquet")),
    "trailing slash": lambda: _edit(_part("y/")),
    "backslash": lambda: _edit(_part("a\\b.parquet")),
    "NUL": lambda: _edit(_part("a\x00b")),
    "empty part": lambda: _edit(_part("")),
    "number part": lambda: _edit(_part(7)),
    "duplicate part": lambda: _edit(
        lambda raw: (raw["parts"].append(raw["parts"][0]), raw["files"].append(raw["files"][0]))
    ),
    "entry not an object": lambda: _edit(lambda raw: raw["files"].__setitem__(0, "x")),
    "entry without path": lambda: _edit(lambda raw: raw["files"][0].pop("path")),
    "negative row_count": lambda: _edit(_set_file(0, "row_count", -1)),
    "string size": lambda: _edit(_set_file(0, "size_bytes", "12")),
    "bool size": lambda: _edit(_set_file(0, "size_bytes", False)),
    "partition_values list": lambda: _edit(_set_file(0, "partition_values", ["a"])),
    "stats of non-objects": lambda: _edit(_set_file(0, "stats", {"f": 1})),
    "stats a list": lambda: _edit(_set_file(0, "stats", [])),
    "missing_columns not names": lambda: _edit(_set_file(0, "missing_columns", [1])),
    "missing_columns a string": lambda: _edit(_set_file(0, "missing_columns", "x")),
    "files/parts mismatch": lambda: _edit(lambda raw: raw["files"].reverse()),
    "row_count mismatch": lambda: _edit(_set_file(0, "row_count", 1000)),
}


PATH_CASES = {
    "absolute part",
    "dotdot part",
    "empty segment",
    "dot segment",
    "trailing slash",
    "backslash",
    "NUL",
    "empty part",
    "number part",
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_manifests_raise_the_same_error_with_either_parser(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = CORRUPT[case]()
    seen = []
    for parser in PARSERS:
        if parser == "stdlib":
            monkeypatch.setattr(manifest_module, "_fast_loads", None)
        with pytest.raises(ManifestCorrupted) as info:
            DatasetManifest.from_json(text)
        seen.append((str(info.value), info.value.reason))
    assert seen[0] == seen[1]
    if case in PATH_CASES:
        assert seen[0][1] in ("unsafe part", "bad parts")


def test_a_newline_in_a_part_path_is_allowed(parser: str) -> None:
    """The one-pass path check joins paths with newlines; a newline inside a path is still a legal key."""
    text = _edit(_part("day=x/a\n/b.parquet"))
    assert DatasetManifest.from_json(text).parts[-1] == "day=x/a\n/b.parquet"
