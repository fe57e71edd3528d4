"""Manifest format 3 (issue 28): above ``PARTS_IN_ROOT`` parts the root stops listing them.

The limit is lowered to 60 parts (and the inline budget to 8 entries) so small datasets cross it.
Below it a root is format 2 with ``parts`` (Spec 042 readers read it); above it the root has no
``parts``, its segment references carry per-column bounds, a point filter opens only the segments
whose bounds it may hit, and an append reads no segment at all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from remote_store import Store as RemoteStore
from remote_store.backends import LocalBackend
from remote_store.ext.parquet import ManifestCorrupted as RemoteManifestCorrupted
from remote_store.ext.parquet import ParquetDatasetStore as RemoteDatasets

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.dataset import manifest as manifest_module
from dagster_parquet_dataset.dataset.commit import segment_commit
from dagster_parquet_dataset.dataset.format import segments
from dagster_parquet_dataset.storage.base import Store

from ._stores import WrappingStore

LIMIT = 60


@pytest.fixture(autouse=True)
def _small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segments, "INLINE_ENTRIES", 8)
    monkeypatch.setattr(manifest_module, "PARTS_IN_ROOT", LIMIT)
    monkeypatch.setattr(segment_commit, "PARTS_IN_ROOT", LIMIT)


class CountingStore(WrappingStore):
    """Records the paths read."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.reads: list[str] = []

    def read_bytes(self, path: str) -> bytes:
        self.reads.append(path)
        return super().read_bytes(path)


def _table(start: int, n: int) -> pa.Table:
    return pa.table(
        {"id": pa.array(range(start, start + n), pa.int64()), "v": [f"r{i}" for i in range(start, start + n)]}
    )


def _root(root: Path) -> dict:
    return json.loads((root / "t" / "manifest.json").read_text())


def _grow(ds: ParquetDatasetStore, start: int, appends: int, per: int = 5) -> int:
    for _ in range(appends):
        ds.append_dataset(_table(start, per), "t")
        start += per
    return start


@pytest.mark.timeout(300)
def test_above_the_limit_the_root_drops_parts_and_plans_and_appends_stay_local(tmp_path: Path) -> None:
    ds = ParquetDatasetStore(LocalStore(str(tmp_path)), max_rows_per_file=5)
    ds.write_dataset(_table(0, 50), "t")  # 10 parts
    end = _grow(ds, 50, 9)  # 55 parts: still format 2
    assert _root(tmp_path)["format_version"] == 2 and len(_root(tmp_path)["parts"]) == 19
    end = _grow(ds, end, 60)  # 79 parts: format 3
    root = _root(tmp_path)
    assert root["format_version"] == 3 and "parts" not in root and root["part_count"] == 79
    assert all(s["min"]["id"] <= s["max"]["id"] for s in root["segments"])
    assert sum(s["files"] for s in root["segments"]) + len(root["files"]) == 79  # no dead row

    counting = CountingStore(LocalStore(str(tmp_path)))
    cold = ParquetDatasetStore(counting)
    plan = cold.plan_read("t", filters=[("id", "==", 7)])
    assert [len(e.path) > 0 for e in plan.selected] == [True]
    opened = [p for p in counting.reads if "/_segments/" in p]
    assert len(opened) == 1 < len(root["segments"])  # only the segment whose bounds hold id 7
    assert len(plan.pruned) == 78

    counting.reads.clear()
    ParquetDatasetStore(counting).append_dataset(_table(end, 5), "t")
    assert not [p for p in counting.reads if "/_segments/" in p]  # an append reads no segment
    assert ParquetDatasetStore(LocalStore(str(tmp_path))).read_dataset("t").column("id").to_pylist() == list(
        range(end + 5)
    )
    assert cold.verify_dataset("t").ok


