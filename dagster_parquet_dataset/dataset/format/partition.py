"""Hive-style partitioning inside a dataset: ``col=value/`` folders.

A partitioned dataset's files do not hold the partition columns (as in
kartothek, Hive and Spark); each file's manifest entry records its partition
values in canonical JSON form, and reads put the columns back with their
original types.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from .stats import decode_value, encode_value

#: The folder value Hive and Spark use for a null (or empty string) partition value.
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"

#: The characters Hive's ``FileUtils.escapePathName`` escapes (as ``%XX``); Spark uses the same set.
#: Everything else, non-ASCII included, stays as it is (UTF-8 in the key).
_HIVE_ESCAPED = frozenset(
    [*map(chr, range(0x20)), '"', "#", "%", "'", "*", "/", ":", "=", "?", "\\", "\x7f", "{", "[", "]", "^"]
)


def _partitionable(typ: pa.DataType) -> bool:
    return bool(
        pat.is_integer(typ)
        or pat.is_string(typ)
        or pat.is_large_string(typ)
        or pat.is_boolean(typ)
        or pat.is_date(typ)
        or pat.is_timestamp(typ)
        or pat.is_decimal(typ)
    )


def check_partition_by(partition_by: Sequence[str] | None, schema: pa.Schema) -> tuple[str, ...]:
    """Validate ``partition_by`` against ``schema``; ``None`` or empty means unpartitioned.

    Raises:
        TypeError: not a list of column names.
        ValueError: an unknown or repeated column, a column whose type cannot
            be a partition (floats, binary, nested), or every column.
    """
    if partition_by is None:
        return ()
    if isinstance(partition_by, (str, bytes)):
        raise TypeError(f"partition_by must be a list of column names, not a single string {partition_by!r}")
    cols = tuple(partition_by)
    for col in cols:
        if not isinstance(col, str):
            raise TypeError(f"partition_by must hold column names, got {col!r}")
        idx = schema.get_field_index(col)
        if idx < 0:
            raise ValueError(f"cannot partition by {col!r}: no such column; the columns are {schema.names}")
        typ = schema.field(idx).type
        if not _partitionable(typ):
            raise ValueError(
                f"cannot partition by {col!r} of type {typ}: partition columns must be integers, "
                "strings, booleans, dates, timestamps or decimals"
            )
    if len(set(cols)) != len(cols):
        raise ValueError(f"partition_by repeats a column: {list(cols)}")
    if len(cols) >= len(schema):
        raise ValueError("partition_by cannot name every column: the files need at least one data column")
    return cols


def _escape(text: str) -> str:
    """``text`` escaped as Hive's ``FileUtils.escapePathName`` does it."""
    return "".join(f"%{ord(ch):02X}" if ch in _HIVE_ESCAPED else ch for ch in text)


def _path_value(value: Any) -> str:
    if value is None or value == "":
        return HIVE_NULL
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return str(value)


def partition_folder(partition_by: Sequence[str], values: Sequence[Any]) -> str:
    """``col=value/col2=value2``, escaped the way Hive and Spark name partition folders.

    Hive's escaping turns ``/``, ``\\``, ``=``, ``%``, control characters
    (NUL included) and a few more into ``%XX``, so no value can leave its
    folder, and leaves everything else, non-ASCII included, as UTF-8. Spark,
    DuckDB and pyarrow (``partitioning="hive"``) reading the folders directly
    therefore decode the same values; like theirs, a null or empty string
    value is ``__HIVE_DEFAULT_PARTITION__``. Reads of this package never parse
    folder names (the manifest records each file's path and values), so
    folders written by earlier versions (every non-alphanumeric byte
    percent-encoded) keep reading.
    """
    return "/".join(f"{_escape(col)}={_escape(_path_value(v))}" for col, v in zip(partition_by, values, strict=True))


def split_by_partition(table: pa.Table, partition_by: Sequence[str]) -> Iterator[tuple[tuple[Any, ...], pa.Table]]:
    """Yield ``(values, rows without the partition columns)`` per distinct partition, in sorted order.

    Holds one partition's rows at a time beyond the input and a row index.
    """
    if table.num_rows == 0:
        return
    index = pa.array(np.arange(table.num_rows, dtype=np.int64))
    groups = (
        table.select(list(partition_by))
        .append_column("__pds_row", index)
        .group_by(list(partition_by), use_threads=False)
        .aggregate([("__pds_row", "list")])
    )
    keys = [tuple(groups.column(c)[i].as_py() for c in partition_by) for i in range(groups.num_rows)]
    order = sorted(range(len(keys)), key=lambda i: tuple((v is None, v if v is not None else 0) for v in keys[i]))
    rows = groups.column("__pds_row_list")
    data = table.drop_columns(list(partition_by))
    for i in order:
        yield keys[i], data.take(rows[i].values)


def encode_partition_values(partition_by: Sequence[str], values: Sequence[Any], schema: pa.Schema) -> dict[str, Any]:
    """The manifest form of a file's partition values (canonical JSON per column type)."""
    return {
        col: None if v is None else encode_value(v, schema.field(col).type)
        for col, v in zip(partition_by, values, strict=True)
    }


def partition_scalar(raw: Any, typ: pa.DataType) -> pa.Scalar:
    """The Arrow scalar for a manifest partition value (``None`` → a null of ``typ``)."""
    if raw is None:
        return pa.scalar(None, type=typ)
    value = decode_value(raw, typ)
    if pat.is_timestamp(typ):
        return pa.scalar(value, type=pa.int64()).cast(typ)
    return pa.scalar(value, type=typ)


def add_partition_columns(
    table: pa.Table, partition_values: Mapping[str, Any], schema: pa.Schema, wanted: Sequence[str]
) -> pa.Table:
    """Append the constant partition columns in ``wanted`` to ``table``."""
    for col in wanted:
        typ = schema.field(col).type
        table = table.append_column(
            schema.field(col), pa.repeat(partition_scalar(partition_values.get(col), typ), table.num_rows)
        )
    return table
