"""Issue 5 benchmarks, side by side in one run.

(a) A pruned query on S3 (a moto server on 127.0.0.1 behind a request-counting
    WSGI middleware): 10,000,000 rows sorted by id in 100 files, filter
    ``id BETWEEN x AND x + 50_000``, us against ``pyarrow.dataset`` with the
    same filter. Targets: at most 3 requests, >= 5x faster.
(b) A merge of 100,000 source rows (50,000 updates whose keys lie in one
    file's id range, 50,000 new ids above the maximum) into that dataset on
    local disk, us against deltalake's
    ``merge(...).when_matched_update_all().when_not_matched_insert_all()`` and
    against rewriting everything. Targets: <= 0.5x deltalake, exactly 1 file
    rewritten, >= 10x faster than a full rewrite.

Run: ``python benchmarks/bench_table_features.py [--rows N] [--files N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, S3Store


class CountingApp:
    """WSGI middleware counting requests by method."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        with self.lock:
            self.counts[environ["REQUEST_METHOD"]] += 1
        return self.app(environ, start_response)

    def reset(self) -> None:
        with self.lock:
            self.counts.clear()

    def total(self) -> int:
        with self.lock:
            return sum(self.counts.values())


def start_moto() -> tuple[str, CountingApp, Any]:
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    counting = CountingApp(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, counting, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}", counting, server


def make_table(rows: int) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table(
        {
            "id": np.arange(rows, dtype=np.int64),
            "value": rng.normal(0, 1, rows),
            "label": pa.array(np.array([f"label-{i:04d}" for i in range(1000)])[rng.integers(0, 1000, rows)]),
        }
    )


