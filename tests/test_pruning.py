"""Filter normalization, file pruning and residual filters (``dataset.expressions.pruning``).

The property tests split random tables into "files" written to Parquet in memory, so the
statistics pruning relies on are the real ones from ``file_column_stats``; the row filter
``to_expression`` is itself checked against a plain-Python SQL evaluation.
"""

from __future__ import annotations

import json
import math
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dagster_parquet_dataset.dataset.expressions.pruning import (
    SUPPORTED_OPS,
    Predicate,
    filter_columns,
    might_match,
    normalize_filters,
    partition_stats,
    plan_files,
    residual_filters,
    to_expression,
)
from dagster_parquet_dataset.dataset.format.stats import (
    ColumnStats,
    decode_stats,
    decode_value,
    encode_value,
    file_column_stats,
)

UTC = timezone.utc
SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("s", pa.string()),
        ("f", pa.float64()),
        ("d", pa.date32()),
        ("t", pa.timestamp("ms", tz="UTC")),
        ("dec", pa.decimal128(6, 2)),
        ("b", pa.binary()),
    ]
)


def one(column: str, op: str, value: Any = None) -> list[list[Predicate]]:
    dnf = normalize_filters([(column, op, value)], SCHEMA)
    assert dnf is not None
    return dnf


def stats(lo: Any = None, hi: Any = None, nulls: int | None = 0) -> dict[str, ColumnStats]:
    return {"i": ColumnStats(lo, hi, nulls)}


def parquet_stats(table: pa.Table, row_group_size: int | None = None) -> dict[str, Any]:
    sink = pa.BufferOutputStream()
    writer = pq.ParquetWriter(sink, table.schema)
    writer.write_table(table, row_group_size=row_group_size)
    writer.close()
    return json.loads(json.dumps(file_column_stats(writer.writer.metadata, table.schema), allow_nan=False))


# ------------------------------------------------------------------------------------------
# normalize_filters


def test_shapes_and_canonical_ops() -> None:
    conj = normalize_filters([("i", "=", 1), ("s", "IS  NOT NULL")], SCHEMA)
    assert conj == [[Predicate("i", "==", 1), Predicate("s", "is not null")]]
    disj = normalize_filters([[("i", ">", 1)], [["s", "in", ["a", "b"]], ("i", "is null", "ignored")]], SCHEMA)
    assert disj == [[Predicate("i", ">", 1)], [Predicate("s", "in", frozenset({"a", "b"})), Predicate("i", "is null")]]
    assert normalize_filters(None, SCHEMA) is None
    assert normalize_filters([], SCHEMA) is None
    assert filter_columns(disj) == {"i", "s"}


def test_literals_are_normalized_per_column() -> None:
    (terms,) = normalize_filters(
        [
            ("d", ">=", "2024-01-02"),
            ("t", "<", datetime(2024, 1, 1, 1, tzinfo=UTC)),
            ("dec", "in", {1, "2.5", Decimal("0.10")}),
            ("f", "==", 3),
        ],
        SCHEMA,
    )  # type: ignore[misc]
    assert terms[0].value == date(2024, 1, 2)
    assert terms[1].value == 1704070800000
    assert terms[2].value == frozenset({Decimal(1), Decimal("2.5"), Decimal("0.1")})
    assert terms[3].value == 3.0 and isinstance(terms[3].value, float)


def test_unknown_column_is_named_with_the_dataset_columns() -> None:
    with pytest.raises(ValueError) as info:
        normalize_filters([("nope", "==", 1)], SCHEMA)
    message = str(info.value)
    assert "'nope'" in message and "'i'" in message and "'dec'" in message


def test_unknown_op_lists_the_supported_ops() -> None:
    with pytest.raises(ValueError) as info:
        normalize_filters([("i", "~=", 1)], SCHEMA)
    message = str(info.value)
    assert "'~='" in message and all(op in message for op in SUPPORTED_OPS)


def test_bad_literal_names_column_type_and_value() -> None:
    with pytest.raises(TypeError, match=r"column 'i' is int64; cannot compare with 'abc'"):
        normalize_filters([("i", "==", "abc")], SCHEMA)
    with pytest.raises(ValueError, match=r"column 'd' is date32\[day\]; cannot compare with '2024-13-01'"):
        normalize_filters([("d", "<", "2024-13-01")], SCHEMA)
    with pytest.raises(TypeError, match="column 't'.*time-zone aware"):
        normalize_filters([("t", "<", datetime(2024, 1, 1))], SCHEMA)
    with pytest.raises(TypeError, match="column 'b' is binary; cannot compare with"):
        normalize_filters([("b", "==", object())], SCHEMA)


