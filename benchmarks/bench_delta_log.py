"""Issue 29 benchmarks: what the Delta log (``delta_log=True``) costs a commit, and how fast Delta readers load it.

(a) A 10-row append to a LocalStore dataset of N files (N = 1,000 and 10,000 by default), with
    ``delta_log`` on against off, alternating on the same dataset; medians of ``--repeat``.
    Target: on <= 1.2x off.
(b) ``deltalake.DeltaTable(uri)`` load + file list of the 10,000-file dataset's log, against the
    same files as a table deltalake wrote itself (``convert_to_deltalake`` + checkpoint); medians.
    Target: ours <= deltalake's.

Run: ``python benchmarks/bench_delta_log.py [--sizes 1000,10000] [--repeat 15]``.
Timings are wall-clock on a shared machine: noisy; compare within one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import package_root  # noqa: E402

#: The package measured: the revision compare_revisions.py names on PYTHONPATH, else this checkout.
ROOT = Path(package_root())

import deltalake  # noqa: E402
from bench_manifest_scale import KEY, build, build_delta, median_of, rows  # noqa: E402

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore  # noqa: E402


def bench(n: int, repeat: int) -> None:
    root = tempfile.mkdtemp(prefix="bench-delta-")
    try:
        plain, total = build(root, n)
        store_root = os.path.join(root, "with-log")
        shutil.copytree(os.path.join(root, "ours"), store_root)  # the same dataset, its own copy
        with_log = ParquetDatasetStore(LocalStore(store_root, durable=False), delta_log=True)
        with_log.sync_delta_log(KEY)
        counter = [total]

        def append(datasets: ParquetDatasetStore) -> None:
            datasets.append_dataset(rows(counter[0], 10), KEY)
            counter[0] += 10

        off, on = [], []
        for _ in range(repeat):  # alternating, so both see the same load on the machine
            off.append(median_of(lambda: append(plain), 1))
            on.append(median_of(lambda: append(with_log), 1))
        off_ms, on_ms = sorted(off)[len(off) // 2] * 1e3, sorted(on)[len(on) // 2] * 1e3
        print(f"(a) {n:>6} files: 10-row append off {off_ms:7.1f} ms, on {on_ms:7.1f} ms, ratio {on_ms / off_ms:4.2f}")
        uri = os.path.join(store_root, KEY)
        ours = median_of(lambda: deltalake.DeltaTable(uri).file_uris(), repeat)
        theirs_uri = build_delta(root, plain)
        theirs = median_of(lambda: deltalake.DeltaTable(theirs_uri).file_uris(), repeat)
        assert len(deltalake.DeltaTable(uri).file_uris()) == len(plain.read_manifest(KEY).parts)
        print(
            f"(b) {n:>6} files: deltalake load + file list, our log {ours * 1e3:7.1f} ms, "
            f"deltalake's own table {theirs * 1e3:7.1f} ms, ratio {ours / theirs:4.2f}"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    for n in (int(s) for s in args.sizes.split(",")):
        bench(n, args.repeat)


if __name__ == "__main__":
    main()
