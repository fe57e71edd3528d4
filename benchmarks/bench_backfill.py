"""Single-run backfill of 30 daily partitions vs writing the same rows as one dataset (issue 10).

Run: ``python benchmarks/bench_backfill.py [--rows N] [--days D] [--repeat R] [--spark-repeat R] [--skip-spark]``.

The same ``--rows`` rows (5,000,000 by default; ``make_table``'s columns plus
a ``day`` column spreading them over ``--days`` days in random order, the
worst case for splitting) are written, in one process and on the same disk:

* **Arrow**: ``RemoteStoreIOManager.handle_output`` of the ``pyarrow.Table``
  over a 30-day ``PartitionKeyRange`` with ``partition_expr="day"`` (split in
  memory, 30 datasets committed in parallel) vs ``handle_output`` of the same
  table as one unpartitioned asset (one dataset).
* **Spark** (``local[2]``, DataFrame cached first): the same backfill of a
  Spark DataFrame (one ``mapInArrow`` job writing every day's parts, then 30
  commits) vs the handler's one-dataset write of the same DataFrame
  (``write_spark_dataset``, ``mode="auto"``: Spark's own writer on a
  LocalStore), and vs ``mode="arrow"`` for information.

Variants alternate within each round; the median of ``--repeat`` rounds is
compared with the target (backfill <= 1.3x one dataset). Peak RSS above the
pre-write RSS is sampled for this Python process (Arrow) and for the process
tree's Python processes (Spark: the driver and the Python workers).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import psutil
import pyarrow as pa

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dagster as dg  # noqa: E402
from _common import PeakSampler, make_table  # noqa: E402

from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager  # noqa: E402

TARGET = 1.3
FIRST_DAY = dt.date(2026, 1, 1)


def with_days(table: pa.Table, days: int, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    offsets = rng.integers(0, days, table.num_rows).astype(np.int32)
    day = pa.array(offsets + (FIRST_DAY - dt.date(1970, 1, 1)).days, pa.int32()).cast(pa.date32())
    return table.append_column("day", day)


def contexts(days: int) -> tuple[dg.OutputContext, dg.OutputContext]:
    daily = dg.DailyPartitionsDefinition(start_date=FIRST_DAY.isoformat())
    last = (FIRST_DAY + dt.timedelta(days=days - 1)).isoformat()
    backfill = dg.build_output_context(
        asset_key=["bench", "daily"],
        asset_partitions_def=daily,
        asset_partition_key_range=dg.PartitionKeyRange(FIRST_DAY.isoformat(), last),
        definition_metadata={"partition_expr": "day"},
    )
    whole = dg.build_output_context(asset_key=["bench", "whole"])
    return backfill, whole


Sample = tuple[float, int, int, int]  # seconds, driver peak over baseline, tree peak, Python-processes peak


def timed(fn: Callable[[], object], tree: bool = False) -> Sample:
    """Wall time of ``fn``; this process's peak RSS above the pre-run RSS; with ``tree``, the absolute
    peak RSS of the process tree and of its Python processes (driver plus Spark's Python workers)."""
    baseline = psutil.Process(os.getpid()).memory_info().rss
    if tree:
        from bench_spark import TreeSampler

        tree_sampler = TreeSampler()
        tree_sampler.__enter__()
    with PeakSampler() as sampler:
        start = time.perf_counter()
        fn()
        seconds = time.perf_counter() - start
    if tree:
        tree_sampler.__exit__()
        return seconds, max(0, sampler.peak - baseline), tree_sampler.peak, tree_sampler.peak_python
    return seconds, max(0, sampler.peak - baseline), 0, 0


def report(name: str, runs: dict[str, list[Sample]], reference: str, subject: str) -> float:
    print(f"\n{name}")
    width = max(len(v) for v in runs) + 2
    med = {}
    for variant, samples in runs.items():
        med[variant] = statistics.median(s[0] for s in samples)
        driver = max(s[1] for s in samples) / 2**20
        line = f"  {variant:<{width}} median {med[variant]:7.2f} s  min {min(s[0] for s in samples):7.2f} s"
        line += f"  driver peak RSS +{driver:6.0f} MiB"
        if any(s[2] for s in samples):
            line += f"  tree peak {max(s[2] for s in samples) / 2**20:6.0f} MiB"
            line += f"  Python procs peak {max(s[3] for s in samples) / 2**20:6.0f} MiB"
        print(line)
    ratio = med[subject] / med[reference]
    print(
        f"  ratio {subject} / {reference}: {ratio:.2f}x (target <= {TARGET}x) {'OK' if ratio <= TARGET else 'MISSED'}"
    )
    return ratio


def bench_arrow(table: pa.Table, days: int, repeat: int, root: str) -> float:
    io_manager = RemoteStoreIOManager(store=LocalStoreResource(root=root))
    ordered = table.sort_by("day")  # the best case: each day's rows contiguous, split by zero-copy slices
    subject = f"backfill of {days} days"
    runs: dict[str, list[Sample]] = {"one dataset": [], subject: [], subject + " (rows sorted by day)": []}
    for _ in range(repeat):  # fresh contexts per round (a context takes its output metadata once), built untimed
        backfill_ctx, whole_ctx = contexts(days)
        sorted_ctx, _ = contexts(days)
        runs["one dataset"].append(timed(lambda c=whole_ctx: io_manager.handle_output(c, table)))
        runs[subject].append(timed(lambda c=backfill_ctx: io_manager.handle_output(c, table)))
        runs[subject + " (rows sorted by day)"].append(timed(lambda c=sorted_ctx: io_manager.handle_output(c, ordered)))
    datasets = io_manager.datasets
    total = sum(
        datasets.read_manifest(f"bench/daily/{(FIRST_DAY + dt.timedelta(days=i)).isoformat()}").row_count
        for i in range(days)
    )
    assert total == table.num_rows, (total, table.num_rows)
    ratio = report(f"Arrow: {table.num_rows:,} rows", runs, "one dataset", subject)
    best = statistics.median(s[0] for s in runs[subject + " (rows sorted by day)"])
    print(
        f"  (for information: sorted rows / one dataset: {best / statistics.median(s[0] for s in runs['one dataset']):.2f}x)"
    )
    return ratio


def bench_spark(table: pa.Table, days: int, repeat: int, root: str, master: str) -> float:
    from pyspark.sql import SparkSession

    from dagster_parquet_dataset.spark import write_spark_dataset

    spark = (
        SparkSession.builder.master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    df = spark.createDataFrame(table.drop_columns(["ts"])).repartition(8).cache()  # ts: not needed here
    assert df.count() == table.num_rows
    io_manager = RemoteStoreIOManager(store=LocalStoreResource(root=root))
    datasets = io_manager.datasets

    runs: dict[str, list[Sample]] = {
        "one dataset (write_spark_dataset auto)": [],
        "one dataset (write_spark_dataset arrow)": [],
        f"backfill of {days} days": [],
    }
    for _ in range(repeat):
        backfill_ctx = contexts(days)[0]
        runs["one dataset (write_spark_dataset auto)"].append(
            timed(lambda: write_spark_dataset(df, datasets, "bench/whole", overwrite=True), tree=True)
        )
        runs["one dataset (write_spark_dataset arrow)"].append(
            timed(lambda: write_spark_dataset(df, datasets, "bench/whole", overwrite=True, mode="arrow"), tree=True)
        )
        runs[f"backfill of {days} days"].append(
            timed(lambda c=backfill_ctx: io_manager.handle_output(c, df), tree=True)
        )
    total = sum(
        datasets.read_manifest(f"bench/daily/{(FIRST_DAY + dt.timedelta(days=i)).isoformat()}").row_count
        for i in range(days)
    )
    assert total == table.num_rows, (total, table.num_rows)
    ratio = report(
        f"Spark ({master}): {table.num_rows:,} rows",
        runs,
        "one dataset (write_spark_dataset auto)",
        f"backfill of {days} days",
    )
    arrow = statistics.median(s[0] for s in runs["one dataset (write_spark_dataset arrow)"])
    backfill = statistics.median(s[0] for s in runs[f"backfill of {days} days"])
    print(f"  (for information: backfill / one dataset via mapInArrow: {backfill / arrow:.2f}x)")
    spark.stop()
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--spark-repeat", type=int, default=None, help="rounds for Spark (default: --repeat)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-spark", action="store_true")
    args = parser.parse_args()
    table = with_days(make_table(args.rows), args.days)
    print(f"{args.rows:,} rows over {args.days} days, {table.nbytes / 2**20:.0f} MB in Arrow")
    root = tempfile.mkdtemp(prefix="bench-backfill-")
    try:
        ratios = {"arrow": bench_arrow(table, args.days, args.repeat, os.path.join(root, "arrow"))}
        if not args.skip_spark:
            ratios["spark"] = bench_spark(
                table, args.days, args.spark_repeat or args.repeat, os.path.join(root, "spark"), args.master
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\nsummary: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()) + f" (target <= {TARGET}x)")


if __name__ == "__main__":
    main()
