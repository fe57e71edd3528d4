"""The comparable domain of statistics: column kinds, filter literals, JSON encoding of values.

Pure functions, no I/O. Every supported column type has one *comparable
domain*: the Python values that ``decode_value`` returns and
``normalize_literal`` produces, so that a filter literal and a file's min/max
compare correctly with Python operators:

==============================  ===================  ==========================
Arrow type                      JSON form            comparable value
==============================  ===================  ==========================
int8..int64, uint8..uint64      int                  ``int``
float32, float64                float (finite only)  ``float``
bool                            bool                 ``bool``
string, large_string            str                  ``str`` (code point order
                                                     = UTF-8 byte order)
date32, date64                  "YYYY-MM-DD"         ``datetime.date``
timestamp[unit, tz?]            int (count of the    ``int`` (UTC for tz-aware
                                column's unit)       columns)
decimal128, decimal256          str                  ``decimal.Decimal``
==============================  ===================  ==========================
"""

from __future__ import annotations

import math
import numbers
import struct
from datetime import date, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal, InvalidOperation
from typing import Any

import pyarrow as pa
import pyarrow.lib as palib

#: ``created_by`` prefixes of Parquet writers known to write exact (never
#: truncated) string min/max in column chunk statistics.
EXACT_STRING_STATS_WRITERS: tuple[str, ...] = ("parquet-cpp",)

# Kind of each supported Arrow type id. Everything not listed is unsupported.
_INT, _FLOAT, _BOOL, _STR, _DATE, _TS, _DEC = "int", "float", "bool", "str", "date", "ts", "dec"
_KINDS: dict[int, str] = {
    palib.Type_INT8: _INT,
    palib.Type_INT16: _INT,
    palib.Type_INT32: _INT,
    palib.Type_INT64: _INT,
    palib.Type_UINT8: _INT,
    palib.Type_UINT16: _INT,
    palib.Type_UINT32: _INT,
    palib.Type_UINT64: _INT,
    palib.Type_FLOAT: _FLOAT,
    palib.Type_DOUBLE: _FLOAT,
    palib.Type_BOOL: _BOOL,
    palib.Type_STRING: _STR,
    palib.Type_LARGE_STRING: _STR,
    palib.Type_DATE32: _DATE,
    palib.Type_DATE64: _DATE,
    palib.Type_TIMESTAMP: _TS,
    palib.Type_DECIMAL128: _DEC,
    palib.Type_DECIMAL256: _DEC,
}

_INT_RANGES: dict[int, tuple[int, int]] = {
    palib.Type_INT8: (-(2**7), 2**7 - 1),
    palib.Type_INT16: (-(2**15), 2**15 - 1),
    palib.Type_INT32: (-(2**31), 2**31 - 1),
    palib.Type_INT64: (-(2**63), 2**63 - 1),
    palib.Type_UINT8: (0, 2**8 - 1),
    palib.Type_UINT16: (0, 2**16 - 1),
    palib.Type_UINT32: (0, 2**32 - 1),
    palib.Type_UINT64: (0, 2**64 - 1),
}
_INT64_RANGE = (-(2**63), 2**63 - 1)

_NS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_EPOCH_DATE = date(1970, 1, 1)
# Exact decimal arithmetic for up to decimal256 (76 digits) and any sane literal.
_DEC_CTX = Context(prec=400, Emax=100_000, Emin=-100_000)


def type_kind(typ: pa.DataType) -> str | None:
    """The comparable-domain kind of ``typ`` (``"int"``, ``"float"``, ``"bool"``, ``"str"``,
    ``"date"``, ``"ts"``, ``"dec"``), or ``None`` when statistics are not supported for it."""
    return _KINDS.get(typ.id)


def stats_supported(typ: pa.DataType) -> bool:
    """Whether min/max statistics are kept and used for pruning on columns of type ``typ``.

    True for signed/unsigned ints, float32/float64, bool, string/large_string,
    date32/date64, timestamps (any unit, with or without time zone) and
    decimal128/decimal256. False for everything else: float16, binary, nested,
    dictionary, time, duration, null, and string_view (pyarrow 26 has no
    comparison or filter kernels for it, so it could not be row-filtered).
    """
    return typ.id in _KINDS


