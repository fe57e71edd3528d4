"""Scans consumed from several threads at once, run as a child process under a watchdog.

``python -m tests._scan_stress KIND WHERE ROUNDS`` builds 12 small daily datasets on a store
(``memory``; ``local`` with WHERE a folder; ``s3`` with WHERE ``bucket@endpoint``), then, each
round, hands one ``scan_datasets`` over them to 4 threads started together, each consuming it
another way: a ``RecordBatchReader`` (``to_reader``), ``to_table``, ``count_rows``, ``to_batches``,
DuckDB (``from_arrow`` and a query), polars (``scan_pyarrow_dataset``). Every answer is checked.
A deadlock (issue 18 #7: Python called back from Arrow's I/O threads) trips the watchdog, which
prints every thread's stack and exits with status 1 instead of hanging.
"""

from __future__ import annotations

import faulthandler
import sys
import threading
from collections.abc import Callable
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads

from dagster_parquet_dataset import LocalStore, MemoryStore, ParquetDatasetStore, S3Store, Store

DAYS = 12
ROWS = 50
THREADS = 4
WATCHDOG_SECONDS = 120


def _store(kind: str, where: str) -> Store:
    if kind == "memory":
        return MemoryStore()
    if kind == "local":
        return LocalStore(where)
    bucket, endpoint = where.split("@", 1)
    return S3Store(bucket, endpoint_url=endpoint)


def _build(datasets: ParquetDatasetStore) -> list[str]:
    keys = []
    for day in range(DAYS):
        key = f"daily/2024-01-{day + 1:02d}"
        datasets.write_dataset(pa.table({"day": [day] * ROWS, "n": list(range(ROWS)), "x": [0.5] * ROWS}), key)
        keys.append(key)
    return keys


def _consumers(expected_rows: int, expected_sum: int) -> list[Callable[[pads.Dataset], None]]:
    def reader(scan: pads.Dataset) -> None:
        table = scan.scanner(columns=["n"]).to_reader().read_all()
        assert (table.num_rows, pa.compute.sum(table["n"]).as_py()) == (expected_rows, expected_sum)

    def to_table(scan: pads.Dataset) -> None:
        assert scan.to_table().num_rows == expected_rows

    def count_rows(scan: pads.Dataset) -> None:
        assert scan.count_rows() == expected_rows

    def batches(scan: pads.Dataset) -> None:
        assert sum(b.num_rows for b in scan.to_batches()) == expected_rows

    def with_duckdb(scan: pads.Dataset) -> None:
        con = duckdb.connect()
        try:
            assert con.from_arrow(scan).aggregate("count(*), sum(n)").fetchall() == [(expected_rows, expected_sum)]
            assert con.sql("select count(*) from scan where x = 0.5").fetchall() == [(expected_rows,)]
        finally:
            con.close()

    def with_polars(scan: pads.Dataset) -> None:
        frame = pl.scan_pyarrow_dataset(scan).select(pl.len(), pl.col("n").sum()).collect()
        assert frame.row(0) == (expected_rows, expected_sum)

    return [reader, to_table, count_rows, batches, with_duckdb, with_polars]


def run(kind: str, where: str, rounds: int) -> None:
    """Raises: AssertionError: a consumer got a wrong answer or raised (re-raised from its thread)."""
    datasets = ParquetDatasetStore(_store(kind, where))
    keys = _build(datasets)
    filters = [("n", ">=", ROWS // 2)]
    kept = list(range(ROWS // 2, ROWS))
    consumers = _consumers(len(kept) * DAYS, sum(kept) * DAYS)
    errors: list[BaseException] = []
    for r in range(rounds):
        scan = datasets.scan_datasets(keys, filters=filters)
        start = threading.Barrier(THREADS)

        def work(consume: Callable[[pads.Dataset], None], scan: Any = scan, start: Any = start) -> None:
            try:
                start.wait()
                consume(scan)
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                errors.append(exc)

        chosen = [consumers[(r + k) % len(consumers)] for k in range(THREADS)]
        threads = [threading.Thread(target=work, args=(c,), daemon=True) for c in chosen]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise AssertionError(f"round {r}: {errors[0]!r}") from errors[0]


if __name__ == "__main__":
    faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True)
    run(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    print("ok")
