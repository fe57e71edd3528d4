"""IO-manager overhead per asset: RemoteStoreIOManager against direct ParquetDatasetStore calls.

Run: ``python benchmarks/bench_io_manager.py [--iterations N] [--rows R]``.

One "asset" is ``handle_output`` plus ``load_input`` of a small table (10 rows
by default) through the IO manager, with contexts from Dagster's
``build_output_context`` (and an ``InputContext`` built the same way); the baseline is
``write_dataset(overwrite=True)`` plus ``read_dataset`` of the same table on
the same ``LocalStore``. Both paths cycle over the same 20 dataset keys, so
most writes overwrite an existing version, as re-materializations do. The two
paths alternate per iteration so drift (disk cache, CPU frequency) hits both
alike. Prints the median and mean milliseconds per asset for each and the
difference, against the target of issue 3 (<= 20 ms overhead).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

import dagster as dg
import pyarrow as pa
from dagster._core.execution.context_creation_job import initialize_console_manager

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager

TARGET_MS = 20.0
KEYS = 20


def input_context(
    key: dg.AssetKey, upstream: dg.OutputContext, instance: dg.DagsterInstance, resources: Any, dagster_type: Any = None
) -> dg.InputContext:
    """What ``build_input_context`` returns, minus the ephemeral instance it builds on every call (~100 ms).

    ``build_input_context`` only accepts a resources mapping, which it builds on a fresh ephemeral
    instance; the ``InputContext`` constructor also takes an already-built ``Resources``.
    """
    return dg.InputContext(
        name="upstream",
        asset_key=key,
        upstream_output=upstream,
        dagster_type=dagster_type,
        resources=resources,
        instance=instance,
        log_manager=initialize_console_manager(None),
    )


def small_table(rows: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "amount": pa.array([i * 1.5 for i in range(rows)], pa.float64()),
            "name": pa.array([f"row-{i}" for i in range(rows)], pa.string()),
        }
    )


def io_manager_asset(
    manager: RemoteStoreIOManager,
    table: pa.Table,
    run_id: str,
    annotated: bool,
    instance: dg.DagsterInstance,
    resources: Any,
) -> Callable[[int], float]:
    """One asset through the IO manager; returns seconds spent in handle_output + load_input."""
    table_type = dg.PythonObjectDagsterType(pa.Table) if annotated else None

    def run(i: int) -> float:
        key = dg.AssetKey(["bench", f"asset_{i % KEYS}"])
        out_ctx = dg.build_output_context(
            asset_key=key,
            name="result",
            step_key=f"asset_{i % KEYS}",
            run_id=run_id,
            instance=instance,
            resources=resources,
        )
        in_ctx = input_context(key, out_ctx, instance, resources, table_type)
        start = time.perf_counter()
        manager.handle_output(out_ctx, table)
        loaded = manager.load_input(in_ctx)
        elapsed = time.perf_counter() - start
        assert loaded.num_rows == table.num_rows
        return elapsed

    return run


def direct_asset(datasets: ParquetDatasetStore, table: pa.Table, run_id: str) -> Callable[[int], float]:
    """The same write + read straight through the dataset layer."""

    def run(i: int) -> float:
        key = f"direct/asset_{i % KEYS}"
        start = time.perf_counter()
        datasets.write_dataset(
            table, key, overwrite=True, run_id=run_id, metadata={"dagster.python_type": "pyarrow.Table"}
        )
        loaded = datasets.read_dataset(key)
        elapsed = time.perf_counter() - start
        assert loaded.num_rows == table.num_rows
        return elapsed

    return run


def summarize(samples: list[float]) -> tuple[float, float]:
    return statistics.median(samples) * 1000, statistics.fmean(samples) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--rows", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()

    table = small_table(args.rows)
    run_id = str(uuid.uuid4())
    # One instance and one (empty) Resources for every context: otherwise each context builds its own
    # ephemeral instance (~100 ms), which a real run never does. Contexts are built outside the timer.
    with (
        tempfile.TemporaryDirectory(prefix="bench-io-manager-") as workdir,
        dg.DagsterInstance.ephemeral() as instance,
        dg.build_resources({}, instance=instance) as resources,
    ):
        root = os.path.join(workdir, "store")
        manager = RemoteStoreIOManager(store=LocalStoreResource(root=root))
        datasets = ParquetDatasetStore(LocalStore(root))  # same folder, same backend, same defaults

        paths: dict[str, Callable[[int], float]] = {
            "io_manager (annotated pa.Table)": io_manager_asset(
                manager, table, run_id, annotated=True, instance=instance, resources=resources
            ),
            "io_manager (unannotated input)": io_manager_asset(
                manager, table, run_id, annotated=False, instance=instance, resources=resources
            ),
            "direct ParquetDatasetStore": direct_asset(datasets, table, run_id),
        }
        samples: dict[str, list[float]] = {name: [] for name in paths}
        for i in range(args.warmup):
            for fn in paths.values():
                fn(i)
        for i in range(args.iterations):
            for name, fn in paths.items():
                samples[name].append(fn(i))

    print(
        f"IO-manager overhead per asset: handle_output + load_input of a {args.rows}-row table, "
        f"{args.iterations} iterations (after {args.warmup} warm-up), LocalStore (durable), python {sys.version.split()[0]}, "
        f"dagster {dg.__version__}"
    )
    print(f"{'path':<34} {'median ms':>10} {'mean ms':>10}")
    for name, values in samples.items():
        median, mean = summarize(values)
        print(f"{name:<34} {median:>10.2f} {mean:>10.2f}")
    direct_median, direct_mean = summarize(samples["direct ParquetDatasetStore"])
    print()
    worst = 0.0
    for name in ("io_manager (annotated pa.Table)", "io_manager (unannotated input)"):
        median, mean = summarize(samples[name])
        overhead_median, overhead_mean = median - direct_median, mean - direct_mean
        worst = max(worst, overhead_median)
        print(f"overhead of {name}: {overhead_median:+.2f} ms median, {overhead_mean:+.2f} ms mean per asset")
    verdict = "meets" if worst <= TARGET_MS else "MISSES"
    print(f"target <= {TARGET_MS:.0f} ms overhead per asset: {verdict} (worst median overhead {worst:.2f} ms)")
    return 0 if worst <= TARGET_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())