# --------------------------------------------------------------------------------------------
# Literals -> comparable domain


def _describe(column: str | None, typ: pa.DataType) -> str:
    return f"column {column!r} is {typ}" if column is not None else f"type {typ}"


def _cannot(column: str | None, typ: pa.DataType, value: Any, why: str = "") -> str:
    return f"{_describe(column, typ)}; cannot compare with {value!r}" + (f": {why}" if why else "")


def _is_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    cls = type(value)
    return cls.__module__ == "numpy" and cls.__name__ in ("bool_", "bool")


def _is_datetime64(value: Any) -> bool:
    cls = type(value)
    return cls.__module__ == "numpy" and cls.__name__ == "datetime64"


def _datetime64_ns(value: Any, column: str | None, typ: pa.DataType) -> int:
    """Exact nanoseconds since the epoch of a numpy datetime64 (naive wall clock)."""
    import numpy as np  # numpy is present whenever a numpy scalar is

    if np.isnat(value):
        raise ValueError(_cannot(column, typ, value, "NaT is null; use 'is null' / 'is not null'"))
    unit, step = np.datetime_data(value.dtype)
    if unit in ("Y", "M", "W"):
        value = value.astype("datetime64[D]")
        unit, step = "D", 1
    per = {
        "D": 86_400_000_000_000,
        "h": 3_600_000_000_000,
        "m": 60_000_000_000,
        "s": 1_000_000_000,
        "ms": 1_000_000,
        "us": 1_000,
        "ns": 1,
    }
    if unit not in per:
        raise ValueError(_cannot(column, typ, value, f"unsupported datetime64 unit {unit!r}"))
    return int(value.astype("int64")) * per[unit] * step


def _datetime_ns(value: datetime) -> int:
    """Exact nanoseconds since the epoch (UTC for aware values, wall clock for naive ones).

    Works for ``datetime`` and ``pandas.Timestamp`` (including its ``nanosecond``)
    with integer arithmetic only, so no overflow or rounding at any date.
    """
    days = value.toordinal() - _EPOCH_ORDINAL
    seconds = days * 86_400 + value.hour * 3_600 + value.minute * 60 + value.second
    ns = seconds * 1_000_000_000 + value.microsecond * 1_000 + int(getattr(value, "nanosecond", 0) or 0)
    offset = value.utcoffset() if value.tzinfo is not None else None
    if offset is not None:
        ns -= (offset.days * 86_400 + offset.seconds) * 1_000_000_000 + offset.microseconds * 1_000
    return ns


def _parse_iso_datetime(text: str, column: str | None, typ: pa.DataType) -> datetime:
    s = text.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(s)
    except ValueError:
        raise ValueError(_cannot(column, typ, text, "not an ISO 8601 date or date-time")) from None


def _norm_int(value: Any, typ: pa.DataType, column: str | None) -> Any:
    if _is_bool(value):
        raise TypeError(_cannot(column, typ, value, "booleans are not integers"))
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(_cannot(column, typ, value, "not a finite number"))
        return int(value) if value == value.to_integral_value() else value
    if isinstance(value, numbers.Real):
        f = float(value)
        if math.isnan(f):
            raise ValueError(_cannot(column, typ, value, "NaN never compares equal or ordered"))
        return int(f) if f.is_integer() else f
    raise TypeError(_cannot(column, typ, value, "expected an integer"))


def _norm_float(value: Any, typ: pa.DataType, column: str | None) -> float:
    if _is_bool(value) or not isinstance(value, (numbers.Real, Decimal)):
        raise TypeError(_cannot(column, typ, value, "expected a number"))
    try:
        f = float(value)
    except OverflowError:
        raise ValueError(_cannot(column, typ, value, "out of the float range")) from None
    if math.isnan(f):
        raise ValueError(_cannot(column, typ, value, "NaN literals are not supported"))
    if typ.id == palib.Type_FLOAT and math.isfinite(f):
        # Compare in the column's own precision (as NumPy does with a Python float).
        try:
            f = struct.unpack("<f", struct.pack("<f", f))[0]
        except OverflowError:
            raise ValueError(_cannot(column, typ, value, "out of the float32 range")) from None
    return f


