"""Issue 29 item 4 benchmark: what one partitioned asset's Delta table costs a partition output.

A daily asset of P partition datasets (P = 100 and 365 by default, one file each) on a LocalStore.
A 10-row overwrite of one partition, as the IO manager does it: ``delta_log`` off; ``delta_log`` on (the
partition's own log); and on plus the asset table's update (``sync_asset_delta_log`` of that partition);
alternating on two copies of the same asset; medians of ``--repeat``. Also the load of the asset
table by ``deltalake.DeltaTable`` (its file list). The asset log gets a checkpoint every 10 versions,
so an update replays at most 10 commits.

Run: ``python benchmarks/bench_asset_delta_log.py [--partitions 100,365] [--repeat 9]``.
Timings are wall-clock on a shared machine: noisy; compare within one run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import deltalake  # noqa: E402
import pyarrow as pa  # noqa: E402

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore  # noqa: E402

ASSET = "sales"


def _days(n: int) -> list[str]:
    start = dt.date(2024, 1, 1)
    return [(start + dt.timedelta(days=i)).isoformat() for i in range(n)]


def _rows(seed: int) -> pa.Table:
    return pa.table({"n": pa.array(range(seed, seed + 10), pa.int64()), "v": [f"r{seed}-{i}" for i in range(10)]})


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def bench(p: int, repeat: int) -> None:
    root = tempfile.mkdtemp(prefix="bench-asset-delta-")
    try:
        off = ParquetDatasetStore(LocalStore(os.path.join(root, "off"), durable=False), retain_versions=1)
        on = ParquetDatasetStore(LocalStore(os.path.join(root, "on"), durable=False), retain_versions=1, delta_log=True)
        days = _days(p)
        for i, day in enumerate(days):
            off.write_dataset(_rows(i), f"{ASSET}/{day}")
            on.write_dataset(_rows(i), f"{ASSET}/{day}")
        on.sync_asset_delta_log(ASSET, columns=["partition"])
        t_off, t_log, t_on = [], [], []
        for r in range(repeat):  # alternating, so all see the same load on the machine
            day = days[(r * 37) % p]
            start = time.perf_counter()
            off.write_dataset(_rows(r), f"{ASSET}/{day}", overwrite=True)
            t_off.append(time.perf_counter() - start)
            start = time.perf_counter()
            on.write_dataset(_rows(r), f"{ASSET}/{day}", overwrite=True)
            t_log.append(time.perf_counter() - start)
            start = time.perf_counter()
            on.sync_asset_delta_log(ASSET, columns=["partition"], partitions=[day])
            t_on.append(t_log[-1] + time.perf_counter() - start)
        a, b, c = (_median(t) * 1e3 for t in (t_off, t_log, t_on))
        print(
            f"{p:>4} partitions: 10-row partition overwrite: delta_log off {a:6.1f} ms, on {b:6.1f} ms, "
            f"on + asset table {c:6.1f} ms; asset table / own log {c / b:4.2f}, / off {c / a:4.2f}"
        )
        uri = os.path.join(root, "on", ASSET)
        loads = []
        for _ in range(repeat):
            start = time.perf_counter()
            files = deltalake.DeltaTable(uri).file_uris()
            loads.append(time.perf_counter() - start)
        assert len(files) == p
        print(f"{p:>4} partitions: deltalake load + file list of the asset table {_median(loads) * 1e3:6.1f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="100,365")
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    for p in (int(x) for x in args.partitions.split(",")):
        bench(p, args.repeat)


if __name__ == "__main__":
    main()