@pytest.mark.parametrize(
    ("filters", "exc", "fragment"),
    [
        ("i == 1", TypeError, "list of (column, op, value) tuples"),
        ({"i": 1}, TypeError, "list of (column, op, value) tuples"),
        ([("i", "==", 1), [("i", "==", 2)]], ValueError, "malformed filter term"),
        ([[("i", "==", 1)], "i"], ValueError, "not a list of terms"),
        ([[]], ValueError, "empty conjunction"),
        ([[("i", "==", 1)], []], ValueError, "empty conjunction"),
        ([[("i", "==", 1)], [("i",)]], ValueError, "malformed filter term"),
        ([[(1, "==", 1)]], ValueError, "malformed filter term"),
        ([("i", "==")], ValueError, "needs a value"),
        ([("i", "==", None)], ValueError, "is null"),
        ([("i", "!=", None)], ValueError, "is null"),
        ([("i", "in", 5)], TypeError, "needs a collection"),
        ([("s", "in", "abc")], TypeError, "needs a collection"),
        ([("i", "not in", [1, None])], ValueError, "is null"),
        ([("i", 3, 1)], ValueError, "unknown operator"),
    ],
)
def test_malformed_filters(filters: Any, exc: type, fragment: str) -> None:
    with pytest.raises(exc) as info:
        normalize_filters(filters, SCHEMA)
    assert fragment in str(info.value)


def test_in_accepts_any_collection() -> None:
    expected = frozenset({1, 2})
    for values in ([1, 2], (1, 2), {1, 2}, frozenset({2, 1}), range(1, 3), pa.array([1, 2]), iter([1, 2])):
        assert one("i", "in", values)[0][0].value == expected


def test_columns_without_statistics_keep_their_literal_and_are_never_pruned() -> None:
    (terms,) = normalize_filters([("b", "==", b"x"), ("b", "in", [b"y"])], SCHEMA)  # type: ignore[misc]
    assert terms[0] == Predicate("b", "==", b"x") and not terms[0].prunable
    assert terms[1].value == (b"y",) and not terms[1].prunable
    # even nonsensical "statistics" for it prove nothing
    assert might_match([[terms[0]]], {"b": ColumnStats("a", "a", 0)}, 10)
    table = pa.table({"b": pa.array([b"x", b"y", None])})
    assert table.filter(to_expression([terms])).num_rows == 0
    assert table.filter(to_expression([[terms[0]], [terms[1]]])).column("b").to_pylist() == [b"x", b"y"]


# ------------------------------------------------------------------------------------------
# might_match: one rule at a time


@pytest.mark.parametrize(
    ("op", "value", "lo", "hi", "expected"),
    [
        ("==", 5, 1, 10, True),
        ("==", 0, 1, 10, False),
        ("==", 11, 1, 10, False),
        ("==", 1, 1, 10, True),
        ("==", 10, 1, 10, True),
        ("<", 1, 1, 10, False),
        ("<", 2, 1, 10, True),
        ("<=", 0, 1, 10, False),
        ("<=", 1, 1, 10, True),
        (">", 10, 1, 10, False),
        (">", 9, 1, 10, True),
        (">=", 11, 1, 10, False),
        (">=", 10, 1, 10, True),
        ("in", [0, 11, 20], 1, 10, False),
        ("in", [0, 10], 1, 10, True),
        ("in", [], 1, 10, False),
        ("!=", 5, 5, 5, False),
        ("!=", 4, 5, 5, True),
        ("!=", 5, 1, 10, True),
        ("not in", [5, 6], 5, 5, False),
        ("not in", [6], 5, 5, True),
        ("not in", [1, 10], 1, 10, True),
        ("==", 1.5, 1, 2, True),  # non-integral literals compare exactly
        ("<", 1.5, 2, 3, False),
        ("==", 1000, -128, 127, False),
    ],
)
def test_min_max_rules(op: str, value: Any, lo: Any, hi: Any, expected: bool) -> None:
    assert might_match(one("i", op, value), stats(lo, hi, 0), 10) is expected
    # nulls in the file never make a comparison match
    assert might_match(one("i", op, value), stats(lo, hi, 3), 10) is expected


