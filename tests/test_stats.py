"""Per-file column statistics (``dataset.format.stats``): extraction from real Parquet footers, JSON
encoding, literal normalization. Files are written in memory with pyarrow (and DuckDB for a
writer that truncates string statistics)."""

from __future__ import annotations

import json
import math
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagster_parquet_dataset.dataset.format.stats import (
    ColumnStats,
    decode_stats,
    decode_value,
    encode_value,
    file_column_stats,
    normalize_literal,
    stats_supported,
)

UTC = timezone.utc


def write_metadata(table: pa.Table, row_group_size: int | None = None, **options: Any) -> pq.FileMetaData:
    """Write ``table`` to an in-memory Parquet file and return the writer's own footer."""
    sink = pa.BufferOutputStream()
    writer = pq.ParquetWriter(sink, table.schema, **options)
    writer.write_table(table, row_group_size=row_group_size)
    writer.close()
    metadata = writer.writer.metadata
    # The footer read back from the bytes must say the same thing as the writer's copy.
    assert pq.ParquetFile(pa.BufferReader(sink.getvalue())).metadata.equals(metadata)
    return metadata


def comparable(array: pa.ChunkedArray, value: pa.Scalar) -> Any:
    """A min/max computed by pyarrow.compute, converted to the comparable domain independently."""
    typ = array.type
    if pa.types.is_timestamp(typ):
        return value.cast(pa.int64()).as_py()
    if pa.types.is_date64(typ):
        return value.cast(pa.date32()).as_py()
    return value.as_py()


def nan_only_group(column: pa.ChunkedArray, row_group_size: int | None) -> bool:
    """Whether some row group holds NaN and no other non-null value: its min/max are unknown."""
    if not pa.types.is_floating(column.type):
        return False
    size = row_group_size or len(column)
    for start in range(0, len(column), size):
        part = column.slice(start, size)
        smallest = pc.min_max(part)["min"].as_py()  # NaN when there is nothing but NaN
        if pc.sum(pc.is_nan(part)).as_py() and (smallest is None or math.isnan(smallest)):
            return True
    return False


def expected_stats(table: pa.Table, row_group_size: int | None = None) -> dict[str, ColumnStats]:
    """What the statistics must say, computed from the data with pyarrow.compute."""
    out = {}
    for name in table.column_names:
        column = table.column(name)
        if not stats_supported(column.type):
            continue
        nulls = column.null_count
        lo = hi = None
        if nulls < len(column):
            mm = pc.min_max(column)  # skips nulls and NaN, like Parquet writers
            lo, hi = comparable(column, mm["min"]), comparable(column, mm["max"])
            if isinstance(lo, float) and not (math.isfinite(lo) and math.isfinite(hi)):
                lo = hi = None  # NaN-only or infinite: not encodable
            if nan_only_group(column, row_group_size):
                lo = hi = None  # the writer gives such a row group no min/max
        out[name] = ColumnStats(lo, hi, nulls)
    return out


def roundtrip(raw: dict[str, Any], schema: pa.Schema) -> dict[str, ColumnStats]:
    """Through real JSON, as in the manifest."""
    return decode_stats(json.loads(json.dumps(raw, allow_nan=False)), schema)


# ------------------------------------------------------------------------------------------
# stats_supported


@pytest.mark.parametrize(
    "typ",
    [
        pa.int8(),
        pa.int16(),
        pa.int32(),
        pa.int64(),
        pa.uint8(),
        pa.uint16(),
        pa.uint32(),
        pa.uint64(),
        pa.float32(),
        pa.float64(),
        pa.bool_(),
        pa.string(),
        pa.large_string(),
        pa.date32(),
        pa.date64(),
        pa.timestamp("s"),
        pa.timestamp("ms", tz="UTC"),
        pa.timestamp("us", tz="Europe/Paris"),
        pa.timestamp("ns"),
        pa.decimal128(10, 2),
        pa.decimal256(50, 5),
    ],
)
def test_supported_types(typ: pa.DataType) -> None:
    assert stats_supported(typ)