def _norm_bool(value: Any, typ: pa.DataType, column: str | None) -> bool:
    if _is_bool(value):
        return bool(value)
    raise TypeError(_cannot(column, typ, value, "expected True or False"))


def _norm_str(value: Any, typ: pa.DataType, column: str | None) -> str:
    if not isinstance(value, str):
        raise TypeError(_cannot(column, typ, value, "expected a str"))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(_cannot(column, typ, value, "not encodable as UTF-8")) from None
    return str(value)


def _norm_date(value: Any, typ: pa.DataType, column: str | None) -> date:
    if isinstance(value, datetime):
        if value.tzinfo is not None and value.utcoffset() is not None:
            raise TypeError(_cannot(column, typ, value, "a date column compares with dates, not tz-aware date-times"))
        if (value.hour, value.minute, value.second, value.microsecond, getattr(value, "nanosecond", 0)) != (
            0,
            0,
            0,
            0,
            0,
        ):
            raise ValueError(_cannot(column, typ, value, "it has a time of day; pass a date"))
        return date(value.year, value.month, value.day)
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(_cannot(column, typ, value, "not an ISO date (YYYY-MM-DD)")) from None
    if _is_datetime64(value):
        ns = _datetime64_ns(value, column, typ)
        days, rest = divmod(ns, 86_400_000_000_000)
        if rest:
            raise ValueError(_cannot(column, typ, value, "it has a time of day; pass a date"))
        try:
            return _EPOCH_DATE + timedelta(days=days)
        except OverflowError:
            raise ValueError(_cannot(column, typ, value, "out of the date range")) from None
    raise TypeError(_cannot(column, typ, value, "expected a datetime.date or an ISO date string"))


def _norm_ts(value: Any, typ: pa.DataType, column: str | None) -> int:
    if _is_bool(value):
        raise TypeError(_cannot(column, typ, value, "booleans are not timestamps"))
    if isinstance(value, numbers.Integral):
        return int(value)  # a raw count of the column's unit, as pa.scalar(int, type) reads it
    if isinstance(value, str):
        value = _parse_iso_datetime(value, column, typ)
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if isinstance(value, datetime):
        aware = value.tzinfo is not None and value.utcoffset() is not None
        if typ.tz is None and aware:
            raise TypeError(
                _cannot(column, typ, value, "the column has no time zone; pass a naive datetime (wall-clock time)")
            )
        if typ.tz is not None and not aware:
            raise TypeError(
                _cannot(
                    column,
                    typ,
                    value,
                    "the column is time-zone aware; pass a tz-aware datetime (e.g. tzinfo=datetime.timezone.utc)",
                )
            )
        ns = _datetime_ns(value)
    elif _is_datetime64(value):
        if typ.tz is not None:
            raise TypeError(
                _cannot(column, typ, value, "the column is time-zone aware; pass a tz-aware datetime or pd.Timestamp")
            )
        ns = _datetime64_ns(value, column, typ)
    else:
        raise TypeError(_cannot(column, typ, value, "expected a datetime, date, ISO string or integer count"))
    count, rest = divmod(ns, _NS_PER_UNIT[typ.unit])
    if rest:
        raise ValueError(_cannot(column, typ, value, f"it is more precise than the column's unit ({typ.unit})"))
    return count


def _norm_dec(value: Any, typ: pa.DataType, column: str | None) -> Decimal:
    if _is_bool(value):
        raise TypeError(_cannot(column, typ, value, "booleans are not numbers"))
    if isinstance(value, Decimal):
        d = value
    elif isinstance(value, numbers.Integral):
        d = Decimal(int(value))
    elif isinstance(value, numbers.Real):
        f = float(value)
        if not math.isfinite(f):
            raise ValueError(_cannot(column, typ, value, "not a finite number"))
        d = Decimal(repr(f))  # the shortest decimal that reads back as this float: 0.1 -> Decimal("0.1")
    elif isinstance(value, str):
        try:
            d = Decimal(value.strip())
        except InvalidOperation:
            raise ValueError(_cannot(column, typ, value, "not a decimal number")) from None
    else:
        raise TypeError(_cannot(column, typ, value, "expected a Decimal, int, float or numeric string"))
    if not d.is_finite():
        raise ValueError(_cannot(column, typ, value, "not a finite number"))
    return d


