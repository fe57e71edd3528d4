"""The command line's two targets from issue 12, each side by side with a plain reference.

1. ``verify`` of a ``--files``-file local dataset (target: <= 5 s, every footer checked).
   - ``verify_dataset``: the API call (one listing, footers on 16 threads);
   - ``cli verify``: ``python -m dagster_parquet_dataset verify KEY`` end to end
     (interpreter start and imports included);
   - ``reference``: plain pyarrow, ``pq.read_metadata`` of every file in a loop
     (footers only, nothing compared).
   Every footer is checked: ``files_checked`` must equal the file count, and a
   truncated and a swapped part (the last and a middle one) must both be found.
2. ``ls`` of ``--datasets`` datasets on a moto S3 server (target: <= 2 requests per dataset).
3. ``head -n 10`` of a ``--head-rows``-row dataset on moto S3 (issue 20; target: <= 2 requests after the manifest).
4. ``verify --all`` over ``--verify-datasets`` datasets of 10 files, local and moto S3 (issue 20), against
   ``pq.read_metadata`` of the same files (target: <= 1.2x wall), in the same run:
   - ``cli main() in process``: the command line's ``main(["verify", "--all"])`` in this process (what the
     ratio uses: no interpreter start), with its peak RSS;
   - ``cli verify --all (subprocess)``: ``python -m dagster_parquet_dataset verify --all`` end to end;
   - ``reference``: ``pq.read_metadata`` of every file on 16 threads, and a plain one-thread loop.
   The CLI runs in a subprocess against a counting HTTP proxy in front of moto
   (``tests/_s3_proxy.py``), which records every request it forwards.
   - ``reference``: boto3, one paginated LIST of the prefix and one sequential
     GET per ``manifest.json`` (the least any tool needs to show versions and rows).

Run: ``nice -n 10 python benchmarks/bench_cli.py [--files 10000] [--datasets 1000]``.
Times are the best of ``--repeats`` runs; peak RSS is above what the process held before.
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
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _common import make_table, measure, mib, package_root  # noqa: E402

#: The package measured: the revision compare_revisions.py names on PYTHONPATH, else this checkout.
REPO = package_root()

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, S3Store  # noqa: E402

KEY = "events/many"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = dict(os.environ)
    environment["PYTHONPATH"] = REPO
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "dagster_parquet_dataset", *args],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )


# --------------------------------------------------------------------------- verify


def bench_verify(files: int, rows_per_file: int, repeats: int) -> bool:
    workdir = tempfile.mkdtemp(prefix="bench-cli-verify-")
    try:
        root = os.path.join(workdir, "store")
        start = time.perf_counter()
        builder = ParquetDatasetStore(LocalStore(root, durable=False), max_rows_per_file=rows_per_file)
        builder.write_dataset(make_table(files * rows_per_file), KEY)
        print(f"built {files:,} files of {rows_per_file} rows in {time.perf_counter() - start:.1f} s")
        ds = ParquetDatasetStore(LocalStore(root))
        manifest = ds.read_manifest(KEY)
        assert len(manifest.parts) == files, len(manifest.parts)
        paths = [os.path.join(root, *KEY.split("/"), p) for p in manifest.parts]

        reports = []
        api = measure(lambda: reports.append(ds.verify_dataset(KEY)), repeats=repeats)
        assert all(r.ok and r.files_checked == files for r in reports), reports[-1].problems[:3]
        reference = measure(lambda: [pq.read_metadata(p) for p in paths], repeats=repeats)
        cpu = []
        for _ in range(repeats):
            c0 = time.process_time()
            ds.verify_dataset(KEY)
            cpu.append(time.process_time() - c0)
        c0 = time.process_time()
        [pq.read_metadata(p) for p in paths]
        reference_cpu = time.process_time() - c0
        cli_times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = _cli("--store", root, "verify", KEY)
            cli_times.append(time.perf_counter() - t0)
            assert result.returncode == 0, result.stderr
            assert result.stdout.splitlines()[-1] == f"1 dataset, {files} files checked, 0 problems", result.stdout
        startup = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            _cli("--help")
            startup.append(time.perf_counter() - t0)

        # Every footer is read: damage the last part and swap a middle one with its neighbour.
        last, middle, neighbour = paths[-1], paths[files // 2], paths[files // 2 + 1]
        with open(last, "r+b") as f:
            f.truncate(os.path.getsize(last) - 10)
        middle_bytes, neighbour_bytes = open(middle, "rb").read(), open(neighbour, "rb").read()
        open(middle, "wb").write(neighbour_bytes)
        open(neighbour, "wb").write(middle_bytes)
        damaged = ds.verify_dataset(KEY)
        found = Counter(p.kind for p in damaged.problems)
        caught = {p.path for p in damaged.problems} == {
            manifest.parts[-1],
            manifest.parts[files // 2],
            manifest.parts[files // 2 + 1],
        }

        print(f"\nverify of a {files:,}-file local dataset (best of {repeats})")
        print(f"  {'verify_dataset (API)':34s} {api.seconds:7.2f} s   peak +{mib(api.peak_rss_over_baseline)}")
        print(
            f"  {'verify_dataset CPU time (all threads)':34s} {min(cpu):7.2f} s   (reference CPU {reference_cpu:.2f} s)"
        )
        print(f"  {'cli verify (subprocess, end to end)':34s} {min(cli_times):7.2f} s")
        print(f"  {'  of which interpreter + imports':34s} {min(startup):7.2f} s   (python -m ... --help)")
        print(
            f"  {'reference: pq.read_metadata loop':34s} {reference.seconds:7.2f} s   "
            f"peak +{mib(reference.peak_rss_over_baseline)}"
        )
        print(f"  ratio verify_dataset / reference: {api.seconds / reference.seconds:.2f}x")
        print(
            f"  files checked: {reports[-1].files_checked:,}; damaged run found {dict(found)} "
            f"on exactly the 3 damaged parts: {caught}"
        )
        met = min(cli_times) <= 5.0 and api.seconds <= 5.0 and caught
        print(f"  target <= 5 s with every footer checked: {'MET' if met else 'NOT MET'}")
        return met
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ------------------------------------------------------------------------------- ls


@contextmanager
def _moto() -> Iterator[tuple[str, Any, Any]]:
    """A moto S3 server with a ``bench`` bucket: its endpoint, a boto3 client, and a counting proxy in front."""
    from moto.server import ThreadedMotoServer

    sys.path.insert(0, os.path.join(REPO, "tests"))
    import boto3
    from _s3_proxy import LossyProxy

    for var, value in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ):
        os.environ[var] = value
    os.environ.pop("AWS_PROFILE", None)
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    proxy = LossyProxy(endpoint)
    try:
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket="bench")
        yield endpoint, client, proxy
    finally:
        proxy.close()
        server.stop()


def bench_ls(datasets: int, repeats: int) -> bool:
    with _moto() as (endpoint, client, proxy):
        ds = ParquetDatasetStore(S3Store("bench", "lake", endpoint_url=endpoint))
        table = pa.table({"id": list(range(10)), "name": [f"n{i}" for i in range(10)]})
        start = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda i: ds.write_dataset(table, f"team{i % 10}/asset{i:05d}", run_id=f"r{i}"), range(datasets)
                )
            )
        print(f"\nbuilt {datasets:,} datasets on moto in {time.perf_counter() - start:.1f} s")
        objects = sum(
            len(page.get("Contents", []))
            for page in client.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix="lake/")
        )

        times = []
        counts: Counter[str] = Counter()
        for _ in range(repeats):
            proxy.seen.clear()
            t0 = time.perf_counter()
            result = _cli("--store", "s3://bench/lake", "--endpoint-url", proxy.url, "ls", "--json")
            times.append(time.perf_counter() - t0)
            assert result.returncode == 0, result.stderr
            assert result.stdout.count('"key"') == datasets
            counts = Counter(
                "LIST"
                if method == "GET" and "list-type=2" in path
                else f"{method} {path.rsplit('/', 1)[-1].split('?')[0]}"
                for method, path, _status in proxy.seen
            )
        requests = sum(counts.values())

        def reference() -> int:
            keys = [
                obj["Key"]
                for page in client.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix="lake/")
                for obj in page.get("Contents", [])
                if obj["Key"].endswith("/manifest.json")
            ]
            for key in keys:
                client.get_object(Bucket="bench", Key=key)["Body"].read()
            return len(keys)

        ref = measure(reference, repeats=repeats)
        api_store = ParquetDatasetStore(S3Store("bench", "lake", endpoint_url=endpoint))
        api = measure(lambda: api_store.list_datasets(), repeats=repeats)
        print(f"ls of {datasets:,} datasets ({objects:,} objects) on moto S3 (best of {repeats})")
        print(f"  {'cli ls --json (subprocess, end to end)':40s} {min(times):7.2f} s")
        print(f"  {'list_datasets (API, in process)':40s} {api.seconds:7.2f} s")
        print(f"  {'reference: boto3 LIST + sequential GETs':40s} {ref.seconds:7.2f} s")
        print(f"  ratio list_datasets / reference: {api.seconds / ref.seconds:.2f}x")
        print(f"  requests: {requests:,} = {dict(counts)}")
        per = requests / datasets
        print(f"  requests per dataset: {per:.3f}; target <= 2: {'MET' if per <= 2 else 'NOT MET'}")
        return per <= 2


# ----------------------------------------------------------------------------- head


def bench_head(rows: int) -> bool:
    """``head -n 10`` of a ``rows``-row dataset on moto S3: the requests after the manifest (target <= 2)."""
    with _moto() as (endpoint, _client, proxy):
        ds = ParquetDatasetStore(S3Store("bench", "lake", endpoint_url=endpoint), max_rows_per_file=1_000_000)
        batch = 1_000_000
        for start in range(0, rows, batch):
            chunk = pa.table({"id": pa.array(range(start, min(rows, start + batch)), pa.int64())})
            ds.append_dataset(chunk, "big", run_id="bench")
        files = len(ds.read_manifest("big").parts)
        proxy.seen.clear()
        t0 = time.perf_counter()
        result = _cli("--store", "s3://bench/lake", "--endpoint-url", proxy.url, "head", "big", "-n", "10", "--json")
        seconds = time.perf_counter() - t0
        assert result.returncode == 0, result.stderr
        assert [r["id"] for r in json.loads(result.stdout)["rows"]] == list(range(10))
        seen = [(method, path.split("?")[0].rsplit("/", 1)[-1]) for method, path, _status in proxy.seen]
        manifest = max(i for i, (method, name) in enumerate(seen) if method == "GET" and name == "manifest.json")
        after = seen[manifest + 1 :]
        print(f"\nhead -n 10 of {rows:,} rows in {files} files on moto S3: {seconds:.2f} s end to end")
        print(f"  requests: {[f'{m} {n}' for m, n in seen]}")
        met = len(after) <= 2
        print(f"  requests after the manifest: {len(after)}; target <= 2: {'MET' if met else 'NOT MET'}")
        return met


# ----------------------------------------------------------------------- verify --all


def _quiet_main(argv: list[str]) -> None:
    """The command line's ``main`` in this process, its output discarded."""
    import contextlib
    import io

    from dagster_parquet_dataset.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0


