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
from urllib.parse import unquote

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


def folder_mismatch(
    path: str, partition_by: Sequence[str], values: Mapping[str, Any] | None, schema: pa.Schema
) -> str | None:
    """Why the folder of the part ``path`` (relative to its dataset) disagrees with its ``values``, or ``None``.

    A Hive reader (pyarrow, Spark, DuckDB) takes a part's partition values from
    its ``col=value`` folders, this package from its manifest entry, so the two
    must agree: the part lies in exactly one folder level per partition column,
    in order, each named after its column and holding its value (``%XX``
    unescaped; ``__HIVE_DEFAULT_PARTITION__`` for a null). A folder value that
    is spelled otherwise but means the same value of the column's type (Spark's
    ``2024-01-02 03:04:05`` timestamps) agrees too. An unpartitioned dataset's
    parts may lie in any folder.
    """
    if not partition_by:
        return None
    folders = path.split("/")[:-1]
    values = values or {}
    wanted = partition_folder(
        partition_by, [partition_scalar(values.get(c), schema.field(c).type).as_py() for c in partition_by]
    )
    where = "at the dataset's root" if not folders else f"in the folder {'/'.join(folders)!r}"
    mismatch = f"part {path!r} lies {where}, but its partition values {dict(values)!r} belong in {wanted!r}"
    if len(folders) != len(partition_by):
        return mismatch
    for col, folder in zip(partition_by, folders, strict=True):
        name, eq, raw = folder.partition("=")
        if not eq or unquote(name) != col:
            return mismatch
        if not _same_value(unquote(raw), values.get(col), schema.field(col).type):
            return mismatch
    return None


def _same_value(folder_value: str, raw: Any, typ: pa.DataType) -> bool:
    """Whether a decoded folder value means the manifest partition value ``raw`` of type ``typ``."""
    value = partition_scalar(raw, typ)
    if folder_value == HIVE_NULL:
        return not value.is_valid or value.as_py() == ""
    if not value.is_valid:
        return False
    if folder_value == _path_value(value.as_py()):
        return True
    try:
        return bool(pa.scalar(folder_value).cast(typ).equals(value))
    except (pa.ArrowException, ValueError, TypeError):
        return False
