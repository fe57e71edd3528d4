"""Spark layer throughput: ``write_spark_dataset`` / ``read_spark_dataset`` against plain Spark Parquet I/O.

Run: ``python benchmarks/bench_spark.py [--rows N] [--partitions P] [--repeat R] [--master local[*]]
[--only io|exec|all] [--merge-rows M]``.

``--only exec`` runs the issue 10 measures alone (see :func:`bench_exec`): the
driver's Python RSS growth during a Spark append, ``partition_by`` write and
merge, and their times against plain Spark (``partitionBy``, ``mode("append")``,
a full union + dedupe + overwrite rewrite for the merge).

A DataFrame of ``--rows`` rows (id, int, double, string, UTC timestamp and
decimal columns; 5,000,000 by default) is cached in memory first, so every
timing is the write or the read alone. In the same run and on the same disk:

* ``df.write.parquet`` (zstd, like the dataset layer's default) -- the baseline,
* ``write_spark_dataset(mode="native")`` -- Spark's writer, then footers, rename, commit,
* ``write_spark_dataset(mode="arrow")`` -- ``mapInArrow`` tasks writing through the store,
* each write again with the parts' content hashes off (a private switch), whose ratio is
  what hashing costs a write (issue 27: at most 3%); with and without run back to back in
  every round, alternating which goes first, and the cost is also given as the median of
  the per-round ratios. The CPU seconds the hashing itself took, summed over the tasks
  (the executors report them with each part), are printed as a share of the write's wall time,
* the native write with its parts hashed by a Spark job on the executors, as on a cluster (with
  a local master they are hashed on driver threads, as before the job existed: see
  ``_native.hash_on_driver``), for comparison,
* ``spark.read.parquet(dir)`` against ``read_spark_dataset`` (native on a LocalStore; the
  executor-side Arrow read is printed for information), each forced to read every column
  of every row with a ``noop`` write.

The variants alternate within each round and the median of ``--repeat`` rounds (7 by default)
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
from dagster_parquet_dataset.spark import (  # noqa: E402
    _native,
    _parts,
    append_spark_dataset,
    merge_spark_dataset,
    read_spark_dataset,
    write_spark_dataset,
)

TARGETS = {"write native": 1.15, "write arrow": 1.6, "read": 1.1, "hash cost": 0.03}


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
    hash_cpu: list[float] = field(default_factory=list)  # CPU s spent hashing, summed over tasks, per round
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
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument(
        "--only",
        choices=["io", "exec", "all"],
        default="all",
        help="io: writes/reads (issue 4); exec: append, merge and partition_by on the executors (issue 10)",
    )
    parser.add_argument("--merge-rows", type=int, default=10_000_000, help="dataset size for the merge benchmarks")
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
        if args.only != "io":
            exec_ok = bench_exec(spark, args, work)
            if args.only == "exec":
                sys.exit(0 if exec_ok else 1)
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

        def unhashed(run: Callable[[int], None]) -> Callable[[int], None]:
            """``run`` with the parts' content hashes off (the private switch), to measure what they cost."""

            def go(i: int) -> None:
                _parts.HASH_CONTENT = False
                try:
                    run(i)
                finally:
                    _parts.HASH_CONTENT = True

            return go

        def executor_hashed(i: int) -> None:
            local = _native.hash_on_driver
            _native.hash_on_driver = lambda sc: False  # the hashing job, as on a cluster
            try:
                native_write(i)
            finally:
                _native.hash_on_driver = local

        writes = [
            Variant("df.write.parquet", plain_write),
            Variant("write native", native_write),
            Variant("write native (no hash)", unhashed(native_write)),
            Variant("native (hash job)", executor_hashed),
            Variant("write arrow", arrow_write),
            Variant("write arrow (no hash)", unhashed(arrow_write)),
        ]
        variants = [
            *writes,
            Variant("spark.read.parquet", plain_read),
            Variant("read", dataset_read),
            Variant("read arrow (info)", dataset_read_arrow),
        ]
        # Warm-up: JIT, Python workers, page cache; also creates what the reads read.
        for v in variants:
            v.run(-1)
        for i in range(args.repeat):
            w = len(writes)
            for v in variants if i % 2 == 0 else [*variants[:w][::-1], *variants[w:][::-1]]:
                _parts.HASH_CLOCK.reset()
                with TreeSampler() as sampler:
                    start = time.perf_counter()
                    v.run(i)
                    v.seconds.append(time.perf_counter() - start)
                v.hash_cpu.append(_parts.HASH_CLOCK.seconds)
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
        for name, without in (
            ("write native", "write native (no hash)"),
            ("native (hash job)", "write native (no hash)"),
            ("write arrow", "write arrow (no hash)"),
        ):
            cost = by[name] / by[without] - 1
            pairs = zip(named[name].seconds, named[without].seconds, strict=True)
            paired = statistics.median(w / wo for w, wo in pairs) - 1
            good = cost <= TARGETS["hash cost"]
            ok &= good or name == "native (hash job)"  # for information: with a local master the driver hashes
            print(
                f"{'content hash cost, ' + name:<40} {cost:+6.1%}  (median with / without - 1; "
                f"median of per-round ratios {paired:+.1%})  target <= {TARGETS['hash cost']:.0%}  "
                f"{'OK' if good else 'MISSED'}"
            )
        cores = spark.sparkContext.defaultParallelism
        for name in ("write native", "native (hash job)", "write arrow"):
            cpu = statistics.median(named[name].hash_cpu)
            print(
                f"{'hash CPU, ' + name:<40} {cpu:6.3f} s summed over tasks = {cpu / by[name]:5.1%} of the "
                f"write's {by[name]:.2f} s wall ({cpu / by[name] / cores:.1%} of its {cores} cores)"
            )
        print(
            f"{'native, hash job / driver threads':<40} {by['native (hash job)'] / by['write native']:5.2f}x  "
            "(the parts hashed by a Spark job on the executors vs on the driver's threads)"
        )
        sys.exit(0 if ok and (args.only == "io" or exec_ok) else 1)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


