"""The Spark <-> Arrow schema mapping (pure functions; no session needed)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from dagster_parquet_dataset.spark import arrow_schema_to_spark, spark_schema_to_arrow
from dagster_parquet_dataset.spark._spark_schema import natively_readable

NESTED = T.StructType(
    [
        T.StructField("id", T.LongType(), nullable=False),
        T.StructField("ts", T.TimestampType()),
        T.StructField("local", T.TimestampNTZType()),
        T.StructField("price", T.DecimalType(38, 10)),
        T.StructField("tags", T.ArrayType(T.StringType(), containsNull=False)),
        T.StructField("attrs", T.MapType(T.StringType(), T.DoubleType(), valueContainsNull=True)),
        T.StructField(
            "address",
            T.StructType([T.StructField("city", T.StringType()), T.StructField("zip", T.IntegerType(), False)]),
        ),
        T.StructField("small", T.ByteType()),
        T.StructField("raw", T.BinaryType()),
        T.StructField("day", T.DateType()),
    ]
)


def test_spark_schema_maps_to_arrow_faithfully_and_back() -> None:
    arrow = spark_schema_to_arrow(NESTED)
    assert arrow.field("id").type == pa.int64() and not arrow.field("id").nullable
    assert arrow.field("ts").type == pa.timestamp("us", tz="UTC")
    assert arrow.field("local").type == pa.timestamp("us")
    assert arrow.field("price").type == pa.decimal128(38, 10)
    assert arrow.field("tags").type == pa.list_(pa.field("element", pa.string(), nullable=False))
    assert arrow.field("attrs").type == pa.map_(pa.string(), pa.float64())
    assert arrow.field("address").type.field("zip").nullable is False
    assert arrow.field("small").type == pa.int8()
    assert arrow_schema_to_spark(arrow) == NESTED  # nullability included
    assert natively_readable(arrow)


def test_unstorable_spark_types_are_named_with_their_path() -> None:
    schema = T.StructType([T.StructField("outer", T.StructType([T.StructField("span", T.YearMonthIntervalType())]))])
    with pytest.raises(TypeError, match=r"column 'outer\.span' has type interval year to month"):
        spark_schema_to_arrow(schema)
    with pytest.raises(ValueError, match=r"duplicate column names \['a'\]"):
        spark_schema_to_arrow(T.StructType([T.StructField("a", T.LongType()), T.StructField("a", T.LongType())]))


def test_arrow_types_spark_lacks_are_widened_or_named() -> None:
    arrow = pa.schema(
        [
            ("u8", pa.uint8()),
            ("u32", pa.uint32()),
            ("u64", pa.uint64()),
            ("ns", pa.timestamp("ns", tz="Europe/Paris")),
            ("cat", pa.dictionary(pa.int8(), pa.string())),
            ("big", pa.large_string()),
            ("half", pa.float16()),
        ]
    )
    spark = arrow_schema_to_spark(arrow)
    assert [f.dataType for f in spark.fields] == [
        T.ShortType(),
        T.LongType(),
        T.DecimalType(20, 0),
        T.TimestampType(),
        T.StringType(),
        T.StringType(),
        T.FloatType(),
    ]
    assert not natively_readable(arrow)  # ns timestamps, half floats, uint64: read through Arrow instead
    assert natively_readable(pa.schema([("u32", pa.uint32()), ("ms", pa.timestamp("ms", tz="UTC"))]))
    with pytest.raises(TypeError, match=r"column 'when' has Arrow type time64\[us\].*columns="):
        arrow_schema_to_spark(pa.schema([("when", pa.time64("us"))]))
