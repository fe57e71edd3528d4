"""Issue 11 benchmarks for scans and cold reads, side by side in one run.

(a) Cold pruned S3 query: 10,000,000 rows sorted by id in 100 files on a moto
    server (behind a request-counting WSGI middleware), one file's worth of
    ids selected. Each query runs in a fresh Python process: ours
    (``read_dataset``, and ``scan_dataset(...).to_table()`` for reference)
    against ``deltalake.DeltaTable(...).to_pyarrow_table(filters=...)`` over
    the same rows as a Delta table (100 appends of one file each, then a
    checkpoint). Reported: the query's wall time in that process (imports
    excluded, printed apart), and the requests the server received. "ours
    warm" reads twice on one store object and times the second read; its
    requests are those of both reads. Targets: ours <= 1.0x delta, <= 2
    requests (the manifest and the selected file), <= 2 more when warm.
(b) Parse + plan a 10,000-file manifest (``DatasetManifest.from_json`` and
    ``plan``), best of ``--repeat``; wall and CPU time; with orjson and with the
    stdlib fallback. Target <= 50 ms.
(c) 365 daily partitions, each its own dataset on local disk, loaded as one
    ``scan_datasets`` dataset and counted (``count_rows``) and read
    (``to_table``), against ``pyarrow.dataset.dataset(list_of_the_files)``.
    Target <= 2x.

Run: ``python benchmarks/bench_scan.py [--rows N] [--files N] [--days N] [--only a,b,c]``.
Timings are wall-clock on a shared machine: noisy; compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import package_root  # noqa: E402

#: The package measured: the revision compare_revisions.py names on PYTHONPATH, else this checkout.
ROOT = Path(package_root())

from bench_table_features import make_table, start_moto  # noqa: E402

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, S3Store  # noqa: E402
from dagster_parquet_dataset.dataset import manifest as manifest_module  # noqa: E402

try:  # the package's layout since issue 25; compare_revisions.py may run an older revision's
    from dagster_parquet_dataset.dataset.io.read_parts import plan
except ImportError:
    from dagster_parquet_dataset.dataset._read import plan  # type: ignore[no-redef]
from dagster_parquet_dataset.dataset.manifest import DatasetManifest, FileEntry, encode_schema, schema_hash  # noqa: E402

_CHILD = {
    "ours": """
        from dagster_parquet_dataset import ParquetDatasetStore, S3Store
        t_import = time.perf_counter() - t_start
        t0 = time.perf_counter()
        table = ParquetDatasetStore(S3Store("bench", "ours", endpoint_url=ENDPOINT)).read_dataset("events", filters=FILTERS)
        """,
    "ours warm": """
        from dagster_parquet_dataset import ParquetDatasetStore, S3Store
        t_import = time.perf_counter() - t_start
        datasets = ParquetDatasetStore(S3Store("bench", "ours", endpoint_url=ENDPOINT))
        datasets.read_dataset("events", filters=FILTERS)  # the cold read; the warm one is timed
        t0 = time.perf_counter()
        table = datasets.read_dataset("events", filters=FILTERS)
        """,
    "ours scan": """
        from dagster_parquet_dataset import ParquetDatasetStore, S3Store
        t_import = time.perf_counter() - t_start
        t0 = time.perf_counter()
        table = ParquetDatasetStore(S3Store("bench", "ours", endpoint_url=ENDPOINT)).scan_dataset("events", filters=FILTERS).to_table()
        """,
    "deltalake": """
        import deltalake
        t_import = time.perf_counter() - t_start
        t0 = time.perf_counter()
        options = {"AWS_ENDPOINT_URL": ENDPOINT, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
                   "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}
        table = deltalake.DeltaTable("s3://bench/delta", storage_options=options).to_pyarrow_table(filters=FILTERS)
        """,
}


def _child_script(kind: str, endpoint: str, filters: list) -> str:
    body = textwrap.dedent(_CHILD[kind])
    return (
        "import time\nt_start = time.perf_counter()\nimport json\n"
        f"ENDPOINT = {endpoint!r}\nFILTERS = {filters!r}\n"
        + body
        + "seconds = time.perf_counter() - t0\n"
        + "print(json.dumps({'rows': table.num_rows, 'query': seconds, 'import': t_import}))\n"
    )


def bench_cold_query(rows: int, files: int, repeat: int) -> None:
    import boto3
    import deltalake

    os.environ["AWS_ACCESS_KEY_ID"] = "bench"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "bench"
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    endpoint, counting, server = start_moto()
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
    table = make_table(rows)
    per_file = rows // files
    start = time.perf_counter()
    ParquetDatasetStore(S3Store("bench", "ours", endpoint_url=endpoint), max_rows_per_file=per_file).write_dataset(
        table, "events"
    )
    options = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }
    for i in range(files):
        deltalake.write_deltalake(
            "s3://bench/delta", table.slice(i * per_file, per_file), mode="append", storage_options=options
        )
    deltalake.DeltaTable("s3://bench/delta", storage_options=options).create_checkpoint()
    print(
        f"(a) cold pruned query: {rows:,} rows in {files} files on S3 (moto); written in {time.perf_counter() - start:.0f} s"
    )
    x = per_file * (files // 2) + per_file // 10
    filters = [("id", ">=", x), ("id", "<", x + per_file // 10)]
    expected = table.filter((pc.field("id") >= x) & (pc.field("id") < x + per_file // 10)).num_rows
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    results: dict[str, list[tuple[float, float, int, float]]] = {k: [] for k in _CHILD}
    for _ in range(repeat):
        for kind in _CHILD:
            counting.reset()
            started = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", _child_script(kind, endpoint, filters)],
                capture_output=True,
                text=True,
                env=env,
                cwd=ROOT,
                timeout=600,
            )
            wall = time.perf_counter() - started
            if out.returncode != 0:
                raise RuntimeError(f"{kind} failed:\n{out.stderr}")
            got = json.loads(out.stdout.strip().splitlines()[-1])
            assert got["rows"] == expected, (kind, got, expected)
            results[kind].append((got["query"], got["import"], counting.total(), wall))
    server.shutdown()
    print(f"    filter {filters}: {expected:,} rows; median of {repeat} fresh processes each")
    print(f"    {'':<12} {'query':>9} {'imports':>9} {'process':>9}  requests")
    medians = {}
    for kind, runs in results.items():
        query = statistics.median(r[0] for r in runs)
        medians[kind] = query
        requests = sorted({r[2] for r in runs})
        print(
            f"    {kind:<12} {query * 1000:7.1f} ms {statistics.median(r[1] for r in runs) * 1000:7.1f} ms "
            f"{statistics.median(r[3] for r in runs) * 1000:7.1f} ms  {requests}"
        )
    ratio = medians["ours"] / medians["deltalake"]
    warm_ratio = medians["ours warm"] / medians["deltalake"]
    requests = max(r[2] for r in results["ours"])
    warm = max(r[2] for r in results["ours warm"]) - requests
    print(f"    ours / deltalake (query): {ratio:.2f}x (target <= 1.0x: {'met' if ratio <= 1.0 else 'NOT MET'})")
    print(f"    ours warm / deltalake (query): {warm_ratio:.2f}x")
    print(
        f"    ours requests: {requests} cold, {warm} warm (target <= 2 each: {'met' if max(requests, warm) <= 2 else 'NOT MET'})"
    )


def _manifest_text(n: int) -> tuple[bytes, list]:
    from bench_planning import SCHEMA, build_manifest

    raw = json.loads(build_manifest(n))["files"]
    files = tuple(
        FileEntry(f["path"], f["row_count"], f["size_bytes"], f["partition_values"], f["column_stats"]) for f in raw
    )
    manifest = DatasetManifest(
        "events",
        [f.path for f in files],
        sum(f.row_count or 0 for f in files),
        schema_hash(SCHEMA),
        "zstd",
        "2026-01-01T00:00:00Z",
        format_version=1,
        version=7,
        files=files,
        arrow_schema=encode_schema(SCHEMA),
        partition_by=("day",),
    )
    x = 4_321_000
    return manifest.to_json().encode("utf-8"), [("id", ">=", x), ("id", "<=", x + 50_000)]


def bench_parse_plan(n: int, repeat: int) -> None:
    text, filters = _manifest_text(n)
    print(f"(b) parse + plan a {n:,}-file manifest ({len(text) / 1e6:.1f} MB JSON), best of {repeat}")
    fast = manifest_module._fast_loads
    for label, loads in (("orjson", fast), ("stdlib json", None)):
        if label == "orjson" and fast is None:
            print("    orjson not installed (pip install 'dagster-parquet-dataset[fast]')")
            continue
        manifest_module._fast_loads = loads
        best: dict[str, float] = {}
        for _ in range(repeat):
            w0, c0 = time.perf_counter(), time.process_time()
            manifest = DatasetManifest.from_json(text)
            w1, c1 = time.perf_counter(), time.process_time()
            selected = plan(manifest, manifest.schema, filters).selected  # type: ignore[arg-type]
            w2, c2 = time.perf_counter(), time.process_time()
            for key, value in (
                ("parse", w1 - w0),
                ("plan", w2 - w1),
                ("total", w2 - w0),
                ("parse cpu", c1 - c0),
                ("plan cpu", c2 - c1),
                ("total cpu", c2 - c0),
            ):
                best[key] = min(best.get(key, float("inf")), value)
        ms = {k: f"{v * 1000:.1f}" for k, v in best.items()}
        print(
            f"    {label:<12} parse {ms['parse']} ms + plan {ms['plan']} ms = {ms['total']} ms wall "
            f"(CPU {ms['parse cpu']} + {ms['plan cpu']} = {ms['total cpu']} ms); {len(selected)} files selected"
        )
        if label == "orjson":
            total = best["total"]
            print(f"    target <= 50 ms: {'met' if total <= 0.05 else 'NOT MET'} (wall)")
    manifest_module._fast_loads = fast


def bench_daily(days: int, rows_per_day: int, repeat: int) -> None:
    import pyarrow.dataset as pads

    root = tempfile.mkdtemp(prefix="bench-scan-")
    store = ParquetDatasetStore(LocalStore(root, durable=False))
    rng = np.random.default_rng(3)
    keys = []
    first = date(2025, 1, 1)
    for d in range(days):
        day = first + timedelta(days=d)
        key = f"daily/{day.isoformat()}"
        store.write_dataset(
            pa.table(
                {
                    "id": np.arange(d * rows_per_day, (d + 1) * rows_per_day, dtype=np.int64),
                    "value": rng.normal(0, 1, rows_per_day),
                    "day": pa.array([day] * rows_per_day, pa.date32()),
                }
            ),
            key,
        )
        keys.append(key)
    paths = [f"{root}/{k}/{p}" for k in keys for p in store.read_manifest(k).parts]
    total = days * rows_per_day
    print(f"(c) {days} daily partitions x {rows_per_day:,} rows ({len(paths)} files) on local disk, best of {repeat}")

    def ours_count() -> int:
        return store.scan_datasets(keys).count_rows()

    def ref_count() -> int:
        return pads.dataset(paths, format="parquet").count_rows()

    def ours_table() -> int:
        return store.scan_datasets(keys).to_table().num_rows

    def ref_table() -> int:
        return pads.dataset(paths, format="parquet").to_table().num_rows

    for label, ours, ref in (("count_rows", ours_count, ref_count), ("to_table", ours_table, ref_table)):
        timings = {}
        for name, fn in (("scan_datasets", ours), ("pyarrow.dataset", ref)):
            fn()  # warm the page cache and code
            best = float("inf")
            for _ in range(repeat):
                start = time.perf_counter()
                assert fn() == total, name
                best = min(best, time.perf_counter() - start)
            timings[name] = best
        ratio = timings["scan_datasets"] / timings["pyarrow.dataset"]
        print(
            f"    {label:<10} scan_datasets {timings['scan_datasets'] * 1000:7.1f} ms   pyarrow.dataset(files) "
            f"{timings['pyarrow.dataset'] * 1000:7.1f} ms   ratio {ratio:.2f}x (target <= 2x: {'met' if ratio <= 2 else 'NOT MET'})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--manifest-files", type=int, default=10_000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--rows-per-day", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default="a,b,c")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if "a" in only:
        bench_cold_query(args.rows, args.files, args.repeat)
    if "b" in only:
        bench_parse_plan(args.manifest_files, args.repeat)
    if "c" in only:
        bench_daily(args.days, args.rows_per_day, args.repeat)


if __name__ == "__main__":
    main()
