"""Write and read a 2,000,000-row table on LocalStore, side by side with plain pyarrow.

Run: ``python benchmarks/bench_dataset.py [--rows N]``. Each scenario runs in
its own process (so peak RSS is not polluted by the others), after a warm-up
on a 1,000-row table that loads code and codecs, three times, best time kept. Prints times, ratios against the targets of issue 2, and the
peak RSS each operation needed above what the process held before it.
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

SCENARIOS = [
    "pyarrow_write",
    "ours_write_single",
    "ours_write_parts",
    "pyarrow_read",
    "ours_read_single",
    "ours_read_parts",
]


def warm_up(workdir: str) -> None:
    """Load the code and codecs every scenario uses, so peak RSS counts data, not imports."""
    small = make_table(1000, seed=1)
    store = LocalStore(os.path.join(workdir, "warmup"))
    pq.write_table(small, os.path.join(workdir, "warmup.parquet"), compression="zstd")
    pq.read_table(os.path.join(workdir, "warmup.parquet"))
    ParquetDatasetStore(store, max_rows_per_file=300).write_dataset(small, "w", overwrite=True)
    ParquetDatasetStore(store).read_dataset("w")


def run_scenario(name: str, rows: int, workdir: str) -> dict[str, float]:
    warm_up(workdir)
    table = make_table(rows)
    store = LocalStore(os.path.join(workdir, "store"))
    plain_path = os.path.join(workdir, "plain.parquet")
    single = ParquetDatasetStore(store)
    parts = ParquetDatasetStore(store, max_rows_per_file=250_000)

    def fresh(key: str):  # type: ignore[no-untyped-def]
        def clear() -> None:
            shutil.rmtree(os.path.join(workdir, "store", key), ignore_errors=True)

        return clear

    if name == "pyarrow_write":
        m = measure(lambda: pq.write_table(table, plain_path, compression="zstd"))
    elif name == "ours_write_single":
        m = measure(lambda: single.write_dataset(table, "single"), setup=fresh("single"))
    elif name == "ours_write_parts":
        m = measure(lambda: parts.write_dataset(table, "parts"), setup=fresh("parts"))
    else:
        del table  # reads start from an empty process
        if name == "pyarrow_read":
            m = measure(lambda: pq.read_table(plain_path))
        elif name == "ours_read_single":
            m = measure(lambda: single.read_dataset("single"))
        else:
            m = measure(lambda: single.read_dataset("parts"))
    return {"seconds": m.seconds, "peak": m.peak_rss_over_baseline}


def interleaved_times(rows: int, rounds: int, workdir: str) -> dict[str, float]:
    """Best wall time of each scenario over ``rounds`` interleaved rounds, in this process."""
    table = make_table(rows)
    store = LocalStore(os.path.join(workdir, "timed"))
    plain_path = os.path.join(workdir, "timed-plain.parquet")
    single = ParquetDatasetStore(store)
    parts = ParquetDatasetStore(store, max_rows_per_file=250_000)
    scenarios = {
        "pyarrow_write": lambda: pq.write_table(table, plain_path, compression="zstd"),
        "ours_write_single": lambda: single.write_dataset(table, "single", overwrite=True),
        "ours_write_parts": lambda: parts.write_dataset(table, "parts", overwrite=True),
        "pyarrow_read": lambda: pq.read_table(plain_path),
        "ours_read_single": lambda: single.read_dataset("single"),
        "ours_read_parts": lambda: single.read_dataset("parts"),
    }
    best = dict.fromkeys(scenarios, float("inf"))
    for _ in range(rounds):
        for name, fn in scenarios.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scenario", choices=SCENARIOS)
    parser.add_argument("--workdir")
    args = parser.parse_args()
    if args.scenario:
        print(json.dumps(run_scenario(args.scenario, args.rows, args.workdir)))
        return

    workdir = tempfile.mkdtemp(prefix="pds-bench-")
    arrow_bytes = make_table(args.rows).nbytes
    results: dict[str, dict[str, float]] = {}
    try:
        for name in SCENARIOS:  # writes first: the reads use their output
            out = subprocess.run(
                [sys.executable, __file__, "--scenario", name, "--rows", str(args.rows), "--workdir", workdir],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            results[name] = json.loads(out.strip().splitlines()[-1])
        for name, seconds in interleaved_times(args.rows, args.rounds, workdir).items():
            results[name]["seconds"] = seconds
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"rows: {args.rows:,}   Arrow size of the table: {mib(arrow_bytes)}   cores: {os.cpu_count()}")
    print(f"pyarrow {pa.__version__}, codec zstd for both sides\n")
    print(f"{'scenario':<22}{'best s':>9}{'peak RSS over baseline':>26}   (best of {args.rounds} interleaved rounds)")
    for name, r in results.items():
        print(f"{name:<22}{r['seconds']:>9.3f}{mib(r['peak']):>26}")
    t = {k: v["seconds"] for k, v in results.items()}
    checks = [
        ("single-file write / pyarrow write_table", t["ours_write_single"] / t["pyarrow_write"], 1.05),
        ("250k-row parts write / pyarrow write_table", t["ours_write_parts"] / t["pyarrow_write"], 0.75),
        ("single-file read / pyarrow read_table", t["ours_read_single"] / t["pyarrow_read"], 1.10),
        ("250k-row parts read / pyarrow read_table", t["ours_read_parts"] / t["pyarrow_read"], 1.10),
    ]
    for name in ("pyarrow_write", "ours_write_single", "ours_write_parts"):
        checks.append((f"{name} peak RSS / Arrow size", results[name]["peak"] / arrow_bytes, 0.25))
    print()
    for label, ratio, target in checks:
        print(f"{label:<48}{ratio:>7.3f}x   target <= {target:.2f}x   {'met' if ratio <= target else 'NOT MET'}")


if __name__ == "__main__":
    main()
