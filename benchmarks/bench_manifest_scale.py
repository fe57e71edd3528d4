"""Issue 21 benchmarks: metadata cost against table size, with deltalake as the anchor in the same run.

Uses public APIs only, so it measures whatever manifest format the code writes
(run it on main, then on a branch with another format, and compare).

(a) A LocalStore dataset of N files (5 columns with statistics: int64 id,
    float64, string, timestamp, int32), built quickly: the files are encoded
    with ``engine.encode_part`` and committed through the external-commit API
    (``begin_append`` / ``commit_append``) in batches, the manifest appends
    produce. The same files (hard links) become a Delta table
    (``convert_to_deltalake``, then a checkpoint). Medians of ``--repeat``:
    ``plan_read`` with a point filter on a fresh store, against Delta's table
    load + file list; a 10-row append, against ``write_deltalake(mode="append")``.
    At N = ``--sizes`` (1,000 / 10,000 / 100,000 by default; ``--million`` adds
    1,000,000 and the peak RSS growth of one plan). Also the manifest's size.
(b) Parse + plan CPU time at 10,000 files (``time.process_time`` around a fresh
    ``plan_read``), median of ``--repeat``. Target <= 50 ms.
(c) ``--appends`` successive 10-row appends to one dataset: the median of the
    first 100 against the last 100, and the last 100 against 100 first appends to a
    fresh copy interleaved with them (the verdict: the machine's speed drifts between
    the first and the last window). Target: within 1.5x. ``--appends-base 50000,200000`` runs them on
    top of metadata-only fixtures (``_scale_fixture``) of those sizes instead of an empty dataset.
(e) ``--retention-repeat`` overwrites + reads of 10 rows on a durable LocalStore (fsync): the default
    retention (7 days: each commit also writes the replaced version's ``_versions/`` copy) against
    ``retain_versions=1`` (no copy), interleaved in one run (issue 25); medians.
(d) ``count_rows`` over ``--days`` daily partition datasets (``scan_datasets``)
    against ``pyarrow.dataset`` over the same files listed by hand, on local
    disk (and on a moto S3 server with ``--s3``). Target <= 2x.

With ``--fixture``, (a) writes both sides' metadata directly instead (``_scale_fixture``: the same
entries as segments and a root, the same ``add`` actions with statistics as a checkpointed Delta log;
no data files, which neither a plan, a table load nor an append opens).

Run: ``python benchmarks/bench_manifest_scale.py [--sizes 1000,10000] [--only a,b,c,d,e] [--million] [--fixture] [--s3]``.
Timings are wall-clock on a shared machine: noisy; compare within one run.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import package_root  # noqa: E402

#: The package measured: the revision compare_revisions.py names on PYTHONPATH, else this checkout.
ROOT = Path(package_root())

from _common import PeakSampler, make_table, mib  # noqa: E402

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, S3Store  # noqa: E402
from dagster_parquet_dataset.dataset.engine import PartOptions, encode_part  # noqa: E402

KEY = "events"
ROWS_PER_FILE = 10
BATCH = 5_000
SCHEMA = make_table(1).schema  # id int64, amount float64, customer string, ts timestamp[us, UTC], qty int32


def rows(start: int, n: int) -> pa.Table:
    """``n`` rows with ids ``start ..``: each file covers its own id range (a point filter selects one file)."""
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "amount": (ids % 997).astype(np.float64) / 7,
            "customer": pa.array([f"customer-{i % 50_000:06d}" for i in ids.tolist()]),
            "ts": pa.array(
                np.datetime64("2026-01-01T00:00:00", "us") + (ids * 1_000_000).astype("timedelta64[us]"),
                pa.timestamp("us", tz="UTC"),
            ),
            "qty": (ids % 1000).astype(np.int32),
        },
        schema=SCHEMA,
    )


def median_of(fn: Callable[[], Any], repeat: int, setup: Callable[[], Any] | None = None) -> float:
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def build(root: str, files: int) -> tuple[ParquetDatasetStore, int]:
    """A dataset of ``files`` files under ``root``/events, committed in batches of appends; its row count."""
    datasets = ParquetDatasetStore(LocalStore(os.path.join(root, "ours"), durable=False))
    options = PartOptions("zstd", None)
    done = 0
    while done < files:
        count = min(BATCH, files - done)
        pending = datasets.begin_append(KEY, SCHEMA)
        entries = []
        for i in range(count):
            relative = pending.write.part_name(i)
            first = (done + i) * ROWS_PER_FILE
            entries.append(
                encode_part(
                    datasets.store, f"{KEY}/{relative}", relative, SCHEMA, [rows(first, ROWS_PER_FILE)], options=options
                )
            )
        datasets.commit_append(pending, entries)
        done += count
    return datasets, files * ROWS_PER_FILE


def build_delta(root: str, datasets: ParquetDatasetStore) -> str:
    """The same files (hard links) as a Delta table, checkpointed."""
    import deltalake

    target = os.path.join(root, "delta")
    os.makedirs(target)
    source = os.path.join(root, "ours", KEY)
    for path in datasets.read_manifest(KEY).parts:
        os.link(os.path.join(source, path), os.path.join(target, path.replace("/", "_")))
    deltalake.convert_to_deltalake(target)
    deltalake.DeltaTable(target).create_checkpoint()
    return target


def bench_sizes(sizes: list[int], repeat: int, million: bool, fixture: bool = False) -> None:
    print(f"(a) plan_read (point filter, fresh store) and a {ROWS_PER_FILE}-row append; medians of {repeat}")
    header = f"    {'files':>9} {'manifest':>10} {'plan ours':>10} {'plan delta':>10} {'ratio':>6}   "
    print(header + f"{'append ours':>11} {'append delta':>12} {'ratio':>6}   plan peak RSS")
    for n in sizes + ([1_000_000] if million else []):
        _measure_size(n, repeat, fixture)


def _measure_size(n: int, repeat: int, fixture: bool = False) -> None:
    import deltalake

    root = tempfile.mkdtemp(prefix=f"bench-scale-{n}-")
    try:
        t0 = time.perf_counter()
        if fixture:  # metadata only, written directly (cached under /tmp/scale_fix): no data files
            from _scale_fixture import copy_delta_fixture, copy_fixture

            copy_fixture(n, SCHEMA, os.path.join(root, "ours"))
            delta, total = copy_delta_fixture(n, SCHEMA, os.path.join(root, "delta")), n * ROWS_PER_FILE
        else:
            datasets, total = build(root, n)
            delta = build_delta(root, datasets)
        built = time.perf_counter() - t0
        store_root = os.path.join(root, "ours")
        manifest_bytes = os.path.getsize(os.path.join(store_root, KEY, "manifest.json"))
        point = [("id", "==", (n // 2) * ROWS_PER_FILE + 3)]

        def plan_ours() -> None:
            plan = ParquetDatasetStore(LocalStore(store_root)).plan_read(KEY, filters=point)
            assert len(plan.selected) == 1, len(plan.selected)

        def plan_delta() -> None:
            assert len(deltalake.DeltaTable(delta).file_uris()) >= n

        with PeakSampler() as sampler:  # the first plan, before the timed ones reuse its memory
            base = sampler.peak
            plan_ours()
        peak = sampler.peak - base
        plan_o = median_of(plan_ours, repeat)
        plan_d = median_of(plan_delta, repeat)
        small = rows(10**12, ROWS_PER_FILE)
        app_o = median_of(lambda: ParquetDatasetStore(LocalStore(store_root)).append_dataset(small, KEY), repeat)
        app_d = median_of(lambda: deltalake.write_deltalake(delta, small, mode="append"), repeat)
        print(
            f"    {n:>9,} {manifest_bytes / 1e6:>8.1f}MB {plan_o * 1000:>8.1f}ms {plan_d * 1000:>8.1f}ms "
            f"{plan_o / plan_d:>5.2f}x   {app_o * 1000:>9.1f}ms {app_d * 1000:>10.1f}ms {app_o / app_d:>5.2f}x   "
            f"{mib(peak)}  (built in {built:.0f} s, {total:,} rows)",
            flush=True,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bench_parse_plan(files: int, repeat: int) -> None:
    root = tempfile.mkdtemp(prefix="bench-scale-cpu-")
    try:
        datasets, _ = build(root, files)
        store_root = os.path.join(root, "ours")
        point = [("id", "==", (files // 3) * ROWS_PER_FILE)]
        cpu = []
        for _ in range(repeat):
            fresh = ParquetDatasetStore(LocalStore(store_root))
            start = time.process_time()
            fresh.plan_read(KEY, filters=point)
            cpu.append(time.process_time() - start)
        value = statistics.median(cpu)
        print(
            f"(b) parse + plan of a {files:,}-file dataset: {value * 1000:.1f} ms CPU "
            f"(target <= 50 ms: {'met' if value <= 0.05 else 'NOT MET'})"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bench_appends(appends: int, base: int = 0) -> None:
    """(c): the first ``window`` and the last ``window`` of ``appends`` successive appends to one dataset.

    The two windows run minutes apart, and this machine's speed drifts more than that between them (one
    quiet run measured 2 ms per append at first and 6 ms a minute later, in CPU time too). So the last
    window is also paired: each of its appends alternates with an append to a fresh copy of the starting
    dataset (whose appends are then its first ``window``), and the verdict compares the two at the same
    moments. The tables are built before the clock starts.
    """
    root = tempfile.mkdtemp(prefix="bench-scale-appends-")
    try:

        def fresh(name: str) -> ParquetDatasetStore:
            store_root = os.path.join(root, name)
            if base:  # on top of the metadata-only fixture of ``base`` files (appends never open existing parts)
                from _scale_fixture import copy_fixture

                copy_fixture(base, SCHEMA, store_root)
            return ParquetDatasetStore(LocalStore(store_root, durable=False))

        def timed(datasets: ParquetDatasetStore, table: pa.Table) -> float:
            start = time.perf_counter()
            datasets.append_dataset(table, KEY)
            return time.perf_counter() - start

        window = min(100, appends // 2)
        tables = [rows((base + i) * ROWS_PER_FILE, ROWS_PER_FILE) for i in range(appends)]
        aged = fresh("aged")
        times = [timed(aged, table) for table in tables[: appends - window]]
        young, young_times = fresh("young"), []
        for i, table in enumerate(tables[appends - window :]):
            if i % 2:  # alternate which side goes first: load on the machine hits both alike
                young_times.append(timed(young, table))
                times.append(timed(aged, table))
            else:
                times.append(timed(aged, table))
                young_times.append(timed(young, table))
        first, last, paired = (statistics.median(t) for t in (times[:window], times[-window:], young_times))
        on = f" on {base:,} files (fixture)" if base else ""
        print(
            f"(c) {appends:,} successive appends{on}: first {window} {first * 1000:.1f} ms, last {window} "
            f"{last * 1000:.1f} ms (median each): {last / first:.2f}x; paired with the first {window} appends to "
            f"a fresh copy at the same moments ({paired * 1000:.1f} ms): {last / paired:.2f}x "
            f"(target <= 1.5x: {'met' if last / paired <= 1.5 else 'NOT MET'})"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bench_retention(repeat: int) -> None:
    root = tempfile.mkdtemp(prefix="bench-scale-retention-")
    try:
        sides = {
            "default retention": ParquetDatasetStore(LocalStore(os.path.join(root, "kept"))),
            "retain_versions=1": ParquetDatasetStore(LocalStore(os.path.join(root, "one")), retain_versions=1),
        }
        times: dict[str, list[float]] = {name: [] for name in sides}
        for i in range(repeat):
            for name, datasets in sides.items():  # interleaved: load on the machine hits both alike
                start = time.perf_counter()
                datasets.write_dataset(rows(i * ROWS_PER_FILE, ROWS_PER_FILE), KEY, overwrite=True)
                datasets.read_dataset(KEY)
                times[name].append(time.perf_counter() - start)
        kept, one = (statistics.median(times[name][1:]) for name in sides)
        print(
            f"(e) overwrite + read of {ROWS_PER_FILE} rows, median of {repeat - 1}: default retention "
            f"{kept * 1000:.1f} ms, retain_versions=1 {one * 1000:.1f} ms: {kept / one:.2f}x"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _daily(datasets: ParquetDatasetStore, days: int, rows_per_day: int) -> list[str]:
    rng = np.random.default_rng(3)
    keys = []
    for d in range(days):
        day = date(2025, 1, 1) + timedelta(days=d)
        key = f"daily/{day.isoformat()}"
        table = pa.table(
            {
                "id": np.arange(d * rows_per_day, (d + 1) * rows_per_day, dtype=np.int64),
                "value": rng.normal(0, 1, rows_per_day),
                "day": pa.array([day] * rows_per_day, pa.date32()),
            }
        )
        datasets.write_dataset(table, key)
        keys.append(key)
    return keys


def _compare(
    label: str, datasets: ParquetDatasetStore, keys: list[str], reference: Callable[[], pads.Dataset], repeat: int
) -> None:
    expected = reference().count_rows()
    timings = {}
    for name, fn in (
        ("scan_datasets", lambda: datasets.scan_datasets(keys).count_rows()),
        ("pyarrow.dataset", lambda: reference().count_rows()),
    ):
        assert fn() == expected, name  # warm the page cache and the code
        timings[name] = median_of(fn, repeat)
    ratio = timings["scan_datasets"] / timings["pyarrow.dataset"]
    print(
        f"    {label:<6} scan_datasets {timings['scan_datasets'] * 1000:7.1f} ms   pyarrow.dataset(files) "
        f"{timings['pyarrow.dataset'] * 1000:7.1f} ms   ratio {ratio:.2f}x (target <= 2x: {'met' if ratio <= 2 else 'NOT MET'})",
        flush=True,
    )


def bench_daily(days: int, rows_per_day: int, repeat: int, s3: bool) -> None:
    print(f"(d) count_rows over {days} daily partition datasets x {rows_per_day:,} rows, medians of {repeat}")
    root = tempfile.mkdtemp(prefix="bench-scale-daily-")
    try:
        datasets = ParquetDatasetStore(LocalStore(root, durable=False))
        keys = _daily(datasets, days, rows_per_day)
        paths = [f"{root}/{k}/{p}" for k in keys for p in datasets.read_manifest(k).parts]
        _compare("local", datasets, keys, lambda: pads.dataset(paths, format="parquet"), repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if not s3:
        return
    import boto3
    from bench_table_features import start_moto

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    endpoint, _counting, server = start_moto()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    try:
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
        datasets = ParquetDatasetStore(S3Store("bench", "daily-root", endpoint_url=endpoint))
        keys = _daily(datasets, days, rows_per_day)
        filesystem, base = datasets.store.arrow_filesystem()
        paths = [f"{base}/{k}/{p}" for k in keys for p in datasets.read_manifest(k).parts]
        _compare("moto", datasets, keys, lambda: pads.dataset(paths, format="parquet", filesystem=filesystem), repeat)
    finally:
        server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--million", action="store_true", help="also 1,000,000 files (long; needs several GB)")
    parser.add_argument("--cpu-files", type=int, default=10_000)
    parser.add_argument("--appends", type=int, default=1_000)
    parser.add_argument(
        "--appends-base",
        default="0",
        help="(c) on top of metadata-only fixtures of these sizes (comma-separated; 0: an empty dataset)",
    )
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--rows-per-day", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--s3", action="store_true", help="also (d) on a moto S3 server")
    parser.add_argument("--retention-repeat", type=int, default=201)
    parser.add_argument("--only", default="a,b,c,d,e")
    parser.add_argument(
        "--fixture",
        action="store_true",
        help="(a) on metadata-only datasets and Delta tables written directly (benchmarks/_scale_fixture.py; "
        "minutes instead of hours at 1,000,000 files)",
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    if "a" in only:
        bench_sizes([int(s) for s in args.sizes.split(",") if s], args.repeat, args.million, args.fixture)
    if "b" in only:
        bench_parse_plan(args.cpu_files, args.repeat)
    if "c" in only:
        for base in [int(s) for s in args.appends_base.split(",") if s]:
            bench_appends(args.appends, base)
    if "d" in only:
        bench_daily(args.days, args.rows_per_day, args.repeat, args.s3)
    if "e" in only:
        bench_retention(args.retention_repeat)


if __name__ == "__main__":
    main()