@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null"])
def test_missing_statistics_are_conservative(op: str) -> None:
    value = [5] if op in ("in", "not in") else 5
    dnf = one("i", op, value)
    assert might_match(dnf, {}, 10)  # no statistics for the column
    assert might_match(dnf, {"i": ColumnStats(None, None, None)}, 10)
    assert might_match(dnf, {"i": ColumnStats(None, None, None)}, None)
    assert might_match(dnf, {"i": ColumnStats(None, None, 3)}, None)
    assert might_match(dnf, {"i": ColumnStats(None, None, 3)}, 10)


def test_one_sided_statistics() -> None:
    assert not might_match(one("i", "<", 3), stats(lo=5), 10)
    assert might_match(one("i", ">", 3), stats(lo=5), 10)
    assert not might_match(one("i", ">", 3), stats(hi=2), 10)
    assert might_match(one("i", "==", 3), stats(hi=4), 10)
    assert might_match(one("i", "in", [1, 9]), stats(lo=5, hi=None), 10)
    assert not might_match(one("i", "in", [1, 2]), stats(lo=5, hi=None), 10)
    assert might_match(one("i", "!=", 3), stats(lo=3), 10)


def test_null_rules() -> None:
    assert not might_match(one("i", "is null"), stats(1, 2, 0), 10)
    assert might_match(one("i", "is null"), stats(1, 2, 1), 10)
    assert might_match(one("i", "is not null"), stats(1, 2, 9), 10)
    assert not might_match(one("i", "is not null"), stats(None, None, 10), 10)
    assert might_match(one("i", "is not null"), stats(None, None, 10), None)  # needs the row count


@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">=", "in", "not in"])
def test_an_all_null_file_matches_no_comparison(op: str) -> None:
    value = [5] if op in ("in", "not in") else 5
    assert not might_match(one("i", op, value), stats(None, None, 10), 10)
    assert might_match(one("i", "is null"), stats(None, None, 10), 10)


def test_empty_files_match_nothing_and_bool_answers() -> None:
    assert not might_match(one("i", "is null"), {}, 0)
    assert might_match(None, {}, 0) and might_match(True, {}, 5) and not might_match(False, {}, 5)


def test_disjunction_needs_every_conjunction_disproved() -> None:
    dnf = normalize_filters([[("i", "<", 0)], [("i", ">", 100), ("s", "==", "x")]], SCHEMA)
    assert not might_match(dnf, stats(1, 50), 10)
    assert might_match(dnf, stats(1, 500), 10)
    assert not might_match(dnf, {**stats(1, 500), "s": ColumnStats("y", "z", 0)}, 10)


def test_in_with_many_values_uses_ordering() -> None:
    values = list(range(0, 200_000, 2))
    dnf = one("i", "in", values)
    assert might_match(dnf, stats(1001, 1003), 10)  # 1002
    assert not might_match(dnf, stats(1001, 1001), 10)
    assert not might_match(dnf, stats(200_000, 300_000), 10)
    assert might_match(dnf, stats(-5, 0), 10)


def test_not_equal_and_not_in_on_floats_never_prune() -> None:
    """Parquet float min/max leave NaN out, and NaN satisfies != and not in."""
    table = pa.table({"f": [1.0, float("nan"), None]})
    raw = parquet_stats(table)
    assert raw["f"] == {"null_count": 1, "min": 1.0, "max": 1.0}
    file_stats = decode_stats(raw, table.schema)
    for filters in ([("f", "!=", 1.0)], [("f", "not in", [1.0])]):
        dnf = normalize_filters(filters, table.schema)
        assert might_match(dnf, file_stats, 3)
        assert table.filter(to_expression(dnf)).num_rows == 1  # the NaN row
    for filters in ([("f", ">", 1.0)], [("f", "<", 1.0)], [("f", "==", 2.0)], [("f", "in", [2.0])]):
        dnf = normalize_filters(filters, table.schema)
        assert not might_match(dnf, file_stats, 3)
        assert table.filter(to_expression(dnf)).num_rows == 0


def test_partition_stats() -> None:
    assert partition_stats(5, 10) == ColumnStats(5, 5, 0)
    assert partition_stats(None, 10) == ColumnStats(None, None, 10)
    assert not might_match(one("i", "==", 4), {"i": partition_stats(5, 10)}, 10)
    assert not might_match(one("i", "!=", 5), {"i": partition_stats(5, 10)}, 10)
    assert not might_match(one("i", "==", 5), {"i": partition_stats(None, 10)}, 10)
    assert might_match(one("i", "is null"), {"i": partition_stats(None, 10)}, 10)