@pytest.mark.parametrize(
    "typ",
    [
        pa.float16(),
        pa.binary(),
        pa.large_binary(),
        pa.binary(4),
        pa.string_view(),
        pa.list_(pa.int64()),
        pa.struct([("a", pa.int64())]),
        pa.map_(pa.string(), pa.int64()),
        pa.dictionary(pa.int32(), pa.string()),
        pa.time32("s"),
        pa.time64("us"),
        pa.duration("s"),
        pa.null(),
    ],
)
def test_unsupported_types(typ: pa.DataType) -> None:
    assert not stats_supported(typ)


# ------------------------------------------------------------------------------------------
# encode / decode


@pytest.mark.parametrize(
    ("typ", "value", "encoded", "decoded"),
    [
        (pa.int64(), 42, 42, 42),
        (pa.int8(), np.int8(-128), -128, -128),
        (pa.uint64(), 2**64 - 1, 2**64 - 1, 2**64 - 1),
        (pa.float64(), 0.1, 0.1, 0.1),
        (pa.float64(), -0.0, -0.0, -0.0),
        (pa.float32(), np.float32(0.1), float(np.float32(0.1)), float(np.float32(0.1))),
        (pa.bool_(), True, True, True),
        (pa.string(), "héllo ✓ 😀", "héllo ✓ 😀", "héllo ✓ 😀"),
        (pa.date32(), date(1900, 2, 28), "1900-02-28", date(1900, 2, 28)),
        (pa.date64(), "2024-02-29", "2024-02-29", date(2024, 2, 29)),
        (pa.timestamp("ms"), datetime(1970, 1, 1, 0, 0, 1, 500000), 1500, 1500),
        (pa.timestamp("s", tz="UTC"), datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC), -1, -1),
        (pa.timestamp("ns", tz="Asia/Tokyo"), pd.Timestamp("1970-01-01 09:00:00.000000007", tz="Asia/Tokyo"), 7, 7),
        (pa.timestamp("us"), 123, 123, 123),
        (pa.decimal128(10, 2), Decimal("1.5"), "1.50", Decimal("1.50")),
        (pa.decimal128(10, 2), 3, "3.00", Decimal("3")),
        (pa.decimal256(60, 0), Decimal(10**59), str(10**59), Decimal(10**59)),
    ],
)
def test_encode_decode_roundtrip(typ: pa.DataType, value: Any, encoded: Any, decoded: Any) -> None:
    raw = encode_value(value, typ)
    assert raw == encoded and type(raw) is type(encoded)
    back = decode_value(json.loads(json.dumps(raw)), typ)
    assert back == decoded and type(back) is type(decoded)
    assert back == normalize_literal(value, typ)
    assert encode_value(back, typ) == raw  # canonical: a fixed point


def test_encode_none_is_null() -> None:
    assert encode_value(None, pa.int64()) is None
    assert decode_value(None, pa.int64()) is None


@pytest.mark.parametrize(
    ("typ", "value"),
    [
        (pa.float64(), float("nan")),
        (pa.float64(), float("inf")),
        (pa.float32(), -math.inf),
        (pa.int8(), 128),
        (pa.uint8(), -1),
        (pa.int64(), 1.5),
        (pa.decimal128(5, 2), Decimal("1.234")),
        (pa.decimal128(5, 2), Decimal("1000.00")),
        (pa.timestamp("ns"), 2**63),
    ],
)
def test_encode_rejects_values_the_column_cannot_hold(typ: pa.DataType, value: Any) -> None:
    with pytest.raises(ValueError):
        encode_value(value, typ)


def test_encode_rejects_unsupported_type() -> None:
    with pytest.raises(TypeError):
        encode_value(b"x", pa.binary())
    with pytest.raises(TypeError):
        decode_value("x", pa.binary())