def bench_verify_all(datasets: int, files: int, repeats: int, only: str | None = None) -> bool:
    """``verify --all`` over ``datasets`` datasets of ``files`` files, against a ``pq.read_metadata`` loop."""
    results = []
    with _moto() as (endpoint, _client, _proxy):
        workdir = tempfile.mkdtemp(prefix="bench-cli-verify-all-")
        try:
            stores = {
                "local": (LocalStore(workdir), ["--store", workdir]),
                "moto S3": (
                    S3Store("bench", "many", endpoint_url=endpoint),
                    ["--store", "s3://bench/many", "--endpoint-url", endpoint],
                ),
            }
            for name, (store, cli_args) in stores.items():
                if only is not None and name != only:
                    continue
                ds = ParquetDatasetStore(store, max_rows_per_file=10)
                table = pa.table({"id": pa.array(range(10 * files), pa.int64())})
                with ThreadPoolExecutor(8) as pool:
                    list(pool.map(lambda i, ds=ds, t=table: ds.write_dataset(t, f"asset/{i:05d}"), range(datasets)))
                filesystem, base = store.arrow_filesystem()
                paths = [f"{base}/{item.key}/{part}" for item in ds.list_datasets() for part in item.manifest.parts]

                def reference(paths: list[str] = paths, filesystem: Any = filesystem) -> None:
                    with ThreadPoolExecutor(16) as pool:
                        list(pool.map(lambda p: pq.read_metadata(p, filesystem=filesystem), paths))

                def loop(paths: list[str] = paths, filesystem: Any = filesystem) -> None:
                    for path in paths:
                        pq.read_metadata(path, filesystem=filesystem)

                ref = measure(reference, repeats=repeats)
                serial = measure(loop, repeats=repeats)
                times = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    result = _cli(*cli_args, "verify", "--all")
                    times.append(time.perf_counter() - t0)
                    assert result.returncode == 0, result.stdout[-500:] + result.stderr
                    assert (
                        result.stdout.splitlines()[-1]
                        == f"{datasets:,} datasets, {len(paths):,} files checked, 0 problems"
                    )
                in_process = measure(lambda a=cli_args: _quiet_main([*a, "verify", "--all", "--json"]), repeats=repeats)
                ratio = in_process.seconds / ref.seconds
                print(f"\nverify --all of {datasets:,} datasets x {files} files on {name} (best of {repeats})")
                rows = [
                    ("cli verify --all (subprocess)", min(times), None),
                    (
                        "cli main() in process (no interpreter start)",
                        in_process.seconds,
                        in_process.peak_rss_over_baseline,
                    ),
                    ("reference: pq.read_metadata, 16 threads", ref.seconds, ref.peak_rss_over_baseline),
                    ("reference: pq.read_metadata, plain loop", serial.seconds, serial.peak_rss_over_baseline),
                ]
                for label, seconds, peak in rows:
                    print(f"  {label:46s} {seconds:7.2f} s" + (f"  peak +{mib(peak)}" if peak is not None else ""))
                print(
                    f"  ratio in process / reference (16 threads): {ratio:.2f}x; "
                    f"target <= 1.2x: {'MET' if ratio <= 1.2 else 'NOT MET'}; "
                    f"ratio in process / plain loop: {in_process.seconds / serial.seconds:.2f}x"
                )
                results.append(ratio <= 1.2)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return all(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rows-per-file", type=int, default=100)
    parser.add_argument("--datasets", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--head-rows", type=int, default=10_000_000)
    parser.add_argument("--verify-datasets", type=int, default=1_000)
    parser.add_argument("--only", choices=["verify", "ls", "head", "verify-all"], default=None)
    parser.add_argument("--verify-store", choices=["local", "moto S3"], default=None, help="verify-all on one store")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, pyarrow {pa.__version__}, {os.cpu_count()} CPUs")
    results = []
    if args.only in (None, "verify"):
        results.append(bench_verify(args.files, args.rows_per_file, args.repeats))
    if args.only in (None, "ls"):
        results.append(bench_ls(args.datasets, args.repeats))
    if args.only in (None, "head"):
        results.append(bench_head(args.head_rows))
    if args.only in (None, "verify-all"):
        results.append(bench_verify_all(args.verify_datasets, 10, args.repeats, args.verify_store))
    print("\nall targets met" if all(results) else "\nsome targets NOT met")


if __name__ == "__main__":
    main()
