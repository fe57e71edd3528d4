"""remote-store 0.33's Spec 042 reader (``remote_store.ext.parquet``) against our datasets, both ways.

A format-2 dataset keeps ``parts`` in ``manifest.json``, so a Spec-only reader reads every file even
when the per-file entries live in segments; and we read what remote-store writes (an append needs
the Arrow schema a Spec-only manifest lacks, so the upgrade is an overwrite).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from remote_store import Store as RemoteStore
from remote_store.backends import LocalBackend
from remote_store.ext.parquet import ParquetDatasetStore as RemoteDatasets

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore

pytestmark = pytest.mark.timeout(600)


def _remote(root: Path, **options: int) -> RemoteDatasets:
    return RemoteDatasets(RemoteStore(LocalBackend(str(root))), **options)


def _root(root: Path, key: str) -> dict:
    return json.loads((root / key / "manifest.json").read_text())


def test_remote_store_reads_a_10000_file_dataset_in_the_segment_format(tmp_path: Path) -> None:
    ours = ParquetDatasetStore(LocalStore(str(tmp_path)), max_rows_per_file=1)
    ours.write_dataset(pa.table({"id": list(range(10_000)), "v": [f"r{i}" for i in range(10_000)]}), "big")
    ours.append_dataset(pa.table({"id": [10_000, 10_001], "v": ["a", "b"]}), "big")

    root = _root(tmp_path, "big")
    assert root["format_version"] == 2
    assert sum(s["files"] for s in root["segments"]) >= 10_000  # the entries live in segments
    assert len(root["files"]) <= 32 and len(root["parts"]) == 10_002

    theirs = _remote(tmp_path).read_dataset("big")
    assert theirs.num_rows == 10_002
    assert theirs.sort_by("id").equals(ours.read_dataset("big").sort_by("id"))
    assert theirs.column("id").to_pylist() == list(range(10_002))  # in the order of parts


def test_we_read_what_remote_store_writes_and_upgrade_it_on_overwrite(tmp_path: Path) -> None:
    table = pa.table({"id": list(range(50)), "v": [float(i) for i in range(50)]})
    _remote(tmp_path, max_rows_per_file=10).write_dataset(table, "shared/orders")
    assert "format_version" not in _root(tmp_path, "shared/orders")

    ours = ParquetDatasetStore(LocalStore(str(tmp_path)))
    assert ours.read_dataset("shared/orders").equals(table)

    before = _root(tmp_path, "shared/orders")
    with pytest.raises(ValueError, match="Spec 042-only manifest without a schema; overwrite it"):
        ours.append_dataset(pa.table({"id": [50], "v": [50.0]}), "shared/orders")
    assert _root(tmp_path, "shared/orders") == before  # refused, nothing changed

    bigger = pa.concat_tables([table, pa.table({"id": [50], "v": [50.0]})])
    ours.write_dataset(bigger, "shared/orders", overwrite=True)
    assert _root(tmp_path, "shared/orders")["format_version"] == 2
    assert _remote(tmp_path).read_dataset("shared/orders").equals(bigger)