def test_foreign_domain_statistics_prove_nothing() -> None:
    assert might_match(one("i", "<", 5), {"i": ColumnStats("a", "b", 0)}, 10)


# ------------------------------------------------------------------------------------------
# residual_filters


def test_residual_simplification() -> None:
    dnf = normalize_filters([[("i", "==", 1), ("s", "==", "x")], [("i", ">", 5)]], SCHEMA)
    assert residual_filters(dnf, {"i": 1}) == [[Predicate("s", "==", "x")]]
    assert residual_filters(dnf, {"i": 7}) is True
    assert residual_filters(dnf, {"i": 3}) is False
    assert residual_filters(dnf, {"i": None}) is False  # comparisons with null are false
    assert residual_filters(dnf, {}) == dnf
    assert residual_filters(None, {"i": 1}) is None
    nulls = normalize_filters([[("i", "is null")], [("i", "!=", 3)], [("i", "not in", [3])]], SCHEMA)
    assert residual_filters(nulls, {"i": None}) is True
    assert residual_filters(nulls, {"i": 3}) is False
    assert residual_filters(nulls, {"i": 4}) is True
    assert residual_filters(normalize_filters([("d", "in", ["2024-01-01"])], SCHEMA), {"d": date(2024, 1, 1)}) is True


def test_residual_rejects_undecoded_constants() -> None:
    dnf = normalize_filters([("d", "==", "2024-01-01")], SCHEMA)
    with pytest.raises(TypeError, match="decode_value"):
        residual_filters(dnf, {"d": "2024-01-01"})
    with pytest.raises(TypeError, match="decode_value"):
        residual_filters(one("i", "==", 1), {"i": True})


def test_residual_keeps_nan_constants_and_columns_without_statistics() -> None:
    dnf = normalize_filters([("f", "!=", 1.0), ("b", "==", b"x")], SCHEMA)
    assert residual_filters(dnf, {"f": float("nan"), "b": b"x"}) == dnf


# ------------------------------------------------------------------------------------------
# plan_files


def test_plan_files_combines_partitions_and_statistics() -> None:
    schema = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("s", pa.string())])
    day = {"day": "2024-01-01"}
    other_day = {"day": "2024-01-02"}
    files = [
        ({"id": {"null_count": 0, "min": 0, "max": 9}}, day, 10),  # overlaps id < 5: filter rows
        ({"id": {"null_count": 0, "min": 10, "max": 19}}, day, 10),  # statistics prune it
        ({"id": {"null_count": 0, "min": 0, "max": 9}}, other_day, 10),  # partition prunes it
        ({}, day, 10),  # no statistics: kept
        (None, {"day": None}, 10),  # null partition: only "is null" matches it
        ({"id": {"null_count": 0, "min": 0, "max": 4}}, day, 0),  # empty file
    ]
    dnf = normalize_filters([("day", "==", date(2024, 1, 1)), ("id", "<", 5)], schema)
    residual = [[Predicate("id", "<", 5)]]
    assert plan_files(dnf, schema, files) == [residual, False, False, residual, False, False]
    # a filter on the partition column only: no row filter at all
    only_day = normalize_filters([[("day", "==", "2024-01-02")], [("day", "is null")]], schema)
    assert plan_files(only_day, schema, files) == [False, False, True, False, True, False]
    assert plan_files(None, schema, files) == [None] * len(files)


def test_plan_files_rejects_malformed_entries() -> None:
    schema = pa.schema([("id", pa.int64()), ("day", pa.date32())])
    dnf = normalize_filters([("id", "<", 5)], schema)
    with pytest.raises(ValueError, match="column 'id'"):
        plan_files(dnf, schema, [({"id": {"min": "0", "max": 3}}, None, 10)])
    with pytest.raises(ValueError):
        plan_files(dnf, schema, [(None, {"day": [2024]}, 10)])
    with pytest.raises(ValueError, match="not an object"):
        decode_stats([1, 2], schema)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------
# to_expression