@pytest.mark.parametrize(
    ("typ", "raw"),
    [
        (pa.int64(), "1"),
        (pa.int64(), 1.0),
        (pa.int64(), True),
        (pa.float64(), "1.0"),
        (pa.bool_(), 1),
        (pa.string(), 1),
        (pa.date32(), 19000),
        (pa.date32(), "2020-13-01"),
        (pa.timestamp("us"), "2020-01-01"),
        (pa.decimal128(5, 2), 1.5),
        (pa.decimal128(5, 2), "abc"),
        (pa.decimal128(5, 2), "NaN"),
    ],
)
def test_decode_rejects_malformed_json(typ: pa.DataType, raw: Any) -> None:
    with pytest.raises(ValueError):
        decode_value(raw, typ)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.sampled_from(["s", "ms", "us", "ns"]))
def test_timestamp_values_roundtrip_and_order(count: int, unit: str) -> None:
    typ = pa.timestamp(unit, tz="UTC")
    raw = encode_value(count, typ)
    assert decode_value(raw, typ) == count
    # the comparable value is the Arrow storage value
    assert pa.scalar(count, typ).cast(pa.int64()).as_py() == count


@given(st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-(10**6), max_value=10**6))
def test_decimal_values_roundtrip_canonically(value: Decimal) -> None:
    typ = pa.decimal128(12, 3)
    raw = encode_value(value, typ)
    assert raw == str(pa.scalar(value, typ).as_py())
    assert decode_value(raw, typ) == value


# ------------------------------------------------------------------------------------------
# normalize_literal


def test_normalize_timestamps_compare_in_utc_and_in_the_column_unit() -> None:
    paris = pa.timestamp("ms", tz="Europe/Paris")
    # 01:00 in Paris in winter is midnight UTC
    aware = datetime(2020, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1)))
    expected = pa.scalar(datetime(2020, 1, 1, tzinfo=UTC), paris).cast(pa.int64()).as_py()
    assert normalize_literal(aware, paris) == expected
    assert normalize_literal(pd.Timestamp("2020-01-01 01:00", tz="Europe/Paris"), paris) == expected
    assert normalize_literal("2020-01-01T00:00:00Z", paris) == expected
    assert normalize_literal("2020-01-01T01:00:00+01:00", paris) == expected
    naive = pa.timestamp("us")
    assert normalize_literal(datetime(2020, 1, 1), naive) == expected * 1000
    assert normalize_literal(date(2020, 1, 1), naive) == expected * 1000
    assert normalize_literal(np.datetime64("2020-01-01T00:00:00.000001"), naive) == expected * 1000 + 1
    assert normalize_literal(pd.Timestamp("2020-01-01 00:00:00.000000005"), pa.timestamp("ns")) == expected * 10**6 + 5
    # far outside the datetime64[ns] range, still exact
    assert (
        normalize_literal(datetime(9999, 12, 31), pa.timestamp("s"))
        == pa.scalar(datetime(9999, 12, 31), pa.timestamp("s")).cast(pa.int64()).as_py()
    )


@pytest.mark.parametrize(
    ("typ", "value", "exc", "fragment"),
    [
        (pa.timestamp("us", tz="UTC"), datetime(2020, 1, 1), TypeError, "time-zone aware"),
        (pa.timestamp("us"), datetime(2020, 1, 1, tzinfo=UTC), TypeError, "no time zone"),
        (pa.timestamp("s"), datetime(2020, 1, 1, 0, 0, 0, 1), ValueError, "more precise"),
        (pa.timestamp("us"), pd.Timestamp("2020-01-01 00:00:00.000000001"), ValueError, "more precise"),
        (pa.timestamp("us"), "yesterday", ValueError, "ISO 8601"),
        (pa.timestamp("us"), True, TypeError, "booleans"),
        (pa.date32(), datetime(2020, 1, 1, 12), ValueError, "time of day"),
        (pa.date32(), "2020/01/01", ValueError, "ISO date"),
        (pa.date32(), 18000, TypeError, "date"),
        (pa.int64(), "abc", TypeError, "cannot compare with 'abc'"),
        (pa.int64(), True, TypeError, "booleans"),
        (pa.int64(), float("nan"), ValueError, "NaN"),
        (pa.float64(), float("nan"), ValueError, "NaN"),
        (pa.float64(), "1.0", TypeError, "number"),
        (pa.float32(), 1e300, ValueError, "float32"),
        (pa.bool_(), 1, TypeError, "True or False"),
        (pa.string(), 1, TypeError, "str"),
        (pa.string(), "\ud800", ValueError, "UTF-8"),
        (pa.decimal128(5, 2), "one", ValueError, "decimal"),
        (pa.decimal128(5, 2), float("inf"), ValueError, "finite"),
        (pa.int64(), None, ValueError, "is null"),
    ],
)
def test_normalize_rejects_with_a_clear_message(typ: pa.DataType, value: Any, exc: type, fragment: str) -> None:
    with pytest.raises(exc) as info:
        normalize_literal(value, typ, column="col")
    message = str(info.value)
    assert "column 'col'" in message and str(typ) in message and fragment in message


