"""Spark layer throughput: ``write_spark_dataset`` / ``read_spark_dataset`` against plain Spark Parquet I/O.

Run: ``python benchmarks/bench_spark.py [--rows N] [--partitions P] [--repeat R] [--master local[*]]``.

A DataFrame of ``--rows`` rows (id, int, double, string, UTC timestamp and
decimal columns; 5,000,000 by default) is cached in memory first, so every
timing is the write or the read alone. In the same run and on the same disk:

* ``df.write.parquet`` (zstd, like the dataset layer's default) -- the baseline,
* ``write_spark_dataset(mode="native")`` -- Spark's writer, then footers, rename, commit,
* ``write_spark_dataset(mode="arrow")`` -- ``mapInArrow`` tasks writing through the store,
* ``spark.read.parquet(dir)`` against ``read_spark_dataset`` (native on a LocalStore; the
  executor-side Arrow read is printed for information), each forced to read every column
  of every row with a ``noop`` write.

The variants alternate within each round and the median of ``--repeat`` rounds
is compared with the targets of issue 4: native write <= 1.15x, mapInArrow
write <= 1.6x, read <= 1.1x. Peak RSS is sampled over the whole process tree
(driver Python, the JVM, Python workers) for each variant.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore  # noqa: E402
from dagster_parquet_dataset.spark import read_spark_dataset, write_spark_dataset  # noqa: E402

TARGETS = {"write native": 1.15, "write arrow": 1.6, "read": 1.1}


class TreeSampler:
    """Peak RSS, sampled every 10 ms, of this process and its descendants.

    ``peak`` is the whole tree (driver Python, the JVM, Python workers);
    ``peak_python`` only the Python processes (the driver and Spark's Python
    workers), where this package's code runs. The JVM's RSS mostly tracks its
    heap, which grows and is rarely returned, so it says little per variant.
    """

    def __init__(self) -> None:
        self._root = psutil.Process(os.getpid())
        self.peak = 0
        self.peak_python = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        total = python = 0
        for proc in [self._root, *self._root.children(recursive=True)]:
            try:
                rss = proc.memory_info().rss
                is_python = "python" in proc.name().lower()
            except psutil.Error:
                continue
            total += rss
            python += rss if is_python else 0
        self.peak = max(self.peak, total)
        self.peak_python = max(self.peak_python, python)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            time.sleep(0.01)

    def __enter__(self) -> TreeSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Variant:
    name: str
    run: Callable[[int], None]
    seconds: list[float] = field(default_factory=list)
    peak_rss: int = 0
    peak_python: int = 0


def make_df(spark: SparkSession, rows: int, partitions: int) -> DataFrame:
    df = spark.range(0, rows, 1, partitions).select(
        F.col("id"),
        (F.col("id") % 1000).cast("int").alias("qty"),
        (F.hash("id") % 100000 / 100.0).alias("amount"),
        F.concat(F.lit("customer-"), (F.abs(F.hash("id")) % 50000).cast("string")).alias("customer"),
        (F.lit(1_767_225_600) + F.abs(F.hash("id", F.lit(1))) % 2_592_000).cast("timestamp").alias("ts"),
        (F.col("id") % 100000 / 7).cast("decimal(18,4)").alias("price"),
    )
    df = df.cache()
    df.count()
    return df


def force_read(df: DataFrame) -> None:
    """Read every column of every row (Spark's no-op sink), nothing collected."""
    df.write.format("noop").mode("overwrite").save()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--driver-memory", default="4g")
    args = parser.parse_args()

    spark = (
        SparkSession.builder.master(args.master)
        .appName("bench-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    work = tempfile.mkdtemp(prefix="bench-spark-")
    try:
        df = make_df(spark, args.rows, args.partitions)
        datasets = ParquetDatasetStore(LocalStore(os.path.join(work, "store")))  # zstd, durable (fsync)
        plain_dir = os.path.join(work, "plain")

        def plain_write(i: int) -> None:
            df.write.mode("overwrite").option("compression", "zstd").parquet(plain_dir)

        def native_write(i: int) -> None:
            write_spark_dataset(df, datasets, "native", overwrite=True, mode="native")

        def arrow_write(i: int) -> None:
            write_spark_dataset(df, datasets, "arrow", overwrite=True, mode="arrow")

        def plain_read(i: int) -> None:
            force_read(spark.read.parquet(plain_dir))

        def dataset_read(i: int) -> None:
            force_read(read_spark_dataset(spark, datasets, "native"))

        def dataset_read_arrow(i: int) -> None:
            force_read(read_spark_dataset(spark, datasets, "native", mode="arrow"))

        variants = [
            Variant("df.write.parquet", plain_write),
            Variant("write native", native_write),
            Variant("write arrow", arrow_write),
            Variant("spark.read.parquet", plain_read),
            Variant("read", dataset_read),
            Variant("read arrow (info)", dataset_read_arrow),
        ]
        # Warm-up: JIT, Python workers, page cache; also creates what the reads read.
        for v in variants:
            v.run(-1)
        for i in range(args.repeat):
            for v in variants if i % 2 == 0 else [*variants[:3][::-1], *variants[3:][::-1]]:
                with TreeSampler() as sampler:
                    start = time.perf_counter()
                    v.run(i)
                    v.seconds.append(time.perf_counter() - start)
                v.peak_rss = max(v.peak_rss, sampler.peak)
                v.peak_python = max(v.peak_python, sampler.peak_python)

        manifest = datasets.read_manifest("arrow")
        by = {v.name: statistics.median(v.seconds) for v in variants}
        named = {v.name: v for v in variants}
        print(
            f"\n{args.rows:,} rows, {args.partitions} partitions, master {args.master}, "
            f"{os.cpu_count()} CPUs, median of {args.repeat} rounds "
            f"(dataset: {len(manifest.parts)} parts, {sum(e.size_bytes or 0 for e in manifest.files) / 2**20:.1f} MiB)"
        )
        print(f"{'variant':<22}{'median s':>10}{'min s':>9}{'peak RSS tree':>16}{'peak RSS Python':>18}")
        for v in variants:
            print(
                f"{v.name:<22}{by[v.name]:>10.2f}{min(v.seconds):>9.2f}"
                f"{v.peak_rss / 2**20:>12.0f} MiB{v.peak_python / 2**20:>14.0f} MiB"
            )
        print()
        ok = True
        for name, base, target in (
            ("write native", "df.write.parquet", TARGETS["write native"]),
            ("write arrow", "df.write.parquet", TARGETS["write arrow"]),
            ("read", "spark.read.parquet", TARGETS["read"]),
        ):
            ratio = by[name] / by[base]
            best = min(named[name].seconds) / min(named[base].seconds)
            ok &= ratio <= target
            verdict = "OK" if ratio <= target else "MISSED"
            print(
                f"{name + ' / ' + base:<40} {ratio:5.2f}x  (best of rounds {best:4.2f}x)  target <= {target}x  {verdict}"
            )
        print(
            f"{'read arrow (info) / spark.read.parquet':<40} {by['read arrow (info)'] / by['spark.read.parquet']:5.2f}x"
        )
        sys.exit(0 if ok else 1)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