def best_of(fn: Any, repeats: int = 3) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def bench_pruned_query(table: pa.Table, files: int) -> None:
    import boto3

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    endpoint, counting, server = start_moto()
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
    per_file = table.num_rows // files
    ours = ParquetDatasetStore(S3Store("bench", "ours", endpoint_url=endpoint), max_rows_per_file=per_file)
    ours.write_dataset(table, "events")
    fs = pafs.S3FileSystem(endpoint_override=endpoint.removeprefix("http://"), scheme="http", region="us-east-1")
    pads.write_dataset(
        table,
        "bench/plain",
        filesystem=fs,
        format="parquet",
        max_rows_per_file=per_file,
        max_rows_per_group=per_file,
        existing_data_behavior="overwrite_or_ignore",
    )
    x = per_file * (files // 2) + per_file // 10
    lo, hi = x, x + 50_000
    expected = table.filter((pc.field("id") >= lo) & (pc.field("id") <= hi))

    def run_ours() -> pa.Table:
        return ours.read_dataset("events", filters=[("id", ">=", lo), ("id", "<=", hi)])

    def run_pyarrow() -> pa.Table:
        dataset = pads.dataset("bench/plain", filesystem=fs, format="parquet")
        return dataset.to_table(filter=(pc.field("id") >= lo) & (pc.field("id") <= hi))

    results = {}
    for name, fn in (("ours", run_ours), ("pyarrow.dataset", run_pyarrow)):
        fn()  # warm connections and code
        counting.reset()
        got = fn()
        requests = dict(counting.counts)
        seconds, got = best_of(fn)
        assert got.sort_by("id").equals(expected), name
        results[name] = (seconds, requests)
    plan = ours.plan_read("events", filters=[("id", ">=", lo), ("id", "<=", hi)])
    server.shutdown()
    print(f"(a) pruned query, {table.num_rows:,} rows in {files} files on S3 (moto), id in [{lo}, {hi}]")
    print(f"    our plan: {len(plan.selected)} file selected, {len(plan.pruned)} pruned")
    for name, (seconds, requests) in results.items():
        print(f"    {name:<16} {seconds * 1000:8.1f} ms   {sum(requests.values()):4d} requests {requests}")
    ratio = results["pyarrow.dataset"][0] / results["ours"][0]
    total = sum(results["ours"][1].values())
    print(f"    requests: {total} (target <= 3: {'met' if total <= 3 else 'NOT MET'})")
    print(f"    speed-up over pyarrow.dataset: {ratio:.1f}x (target >= 5x: {'met' if ratio >= 5 else 'NOT MET'})")


def bench_merge(table: pa.Table, files: int) -> None:
    import deltalake

    per_file = table.num_rows // files
    top = table.num_rows
    rng = np.random.default_rng(3)
    start = per_file * (files // 3)
    updates = np.sort(rng.choice(np.arange(start, start + per_file), 50_000, replace=False))
    ids = np.concatenate([updates, np.arange(top, top + 50_000)]).astype(np.int64)
    source = pa.table({"id": ids, "value": rng.normal(5, 1, len(ids)), "label": pa.array(["merged"] * len(ids))})

    work = tempfile.mkdtemp(prefix="pds-merge-bench-")
    try:

        def fresh_ours() -> ParquetDatasetStore:
            shutil.rmtree(os.path.join(work, "ours"), ignore_errors=True)
            ds = ParquetDatasetStore(LocalStore(os.path.join(work, "ours")), max_rows_per_file=per_file)
            ds.write_dataset(table, "events")
            return ds

        def fresh_delta() -> str:
            path = os.path.join(work, "delta")
            shutil.rmtree(path, ignore_errors=True)
            for i in range(files):  # one file per slice, like ours
                deltalake.write_deltalake(path, table.slice(i * per_file, per_file), mode="append")
            return path

        timings: dict[str, float] = {}
        result = None
        for _ in range(3):
            ds = fresh_ours()
            t0 = time.perf_counter()
            result = ds.merge_dataset(source, "events", key_columns=["id"])
            timings["ours"] = min(timings.get("ours", float("inf")), time.perf_counter() - t0)
        check = ds.read_dataset("events", filters=[("id", "in", ids[:5].tolist() + ids[-5:].tolist())])
        assert check.num_rows == 10 and set(check.column("label").to_pylist()) == {"merged"}
        assert ds.read_manifest("events").row_count == table.num_rows + 50_000

        for _ in range(3):
            path = fresh_delta()
            t0 = time.perf_counter()
            (
                deltalake.DeltaTable(path)
                .merge(source, predicate="t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
            timings["deltalake"] = min(timings.get("deltalake", float("inf")), time.perf_counter() - t0)

        ds = fresh_ours()

        def rewrite_all() -> None:
            current = ds.read_dataset("events")
            keep = current.filter(pc.invert(pc.is_in(current.column("id"), value_set=source.column("id"))))
            ds.write_dataset(pa.concat_tables([keep, source]).sort_by("id"), "events", overwrite=True)

        timings["rewrite everything"], _ = best_of(rewrite_all, repeats=2)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    assert result is not None
    print(f"\n(b) merge of {source.num_rows:,} rows (50,000 updates in one file's range, 50,000 new ids)")
    for name, seconds in timings.items():
        print(f"    {name:<20} {seconds * 1000:8.1f} ms")
    print(
        f"    files rewritten: {len(result.rewritten_files)} (target 1), inserted {result.inserted}, "
        f"updated {result.updated}, preserved {len(result.preserved_files)}"
    )
    vs_delta = timings["ours"] / timings["deltalake"]
    vs_rewrite = timings["rewrite everything"] / timings["ours"]
    print(f"    ours / deltalake: {vs_delta:.2f}x (target <= 0.5x: {'met' if vs_delta <= 0.5 else 'NOT MET'})")
    print(f"    rewrite-all / ours: {vs_rewrite:.1f}x (target >= 10x: {'met' if vs_rewrite >= 10 else 'NOT MET'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--only", choices=["query", "merge"])
    args = parser.parse_args()
    table = make_table(args.rows)
    print(f"pyarrow {pa.__version__}, {os.cpu_count()} cores, python {sys.version.split()[0]}\n")
    if args.only in (None, "query"):
        bench_pruned_query(table, args.files)
    if args.only in (None, "merge"):
        bench_merge(table, args.files)


if __name__ == "__main__":
    main()