class DriverSampler:
    """Peak RSS of this (the driver's) Python process alone, sampled every 10 ms; growth over the start."""

    def __init__(self) -> None:
        self._proc = psutil.Process(os.getpid())
        self.start = self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __enter__(self) -> DriverSampler:
        self.start = self.peak = self._proc.memory_info().rss
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)

    @property
    def growth(self) -> float:
        return (self.peak - self.start) / 2**20


EXEC_TARGETS = {"rss": 64.0, "partition_by": 1.2, "append": 1.2, "merge": 0.2}


def bench_exec(spark: SparkSession, args: argparse.Namespace, work: str) -> bool:
    """Issue 10: append, merge and partition_by on the executors, side by side with plain Spark.

    * driver Python peak RSS growth during a ``--rows`` append, a ``--rows`` partition_by write
      (30 folders) and a merge of ``--merge-rows / 5`` changed rows into ``--merge-rows`` (<= 64 MB each);
    * ``write_spark_dataset(partition_by=["day"])`` vs ``df.write.partitionBy("day").parquet`` (<= 1.2x);
    * ``append_spark_dataset`` vs ``df.write.mode("append").parquet`` (<= 1.2x);
    * merging 1% changed keys (one file's range) into ``--merge-rows`` rows in 100 files vs a full
      Spark rewrite (``union`` + dedupe + overwrite) (<= 0.2x, exactly one file rewritten).
    """
    rows, n = args.rows, args.merge_rows
    df = make_df(spark, rows, args.partitions).withColumn("day", (F.col("id") % 30).cast("int"))
    df.count()
    datasets = ParquetDatasetStore(LocalStore(os.path.join(work, "exec")))
    plain = os.path.join(work, "exec-plain")
    print(f"\n== executor-side append / merge / partition_by: {rows:,} rows, merges into {n:,} rows, {args.master}")

    # ---- driver RSS
    def base(lo: int, hi: int, parts: int) -> DataFrame:
        return spark.range(lo, hi, 1, parts).select(
            "id", (F.col("id") % 1000).alias("qty"), F.sha1(F.col("id").cast("string")).alias("h")
        )

    append_spark_dataset(base(0, 1000, 2), datasets, "warm")  # imports, Python workers
    merge_spark_dataset(base(0, 10, 1), datasets, "warm", key_columns=["id"])
    write_spark_dataset(df.limit(1000), datasets, "warm-p", partition_by=["day"])
    write_spark_dataset(base(0, n, 100), datasets, "merge-rss", mode="arrow")
    rss: dict[str, float] = {}
    with DriverSampler() as s:
        append_spark_dataset(df, datasets, "append-rss")
    rss[f"append {rows:,} rows"] = s.growth
    with DriverSampler() as s:
        write_spark_dataset(df, datasets, "part-rss", partition_by=["day"])
    rss[f"partition_by write {rows:,} rows"] = s.growth
    changed = base(2 * n // 5, 3 * n // 5, args.partitions).withColumn("qty", F.lit(-1).cast("long"))
    with DriverSampler() as s:
        result = merge_spark_dataset(changed, datasets, "merge-rss", key_columns=["id"])
    rss[f"merge {n // 5:,} changed rows into {n:,}"] = s.growth
    assert result.updated == n // 5, result
    ok = True
    print(f"{'driver Python peak RSS growth':<48}{'MiB':>8}")
    for name, growth in rss.items():
        good = growth <= EXEC_TARGETS["rss"]
        ok &= good
        print(f"  {name:<46}{growth:>8.1f}  target <= {EXEC_TARGETS['rss']:.0f}  {'OK' if good else 'MISSED'}")

    # ---- timings, alternating within each round
    def plain_partitioned(i: int) -> None:
        df.write.mode("overwrite").option("compression", "zstd").partitionBy("day").parquet(plain + "-p")

    def ours_partitioned(i: int) -> None:
        write_spark_dataset(df, datasets, "p", overwrite=True, partition_by=["day"])

    def plain_append(i: int) -> None:
        df.write.mode("append").option("compression", "zstd").parquet(plain + "-a")

    def ours_append(i: int) -> None:
        append_spark_dataset(df, datasets, "a")

    write_spark_dataset(base(0, n, 100), datasets, "m", mode="arrow")
    base(0, n, 100).write.mode("overwrite").option("compression", "zstd").parquet(plain + "-m")
    per_file = n // 100
    one_file = base(5 * per_file, 6 * per_file, args.partitions).withColumn("qty", F.lit(-7).cast("long"))
    rewritten: list[int] = []

    def full_rewrite(i: int) -> None:
        current = spark.read.parquet(plain + "-m")
        merged = one_file.unionByName(current.join(one_file.select("id"), "id", "left_anti"))
        merged.write.mode("overwrite").option("compression", "zstd").parquet(plain + f"-m{i % 2}")

    def ours_merge(i: int) -> None:
        r = merge_spark_dataset(one_file, datasets, "m", key_columns=["id"])
        rewritten.append(len(r.rewritten_files))

    variants = [
        Variant("df.write.partitionBy", plain_partitioned),
        Variant("partition_by write", ours_partitioned),
        Variant("df.write append", plain_append),
        Variant("append_spark_dataset", ours_append),
        Variant("full rewrite merge", full_rewrite),
        Variant("merge_spark_dataset", ours_merge),
    ]
    for i in range(args.repeat):
        for v in variants if i % 2 == 0 else variants[::-1]:
            start = time.perf_counter()
            v.run(i)
            v.seconds.append(time.perf_counter() - start)
    by = {v.name: statistics.median(v.seconds) for v in variants}
    print(f"{'variant':<26}{'median s':>10}{'min s':>9}   (median of {args.repeat} rounds)")
    for v in variants:
        print(f"  {v.name:<24}{by[v.name]:>10.2f}{min(v.seconds):>9.2f}")
    folders = {e.path.split("/")[0] for e in datasets.read_manifest("p").files}
    for name, ref, target in (
        ("partition_by write", "df.write.partitionBy", EXEC_TARGETS["partition_by"]),
        ("append_spark_dataset", "df.write append", EXEC_TARGETS["append"]),
        ("merge_spark_dataset", "full rewrite merge", EXEC_TARGETS["merge"]),
    ):
        ratio = by[name] / by[ref]
        good = ratio <= target
        ok &= good
        print(f"  {name + ' / ' + ref:<48}{ratio:6.2f}x  target <= {target}x  {'OK' if good else 'MISSED'}")
    print(f"  partition_by folders: {len(folders)}; merge files rewritten per round: {rewritten}")
    ok &= len(folders) == 30 and set(rewritten) == {1}
    return ok


if __name__ == "__main__":
    main()
