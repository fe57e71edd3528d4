"""Spark reads with filters return exactly the rows read_dataset returns (issue 9, item 13).

One small dataset with nulls, NaNs, -0.0, float32 values, naive and tz-aware
timestamps, decimals and a partition column, written twice: partitioned (read
on the executors, ``mode="arrow"``) and not (read by Spark's own Parquet
reader, ``mode="native"``). The session time zone is set away from UTC so
timestamp literals cannot depend on it.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.spark import read_spark_dataset

UTC = dt.timezone.utc
N = 120
START = dt.datetime(2026, 1, 1)


def _rows() -> pa.Table:
    def nth(values: list[Any], i: int) -> Any:
        return values[i % len(values)]

    ints = [None, 1, 2, 3, 4, 10, -5]
    floats = [None, math.nan, -0.0, 0.0, 0.5, 1.0, 1.5, -2.0, math.inf, -math.inf, 1e9]
    strings = [None, "a", "b", "ü", "Zürich", "", "z"]
    return pa.table(
        {
            "id": pa.array(range(N), pa.int64()),
            "i": pa.array([nth(ints, i) for i in range(N)], pa.int32()),
            "f": pa.array([nth(floats, i) for i in range(N)], pa.float64()),
            "f32": pa.array([nth([None, 0.1, 0.2, math.nan, -0.0], i) for i in range(N)], pa.float32()),
            "s": pa.array([nth(strings, i) for i in range(N)], pa.string()),
            "d": pa.array([None if i % 9 == 0 else dt.date(2026, 1, 1 + i % 4) for i in range(N)], pa.date32()),
            "ts": pa.array(
                [None if i % 8 == 0 else (START + dt.timedelta(hours=i)).replace(tzinfo=UTC) for i in range(N)],
                pa.timestamp("us", tz="UTC"),
            ),
            "tn": pa.array(
                [None if i % 7 == 0 else START + dt.timedelta(hours=i, microseconds=i) for i in range(N)],
                pa.timestamp("us"),
            ),
            "tms": pa.array(
                [None if i % 6 == 0 else START + dt.timedelta(minutes=i) for i in range(N)], pa.timestamp("ms")
            ),
            "dec": pa.array([None if i % 5 == 0 else Decimal(i % 13) / 4 for i in range(N)], pa.decimal128(10, 2)),
            "b": pa.array([nth([None, True, False], i) for i in range(N)], pa.bool_()),
            "part": pa.array([nth([None, "x", "y", "ü z"], i // 3) for i in range(N)], pa.string()),
        }
    )


CASES: list[Any] = [
    # nulls
    [("i", "!=", 3)],
    [("i", "==", 3)],
    [("i", "is null")],
    [("i", "is not null")],
    [("i", "not in", [1, 2])],
    [("i", "in", [1, 2, 2.5])],
    [("i", "in", [])],
    [("i", "not in", [])],
    # literals an int column cannot hold
    [("i", ">", 2.5)],
    [("i", "<", 2.5)],
    [("i", "==", 2.5)],
    [("i", "!=", 2.5)],
    [("i", "<=", 10**20)],
    [("i", ">", -(10**20))],
    [("i", ">=", 3_000_000_000)],
    # NaN, -0.0, infinities
    [("f", ">", 0.5)],
    [("f", ">=", -1.0)],
    [("f", "<", 1e10)],
    [("f", "<=", 0.0)],
    [("f", "!=", 1.5)],
    [("f", "==", 0.0)],
    [("f", "==", -0.0)],
    [("f", "in", [0.0, 1.5])],
    [("f", "not in", [1.5, -2.0])],
    [("f", ">", -math.inf)],
    [("f", "<", math.inf)],
    [("f", "is not null")],
    [("f32", "==", 0.1)],
    [("f32", ">", 0.1)],
    [("f32", "in", [0.2, 0.0])],
    # strings, booleans
    [("s", "!=", "ü")],
    [("s", "in", ["a", "ü", ""])],
    [("s", "not in", ["a"])],
    [("s", ">=", "b")],
    [("s", "==", "")],
    [("b", "==", False)],
    [("b", "!=", True)],
    # dates and timestamps, given as the docs allow
    [("d", ">=", dt.date(2026, 1, 2))],
    [("d", "==", "2026-01-02")],
    [("d", "<", dt.datetime(2026, 1, 3))],
    [("ts", ">=", dt.datetime(2026, 1, 2, 5, tzinfo=UTC))],
    [("ts", "<", "2026-01-02T05:00:00+00:00")],
    [("ts", "==", dt.datetime(2026, 1, 2, 7, tzinfo=dt.timezone(dt.timedelta(hours=2))))],
    [("ts", "in", ["2026-01-01T03:00:00Z", dt.datetime(2026, 1, 3, tzinfo=UTC)])],
    [("tn", ">=", dt.datetime(2026, 1, 2, 5, 0, 0, 29))],
    [("tn", "<", "2026-01-02T05:00:00.000029")],
    [("tn", ">", dt.date(2026, 1, 3))],
    [("tn", "==", dt.datetime(2026, 1, 2, 5, 0, 0, 29))],
    [("tn", "not in", [dt.datetime(2026, 1, 1, 1, 0, 0, 1)])],
    [("tms", ">=", dt.datetime(2026, 1, 1, 1, 30))],
    [("tms", "<", "2026-01-01T00:10:00")],
    # decimals
    [("dec", ">", Decimal("1.234"))],
    [("dec", "==", 1.25)],
    [("dec", "<=", "2.5")],
    [("dec", "!=", Decimal("0.001"))],
    # the partition column
    [("part", "==", "x")],
    [("part", "!=", "x")],
    [("part", "is null")],
    [("part", "not in", ["y"])],
    # several terms, disjunctions, operator spellings
    [[("i", "==", 3)], [("f", ">", 0.0)]],
    [[("s", "is null")], [("part", "!=", "x"), ("f", "<", 1.0)]],
    [("i", "=", 4), ("f", "NOT IN", [0.5])],
]


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Iterator[ParquetDatasetStore]:
    root: Path = tmp_path_factory.mktemp("filters")
    ds = ParquetDatasetStore(LocalStore(root), max_rows_per_file=25, retain_versions=1)
    table = _rows()
    ds.write_dataset(table, "flat")
    ds.write_dataset(table, "parted", partition_by=["part"])
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        yield ds
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


@pytest.mark.parametrize("filters", CASES, ids=[repr(c) for c in CASES])
def test_spark_filter_matches_read_dataset(spark: Any, datasets: ParquetDatasetStore, filters: Any) -> None:
    expected = sorted(datasets.read_dataset("flat", columns=["id"], filters=filters).column("id").to_pylist())
    assert expected == sorted(datasets.read_dataset("parted", columns=["id"], filters=filters).column("id").to_pylist())
    for key, mode in (("flat", "native"), ("parted", "arrow")):
        df = read_spark_dataset(spark, datasets, key, columns=["id"], filters=filters, mode=mode)
        assert df.columns == ["id"]
        assert sorted(r["id"] for r in df.collect()) == expected, (key, mode)


def test_spark_read_skips_pruned_files(spark: Any, datasets: ParquetDatasetStore) -> None:
    plan = datasets.plan_read("parted", filters=[("part", "==", "x")])
    assert plan.pruned
    df = read_spark_dataset(spark, datasets, "parted", filters=[("part", "==", "x")], mode="arrow")
    assert df.rdd.getNumPartitions() == len(plan.selected)
    assert {r["part"] for r in df.collect()} == {"x"}


def test_spark_filter_errors_name_the_problem(spark: Any, datasets: ParquetDatasetStore) -> None:
    with pytest.raises(ValueError, match="'nope' is not in the dataset"):
        read_spark_dataset(spark, datasets, "flat", filters=[("nope", "==", 1)])
    with pytest.raises(ValueError, match="unknown operator"):
        read_spark_dataset(spark, datasets, "flat", filters=[("i", "~", 1)])
    with pytest.raises(TypeError, match="cannot compare"):
        read_spark_dataset(spark, datasets, "flat", filters=[("i", "==", "three")])