_NORMALIZERS = {
    _INT: _norm_int,
    _FLOAT: _norm_float,
    _BOOL: _norm_bool,
    _STR: _norm_str,
    _DATE: _norm_date,
    _TS: _norm_ts,
    _DEC: _norm_dec,
}


def normalize_literal(value: Any, typ: pa.DataType, *, column: str | None = None) -> Any:
    """Convert a filter literal to the comparable domain of a column of type ``typ``.

    The result compares exactly, with Python operators, against ``decode_value``
    results for the same type. Accepted literals per column kind:

    * ints: ``int``/numpy integers, finite floats and Decimals (an integral one
      becomes ``int``; a fractional one is kept, it still compares exactly).
    * floats: any real number (not NaN); for float32 columns it is rounded to
      float32, so ``("f", "==", 0.1)`` matches the stored ``float32(0.1)``.
    * bool: ``bool``/``numpy.bool_``. strings: ``str``.
    * dates: ``date``, a ``datetime``/``pd.Timestamp`` at midnight without
      time zone, an ISO ``"YYYY-MM-DD"`` string, ``numpy.datetime64``.
    * timestamps: ``datetime``/``pd.Timestamp``/ISO string/``date`` (midnight)/
      ``numpy.datetime64``, or an ``int`` count of the column's unit. A tz-aware
      column needs a tz-aware literal (compared in UTC); a naive column needs a
      naive one. The literal must be exact in the column's unit.
    * decimals: ``Decimal``, ``int``, float (via its shortest repr) or numeric
      string; kept exact, so it may have more digits than the column.

    Args:
        value: the user's literal.
        typ: the column's Arrow type; must satisfy ``stats_supported``.
        column: the column's name, used in error messages.

    Raises:
        TypeError: the type is not supported, or the literal's kind cannot be
            compared with the column (a str for an int column, a naive datetime
            for a tz-aware column, ...).
        ValueError: the literal has the right kind but no exact comparable
            value (``None``, NaN, a time of day for a date column, sub-unit
            precision for a timestamp column, an unparsable string, ...).
    """
    kind = _KINDS.get(typ.id)
    if kind is None:
        raise TypeError(f"{_describe(column, typ)}, which has no comparable statistics")
    if value is None:
        raise ValueError(_cannot(column, typ, value, "use 'is null' / 'is not null' to test for nulls"))
    return _NORMALIZERS[kind](value, typ, column)


# --------------------------------------------------------------------------------------------
# JSON encoding


def _decimal_in_type(d: Decimal, typ: pa.DataType) -> Decimal | None:
    """``d`` at the column's scale if it is exactly representable in ``typ``, else ``None``."""
    try:
        q = d.quantize(Decimal(1).scaleb(-typ.scale), context=_DEC_CTX)
    except InvalidOperation:
        return None
    if q != d or len(q.as_tuple().digits) > typ.precision:
        return None
    return q


