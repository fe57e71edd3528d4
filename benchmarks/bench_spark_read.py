"""Spark reads over many datasets and pruned Spark reads (issue 10, items 4 and 5).

Run: ``python benchmarks/bench_spark_read.py [--datasets 365] [--rows 10000] [--files 100] [--repeat 3]``.

In one run, on one local disk and one ``local[2]`` session:

* **Many datasets, one scan.** ``--datasets`` datasets (e.g. a year of daily
  partitions) of ``--rows`` rows each, written by the dataset layer. Timed:
  ``read_spark_datasets(spark, datasets, keys).count()`` -- planning every
  manifest, checking every part and footer, building the DataFrame, counting --
  against ``spark.read.parquet(*files).count()`` over the same files listed by
  hand (the list built before timing). The variants alternate within each
  round; the medians are compared with the target (<= 3x). The number of file
  scans in the executed plan is printed (1 = one scan, not a union).
* **Filtered read of 1 of ``--files`` files.** One dataset of ``--files`` files
  (sorted ids); a filter on one id. Printed: the files the DataFrame lists
  (``inputFiles()``) and the ``numFiles`` metric of the executed scan after the
  read ran (target: 1), with the time against ``spark.read.parquet(dir)`` plus
  the same filter, for information.

Peak RSS of the driver's Python process above its baseline is printed per variant.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import pyarrow as pa

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import PeakSampler, make_table  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore  # noqa: E402
from dagster_parquet_dataset.spark import read_spark_dataset, read_spark_datasets  # noqa: E402

TARGET_MANY = 3.0


def timed(fn: Callable[[], object]) -> tuple[float, int, object]:
    with PeakSampler() as sampler:
        baseline = sampler.peak
        start = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - start
    return seconds, sampler.peak - baseline, result


def file_scans(df: DataFrame) -> int:
    return str(df._jdf.queryExecution().executedPlan().toString()).count("FileScan")


def scanned_files(df: DataFrame) -> list[int]:
    """``numFiles`` of every file scan in ``df``'s executed plan (run ``df`` first)."""
    found: list[int] = []

    def walk(node: object) -> None:
        name = node.getClass().getSimpleName()  # type: ignore[attr-defined]
        if name == "AdaptiveSparkPlanExec":
            walk(node.executedPlan())  # type: ignore[attr-defined]
            return
        metrics = node.metrics()  # type: ignore[attr-defined]
        if "Scan" in name and metrics.contains("numFiles"):
            found.append(int(metrics.apply("numFiles").value()))
        children = node.children()  # type: ignore[attr-defined]
        for i in range(children.size()):
            walk(children.apply(i))

    walk(df._jdf.queryExecution().executedPlan())
    return found


def bench_many(spark: SparkSession, root: str, n_datasets: int, rows: int, repeat: int) -> bool:
    datasets = ParquetDatasetStore(LocalStore(os.path.join(root, "many")))
    keys = [f"daily/{i:04d}" for i in range(n_datasets)]
    start = time.perf_counter()
    base = make_table(rows)
    for i, key in enumerate(keys):
        datasets.write_dataset(base.set_column(0, "id", pa.array(range(i * rows, (i + 1) * rows), pa.int64())), key)
    print(f"wrote {n_datasets} datasets of {rows:,} rows in {time.perf_counter() - start:.1f}s")
    files = [os.path.join(root, "many", key, part) for key in keys for part in datasets.read_manifest(key).parts]

    ours: list[float] = []
    theirs: list[float] = []
    rss_ours = rss_theirs = 0
    for r in range(repeat + 1):  # round 0 warms the JVM up and is not counted
        t1, m1, c1 = timed(lambda: read_spark_datasets(spark, datasets, keys).count())
        t2, m2, c2 = timed(lambda: spark.read.parquet(*files).count())
        assert c1 == c2 == n_datasets * rows, (c1, c2)
        if r:
            ours.append(t1)
            theirs.append(t2)
            rss_ours, rss_theirs = max(rss_ours, m1), max(rss_theirs, m2)
    df = read_spark_datasets(spark, datasets, keys)
    scans, listed = file_scans(df), len(df.inputFiles())
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(f"\n{n_datasets} datasets x {rows:,} rows ({len(files)} files), build + count, median of {repeat}:")
    print(
        f"  read_spark_datasets(...).count()      {statistics.median(ours):7.3f}s  (runs {fmt(ours)})"
        f"  driver Python peak +{rss_ours / 2**20:.0f} MB"
    )
    print(
        f"  spark.read.parquet(*files).count()    {statistics.median(theirs):7.3f}s  (runs {fmt(theirs)})"
        f"  driver Python peak +{rss_theirs / 2**20:.0f} MB"
    )
    print(f"  ratio {ratio:.2f}x (target <= {TARGET_MANY}x): {'met' if ratio <= TARGET_MANY else 'NOT met'}")
    print(f"  plan: {scans} file scan(s), {listed} input files")
    return ratio <= TARGET_MANY and scans == 1


def bench_pruned(spark: SparkSession, root: str, n_files: int, repeat: int) -> bool:
    per_file = 10_000
    datasets = ParquetDatasetStore(LocalStore(os.path.join(root, "pruned")), max_rows_per_file=per_file)
    datasets.write_dataset(make_table(n_files * per_file), "events")  # ids ascending: one id range per file
    parts = datasets.read_manifest("events").parts
    target_id = (n_files // 2) * per_file + 123
    filters = [("id", "==", target_id)]
    directory = os.path.join(root, "pruned", "events")
    files = [os.path.join(directory, p) for p in parts]

    ours: list[float] = []
    theirs: list[float] = []
    for r in range(repeat + 1):
        t1, _, got = timed(lambda: read_spark_dataset(spark, datasets, "events", filters=filters).collect())
        t2, _, want = timed(lambda: spark.read.parquet(*files).where(f"id = {target_id}").collect())
        assert [row["id"] for row in got] == [row["id"] for row in want] == [target_id]  # type: ignore[attr-defined]
        if r:
            ours.append(t1)
            theirs.append(t2)
    df = read_spark_dataset(spark, datasets, "events", filters=filters)
    df.collect()
    opened = scanned_files(df)
    plain = spark.read.parquet(*files).where(f"id = {target_id}")
    plain.collect()
    print(f"\nfiltered read of 1 id from {len(parts)} files of {per_file:,} rows, median of {repeat}:")
    print(f"  read_spark_dataset(filters=...)       {statistics.median(ours):7.3f}s  (runs {fmt(ours)})")
    print(f"  spark.read.parquet(*files).where(...) {statistics.median(theirs):7.3f}s  (runs {fmt(theirs)})")
    print(
        f"  files Spark opens: ours inputFiles()={len(df.inputFiles())}, scan numFiles={opened}; "
        f"plain Spark scan numFiles={scanned_files(plain)}"
    )
    ok = opened == [1] and len(df.inputFiles()) == 1
    print(f"  target 'Spark opens 1 file': {'met' if ok else 'NOT met'}")
    return ok


def fmt(values: list[float]) -> str:
    return ", ".join(f"{v:.3f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", type=int, default=365)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    spark = (
        SparkSession.builder.master(args.master)
        .appName("bench-spark-read")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    root = tempfile.mkdtemp(prefix="bench-spark-read-")
    try:
        many_ok = bench_many(spark, root, args.datasets, args.rows, args.repeat)
        pruned_ok = bench_pruned(spark, root, args.files, args.repeat)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nall targets met: {many_ok and pruned_ok}")


if __name__ == "__main__":
    main()
