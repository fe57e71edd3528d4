"""Filters as Spark conditions: the dataset layer's normalized DNF, with the same results as ``read_dataset``.

Spark's SQL comparisons differ from Arrow's (and so from ``read_dataset``) in two ways that
matter here: NaN equals NaN and sorts above every other value, so ``x > 1.0`` holds for a NaN;
and a literal is coerced to a common type with the column, so ``1.5`` against an int column or
``0.1`` against a float32 one compares as doubles. Building each term from the normalized
predicate (the literal already in the column's domain) and the column's own type gives the
exact comparisons the dataset layer's Arrow filter expressions make.
"""

from __future__ import annotations

import datetime as dt
import functools
import operator
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..dataset.engine import DNF, Predicate, discrete_bounds, type_kind

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["spark_column", "spark_filter"]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_EPOCH = dt.datetime(1970, 1, 1)
_MICROS_PER_UNIT = {"s": 1_000_000, "ms": 1_000, "us": 1}


def spark_column(name: str) -> Column:
    """The Spark column ``name``, quoted (any name works, dots and backticks included)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


class _Beyond(Exception):
    """A literal lies beyond every value Spark can compare it with (``above``: on the high side)."""

    def __init__(self, above: bool) -> None:
        self.above = above


def _literal(v: Any, typ: pa.DataType, kind: str | None) -> Column:
    """The Spark literal for ``v``, a value in the comparable domain of a column of Arrow type ``typ``.

    Raises:
        _Beyond: a timestamp outside the years 1-9999 (no such value in a Spark column).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if kind == "ts":
        unit = typ.unit  # type: ignore[attr-defined]
        micros = v // 1000 if unit == "ns" else v * _MICROS_PER_UNIT[unit]  # Spark holds microseconds
        if typ.tz is not None:  # type: ignore[attr-defined]
            return F.timestamp_micros(F.lit(micros))
        try:
            wall = _EPOCH + dt.timedelta(microseconds=micros)
        except OverflowError:
            raise _Beyond(micros > 0) from None
        return F.expr(f"TIMESTAMP_NTZ '{wall.isoformat(sep=' ')}'")
    if kind in ("int", "dec") and isinstance(v, int) and not _INT64_MIN <= v <= _INT64_MAX:
        return F.lit(Decimal(v))  # unsigned 64-bit columns are decimal(20, 0) in Spark
    if kind == "float":
        return F.lit(float(v)).cast(T.FloatType() if pa.types.is_float32(typ) else T.DoubleType())
    return F.lit(v)


def _comparison(p: Predicate, col: Column) -> Column:
    from pyspark.sql import functions as F

    op, v, typ = p.op, p.value, p.arrow_type
    kind = type_kind(typ) if (typ is not None and p.prunable) else None
    false, valid = F.lit(False), col.isNotNull()
    if typ is None or kind is None:  # a type without statistics: the literal as given
        return {  # type: ignore[no-any-return]
            "==": col.__eq__,
            "!=": col.__ne__,
            "<": col.__lt__,
            "<=": col.__le__,
            ">": col.__gt__,
            ">=": col.__ge__,
        }[op](F.lit(v))
    floor = ceil = v
    if kind in ("int", "ts", "dec"):
        floor, ceil = discrete_bounds(v, typ, kind)
    exact = floor is not None and floor == ceil
    try:
        if op == "==":
            return col == _literal(floor, typ, kind) if exact else false
        if op == "!=":
            return col != _literal(floor, typ, kind) if exact else valid
        if op in ("<", "<="):
            if floor is None:
                return false
            return col < _literal(floor, typ, kind) if op == "<" and exact else col <= _literal(floor, typ, kind)
        if ceil is None:
            return false
        term = col > _literal(ceil, typ, kind) if op == ">" and exact else col >= _literal(ceil, typ, kind)
    except _Beyond as beyond:
        if op == "==":
            return false
        if op == "!=":
            return valid
        return valid if beyond.above == (op in ("<", "<=")) else false
    if kind == "float":
        term = term & ~F.isnan(col)  # NaN sorts above everything in Spark; for Arrow it compares false
    return term


def _value_list(p: Predicate) -> list[Column]:
    from pyspark.sql import functions as F

    typ = p.arrow_type
    values = list(p.sorted_values if p.sorted_values is not None else p.value)
    kind = type_kind(typ) if (typ is not None and p.prunable) else None
    if typ is None or kind is None:
        return [F.lit(v) for v in values]
    if kind in ("int", "ts", "dec"):
        exact = []
        for v in values:  # values the column cannot hold can neither match nor exclude anything
            floor, ceil = discrete_bounds(v, typ, kind)
            if floor is not None and floor == ceil:
                exact.append(floor)
        values = exact
    out = []
    for v in values:
        try:
            out.append(_literal(v, typ, kind))
        except _Beyond:
            continue
    return out


def _spark_term(p: Predicate) -> Column:
    from pyspark.sql import functions as F

    col = spark_column(p.column)
    if p.op == "is null":
        return col.isNull()
    if p.op == "is not null":
        return col.isNotNull()
    if p.op in ("in", "not in"):
        values = _value_list(p)
        if not values:
            return F.lit(False) if p.op == "in" else col.isNotNull()
        return col.isin(*values) if p.op == "in" else ~col.isin(*values) & col.isNotNull()
    return _comparison(p, col)


def spark_filter(dnf: DNF) -> Column:
    """The Spark condition for a normalized filter (``normalize_filters``; ``plan_read(...).filters``).

    ``DataFrame.where`` with it keeps exactly the rows ``read_dataset`` keeps
    with the same filters: SQL null semantics (a null satisfies only
    ``is null``), a NaN satisfies only ``!=`` and ``not in`` (Spark alone would
    also let it satisfy ``>``/``>=``), and literals compare exactly with the
    column's own type (``1.5`` against an int column, ``0.1`` against a
    float32 one, a timestamp against a naive or a tz-aware column whatever the
    session time zone). Nanosecond timestamps compare at Spark's microsecond
    precision.

    Raises:
        ValueError: an empty filter.
    """
    if not dnf:
        raise ValueError("spark_filter needs at least one conjunction")
    from pyspark.sql import functions as F

    conjunctions = [
        functools.reduce(operator.and_, [_spark_term(p) for p in conjunction]) if conjunction else F.lit(True)
        for conjunction in dnf
    ]
    return functools.reduce(operator.or_, conjunctions)
