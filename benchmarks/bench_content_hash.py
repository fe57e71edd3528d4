"""Cost of the per-part content hash on a 2M-row write (issue 19: target <= 3% of the write).

Writes the same table with and without hashing, alternating, in one process, and reports
the medians. Run: ``python benchmarks/bench_content_hash.py [rows] [repeats] [store]``
(store: ``local`` (default, a temporary folder) or ``memory``).
"""

from __future__ import annotations

import hashlib
import statistics
import sys
import tempfile
import time

from _common import make_table

from dagster_parquet_dataset.dataset import ParquetDatasetStore, data_version
from dagster_parquet_dataset.dataset.engine import PartOptions, encode_part
from dagster_parquet_dataset.storage.local import LocalStore
from dagster_parquet_dataset.storage.memory import MemoryStore


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    kind = sys.argv[3] if len(sys.argv) > 3 else "local"
    compression = sys.argv[4] if len(sys.argv) > 4 else "zstd"  # the dataset default
    table = make_table(rows)
    with tempfile.TemporaryDirectory() as folder:
        store = LocalStore(folder) if kind == "local" else MemoryStore()
        timings: dict[bool, list[float]] = {True: [], False: []}
        cpu: dict[bool, list[float]] = {True: [], False: []}
        for i in range(repeats):
            for hashed in (False, True) if i % 2 else (True, False):
                options = PartOptions(compression=compression, row_group_size=None, hash_content=hashed)
                start, start_cpu = time.perf_counter(), time.process_time()
                encode_part(store, f"bench/{i}-{hashed}.parquet", "x.parquet", table.schema, [table], options=options)
                timings[hashed].append(time.perf_counter() - start)
                cpu[hashed].append(time.process_time() - start_cpu)
        plain, hashed = statistics.median(timings[False]), statistics.median(timings[True])
        print(f"{rows:,} rows, {kind} store, {repeats} runs each (one part, {compression})")
        print(f"  write without hash: {plain * 1000:8.1f} ms (median)")
        print(f"  write with hash:    {hashed * 1000:8.1f} ms (median)")
        print(f"  hash cost:          {(hashed - plain) / plain * 100:+.1f} % (wall clock)")
        plain_cpu, hashed_cpu = statistics.median(cpu[False]), statistics.median(cpu[True])
        print(
            f"  CPU time without / with: {plain_cpu * 1000:.1f} / {hashed_cpu * 1000:.1f} ms, "
            f"{(hashed_cpu - plain_cpu) / plain_cpu * 100:+.1f} % (CPU, less sensitive to a busy machine)"
        )
        data = store.read_bytes("bench/0-True.parquet")
        size = len(data)
        start = time.perf_counter()
        hashlib.sha256(data).hexdigest()
        alone = time.perf_counter() - start
        print(
            f"  sha256 of the {size / 2**20:.1f} MiB part alone: {alone * 1000:.1f} ms = {alone / plain * 100:.1f} % of the write"
        )
        datasets = ParquetDatasetStore(store)
        start = time.perf_counter()
        manifest = datasets.write_dataset(table, "whole", overwrite=True)
        print(
            f"  write_dataset (parallel parts, hashed): {(time.perf_counter() - start) * 1000:.1f} ms, "
            f"{len(manifest.parts)} parts, data version {data_version(manifest)}"
        )


if __name__ == "__main__":
    main()
