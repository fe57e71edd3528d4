"""Issue 26 #12: a part truncated after a scan was created (and after an earlier scan of it read its footer) is
an error on every scan, never rows. pyarrow keeps a fragment's footer once a scan read it; a later scan that
trusted it would read the truncated part's (still whole) data pages and return every row."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.storage.base import Store

ROWS = 100


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> Store:
    if request.param == "local":
        return LocalStore(os.path.join(tmp_path, "store"))
    return request.getfixturevalue("s3_store")


def _to_table(scan: pads.Dataset) -> int:
    return scan.to_table().num_rows


def _count_rows(scan: pads.Dataset) -> int:
    return scan.count_rows()


def _scanner(scan: pads.Dataset) -> int:
    return pads.Scanner.from_dataset(scan, columns=["id"]).to_table().num_rows


def _filtered(scan: pads.Dataset) -> int:
    return scan.filter(pads.field("id") >= 0).to_table().num_rows


def _pickled(scan: pads.Dataset) -> int:
    return pickle.loads(pickle.dumps(scan)).to_table().num_rows


def _duckdb(scan: pads.Dataset) -> int:
    return len(duckdb.connect().from_arrow(scan).to_arrow_table())


def _polars(scan: pads.Dataset) -> int:
    return pl.scan_pyarrow_dataset(scan).collect().height


CONSUMERS: dict[str, Callable[[pads.Dataset], int]] = {
    "to_table": _to_table,
    "count_rows": _count_rows,
    "scanner": _scanner,
    "filter": _filtered,
    "pickle": _pickled,
    "duckdb": _duckdb,
    "polars": _polars,
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_a_part_truncated_after_a_scan_read_it_is_an_error_on_every_later_scan(backend: Store, consumer: str) -> None:
    consume = CONSUMERS[consumer]
    ds = ParquetDatasetStore(backend)
    ds.write_dataset(pa.table({"id": pa.array(range(ROWS), pa.int64())}), "t")
    part = f"t/{ds.read_manifest('t').parts[0]}"
    whole = backend.read_bytes(part)
    scan = ds.scan_dataset("t")
    for cut in (1, 8, 64, len(whole) // 3):
        backend.write_bytes(part, whole)
        assert consume(scan) == ROWS  # reads (and, by pyarrow's default, would keep) the footer
        backend.write_bytes(part, whole[:-cut])  # truncated between two scans of one scan object
        for _attempt in range(3):
            with pytest.raises((OSError, pa.ArrowException, duckdb.Error, pl.exceptions.PolarsError)):
                rows = consume(scan)
                pytest.fail(f"a part truncated by {cut} bytes was scanned: {rows} rows")
