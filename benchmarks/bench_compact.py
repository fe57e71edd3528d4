"""Compaction of an append-heavy dataset on LocalStore, side by side with plain pyarrow (issue 12).

The dataset is built the way an append-heavy asset builds it: ``--files``
calls of ``append_dataset`` with ``--rows-per-file`` rows each. Then:

- ``read_before``: ``read_dataset`` of the many-file dataset;
- ``reference``: the same files read once with ``pq.read_table`` and written
  once with ``pq.write_table`` (zstd), the cost compaction is held against;
- ``compact``: ``compact_dataset`` (default 128 MiB target) on a fresh copy;
- ``read_after``: ``read_dataset`` of the compacted dataset.

Run: ``python benchmarks/bench_compact.py [--files 1000] [--rows-per-file 1000]``.
Each scenario runs in its own process (so peak RSS is its own), after a
warm-up on a tiny dataset that loads code and codecs, ``--repeats`` times,
best time kept. Prints times, the ratios the issue sets targets for, and the
peak RSS each scenario needed above what its process held before it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import make_table, measure, mib  # noqa: E402

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore  # noqa: E402

SCENARIOS = ["read_before", "reference", "compact", "read_after"]
KEY = "events"


def build(workdir: str, files: int, rows_per_file: int) -> float:
    """The many-file dataset under ``workdir/base``; returns the seconds the appends took."""
    table = make_table(files * rows_per_file)
    ds = ParquetDatasetStore(LocalStore(os.path.join(workdir, "base")))
    start = time.perf_counter()
    for i in range(files):
        ds.append_dataset(table.slice(i * rows_per_file, rows_per_file), KEY)
    return time.perf_counter() - start


def warm_up(workdir: str) -> None:
    """Load the code and codecs every scenario uses, so peak RSS counts data, not imports."""
    small = make_table(2000, seed=1)
    ds = ParquetDatasetStore(LocalStore(os.path.join(workdir, "warmup")))
    for i in range(4):
        ds.append_dataset(small.slice(i * 500, 500), "w")
    ds.read_dataset("w")
    ds.compact_dataset("w")
    ds.read_dataset("w")
    path = os.path.join(workdir, "warmup.parquet")
    pq.write_table(small, path, compression="zstd")
    pq.read_table([path])
    shutil.rmtree(os.path.join(workdir, "warmup"), ignore_errors=True)


def run_scenario(name: str, workdir: str, repeats: int) -> dict[str, float]:
    warm_up(workdir)
    base = os.path.join(workdir, "base")
    work = os.path.join(workdir, f"work-{name}")

    def fresh() -> None:
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(base, work)

    fresh()
    ds = ParquetDatasetStore(LocalStore(work))
    extra: dict[str, float] = {}
    if name == "read_before":
        m = measure(lambda: ds.read_dataset(KEY), repeats)
    elif name == "reference":
        paths = [os.path.join(work, KEY, p) for p in ds.read_manifest(KEY).parts]
        out = os.path.join(workdir, "reference.parquet")
        m = measure(lambda: pq.write_table(pq.read_table(paths), out, compression="zstd"), repeats)
    elif name == "compact":
        m = measure(lambda: ds.compact_dataset(KEY), repeats, setup=fresh)
        manifest = ds.read_manifest(KEY)
        extra = {"files_after": len(manifest.parts), "bytes_after": sum(f.size_bytes or 0 for f in manifest.files)}
    else:
        ds.compact_dataset(KEY)
        m = measure(lambda: ds.read_dataset(KEY), repeats)
    shutil.rmtree(work, ignore_errors=True)
    return {"seconds": m.seconds, "peak": m.peak_rss_over_baseline, **extra}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rows-per-file", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scenario", choices=SCENARIOS)
    parser.add_argument("--workdir")
    args = parser.parse_args()
    if args.scenario:
        print(json.dumps(run_scenario(args.scenario, args.workdir, args.repeats)))
        return

    workdir = tempfile.mkdtemp(prefix="pds-bench-compact-")
    results: dict[str, dict[str, float]] = {}
    try:
        build_seconds = build(workdir, args.files, args.rows_per_file)
        manifest = ParquetDatasetStore(LocalStore(os.path.join(workdir, "base"))).read_manifest(KEY)
        bytes_before = sum(f.size_bytes or 0 for f in manifest.files)
        for name in SCENARIOS:
            out = subprocess.run(
                [sys.executable, __file__, "--scenario", name, "--workdir", workdir, "--repeats", str(args.repeats)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            results[name] = json.loads(out.strip().splitlines()[-1])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    rows = args.files * args.rows_per_file
    arrow_bytes = make_table(rows).nbytes
    print(f"{args.files:,} appended files of {args.rows_per_file:,} rows = {rows:,} rows")
    print(f"Arrow size: {mib(arrow_bytes)}   on disk before: {mib(bytes_before)} in {len(manifest.parts):,} files")
    print(
        f"after compaction: {mib(results['compact']['bytes_after'])} in {int(results['compact']['files_after'])} file(s)"
    )
    print(f"building it with {args.files:,} append_dataset calls took {build_seconds:.1f} s")
    print(f"pyarrow {pa.__version__}, zstd, cores: {os.cpu_count()}\n")
    print(f"{'scenario':<14}{'best s':>9}{'peak RSS over baseline':>26}   (best of {args.repeats})")
    for name, r in results.items():
        print(f"{name:<14}{r['seconds']:>9.3f}{mib(r['peak']):>26}")
    t = {k: v["seconds"] for k, v in results.items()}
    speedup = t["read_before"] / t["read_after"]
    cost = t["compact"] / t["reference"]
    print()
    print(f"{'full read before / after compaction':<52}{speedup:>7.2f}x   target >= 5.00x   ", end="")
    print("met" if speedup >= 5 else "NOT MET")
    print(f"{'compact_dataset / (pq.read_table + pq.write_table)':<52}{cost:>7.2f}x   target <= 1.50x   ", end="")
    print("met" if cost <= 1.5 else "NOT MET")


if __name__ == "__main__":
    main()
