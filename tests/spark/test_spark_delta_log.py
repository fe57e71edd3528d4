"""Spark writes with ``delta_log=True``: the parts Spark writes hold microsecond timestamps (Spark's own
precision, which Delta and Spark's Delta reader require), so the Delta table reads the same rows as
``read_dataset``, on both write paths and for an append."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.spark import append_spark_dataset, write_spark_dataset

SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("local", T.TimestampNTZType()),
    ]
)


def _rows(start: int) -> list[tuple[int, dt.datetime, dt.datetime]]:
    base = dt.datetime(2024, 5, 1, 12, 0, 0, 123456)
    return [(i, base + dt.timedelta(seconds=i), base + dt.timedelta(minutes=i)) for i in range(start, start + 3)]


@pytest.mark.parametrize("mode", ["arrow", "native"])
def test_spark_parts_hold_microsecond_timestamps_and_read_through_delta(
    spark: SparkSession, tmp_path: Path, mode: str
) -> None:
    store = LocalStore(str(tmp_path))
    datasets = ParquetDatasetStore(store, delta_log=True)
    write_spark_dataset(spark.createDataFrame(_rows(0), SCHEMA).repartition(2), datasets, "t", mode=mode)
    append_spark_dataset(spark.createDataFrame(_rows(3), SCHEMA), datasets, "t")
    manifest = datasets.read_manifest("t")
    assert manifest.version == 2
    for part in manifest.parts:  # what a Delta reader reads: the files, not the manifest's schema
        types = pq.read_schema(str(tmp_path / "t" / part))
        assert types.field("ts").type == pa.timestamp("us", tz="UTC")
        assert types.field("local").type == pa.timestamp("us")
    table = DeltaTable(str(tmp_path / "t"))
    assert table.version() == 2
    assert table.protocol().reader_features == ["timestampNtz"]
    got = table.to_pyarrow_table().sort_by("id")
    want = datasets.read_dataset("t").sort_by("id")
    assert got.column("id").to_pylist() == list(range(6))
    assert got.column("ts").to_pylist() == want.column("ts").to_pylist()
    assert got.column("local").to_pylist() == want.column("local").to_pylist()
    assert got.column("local")[0].as_py() == dt.datetime(2024, 5, 1, 12, 0, 0, 123456)  # microseconds kept