def test_normalize_unsupported_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="column 'b' is binary"):
        normalize_literal(b"x", pa.binary(), column="b")


def test_normalize_numbers() -> None:
    assert normalize_literal(np.int32(5), pa.int64()) == 5
    assert type(normalize_literal(5.0, pa.int64())) is int
    assert normalize_literal(1.5, pa.int64()) == 1.5  # kept exact: compares exactly with ints
    assert normalize_literal(Decimal("2.000"), pa.int8()) == 2
    assert normalize_literal(1000, pa.int8()) == 1000  # out of range literals still compare
    assert normalize_literal(3, pa.float64()) == 3.0
    assert normalize_literal(0.1, pa.float32()) == float(np.float32(0.1))
    assert normalize_literal(0.1, pa.float64()) == 0.1
    assert normalize_literal(0.1, pa.decimal128(5, 2)) == Decimal("0.1")
    assert normalize_literal("1.234", pa.decimal128(5, 2)) == Decimal("1.234")
    assert normalize_literal(np.bool_(True), pa.bool_()) is True


# ------------------------------------------------------------------------------------------
# file_column_stats on real files


def mixed_table() -> pa.Table:
    ts_values = [
        datetime(2021, 3, 28, 0, 59, tzinfo=UTC),
        None,
        datetime(1969, 7, 20, 20, 17, tzinfo=UTC),
        datetime(2038, 1, 19, 3, 14, 8, tzinfo=UTC),
        None,
        datetime(2000, 2, 29, 12, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
    ]
    n = len(ts_values)
    return pa.table(
        {
            "i": pa.array([5, None, -3, 7, None, 2**40, 0], pa.int64()),
            "i8": pa.array([-128, 127, None, 0, 1, 2, 3], pa.int8()),
            "u64": pa.array([2**64 - 1, None, 0, 5, 6, 7, 8], pa.uint64()),
            "f": pa.array([1.5, float("nan"), None, -2.25, float("nan"), 0.0, 3.0]),
            "f32": pa.array([0.1, None, 0.2, float("nan"), 1e30, -1e-30, 2.0], pa.float32()),
            "f_inf": pa.array([1.0, float("inf"), None, 2.0, 3.0, 4.0, 5.0]),
            "f_nan_only": pa.array([float("nan"), None, float("nan"), None, float("nan"), None, float("nan")]),
            "b": pa.array([False, None, True, False, None, False, False]),
            "s": pa.array(["ébène", None, "zèbre", "Zulu", "😀 emoji", "", "a\x00b"]),
            "ls": pa.array(["b", "a", None, "c", "ä", "ß", "z"], pa.large_string()),
            "d32": pa.array([date(2020, 1, 1), None, date(1, 1, 1), date(9999, 12, 31), None, date(1970, 1, 1), None]),
            "d64": pa.array(
                [date(2020, 1, 1), None, date(1960, 5, 4), date(2100, 1, 1), None, None, None], pa.date64()
            ),
            "ts_s": pa.array(ts_values, pa.timestamp("s")),
            "ts_ms_tz": pa.array(ts_values, pa.timestamp("ms", tz="Europe/Paris")),
            "ts_us_tz": pa.array(ts_values, pa.timestamp("us", tz="America/New_York")),
            "ts_ns_tz": pa.array(ts_values, pa.timestamp("ns", tz="Asia/Kolkata")),
            "ts_ns": pa.array([None, -1, 1, 1_700_000_000_123_456_789, None, 0, 7], pa.timestamp("ns")),
            "dec": pa.array(
                [Decimal("1.23"), Decimal("-4.50"), None, Decimal("0.01"), None, None, None], pa.decimal128(9, 2)
            ),
            "dec256": pa.array(
                [Decimal(10**60), Decimal(-(10**59)), None, Decimal(1), None, None, Decimal("0.5")],
                pa.decimal256(70, 1),
            ),
            "all_null": pa.array([None] * n, pa.int64()),
            "null_type": pa.nulls(n),
            "bin": pa.array([b"x", b"y", None, b"z", b"", b"a", b"b"]),
            "lst": pa.array([[1], [2, 3], None, [], [4], [5], [6]]),
            "dict": pa.array(["a", "b", None, "a", "b", "c", "a"]).dictionary_encode(),
            "struct": pa.array([{"x": 1}, None, {"x": 2}, {"x": 3}, {"x": 4}, {"x": 5}, {"x": 6}]),
        }
    )


@pytest.mark.parametrize("row_group_size", [1, 2, 3, 7, None])
def test_file_column_stats_match_the_data(row_group_size: int | None) -> None:
    table = mixed_table()
    metadata = write_metadata(table, row_group_size=row_group_size)
    if row_group_size and row_group_size < len(table):
        assert metadata.num_row_groups > 1
    raw = file_column_stats(metadata, table.schema)
    got = roundtrip(raw, table.schema)
    expected = expected_stats(table, row_group_size)
    assert set(raw) == set(expected)  # supported columns only: no binary, list, dictionary, struct, null
    for name, want in expected.items():
        assert got[name] == want, name
    assert raw["all_null"] == {"null_count": len(table)}
    assert raw["f_inf"] == {"null_count": 1}  # +inf max is not encodable
    assert raw["f_nan_only"] == {"null_count": 3}
    if row_group_size != 1:
        assert got["f"] == ColumnStats(-2.25, 3.0, 1)  # NaN is left out of min/max
    else:
        assert got["f"] == ColumnStats(None, None, 1)  # a NaN-only row group has no min/max


def test_timestamp_units_and_time_zones() -> None:
    """Raw Parquet statistics are in the file's unit; the manifest keeps the column's unit (UTC)."""
    values = [datetime(2024, 3, 31, 1, 30, tzinfo=UTC), datetime(1900, 1, 1, tzinfo=UTC), None]
    table = pa.table(
        {
            f"{unit}_{tz}": pa.array(values, pa.timestamp(unit, tz=None if tz == "naive" else tz))
            for unit in ("s", "ms", "us", "ns")
            for tz in ("naive", "UTC", "Pacific/Chatham")
        }
    )
    for options in ({}, {"coerce_timestamps": "us"}, {"coerce_timestamps": "ms"}):
        metadata = write_metadata(table, **options)
        raw = file_column_stats(metadata, table.schema)
        for name in table.column_names:
            typ = table.schema.field(name).type
            storage = table.column(name).cast(pa.int64())
            assert raw[name] == {
                "null_count": 1,
                "min": pc.min(storage).as_py(),
                "max": pc.max(storage).as_py(),
            }, (name, options)
            latest = values[0] if typ.tz else values[0].replace(tzinfo=None)
            assert decode_value(raw[name]["max"], typ) == normalize_literal(latest, typ)


def test_truncated_timestamps_describe_the_file() -> None:
    """With coerce_timestamps to a coarser unit the file holds truncated values; stats say so."""
    table = pa.table({"t": pa.array([1_500, 2_999_999], pa.timestamp("ns"))})
    metadata = write_metadata(table, coerce_timestamps="us", allow_truncated_timestamps=True)
    assert file_column_stats(metadata, table.schema)["t"] == {"null_count": 0, "min": 1_000, "max": 2_999_000}


def test_all_null_row_groups_do_not_hide_the_others() -> None:
    table = pa.table({"x": pa.array([None, None, 4, 2, None, None, 9, None])})
    metadata = write_metadata(table, row_group_size=2)
    assert metadata.num_row_groups == 4
    assert file_column_stats(metadata, table.schema)["x"] == {"null_count": 5, "min": 2, "max": 9}


def test_long_strings_drop_min_max_but_keep_null_count() -> None:
    # Arrow C++ drops (never truncates) string statistics over its 4096-byte limit.
    table = pa.table({"s": ["b" * 5000, "a", None, "c"], "t": ["x", "y", "z", None]})
    metadata = write_metadata(table, row_group_size=2)
    raw = file_column_stats(metadata, table.schema)
    assert raw["s"] == {"null_count": 1}
    assert raw["t"] == {"null_count": 1, "min": "x", "max": "z"}


def test_unicode_string_order_is_utf8_byte_order() -> None:
    values = ["z", "é", "\uffff", "😀", "A", "\x00"]
    table = pa.table({"s": values})
    raw = file_column_stats(write_metadata(table), table.schema)
    assert raw["s"]["min"] == min(values) == "\x00"
    assert raw["s"]["max"] == max(values) == "😀"


def test_strings_from_a_truncating_writer_are_not_trusted(tmp_path: Any) -> None:
    """DuckDB truncates long string min/max (and pyarrow cannot tell): such stats must not be used."""
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "d.parquet"
    longest = "b" * 300 + "x"
    duckdb.sql(
        f"COPY (SELECT * FROM (VALUES ('{'a' * 300}', 1), ('{longest}', 2)) t(s, n)) TO '{path}' (FORMAT parquet)"
    )
    metadata = pq.ParquetFile(path).metadata
    schema = pq.read_schema(path)
    assert not metadata.created_by.startswith("parquet-cpp")
    raw = file_column_stats(metadata, schema)
    assert "min" not in raw["s"] and raw["s"]["null_count"] == 0
    assert raw["n"] == {"null_count": 0, "min": 1, "max": 2}  # numbers are exact from any writer
    trusted = file_column_stats(metadata, schema, trust_string_stats=True)
    # what trusting them would have meant: bounds that are no values of the file
    assert trusted["s"]["max"] != longest and trusted["s"]["min"] != "a" * 300


def test_trust_string_stats_false_omits_string_min_max() -> None:
    table = pa.table({"s": ["a", "b"]})
    assert file_column_stats(write_metadata(table), table.schema, trust_string_stats=False) == {"s": {"null_count": 0}}


def test_statistics_disabled() -> None:
    table = pa.table({"a": [1, 2, None], "b": ["x", None, "y"]})
    assert file_column_stats(write_metadata(table, write_statistics=False), table.schema) == {}
    raw = file_column_stats(write_metadata(table, write_statistics=["b"]), table.schema)
    assert raw == {"b": {"null_count": 1, "min": "x", "max": "y"}}


def test_nested_columns_and_name_collisions() -> None:
    # a struct "a" with child "b" has the leaf path "a.b": a top-level column "a.b" is ambiguous
    table = pa.table(
        {
            "a": pa.array([{"b": 1}, {"b": 2}]),
            "a.b": pa.array([10, 20]),
            "c.d": pa.array([3, 4]),
            "m": pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int64())),
            "z": pa.array([5, 6]),
        }
    )
    raw = file_column_stats(write_metadata(table), table.schema)
    assert raw == {"c.d": {"null_count": 0, "min": 3, "max": 4}, "z": {"null_count": 0, "min": 5, "max": 6}}