def test_format_3_reads_versions_and_goes_back_to_format_2_below_the_limit(tmp_path: Path) -> None:
    ds = ParquetDatasetStore(LocalStore(str(tmp_path)), max_rows_per_file=5)
    ds.write_dataset(_table(0, 400), "t")  # 80 parts at once: format 3
    assert _root(tmp_path)["format_version"] == 3
    end = _grow(ds, 400, 3)
    cold = ParquetDatasetStore(LocalStore(str(tmp_path)))
    assert cold.read_dataset("t").column("id").to_pylist() == list(range(end))
    assert cold.read_dataset("t", version=1).column("id").to_pylist() == list(range(400))
    assert cold.read_manifest("t").parts == ds.read_manifest("t").parts and len(cold.read_manifest("t").parts) == 83
    ds.compact_dataset("t", filters=[("id", ">=", 100)])  # 63 small files become one: 21 parts
    root = _root(tmp_path)
    assert root["format_version"] == 2 and len(root["parts"]) == 21
    assert cold.read_dataset("t").column("id").to_pylist() == list(range(end))
    assert cold.verify_dataset("t").ok


def test_a_spec_042_reader_refuses_a_format_3_root_with_a_clear_error(tmp_path: Path) -> None:
    ds = ParquetDatasetStore(LocalStore(str(tmp_path)), max_rows_per_file=5)
    ds.write_dataset(_table(0, 50), "small")  # 10 parts, below the limit: Spec readers read it
    ds.write_dataset(_table(0, 400), "t")
    theirs = RemoteDatasets(RemoteStore(LocalBackend(str(tmp_path))))
    assert theirs.read_dataset("small").num_rows == 50
    with pytest.raises(RemoteManifestCorrupted, match="missing required fields: parts"):
        theirs.read_dataset("t")


def test_segments_hold_at_most_segment_rows_so_a_point_filter_reads_a_bounded_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segments, "SEGMENT_ROWS", 16)
    ds = ParquetDatasetStore(LocalStore(str(tmp_path)), max_rows_per_file=5)
    ds.write_dataset(_table(0, 400), "t")  # 80 parts at once
    _grow(ds, 400, 12)  # 12 more: the inline entries overflow into a segment of their own
    root = _root(tmp_path)
    assert root["format_version"] == 3 and max(s["files"] for s in root["segments"]) <= 16
    assert sum(s["files"] for s in root["segments"]) + len(root["files"]) == 92
    counting = CountingStore(LocalStore(str(tmp_path)))
    plan = ParquetDatasetStore(counting).plan_read("t", filters=[("id", "==", 222)])
    assert [e.row_count for e in plan.selected] == [5]
    assert len([p for p in counting.reads if "/_segments/" in p]) == 1
    assert ParquetDatasetStore(LocalStore(str(tmp_path))).read_dataset("t").num_rows == 460


@pytest.mark.parametrize("retain_versions", [1, 3])
def test_an_append_to_a_format_3_version_reads_no_segment_under_any_retention(
    tmp_path: Path, retain_versions: int
) -> None:
    ParquetDatasetStore(LocalStore(str(tmp_path)), max_rows_per_file=5).write_dataset(_table(0, 400), "t")
    counting = CountingStore(LocalStore(str(tmp_path)))
    ds = ParquetDatasetStore(counting, retain_versions=retain_versions)
    end = _grow(ds, 400, 4)
    assert _root(tmp_path)["format_version"] == 3
    assert not [p for p in counting.reads if "/_segments/" in p]
    assert ParquetDatasetStore(LocalStore(str(tmp_path))).read_dataset("t").column("id").to_pylist() == list(range(end))


@pytest.mark.timeout(300)
def test_above_the_limit_an_append_does_not_check_a_damaged_segment_and_a_read_still_refuses_it(
    tmp_path: Path,
) -> None:
    """As docs/guarantees.md (item 6) says: a format-3 append reads only the root, so it commits beside a
    damaged segment, and a read that opens the segment raises ``ManifestCorrupted`` naming it."""
    from dagster_parquet_dataset import ManifestCorrupted

    ds = ParquetDatasetStore(LocalStore(str(tmp_path)), max_rows_per_file=5)
    ds.write_dataset(_table(0, 400), "t")  # 80 parts: format 3
    assert _root(tmp_path)["format_version"] == 3
    damaged = tmp_path / "t" / _root(tmp_path)["segments"][0]["path"]
    data = damaged.read_bytes()
    damaged.write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    ParquetDatasetStore(LocalStore(str(tmp_path))).append_dataset(_table(400, 5), "t")
    assert _root(tmp_path)["part_count"] == 81
    with pytest.raises(ManifestCorrupted, match=damaged.name):
        ParquetDatasetStore(LocalStore(str(tmp_path))).read_dataset("t")
