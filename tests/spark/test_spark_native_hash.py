"""Content hashes of Spark's own writer's parts (issue 27): computed on the executors, not the driver.

Spark's Parquet writer has no hook for the bytes it writes, so a small Spark job hashes the written
files (``hash_parts``; with a local master, driver threads, as the executors are the same machine):
the hashes must equal the dataset layer's (``encode_part``'s, while writing) for the same bytes, a
Spark output's data version must not change with where the hash is computed, and with the job the
driver reads only the footers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.dataset import FileEntry, data_version
from dagster_parquet_dataset.dataset.engine import PartOptions, encode_part, hash_before_footer
from dagster_parquet_dataset.spark import _native, write_spark_dataset
from dagster_parquet_dataset.spark._native import hash_parts

from ._driver_reads import DriverReadCountingStore

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("where", ["executors", "driver threads"])
def test_the_executors_hash_equals_the_hash_encode_part_records(
    spark: SparkSession, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    assert _native.hash_on_driver(spark.sparkContext)  # the tests' master is local
    monkeypatch.setattr(_native, "hash_on_driver", lambda sc: where == "driver threads")
    store = LocalStore(str(tmp_path))
    rng = np.random.default_rng(7)
    entries: dict[str, FileEntry] = {}
    for i, (rows, group) in enumerate([(0, None), (10, None), (200_000, 50_000), (70_000, None), (3, 1)]):
        table = pa.table({"id": np.arange(rows), "x": rng.random(rows), "s": [f"v{j % 97}" for j in range(rows)]})
        path = f"k/part-{i}.parquet"
        options = PartOptions("zstd" if i % 2 else "snappy", group)
        entries[path] = encode_part(store, path, path[2:], table.schema, [table], options=options, tag=bool(i % 2))
    hashes = hash_parts(spark.sparkContext, store, sorted(entries))
    assert sorted(hashes) == sorted(entries)
    for path, entry in entries.items():
        assert hashes[path].content_hash == entry.content_hash
        assert hashes[path].size == entry.size_bytes
    assert hash_parts(spark.sparkContext, store, []) == {}


def _driver_hashes(store: LocalStore, key: str, entries: Sequence[FileEntry]) -> list[FileEntry]:
    """``entries`` with the content hash the driver computed before the move (its own read of each file)."""
    out = []
    for entry in entries:
        with store.open_input(f"{key}/{entry.path}") as source:
            digest = hash_before_footer(source, source.size())
        out.append(FileEntry(entry.path, entry.row_count, entry.size_bytes, stats=entry.stats, content_hash=digest))
    return out


def test_a_native_write_is_hashed_on_the_executors_with_the_same_data_version(
    spark: SparkSession, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_native, "hash_on_driver", lambda sc: False)  # as on a cluster
    store = DriverReadCountingStore(os.path.join(str(tmp_path), "store"))
    datasets = ParquetDatasetStore(store, retain_versions=1)
    df = spark.range(0, 400_000, numPartitions=3).select(
        "id", F.rand(seed=3).alias("x"), F.sha1(F.col("id").cast("string")).alias("h")
    )
    manifest = write_spark_dataset(df, datasets, "native", mode="native")
    entries = manifest.file_entries()
    total = sum(e.size_bytes or 0 for e in entries)
    assert len(entries) == 3 and total > 3 * 2**20
    # The driver read footers (pyarrow reads the last 64 KiB of a file for its footer), not the data pages:
    # hashing them on the driver read every byte.
    assert store.driver_bytes_read < total // 4

    rehashed = _driver_hashes(store, "native", entries)
    assert [e.content_hash for e in entries] == [e.content_hash for e in rehashed]
    before = data_version(manifest.evolve(files=rehashed))  # what the driver-side hash gave for these bytes
    assert before is not None and data_version(manifest) == before
