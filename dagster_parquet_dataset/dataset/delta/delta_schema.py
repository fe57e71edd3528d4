"""Arrow schemas as Delta sees them: Spark's JSON ``schemaString``, and the names and types Delta
cannot hold without column mapping (refused before anything is written)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.types as pat

#: Characters a column name may not contain in a Delta table without column mapping.
FORBIDDEN_NAME_CHARS = " ,;{}()\n\t="

_PRIMITIVES: tuple[tuple[Any, str], ...] = (
    (pat.is_boolean, "boolean"),
    (pat.is_int8, "byte"),
    (pat.is_int16, "short"),
    (pat.is_int32, "integer"),
    (pat.is_int64, "long"),
    (pat.is_float32, "float"),
    (pat.is_float64, "double"),
    (pat.is_string, "string"),
    (pat.is_large_string, "string"),
    (pat.is_binary, "binary"),
    (pat.is_large_binary, "binary"),
    (pat.is_date32, "date"),
)


def _type(typ: pa.DataType, where: str) -> Any:
    """The Spark JSON form of ``typ``. Raises ``ValueError`` naming ``where`` for a type Delta has not."""
    for test, name in _PRIMITIVES:
        if test(typ):
            return name
    if pat.is_timestamp(typ):
        return "timestamp" if typ.tz is not None else "timestamp_ntz"
    if pat.is_decimal(typ) and typ.precision <= 38:
        return f"decimal({typ.precision},{typ.scale})"
    if pat.is_list(typ) or pat.is_large_list(typ):
        return {
            "type": "array",
            "elementType": _type(typ.value_type, f"{where} (its items)"),
            "containsNull": typ.value_field.nullable,
        }
    if pat.is_map(typ):
        return {
            "type": "map",
            "keyType": _type(typ.key_type, f"{where} (its keys)"),
            "valueType": _type(typ.item_type, f"{where} (its values)"),
            "valueContainsNull": typ.item_field.nullable,
        }
    if pat.is_struct(typ):
        return {"type": "struct", "fields": _fields(list(typ), where)}
    if pat.is_unsigned_integer(typ):
        why = "Delta has no unsigned integers; cast it to a signed type wide enough for its values"
    else:
        why = "Delta has no such type; cast it to one Delta has (see docs/delta.md)"
    raise ValueError(f"column {where!r} has type {typ}, which a Delta table cannot hold: {why}")


def _fields(fields: list[pa.Field], parent: str | None) -> list[dict[str, Any]]:
    seen: dict[str, str] = {}
    out = []
    for f in fields:
        where = f.name if parent is None else f"{parent}.{f.name}"
        bad = sorted({repr(c) for c in f.name if c in FORBIDDEN_NAME_CHARS})
        if bad:
            raise ValueError(
                f"column {where!r} cannot be a Delta column: without column mapping Delta refuses names "
                f"containing any of ' ,;{{}}()\\n\\t=' (it has {', '.join(bad)}); rename it"
            )
        if f.name.lower() in seen:
            raise ValueError(
                f"columns {seen[f.name.lower()]!r} and {where!r} cannot both be Delta columns: Delta column "
                "names must be unique ignoring case; rename one"
            )
        seen[f.name.lower()] = where
        out.append({"name": f.name, "type": _type(f.type, where), "nullable": f.nullable, "metadata": {}})
    return out


def check_delta_schema(schema: pa.Schema, *, key: str) -> None:
    """Refuse a schema a Delta table cannot hold without column mapping.

    Raises:
        ValueError: a column name with one of `` ,;{}()\\n\\t=``, two names equal ignoring case, or a
            type Delta has not (unsigned integers, time, duration, ...); the message names the column.
    """
    try:
        _fields(list(schema), None)
    except ValueError as exc:
        raise ValueError(f"dataset {key!r} keeps a Delta log (delta_log=True): {exc}") from None


def spark_schema(schema: pa.Schema) -> str:
    """The Delta ``schemaString`` of ``schema`` (Spark's JSON form).

    Raises:
        ValueError: as :func:`check_delta_schema`.
    """
    return json.dumps({"type": "struct", "fields": _fields(list(schema), None)}, separators=(",", ":"))


def has_naive_timestamps(schema: pa.Schema) -> bool:
    """Whether any column (nested included) is a timestamp without time zone (Delta's ``timestamp_ntz``)."""

    def naive(typ: pa.DataType) -> bool:
        if pat.is_timestamp(typ):
            return typ.tz is None
        if pat.is_list(typ) or pat.is_large_list(typ):
            return naive(typ.value_type)
        if pat.is_map(typ):
            return naive(typ.key_type) or naive(typ.item_type)
        if pat.is_struct(typ):
            return any(naive(f.type) for f in typ)
        return False

    return any(naive(f.type) for f in schema)


def _micro_schema(schema: pa.Schema) -> pa.Schema:
    fields = [
        f.with_type(pa.timestamp("us", f.type.tz)) if pat.is_timestamp(f.type) and f.type.unit == "ns" else f
        for f in schema
    ]
    return pa.schema(fields, metadata=schema.metadata)


def delta_ready(data: pa.Table | pa.RecordBatchReader, *, key: str) -> pa.Table | pa.RecordBatchReader:
    """``data`` as a Delta table can hold it: nanosecond timestamps (top-level columns) cast to
    microseconds, as Delta stores them (sub-microsecond digits are dropped, as Spark drops them).

    Raises:
        ValueError: a column Delta cannot hold (:func:`check_delta_schema`), before anything is read.
    """
    check_delta_schema(data.schema, key=key)
    target = _micro_schema(data.schema)
    if target.equals(data.schema):
        return data
    if isinstance(data, pa.Table):
        return data.cast(target, safe=False)
    batches = (pa.Table.from_batches([b]).cast(target, safe=False).to_batches() for b in data)
    return pa.RecordBatchReader.from_batches(target, (b for chunk in batches for b in chunk))