def test_null_semantics_of_the_row_filter() -> None:
    table = pa.table({"i": pa.array([1, 2, None, 3]), "s": pa.array(["a", None, "b", "c"])})
    schema = table.schema

    def rows(filters: Any) -> list[Any]:
        return table.filter(to_expression(normalize_filters(filters, schema))).column("i").to_pylist()

    assert rows([("i", "!=", 1)]) == [2, 3]
    assert rows([("i", "not in", [1, 2])]) == [3]
    assert rows([("i", "in", [1, 2])]) == [1, 2]
    assert rows([("i", "is null")]) == [None]
    assert rows([("i", "is not null")]) == [1, 2, 3]
    assert rows([[("i", "==", 1)], [("s", "!=", "b")]]) == [1, 3]
    assert rows([[("i", "!=", 2), ("s", "!=", "a")]]) == [3]
    assert table.filter(to_expression(True)).num_rows == 4
    assert table.filter(to_expression(False)).num_rows == 0


@pytest.mark.parametrize(
    ("typ", "values", "op", "literal", "expected"),
    [
        (pa.int8(), [-128, 0, 127, None], "<", 1000, [-128, 0, 127]),
        (pa.int8(), [-128, 0, 127, None], "!=", 1000, [-128, 0, 127]),
        (pa.int8(), [-128, 0, 127, None], "==", -1000, []),
        (pa.int8(), [-128, 0, 127, None], ">", -1000, [-128, 0, 127]),
        (pa.uint64(), [0, 2**64 - 1, None], ">", -1, [0, 2**64 - 1]),
        (pa.uint64(), [0, 2**64 - 1, None], ">=", 2**63, [2**64 - 1]),
        (pa.int64(), [1, 2, None], "<", 1.5, [1]),
        (pa.int64(), [1, 2, None], ">", 1.5, [2]),
        (pa.int64(), [1, 2, None], "==", 1.5, []),
        (pa.int64(), [1, 2, None], "!=", 1.5, [1, 2]),
        (pa.int64(), [1, 2, None], "in", [1.5, 2, 2**70], [2]),
        (pa.int64(), [1, 2, None], "not in", [1.5, 2, 2**70], [1]),
        (pa.decimal128(5, 2), [Decimal("1.23"), Decimal("1.24"), None], "<=", Decimal("1.235"), [Decimal("1.23")]),
        (pa.decimal128(5, 2), [Decimal("1.23"), Decimal("1.24"), None], ">", "1.235", [Decimal("1.24")]),
        (pa.decimal128(5, 2), [Decimal("1.23"), Decimal("1.24"), None], "<", 10**6, [Decimal("1.23"), Decimal("1.24")]),
        (pa.decimal128(5, 2), [Decimal("1.23"), None], "==", 1.23, [Decimal("1.23")]),
        (pa.decimal128(5, 2), [Decimal("1.23"), None], "in", [Decimal("1.230"), Decimal("1.2301")], [Decimal("1.23")]),
        (pa.float32(), [0.1, 0.2, None], "==", 0.1, [pytest.approx(0.1)]),
        (pa.timestamp("s"), [0, 10, None], ">", datetime(2262, 1, 1), []),
        (pa.timestamp("ns"), [0, 10, None], "<", datetime(2300, 1, 1), [0, 10]),
        (pa.date64(), [date(2020, 1, 1), None], "==", "2020-01-01", [date(2020, 1, 1)]),
    ],
)
def test_literals_the_column_cannot_hold(
    typ: pa.DataType, values: list[Any], op: str, literal: Any, expected: list[Any]
) -> None:
    table = pa.table({"x": pa.array(values, typ)})
    dnf = normalize_filters([("x", op, literal)], table.schema)
    result = table.filter(to_expression(dnf)).column("x")
    if pa.types.is_timestamp(typ):
        result = result.cast(pa.int64())
    assert result.to_pylist() == expected


# ------------------------------------------------------------------------------------------
# Properties on random data


