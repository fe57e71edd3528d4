"""Parse ``--filter "col op value"`` into the dataset layer's DNF terms, by the column's Arrow type.

Grammar: ``COLUMN OP [VALUE]``. ``COLUMN`` is a bare name, or quoted with
``"..."`` or backquotes when it holds spaces or operator characters. ``OP`` is
one of ``== = != < <= > >= in, not in, is null, is not null`` (word operators in
any case). ``VALUE`` parses as the column's type says: integers, floats,
decimals, booleans (``true``/``false``), dates (``2024-05-01``), timestamps
(ISO 8601; a naive value for a time-zone-aware column is taken as UTC) and
strings (quotes optional: ``name == 'a b'``, ``name == a b``). ``in`` and
``not in`` take a comma-separated list, optionally in parentheses:
``region in (eu, "us east")``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import date, datetime, timezone
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa

from ._usage_error import UsageError

_SYMBOL_OPS = ("==", "!=", "<=", ">=", "=", "<", ">")
_WORD_OPS = re.compile(r"(is\s+not\s+null|is\s+null|not\s+in|in)(?=$|[\s(\[])", re.IGNORECASE)
_BARE_COLUMN = re.compile(r"[^\s=!<>]+")
_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}


def _split_column(text: str) -> tuple[str, str]:
    text = text.strip()
    if not text:
        raise UsageError("empty --filter; expected \"COLUMN OP VALUE\", e.g. --filter 'id > 10'")
    if text[0] in '"`':
        end = text.find(text[0], 1)
        if end < 0:
            raise UsageError(f"filter {text!r}: the quoted column name is not closed")
        return text[1:end], text[end + 1 :]
    match = _BARE_COLUMN.match(text)
    assert match is not None  # text is non-empty and stripped
    return match.group(0), text[match.end() :]


def _split_op(rest: str, text: str) -> tuple[str, str]:
    rest = rest.lstrip()
    for op in _SYMBOL_OPS:
        if rest.startswith(op):
            return ("==" if op == "=" else op), rest[len(op) :].strip()
    match = _WORD_OPS.match(rest)
    if match:
        return " ".join(match.group(1).lower().split()), rest[match.end() :].strip()
    raise UsageError(
        f"filter {text!r}: expected an operator after the column "
        "(one of == != < <= > >= in, not in, is null, is not null)"
    )


def _unquote(raw: str) -> tuple[str, bool]:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1], True
    return raw, False


def _split_list(raw: str, text: str) -> list[str]:
    raw = raw.strip()
    if raw[:1] in "([" and raw[-1:] in ")]":
        raw = raw[1:-1]
    items: list[str] = []
    current: list[str] = []
    quote = ""
    for ch in raw:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            current.append(ch)
        elif ch == ",":
            items.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if quote:
        raise UsageError(f"filter {text!r}: a quoted value is not closed")
    items.append("".join(current).strip())
    if any(item == "" for item in items):
        raise UsageError(f"filter {text!r}: empty value in the list; separate values with commas: a, b, c")
    return items


def _bad(text: str, column: str, typ: pa.DataType, value: str, what: str) -> UsageError:
    return UsageError(f"filter {text!r}: {value!r} is not {what} (column {column!r} is {typ})")


def parse_value(raw: str, typ: pa.DataType, column: str, text: str) -> Any:
    """One literal for a column of type ``typ``.

    Raises:
        UsageError: the text is not a value of that type; the message names the column and type.
    """
    value, quoted = _unquote(raw.strip())
    if pa.types.is_dictionary(typ):
        typ = typ.value_type

    def converted(convert: Callable[[str], Any], what: str) -> Any:
        """``convert(value)``; a value it refuses is a UsageError saying the column wants ``what``."""
        try:
            return convert(value)
        except (ValueError, InvalidOperation):
            raise _bad(text, column, typ, value, what) from None

    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ):
        return value
    if not quoted and value.lower() in ("null", "none"):
        raise UsageError(f"filter {text!r}: compare with null using 'is null' or 'is not null'")
    if pa.types.is_integer(typ):
        return converted(int, "an integer")
    if pa.types.is_floating(typ):
        number = converted(float, "a number")
        if math.isnan(number):
            raise _bad(text, column, typ, value, "a comparable number")
        return number
    if pa.types.is_decimal(typ):
        return converted(Decimal, "a decimal number")
    if pa.types.is_boolean(typ):
        lowered = value.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise _bad(text, column, typ, value, "a boolean (true or false)")
    if pa.types.is_date(typ):
        return converted(date.fromisoformat, "a date (YYYY-MM-DD)")
    if pa.types.is_timestamp(typ):
        moment = converted(datetime.fromisoformat, "an ISO 8601 timestamp (2024-05-01T12:00:00)")
        if typ.tz is not None and moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ) or pa.types.is_fixed_size_binary(typ):
        return value.encode("utf-8")
    raise UsageError(f"filter {text!r}: column {column!r} is {typ}, which the command line cannot filter on")


def parse_filter(text: str, schema: pa.Schema) -> tuple[Any, ...]:
    """``"col op value"`` as a DNF term ``(col, op, value)`` (or ``(col, op)`` for null tests).

    Raises:
        UsageError: malformed text, an unknown operator or column (the message
            lists the dataset's columns), or a value that is not of the column's type.
    """
    column, rest = _split_column(text)
    op, raw = _split_op(rest, text)
    if schema.get_field_index(column) < 0:
        raise UsageError(
            f"filter {text!r}: unknown column {column!r}; the dataset's columns are {', '.join(schema.names)}"
        )
    typ = schema.field(column).type
    if op in ("is null", "is not null"):
        if raw:
            raise UsageError(f"filter {text!r}: {op!r} takes no value")
        return (column, op)
    if not raw:
        raise UsageError(f"filter {text!r}: {op!r} needs a value")
    if op in ("in", "not in"):
        return (column, op, [parse_value(item, typ, column, text) for item in _split_list(raw, text)])
    return (column, op, parse_value(raw, typ, column, text))


def describe_filter(term: tuple[Any, ...]) -> str:
    """A term back as text, for output."""
    if len(term) == 2:
        return f"{term[0]} {term[1]}"
    column, op, value = term
    if isinstance(value, list):
        return f"{column} {op} ({', '.join(_literal(v) for v in value)})"
    return f"{column} {op} {_literal(value)}"


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    if isinstance(value, bytes):
        return repr(value)
    return str(value).lower() if isinstance(value, bool) else str(value)
