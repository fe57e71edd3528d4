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

import pytest

from dagster_parquet_dataset.dataset.format import manifest_json
from dagster_parquet_dataset.dataset.format.manifest_json import render_manifest


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