# Small value pools, so that literals, file min/max and row values collide often.
POOLS: dict[str, list[Any]] = {
    "i": list(range(-5, 6)),
    "s": ["", "a", "ab", "b", "é", "z", "😀"],
    "d": [date(2024, 1, 1) + timedelta(days=k) for k in range(-3, 4)],
    "t": [datetime(2024, 1, 1, 12, tzinfo=UTC) + timedelta(hours=h) for h in range(-3, 4)],
    "dec": [Decimal(k) / 4 for k in range(-6, 7)],
    "f": [-1.5, -0.0, 0.0, 2.0, 2.5, float("nan")],
    "p": [0, 1, 2, 3],
    "u": [0, 1, 254, 255],
    "bo": [False, True],
    "ns": [-(2**63), -1, 0, 1, 10**18, 2**63 - 1],
    "ls": ["a", "b", "bb"],
}
TYPES = {
    "i": pa.int16(),
    "s": pa.string(),
    "d": pa.date32(),
    "t": pa.timestamp("ms", tz="Europe/Paris"),
    "dec": pa.decimal128(4, 2),
    "f": pa.float64(),
    "p": pa.int32(),
    "u": pa.uint8(),
    "bo": pa.bool_(),
    "ns": pa.timestamp("ns"),
    "ls": pa.large_string(),
}
PROP_SCHEMA = pa.schema(list(TYPES.items()))
# Literals besides the held values: ones the column cannot hold exactly, or at all.
EXTRA_LITERALS: dict[str, list[Any]] = {
    "i": [-(2**40), 2**40, 40_000, -40_000, -5.5, -0.5, 0.5, 4.5, 5.5, 7.25, -9],
    "s": ["aa", "c", "\x00", "😀😀", "A", "éé"],
    "d": ["2023-12-31", "2024-01-03", "2023-06-01", "2025-01-01"],
    "t": ["2024-01-01T12:00:00Z", "2024-01-01T14:00:00+02:00", "2023-01-01T00:00:00Z", "2024-01-01T11:30:00Z"],
    "dec": [Decimal("-1.495"), Decimal("0.005"), Decimal("0.255"), Decimal("1.245"), Decimal("-100"), 100, 1e30, -2, 0],
    "f": [-1.25, 0.25, 2.25, 2.75, 10.0, -10.0, math.inf, -math.inf],
    "p": [-1, 4],
    "u": [-1, 256, 2**70, -(2**70), 0.5, 254.5],
    "bo": [],
    "ns": [2**63, -(2**63) - 1, datetime(2262, 4, 12), datetime(1677, 9, 21), "1970-01-01T00:00:00", date(1970, 1, 2)],
    "ls": ["", "ab", "c"],
}


def literals(column: str) -> list[Any]:
    return [v for v in POOLS[column] if not (isinstance(v, float) and math.isnan(v))] + EXTRA_LITERALS[column]


def literal(column: str) -> st.SearchStrategy[Any]:
    return st.sampled_from(literals(column))


def single_terms(column: str) -> list[tuple[Any, ...]]:
    """Every single-term filter on ``column`` over its literals (and a few value lists)."""
    values = literals(column)
    lists = [[], *([v] for v in values), values[:2], values[-3:], values[::2]]
    terms: list[tuple[Any, ...]] = [(column, "is null"), (column, "is not null")]
    for op in ("==", "!=", "<", "<=", ">", ">="):
        terms += [(column, op, v) for v in values]
    for op in ("in", "not in"):
        terms += [(column, op, v) for v in lists]
    return terms


@st.composite
def random_table(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(0, 60))
    columns = {}
    for name, pool in POOLS.items():
        nulls = draw(st.sampled_from(["none", "some", "all"]))
        column = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n)) if nulls != "all" else [None] * n
        if nulls == "some":
            mask = draw(st.lists(st.booleans(), min_size=n, max_size=n))
            column = [None if m else v for m, v in zip(mask, column, strict=True)]
        columns[name] = pa.array(column, TYPES[name])
    table = pa.table(columns)
    sort_key = draw(st.sampled_from([None, *TYPES]))
    if sort_key is not None and n:
        table = table.sort_by(sort_key)  # sorted files make min/max ranges disjoint: pruning happens
    return table


