"""Bounded memory (issue 11, DESIGN guarantee 5), measured as peak RSS growth in fresh processes.

Run: ``nice -n 10 python benchmarks/bench_memory.py [--write-gb 3] [--read-rows 2000000]
[--lazy-partitions 30 --lazy-rows 1000000] [--only write,read,lazy]``.

Every measurement runs in its own fresh process: it imports everything, warms
up on a tiny dataset (so code and codecs are loaded), builds its inputs, then
records its RSS (the baseline) and samples RSS every millisecond while the
operation runs. "growth" is the peak minus the baseline; ``ru_maxrss`` of the
child is printed too as a cross-check. Scenarios:

* ``write``: a generator-backed ``RecordBatchReader`` yielding ``--write-gb``
  of Arrow data (64 Ki-row batches) written with ``write_dataset`` on a
  LocalStore: as one ``data.parquet`` (the default) and as parts of
  ``4 Mi`` rows (``max_rows_per_file``), beside ``pq.ParquetWriter`` writing
  the same stream. Target: growth <= 300 MB.
* ``read``: ``read_dataset`` of a ``--read-rows`` dataset beside
  ``pq.read_table`` of the very same file. Target: peak <= pyarrow's + 10 %.
* ``lazy``: a ``polars.LazyFrame`` from the IO manager's LazyFrame handler
  over ``--lazy-partitions`` datasets of ``--lazy-rows`` rows each, grouped and
  aggregated. Target: growth <= 15 % of the data's Arrow size.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PeakSampler, make_table, mib  # noqa: E402

MB = 1_000_000
BATCH_ROWS = 64 * 1024


# ----------------------------------------------------------------- children


def _stream(total_bytes: int) -> tuple[pa.RecordBatchReader, Callable[[], int]]:
    """A reader yielding about ``total_bytes`` of Arrow data, built batch by batch (never held whole)."""
    import numpy as np

    templates = [make_table(BATCH_ROWS, seed=i).combine_chunks().to_batches()[0] for i in range(8)]
    schema = templates[0].schema
    produced = [0]
    rng = np.random.default_rng(0)

    def batches() -> Iterator[pa.RecordBatch]:
        i = 0
        while produced[0] < total_bytes:
            # Every batch gets buffers of its own (a shuffled copy of a template), so a writer
            # that holds on to batches shows in RSS.
            t = templates[i % len(templates)].take(pa.array(rng.permutation(BATCH_ROWS)))
            ids = pa.array(np.arange(i * BATCH_ROWS, (i + 1) * BATCH_ROWS, dtype=np.int64))
            batch = pa.RecordBatch.from_arrays([ids, *t.columns[1:]], schema=schema)
            produced[0] += batch.nbytes
            i += 1
            yield batch

    return pa.RecordBatchReader.from_batches(schema, batches()), lambda: produced[0]


def _warm_up(workdir: str) -> None:
    import pyarrow.parquet as pq

    from dagster_parquet_dataset import LocalStore, ParquetDatasetStore

    small = make_table(1000, seed=99)
    ds = ParquetDatasetStore(LocalStore(os.path.join(workdir, "warm")), max_rows_per_file=400)
    ds.write_dataset(small, "w", overwrite=True)
    ds.read_dataset("w")
    pq.write_table(small, os.path.join(workdir, "warm.parquet"), compression="zstd")
    pq.read_table(os.path.join(workdir, "warm.parquet"))


def _child(scenario: str, workdir: str, args: dict[str, Any]) -> dict[str, Any]:
    import pyarrow.parquet as pq

    from dagster_parquet_dataset import LocalStore, ParquetDatasetStore

    _warm_up(workdir)
    info: dict[str, Any] = {}
    run: Callable[[], object]
    if scenario.startswith("write_"):
        reader, produced = _stream(int(args["write_gb"] * 1e9))
        out = os.path.join(workdir, scenario)
        if scenario == "write_pyarrow":

            def run() -> object:
                with pq.ParquetWriter(os.path.join(out + ".parquet"), reader.schema, compression="zstd") as writer:
                    for batch in reader:
                        writer.write_batch(batch)
                return None
        else:
            per_file = 4 * 1024 * 1024 if scenario == "write_ours_parts" else None
            ds = ParquetDatasetStore(LocalStore(out), max_rows_per_file=per_file)

            def run() -> object:
                return ds.write_dataset(reader, "big")

        info["data_bytes"] = produced
    elif scenario in ("read_ours", "read_pyarrow"):
        ds = ParquetDatasetStore(LocalStore(os.path.join(workdir, "read")))
        path = os.path.join(workdir, "read", "t", ds.read_manifest("t").parts[0])
        if scenario == "read_ours":

            def run() -> object:
                return ds.read_dataset("t")
        else:

            def run() -> object:
                return pq.read_table(path)
    elif scenario == "lazy_polars":
        import polars as pl

        from dagster_parquet_dataset.dagster_io.handlers import PolarsLazyFrameHandler

        ds = ParquetDatasetStore(LocalStore(os.path.join(workdir, "lazy")))
        keys = [f"p/{i:03d}" for i in range(args["lazy_partitions"])]

        engine = args.get("engine", "streaming")

        def query(keys: list[str]) -> object:
            lazy = PolarsLazyFrameHandler().read_many(None, ds, keys, columns=None)
            return lazy.group_by("customer").agg(pl.col("amount").sum(), pl.col("qty").max()).collect(engine=engine)

        query(keys[:2])  # warm up polars' engine and thread pool on a small part of the data

        def run() -> object:
            return query(keys)
    else:
        raise SystemExit(f"unknown scenario {scenario}")

    gc.collect()
    import psutil

    baseline = psutil.Process().memory_info().rss
    with PeakSampler() as sampler:
        start = time.perf_counter()
        result = run()
        seconds = time.perf_counter() - start
    if scenario.startswith("write_"):
        info["data_bytes"] = info["data_bytes"]()
    if isinstance(result, pa.Table):
        info["result_rows"] = result.num_rows
    elif result is not None and hasattr(result, "height"):
        info["result_rows"] = result.height
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"seconds": seconds, "baseline": baseline, "peak": sampler.peak, "maxrss": maxrss, **info}


# ------------------------------------------------------------------ driver


def _run_child(scenario: str, workdir: str, args: dict[str, Any]) -> dict[str, Any]:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        scenario,
        "--workdir",
        workdir,
        "--args",
        json.dumps(args),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{scenario} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _prepare_read(workdir: str, rows: int) -> int:
    from dagster_parquet_dataset import LocalStore, ParquetDatasetStore

    table = make_table(rows)
    ParquetDatasetStore(LocalStore(os.path.join(workdir, "read"))).write_dataset(table, "t", overwrite=True)
    return table.nbytes


def _prepare_lazy(workdir: str, partitions: int, rows: int) -> int:
    from dagster_parquet_dataset import LocalStore, ParquetDatasetStore

    ds = ParquetDatasetStore(LocalStore(os.path.join(workdir, "lazy")))
    total = 0
    for i in range(partitions):
        table = make_table(rows, seed=i)
        total += table.nbytes
        ds.write_dataset(table, f"p/{i:03d}", overwrite=True)
    return total


def _line(name: str, m: dict[str, Any]) -> str:
    growth = m["peak"] - m["baseline"]
    return (
        f"  {name:<18} {m['seconds']:8.2f} s   peak growth {mib(growth):>8}   "
        f"(baseline {mib(m['baseline'])}, ru_maxrss {mib(m['maxrss'])})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write-gb", type=float, default=3.0)
    parser.add_argument("--read-rows", type=int, default=2_000_000)
    parser.add_argument("--lazy-partitions", type=int, default=30)
    parser.add_argument("--lazy-rows", type=int, default=1_000_000)
    parser.add_argument("--only", default="write,read,lazy")
    parser.add_argument("--engine", default="streaming", help="polars engine for the lazy aggregate")
    parser.add_argument("--child")
    parser.add_argument("--workdir")
    parser.add_argument("--args")
    ns = parser.parse_args()
    if ns.child:
        print(json.dumps(_child(ns.child, ns.workdir, json.loads(ns.args))))
        return

    only = set(ns.only.split(","))
    args = {"write_gb": ns.write_gb, "lazy_partitions": ns.lazy_partitions, "engine": ns.engine}
    workdir = tempfile.mkdtemp(prefix="pds-bench-memory-")
    try:
        if "write" in only:
            print(f"write: a RecordBatchReader yielding {ns.write_gb:g} GB of Arrow data, LocalStore")
            results = {s: _run_child(s, workdir, args) for s in ("write_pyarrow", "write_ours", "write_ours_parts")}
            for name, m in results.items():
                print(_line(name, m) + f"   data {m['data_bytes'] / 1e9:.2f} GB")
                shutil.rmtree(os.path.join(workdir, name), ignore_errors=True)
            for name in ("write_ours", "write_ours_parts"):
                growth = results[name]["peak"] - results[name]["baseline"]
                ok = "met" if growth <= 300 * MB else "NOT met"
                print(f"  {name}: growth {growth / MB:.0f} MB vs target <= 300 MB: {ok}")
        if "read" in only:
            arrow = _prepare_read(workdir, ns.read_rows)
            print(f"read: {ns.read_rows:,} rows ({arrow / MB:.0f} MB of Arrow data), one file, LocalStore")
            results = {s: _run_child(s, workdir, args) for s in ("read_pyarrow", "read_ours")}
            for name, m in results.items():
                print(_line(name, m))
            theirs, ours = results["read_pyarrow"], results["read_ours"]
            ratio = (ours["peak"] - ours["baseline"]) / max(theirs["peak"] - theirs["baseline"], 1)
            abs_ratio = ours["peak"] / theirs["peak"]
            ok = "met" if ours["peak"] - ours["baseline"] <= 1.10 * (theirs["peak"] - theirs["baseline"]) else "NOT met"
            print(f"  growth ours / pyarrow = {ratio:.3f} (absolute peak ratio {abs_ratio:.3f}); target <= 1.10: {ok}")
        if "lazy" in only:
            arrow = _prepare_lazy(workdir, ns.lazy_partitions, ns.lazy_rows)
            print(
                f"lazy: LazyFrame group_by/agg (collect(engine={ns.engine!r})) over {ns.lazy_partitions} "
                f"partitions x {ns.lazy_rows:,} rows "
                f"({arrow / MB:.0f} MB of Arrow data)"
            )
            m = _run_child("lazy_polars", workdir, args)
            print(_line("lazy_polars", m))
            growth = m["peak"] - m["baseline"]
            ok = "met" if growth <= 0.15 * arrow else "NOT met"
            print(f"  growth = {100 * growth / arrow:.1f} % of the data; target <= 15 %: {ok}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