def test_empty_file() -> None:
    table = pa.table({"a": pa.array([], pa.int64()), "s": pa.array([], pa.string())})
    raw = file_column_stats(write_metadata(table), table.schema)
    for entry in raw.values():
        assert entry.get("null_count", 0) == 0 and "min" not in entry


def test_decimals_stored_as_integers() -> None:
    table = pa.table({"d": pa.array([Decimal("-1.5"), Decimal("2.25"), None], pa.decimal128(5, 2))})
    for options in ({}, {"store_decimal_as_integer": True}):
        raw = file_column_stats(write_metadata(table, **options), table.schema)
        assert raw["d"] == {"null_count": 1, "min": "-1.50", "max": "2.25"}


# ------------------------------------------------------------------------------------------
# decode_stats


def test_decode_stats_selected_columns_and_foreign_entries() -> None:
    schema = pa.schema([("a", pa.int64()), ("d", pa.date32()), ("bin", pa.binary())])
    raw = {
        "a": {"null_count": 0, "min": 1, "max": 3},
        "d": {"null_count": 2},
        "gone": {"null_count": 0, "min": 1, "max": 1},  # a column no longer in the schema
        "bin": {"null_count": 0, "min": "x", "max": "y"},  # unsupported type: never used
    }
    assert decode_stats(raw, schema) == {"a": ColumnStats(1, 3, 0), "d": ColumnStats(None, None, 2)}
    assert decode_stats(raw, schema, columns=["d", "missing"]) == {"d": ColumnStats(None, None, 2)}


