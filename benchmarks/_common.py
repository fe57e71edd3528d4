"""Shared helpers for the benchmark scripts: timing, peak RSS sampling, tables."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import psutil
import pyarrow as pa


def make_table(rows: int, seed: int = 0) -> pa.Table:
    """int64, float64, string, timestamp and int32 columns with realistic entropy."""
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    categories = np.array([f"customer-{i:06d}" for i in range(50_000)])
    return pa.table(
        {
            "id": ids,
            "amount": rng.normal(100, 25, rows).round(2),
            "customer": pa.array(categories[rng.integers(0, len(categories), rows)]),
            "ts": pa.array(
                np.datetime64("2026-01-01T00:00:00", "us")
                + rng.integers(0, 86_400_000_000 * 30, rows).astype("timedelta64[us]"),
                pa.timestamp("us", tz="UTC"),
            ),
            "qty": rng.integers(0, 1000, rows, dtype=np.int32),
        }
    )


@dataclass
class Measurement:
    seconds: float
    peak_rss_over_baseline: int


class PeakSampler:
    """Samples this process's RSS every millisecond while active."""

    def __init__(self) -> None:
        self._proc = psutil.Process(os.getpid())
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss)
            time.sleep(0.001)

    def __enter__(self) -> PeakSampler:
        self.peak = self._proc.memory_info().rss
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)


def measure(fn: Callable[[], object], repeats: int = 3, setup: Callable[[], object] | None = None) -> Measurement:
    """Best wall time of ``repeats`` runs, and the peak RSS above the pre-run RSS."""
    best = float("inf")
    peak_over = 0
    for _ in range(repeats):
        if setup is not None:
            setup()
        baseline = psutil.Process(os.getpid()).memory_info().rss
        with PeakSampler() as sampler:
            start = time.perf_counter()
            result = fn()
            best = min(best, time.perf_counter() - start)
        del result
        peak_over = max(peak_over, sampler.peak - baseline)
    return Measurement(best, peak_over)


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def package_root() -> str:
    """The tree whose ``dagster_parquet_dataset`` a benchmark measures, put first on ``sys.path``.

    The first ``PYTHONPATH`` entry that holds the package (``compare_revisions.py`` names each revision's
    tree there, so each side runs its own code), else this checkout. A script calls it before importing the
    package and hands it on to the processes it starts.
    """
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and os.path.isdir(os.path.join(entry, "dagster_parquet_dataset")):
            root = os.path.abspath(entry)
            break
    else:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if sys.path[:1] != [root]:
        sys.path.insert(0, root)
    return root