@st.composite
def random_filters(draw: st.DrawFn) -> list[list[tuple[Any, ...]]]:
    # often a single term, so that each term decides the outcome; sometimes a real DNF
    n_conjunctions, n_terms = draw(st.sampled_from([(1, 1), (1, 1), (1, 2), (2, 1), (2, 2), (3, 3)]))
    conjunctions = []
    for _ in range(n_conjunctions):
        terms: list[tuple[Any, ...]] = []
        for _ in range(draw(st.integers(1, n_terms))):
            column = draw(st.sampled_from(sorted(TYPES)))
            op = draw(
                st.sampled_from(["==", "=", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null"])
            )
            if op in ("is null", "is not null"):
                terms.append((column, op))
            elif op in ("in", "not in"):
                terms.append((column, op, draw(st.lists(literal(column), max_size=4))))
            else:
                terms.append((column, op, draw(literal(column))))
        conjunctions.append(terms)
    return conjunctions


@st.composite
def chunks(draw: st.DrawFn, table: pa.Table) -> list[pa.Table]:
    cuts = sorted(draw(st.lists(st.integers(0, table.num_rows), max_size=6)))
    bounds = [0, *cuts, table.num_rows]
    return [table.slice(a, b - a) for a, b in zip(bounds, bounds[1:], strict=False)]


def comparable_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Rows in each column's comparable domain (timestamps as their int64 storage values)."""
    columns = {}
    for name in table.column_names:
        column = table.column(name)
        if pa.types.is_timestamp(column.type):
            column = column.cast(pa.int64())
        columns[name] = column.to_pylist()
    return [{name: columns[name][k] for name in columns} for k in range(table.num_rows)]


def sql_truth(p: Predicate, x: Any) -> bool:
    """A plain-Python SQL evaluation of one term (the reference for ``to_expression``)."""
    if p.op == "is null":
        return x is None
    if p.op == "is not null":
        return x is not None
    if x is None:
        return False
    if p.op == "in":
        return any(x == v for v in p.value)
    if p.op == "not in":
        return (isinstance(x, float) and math.isnan(x)) or all(x != v for v in p.value)
    return {
        "==": lambda: x == p.value,
        "!=": lambda: x != p.value,
        "<": lambda: x < p.value,
        "<=": lambda: x <= p.value,
        ">": lambda: x > p.value,
        ">=": lambda: x >= p.value,
    }[p.op]()


def reference_filter(table: pa.Table, dnf: list[list[Predicate]]) -> list[int]:
    return [
        k
        for k, row in enumerate(comparable_rows(table))
        if any(all(sql_truth(p, row[p.column]) for p in conjunction) for conjunction in dnf)
    ]


def filtered_positions(table: pa.Table, expression: pc.Expression) -> list[int]:
    indexed = table.append_column("__row", pa.array(range(table.num_rows), pa.int64()))
    return indexed.filter(expression).column("__row").to_pylist()


SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@SETTINGS
@given(random_table(), random_filters())
def test_row_filter_is_sql_semantics(table: pa.Table, filters: Any) -> None:
    dnf = normalize_filters(filters, table.schema)
    assert filtered_positions(table, to_expression(dnf)) == reference_filter(table, dnf)


@SETTINGS
@given(st.data(), random_table(), random_filters())
def test_statistics_pruning_is_sound(data: st.DataObject, table: pa.Table, filters: Any) -> None:
    dnf = normalize_filters(filters, table.schema)
    expression = to_expression(dnf)
    columns = filter_columns(dnf)
    kept_rows = 0
    pruned = 0
    files = data.draw(chunks(table))
    raws = [parquet_stats(chunk, row_group_size=data.draw(st.sampled_from([None, 1, 3]))) for chunk in files]
    for chunk, raw in zip(files, raws, strict=True):
        file_stats = decode_stats(raw, chunk.schema, columns=columns)
        if might_match(dnf, file_stats, chunk.num_rows):
            kept_rows += chunk.filter(expression).num_rows
        else:
            pruned += 1
            assert chunk.filter(expression).num_rows == 0, (raw, dnf)
    # reading only the kept files gives the whole answer
    assert kept_rows == table.filter(expression).num_rows
    # plan_files decides the same (no partitions: the residual is the filter itself)
    answers = plan_files(
        dnf, table.schema, [(raw, None, chunk.num_rows) for chunk, raw in zip(files, raws, strict=True)]
    )
    assert answers == [
        dnf if might_match(dnf, decode_stats(raw, chunk.schema), chunk.num_rows) else False
        for chunk, raw in zip(files, raws, strict=True)
    ]
    event(f"pruned files: {min(pruned, 3)}{'+' if pruned >= 3 else ''}")


@SETTINGS
@given(random_table(), random_filters())
def test_partition_pruning_and_residuals_are_exact(table: pa.Table, filters: Any) -> None:
    """Files holding one value of the partition column ``p`` (or only its nulls)."""
    dnf = normalize_filters(filters, table.schema)
    expression = to_expression(dnf)
    parts, planned = [], []
    for value in [None, *sorted(set(table.column("p").drop_null().to_pylist()))]:
        mask = pc.is_null(table.column("p")) if value is None else pc.equal(table.column("p"), value)
        part = table.filter(mask)
        if part.num_rows == 0:
            continue
        constant = decode_value(encode_value(value, TYPES["p"]), TYPES["p"])
        expected = filtered_positions(part, expression)
        residual = residual_filters(dnf, {"p": constant})
        if residual is False:
            assert expected == []
        elif residual is True:
            assert expected == list(range(part.num_rows))
        else:
            assert "p" not in filter_columns(residual)
            assert filtered_positions(part, to_expression(residual)) == expected
        # the partition value used as statistics is sound too
        file_stats = {**decode_stats(parquet_stats(part), part.schema), "p": partition_stats(constant, part.num_rows)}
        if not might_match(dnf, file_stats, part.num_rows):
            assert expected == []
        event(f"residual: {residual if isinstance(residual, bool) else 'filter'}")
        # as the dataset layer stores it: the partition column is not in the file, its value is in the manifest
        parts.append((part, expected))
        planned.append((parquet_stats(part.drop_columns(["p"])), {"p": encode_value(value, TYPES["p"])}, part.num_rows))
    for (part, expected), answer, (raw, values, rows) in zip(
        parts, plan_files(dnf, table.schema, planned), planned, strict=True
    ):
        # the same answer as the primitives one file at a time
        residual = residual_filters(dnf, {"p": decode_value(values["p"], TYPES["p"])})
        if isinstance(residual, bool):
            assert answer is residual
        else:
            assert answer == (residual if might_match(residual, decode_stats(raw, table.schema), rows) else False)
        if answer is False:
            assert expected == []
        elif answer is True:
            assert expected == list(range(part.num_rows))
        else:
            assert "p" not in filter_columns(answer)
            assert filtered_positions(part.drop_columns(["p"]), to_expression(answer)) == expected


def full_table() -> pa.Table:
    """Every pool value of every column, plus a null."""
    n = max(len(pool) for pool in POOLS.values()) + 1
    return pa.table(
        {
            name: pa.array([pool[k] if k < len(pool) else None for k in range(n)], TYPES[name])
            for name, pool in POOLS.items()
        }
    )


@pytest.mark.parametrize("column", sorted(TYPES))
def test_every_single_term_row_filter_is_sql_semantics(column: str) -> None:
    table = full_table()
    for term in single_terms(column):
        dnf = normalize_filters([term], table.schema)
        assert filtered_positions(table, to_expression(dnf)) == reference_filter(table, dnf), term


def window_files(column: str) -> list[pa.Table]:
    """Files holding each contiguous window of the sorted pool, with and without a null (and a NaN for floats)."""
    pool = POOLS[column]
    ordered = sorted(v for v in pool if not (isinstance(v, float) and math.isnan(v)))
    extras: list[list[Any]] = [[], [None]]
    if any(isinstance(v, float) and math.isnan(v) for v in pool):
        extras += [[math.nan], [math.nan, None]]
    files = [[None], [None, None]]
    for a in range(len(ordered)):
        for b in range(a + 1, len(ordered) + 1):
            files += [ordered[a:b] + extra for extra in extras]
    return [pa.table({column: pa.array(values, TYPES[column])}) for values in files]


@pytest.mark.parametrize("column", sorted(TYPES))
def test_every_single_term_prunes_soundly_on_every_window(column: str) -> None:
    terms = [(term, normalize_filters([term], PROP_SCHEMA)) for term in single_terms(column)]
    pruned = 0
    for file in window_files(column):
        file_stats = decode_stats(parquet_stats(file), file.schema)
        for term, dnf in terms:
            if not might_match(dnf, file_stats, file.num_rows):
                pruned += 1
                assert file.filter(to_expression(dnf)).num_rows == 0, (term, file.column(0).to_pylist())
    assert pruned > 0


def test_pruning_actually_prunes_sorted_files() -> None:
    """A non-vacuous check: on files sorted by id, a range filter keeps exactly the overlapping files."""
    table = pa.table({"id": pa.array(range(1000), pa.int64()), "s": [f"k{i:04d}" for i in range(1000)]})
    files = [table.slice(k, 100) for k in range(0, 1000, 100)]
    dnf = normalize_filters([[("id", ">=", 250), ("id", "<", 320)], [("s", "==", "k0901")]], table.schema)
    kept = [k for k, f in enumerate(files) if might_match(dnf, decode_stats(parquet_stats(f), f.schema), f.num_rows)]
    assert kept == [2, 3, 9]
