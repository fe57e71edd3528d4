"""The root's inline entries stay within their budget however many appends a dataset takes (issue 28).

Every commit renders, hashes and writes the root's inline ``files`` again, so their size bounds what an
append costs beyond its own files. These tests append one file at a time (5 columns with statistics,
as ``benchmarks/bench_manifest_scale.py`` does) with the default budget and check after every append
that the inline entries stay within 64 KiB of compact JSON and 256 entries, that they roll into a
segment when they would not, that a small dataset still needs no segment, and that every reader
(ours cold, an older version, remote-store's Spec 042 reader below ``PARTS_IN_ROOT``) reads it all.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from remote_store import Store as RemoteStore
from remote_store.backends import LocalBackend
from remote_store.ext.parquet import ParquetDatasetStore as RemoteDatasets

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.dataset import manifest as manifest_module
from dagster_parquet_dataset.dataset.commit import segment_commit

pytestmark = pytest.mark.timeout(300)

APPENDS = 240
BUDGET_BYTES = 64 * 1024
BUDGET_ENTRIES = 256


def _rows(start: int, n: int = 2) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "amount": ids.astype(np.float64) / 7,
            "customer": [f"customer-{i:06d}" for i in ids.tolist()],
            "ts": pa.array(ids * 1_000_000, pa.timestamp("us", tz="UTC")),
            "qty": (ids % 1000).astype(np.int32),
        }
    )


def _root(root: Path) -> dict:
    return json.loads((root / "t" / "manifest.json").read_text())


def _inline_bytes(raw: dict) -> int:
    return len(json.dumps(raw["files"], separators=(",", ":"), ensure_ascii=False))


@pytest.mark.parametrize("rootless", [False, True], ids=["format-2", "format-3"])
def test_successive_appends_keep_the_inline_entries_within_their_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rootless: bool
) -> None:
    if rootless:  # cross into format 3 (no ``parts`` in the root) half-way
        monkeypatch.setattr(manifest_module, "PARTS_IN_ROOT", APPENDS // 2)
        monkeypatch.setattr(segment_commit, "PARTS_IN_ROOT", APPENDS // 2)
    ours = ParquetDatasetStore(LocalStore(str(tmp_path)))
    largest, rolled = 0, 0
    for i in range(APPENDS):
        ours.append_dataset(_rows(2 * i), "t")
        raw = _root(tmp_path)
        size = _inline_bytes(raw)
        assert size <= BUDGET_BYTES and len(raw["files"]) <= BUDGET_ENTRIES, (i, size, len(raw["files"]))
        if i == 99:  # a small dataset (100 files with statistics) is still one manifest.json
            assert raw["segments"] == [] and len(raw["files"]) == 100
        rolled += size < largest
        largest = size
    raw = _root(tmp_path)
    assert rolled >= 1 and raw["segments"]  # the inline entries moved into a segment at least once
    assert raw["format_version"] == (3 if rootless else 2)
    assert ("parts" not in raw) if rootless else (len(raw["parts"]) == APPENDS)

    expected = pa.concat_tables([_rows(2 * i) for i in range(APPENDS)])
    cold = ParquetDatasetStore(LocalStore(str(tmp_path)))
    assert cold.read_dataset("t").sort_by("id").equals(expected)
    assert cold.scan_dataset("t").count_rows() == 2 * APPENDS
    assert cold.read_dataset("t", filters=[("id", "==", 301)]).column("id").to_pylist() == [301]
    older = cold.read_dataset("t", version=raw["version"] - 20).sort_by("id")
    assert older.equals(pa.concat_tables([_rows(2 * i) for i in range(APPENDS - 20)]))
    if not rootless:  # a Spec 042 reader follows ``parts`` and reads every file
        theirs = RemoteDatasets(RemoteStore(LocalBackend(str(tmp_path)))).read_dataset("t")
        assert theirs.num_rows == 2 * APPENDS
        assert sorted(theirs.column("id").to_pylist()) == list(range(2 * APPENDS))