@pytest.mark.parametrize(
    "entry",
    [
        [1, 2],
        {"null_count": -1},
        {"null_count": "3"},
        {"null_count": 1.0},
        {"min": "2020-01-01", "max": 3},
    ],
)
def test_decode_stats_rejects_malformed_entries(entry: Any) -> None:
    schema = pa.schema([("a", pa.int64())])
    with pytest.raises(ValueError, match="column 'a'"):
        decode_stats({"a": entry}, schema)


# ------------------------------------------------------------------------------------------
# property: random tables, random row groups


def _column_strategy(n: int) -> st.SearchStrategy[tuple[pa.DataType, list[Any]]]:
    def nullable(values: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
        return st.lists(st.one_of(st.none(), values), min_size=n, max_size=n)

    moments = st.datetimes(min_value=datetime(1700, 1, 1), max_value=datetime(2250, 1, 1), timezones=st.just(UTC))
    return st.one_of(
        nullable(st.integers(-(2**63), 2**63 - 1)).map(lambda v: (pa.int64(), v)),
        nullable(st.integers(0, 2**64 - 1)).map(lambda v: (pa.uint64(), v)),
        nullable(st.integers(-(2**15), 2**15 - 1)).map(lambda v: (pa.int16(), v)),
        nullable(st.floats(allow_infinity=False)).map(lambda v: (pa.float64(), v)),
        nullable(st.floats(width=32, allow_infinity=False)).map(lambda v: (pa.float32(), v)),
        nullable(st.booleans()).map(lambda v: (pa.bool_(), v)),
        nullable(st.text(max_size=8)).map(lambda v: (pa.string(), v)),
        nullable(st.dates()).map(lambda v: (pa.date32(), v)),
        st.tuples(st.sampled_from(["s", "ms", "us", "ns"]), st.sampled_from([None, "UTC", "Europe/Paris"])).flatmap(
            lambda u: nullable(moments.map(lambda m: m.replace(microsecond=0) if u[0] in ("s", "ms") else m)).map(
                lambda v: (
                    pa.timestamp(u[0], tz=u[1]),
                    [x if (x is None or u[1]) else x.replace(tzinfo=None) for x in v],
                )
            )
        ),
        nullable(st.decimals(allow_nan=False, allow_infinity=False, places=2, min_value=-(10**7), max_value=10**7)).map(
            lambda v: (pa.decimal128(12, 2), v)
        ),
    )


@st.composite
def random_tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(1, 40))
    columns = draw(st.lists(_column_strategy(n), min_size=1, max_size=4))
    return pa.table({f"c{i}": pa.array(values, typ) for i, (typ, values) in enumerate(columns)})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(random_tables(), st.integers(1, 15))
def test_random_files_stats_equal_computed_stats(table: pa.Table, row_group_size: int) -> None:
    metadata = write_metadata(table, row_group_size=row_group_size)
    got = roundtrip(file_column_stats(metadata, table.schema), table.schema)
    assert got == expected_stats(table, row_group_size)
