"""Bounded memory (DESIGN guarantee 5): a streamed write never holds its input whole.

The memory checks run in a fresh subprocess each (so nothing else this test
session allocated counts) and compare peak RSS growth, sampled every
millisecond, against a bound far below what holding the data would take.
``benchmarks/bench_memory.py`` measures the same at full scale.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore

MB = 1_000_000

_CHILD = r"""
import json, os, sys, threading, time
import numpy as np
import psutil
import pyarrow as pa
from dagster_parquet_dataset import LocalStore, ParquetDatasetStore

root, total, per_file, group = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
per_file = None if per_file == "none" else int(per_file)
rows = 32 * 1024
rng = np.random.default_rng(0)
schema = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("s", pa.string())])
words = np.array([f"word-{i:07d}" for i in range(100_000)])

def batches():
    made, i = 0, 0
    while made < total:
        # fresh buffers in every batch, so a writer that keeps batches shows in RSS
        batch = pa.RecordBatch.from_arrays(
            [pa.array(np.arange(i * rows, (i + 1) * rows)), pa.array(rng.random(rows)),
             pa.array(words[rng.integers(0, len(words), rows)])], schema=schema)
        made += batch.nbytes
        i += 1
        yield batch

ds = ParquetDatasetStore(LocalStore(os.path.join(root, "warm")), max_rows_per_file=per_file, row_group_size=group)
ds.write_dataset(pa.RecordBatchReader.from_batches(schema, iter([next(batches())])), "w")  # load code and codecs
ds = ParquetDatasetStore(LocalStore(root), max_rows_per_file=per_file, row_group_size=group)
proc = psutil.Process()
baseline = peak = proc.memory_info().rss
done = threading.Event()

def sample():
    global peak
    while not done.is_set():
        peak = max(peak, proc.memory_info().rss)
        time.sleep(0.001)

sampler = threading.Thread(target=sample)
sampler.start()
manifest = ds.write_dataset(pa.RecordBatchReader.from_batches(schema, batches()), "big")
done.set()
sampler.join()
print(json.dumps({"growth": peak - baseline, "rows": manifest.row_count, "parts": len(manifest.parts)}))
"""


def _write_in_child(root: str, total: int, per_file: int | None, group: int) -> dict[str, int]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, root, str(total), str(per_file or "none"), str(group)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("per_file", "parts"),
    [(None, 1), (2_500_000, 3)],  # ~200 MB of Arrow data as one file, and as parts of ~80 MB each
    ids=["single-file", "parts"],
)
def test_streamed_write_holds_a_row_group_not_the_data(
    tmp_path: os.PathLike[str], per_file: int | None, parts: int
) -> None:
    total = 200 * MB
    out = _write_in_child(str(tmp_path), total, per_file, group=128 * 1024)
    assert out["parts"] == parts
    assert out["rows"] >= total // 32  # ~32 bytes of Arrow data per row
    print(f"peak RSS growth {out['growth'] / MB:.0f} MB")
    # A 128 Ki-row group holds ~4 MB; holding two parts (~160 MB) or the data (200 MB) would exceed this.
    assert out["growth"] <= 80 * MB, f"peak RSS grew by {out['growth'] / MB:.0f} MB while streaming {total / MB:.0f} MB"


def _reader(sizes: list[int]) -> pa.RecordBatchReader:
    schema = pa.schema([("i", pa.int64())])

    def gen() -> Iterator[pa.RecordBatch]:
        start = 0
        for n in sizes:
            yield pa.record_batch([pa.array(range(start, start + n), pa.int64())], schema=schema)
            start += n

    return pa.RecordBatchReader.from_batches(schema, gen())


@pytest.mark.parametrize(
    "sizes",
    [[], [0], [5, 0, 9, 1, 13], [14], [7, 7], [3] * 9, [1] * 22, [40]],
    ids=lambda s: "+".join(map(str, s)) or "empty",
)
def test_streamed_parts_cut_at_max_rows_per_file(tmp_path: os.PathLike[str], sizes: list[int]) -> None:
    ds = ParquetDatasetStore(LocalStore(str(tmp_path)), max_rows_per_file=7, row_group_size=3)
    manifest = ds.write_dataset(_reader(sizes), "k")
    total = sum(sizes)
    expected_parts = max(1, -(-total // 7))
    assert [e.row_count for e in manifest.files] == [min(7, total - 7 * i) for i in range(expected_parts)]
    assert ds.read_dataset("k").column("i").to_pylist() == list(range(total))
    for entry in manifest.files:  # row groups of at most row_group_size rows
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(os.path.join(str(tmp_path), "k", entry.path)).metadata
        assert all(meta.row_group(g).num_rows <= 3 for g in range(meta.num_row_groups))