def encode_value(value: Any, typ: pa.DataType) -> Any:
    """The canonical JSON form of one value of a column of type ``typ`` (``None`` for null).

    ``value`` may be anything ``normalize_literal`` accepts, but it must be a
    value the column can hold exactly. ``decode_value(encode_value(v, t), t)``
    equals ``normalize_literal(v, t)``, and the JSON form of equal values is
    identical (decimals carry exactly the column's scale).

    Raises:
        TypeError: ``typ`` is not ``stats_supported``, or the value's kind does
            not fit the column.
        ValueError: the value is not encodable: NaN or infinite floats, an int
            outside the type's range, a decimal with more digits than the
            column's scale or precision, a timestamp outside int64.
    """
    if value is None:
        return None
    kind = _KINDS.get(typ.id)
    if kind is None:
        raise TypeError(f"type {typ} has no comparable statistics")
    v = _NORMALIZERS[kind](value, typ, None)
    if kind == _INT:
        lo, hi = _INT_RANGES[typ.id]
        if type(v) is not int or not lo <= v <= hi:
            raise ValueError(f"{value!r} is not a value of type {typ}")
        return v
    if kind == _FLOAT:
        if not math.isfinite(v):
            raise ValueError(f"{value!r} is not encodable: JSON has no infinite floats")
        return v
    if kind == _TS:
        if not _INT64_RANGE[0] <= v <= _INT64_RANGE[1]:
            raise ValueError(f"{value!r} is out of the range of type {typ}")
        return v
    if kind == _DATE:
        return v.isoformat()
    if kind == _DEC:
        q = _decimal_in_type(v, typ)
        if q is None:
            raise ValueError(f"{value!r} is not exactly representable in type {typ}")
        return str(q)
    return v  # bool, str


def _dec_int(raw: Any) -> int:
    if type(raw) is not int:
        raise ValueError(f"expected an integer, got {raw!r}")
    return raw


def _dec_float(raw: Any) -> float:
    if type(raw) not in (int, float) or not math.isfinite(raw):
        raise ValueError(f"expected a finite number, got {raw!r}")
    return float(raw)


def _dec_bool(raw: Any) -> bool:
    if type(raw) is not bool:
        raise ValueError(f"expected a boolean, got {raw!r}")
    return raw


def _dec_str(raw: Any) -> str:
    if type(raw) is not str:
        raise ValueError(f"expected a string, got {raw!r}")
    return raw


def _dec_date(raw: Any) -> date:
    if type(raw) is not str:
        raise ValueError(f"expected an ISO date string, got {raw!r}")
    return date.fromisoformat(raw)


def _dec_decimal(raw: Any) -> Decimal:
    if type(raw) is not str:
        raise ValueError(f"expected a decimal string, got {raw!r}")
    try:
        d = Decimal(raw)
    except InvalidOperation:
        raise ValueError(f"expected a decimal string, got {raw!r}") from None
    if not d.is_finite():
        raise ValueError(f"expected a finite decimal, got {raw!r}")
    return d


_DECODERS = {
    _INT: _dec_int,
    _FLOAT: _dec_float,
    _BOOL: _dec_bool,
    _STR: _dec_str,
    _DATE: _dec_date,
    _TS: _dec_int,
    _DEC: _dec_decimal,
}


def decode_value(raw: Any, typ: pa.DataType) -> Any:
    """The comparable value of ``raw``, a JSON form written by ``encode_value`` for ``typ``.

    ``None`` decodes to ``None``.

    Raises:
        TypeError: ``typ`` is not ``stats_supported``.
        ValueError: ``raw`` is not a JSON form of that type (a malformed manifest).
    """
    if raw is None:
        return None
    kind = _KINDS.get(typ.id)
    if kind is None:
        raise TypeError(f"type {typ} has no comparable statistics")
    return _DECODERS[kind](raw)


# --------------------------------------------------------------------------------------------
# Value ranges (used by pruning)


def int_like_range(typ: pa.DataType) -> tuple[int, int] | None:
    """The inclusive value range of an int or timestamp type, else ``None``."""
    if typ.id == palib.Type_TIMESTAMP:
        return _INT64_RANGE
    return _INT_RANGES.get(typ.id)


def decimal_bounds(value: Decimal, typ: pa.DataType) -> tuple[Decimal | None, Decimal | None]:
    """(largest value of decimal type ``typ`` <= ``value``, smallest >= ``value``); ``None``
    where no such value exists (``value`` below the type's minimum, or above its maximum)."""
    unit = Decimal(1).scaleb(-typ.scale)
    top = (Decimal(10) ** typ.precision - 1).scaleb(-typ.scale, context=_DEC_CTX)
    if value > top:
        return top, None
    if value < -top:
        return None, -top
    floor = value.quantize(unit, rounding=ROUND_FLOOR, context=_DEC_CTX)
    ceil = value.quantize(unit, rounding=ROUND_CEILING, context=_DEC_CTX)
    return floor, ceil
