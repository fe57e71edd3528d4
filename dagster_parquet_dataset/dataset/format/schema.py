"""Schema rules: what a manifest records, and how appended or merged data is made to fit it.

A manifest records each file column with the type Parquet reads it back as
(``timestamp[s]`` is stored as ``timestamp[ms]``, ``date64`` as ``date32``,
``time32[s]`` as ``time32[ms]``, list items are called ``element``), so every
committed part matches the manifest. Partition columns live in folder names,
not in files, and keep the type they were given.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Sequence
from functools import lru_cache

import pyarrow as pa
import pyarrow.parquet as pq
import pyarrow.types as pat


@lru_cache(maxsize=256)
def decode_schema(encoded: str) -> pa.Schema:
    """The Arrow schema of a manifest's ``arrow_schema`` (remembered: 365 partition datasets share one).

    Raises:
        binascii.Error / pa.ArrowInvalid: ``encoded`` is not base64 of an Arrow IPC schema.
    """
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(encoded, validate=True)))


def check_column_names(schema: pa.Schema, *, key: str) -> None:
    """Refuse a schema that names a column more than once.

    Raises:
        ValueError: a column name repeats; the message names it.
    """
    names = schema.names
    if len(set(names)) != len(names):
        repeated = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(
            f"dataset {key!r}: the data names the column(s) {repeated} more than once; "
            "rename them so that every column name is unique"
        )


@lru_cache(maxsize=256)
def _round_trip(schema: pa.Schema) -> pa.Schema:
    sink = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), sink)
    return pq.read_schema(pa.BufferReader(sink.getvalue())).remove_metadata()


def _view_in_struct_in_list(typ: pa.DataType, in_list: bool = False, in_struct: bool = False) -> bool:
    """Whether a string_view/binary_view sits inside a struct inside a list, which pyarrow's
    Parquet writer fails on once such a struct is null ("Slicing not implemented")."""
    if pat.is_string_view(typ) or pat.is_binary_view(typ):
        return in_list and in_struct
    if pat.is_struct(typ):
        return any(_view_in_struct_in_list(f.type, in_list, in_list) for f in typ)
    nested_list = pat.is_list(typ) or pat.is_large_list(typ) or pat.is_fixed_size_list(typ) or pat.is_map(typ)
    nested_list = nested_list or pat.is_list_view(typ) or pat.is_large_list_view(typ)
    return any(
        _view_in_struct_in_list(typ.field(i).type, in_list or nested_list, in_struct) for i in range(typ.num_fields)
    )


def stored_schema(schema: pa.Schema, *, key: str = "") -> pa.Schema:
    """``schema`` as a Parquet file written with it reads back (pyarrow's own writer and reader).

    Schema-level metadata and each top-level field's metadata (e.g. a column
    ``description``) are kept as given.

    Raises:
        TypeError: a column's type cannot be stored in Parquet (or pyarrow's
            writer cannot write it); the message names the column(s).
    """
    bare = schema.remove_metadata()
    views = [f"{f.name!r} ({f.type})" for f in bare if _view_in_struct_in_list(f.type)]
    if views:
        raise TypeError(
            f"dataset {key!r}: pyarrow's Parquet writer cannot write string_view/binary_view inside a struct "
            f"inside a list, as column(s) {', '.join(views)} have; cast those fields to string/binary first"
        )
    try:
        # The cache compares schemas without metadata, so round-trip them without it and put it back.
        stored = _round_trip(pa.schema([f.remove_metadata() for f in bare]))
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        bad = []
        for field in bare:
            try:
                _round_trip(pa.schema([field]))
            except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
                bad.append(f"{field.name!r} ({field.type})")
        raise TypeError(
            f"dataset {key!r}: Parquet cannot store column(s) {', '.join(bad) or '?'} ({exc}); "
            "cast them to a type Parquet can hold first"
        ) from None
    if any(f.metadata for f in bare):
        stored = pa.schema(
            [s.with_metadata(f.metadata) if f.metadata else s for s, f in zip(stored, bare, strict=True)]
        )
    return stored.with_metadata(schema.metadata) if schema.metadata else stored


def recorded_schema(
    schema: pa.Schema, partition_by: Sequence[str] = (), *, key: str, names_checked: bool = False
) -> pa.Schema:
    """The schema a manifest records for data of ``schema``: file columns as Parquet
    reads them back, partition columns as given.

    ``names_checked``: the caller already ran :func:`check_column_names` on ``schema``
    (the write pipeline decides a schema once and checks its names once).

    Raises:
        ValueError: a column name repeats.
        TypeError: a column's type cannot be stored in Parquet.
    """
    if not names_checked:
        check_column_names(schema, key=key)
    files = stored_schema(pa.schema([f for f in schema if f.name not in partition_by]), key=key)
    fields = [f if f.name in partition_by else files.field(f.name) for f in schema]
    return pa.schema(fields, metadata=schema.metadata)


def file_schema_matches(actual: pa.Schema, expected: pa.Schema) -> bool:
    """Whether a part whose footer says ``actual`` reads correctly as ``expected``.

    Equal schemas match. So do, for parts committed before manifests recorded
    the stored types, the same columns in another order, each of the expected
    type or of the type Parquet stores it as, and non-nullable where the
    manifest allows nulls (a read casts them to the manifest's schema).
    """
    if actual.equals(expected, check_metadata=False):
        return True
    if sorted(actual.names) != sorted(expected.names) or len(set(actual.names)) != len(actual.names):
        return False
    try:
        stored = stored_schema(expected)
    except TypeError:
        return False
    for field in expected:
        have = actual.field(field.name)
        if not (have.type.equals(field.type) or have.type.equals(stored.field(field.name).type)):
            return False
        if have.nullable and not field.nullable:
            return False
    return True


# ------------------------------------------------------------------ appends and merges


def _family(typ: pa.DataType) -> str | None:
    if pat.is_integer(typ):
        return "integer"
    if pat.is_floating(typ):
        return "float"
    if pat.is_decimal(typ):
        return "decimal"
    if pat.is_date(typ):
        return "date"
    if pat.is_time(typ):
        return "time"
    if pat.is_string(typ) or pat.is_large_string(typ) or pat.is_string_view(typ):
        return "string"
    if pat.is_binary(typ) or pat.is_large_binary(typ) or pat.is_binary_view(typ):
        return "binary"
    return None


def _compatible(src: pa.DataType, dst: pa.DataType, stored_src: pa.DataType | None) -> bool:
    """Whether values of ``src`` may be written into a column of ``dst`` (by a checked cast)."""
    if src.equals(dst) or (stored_src is not None and stored_src.equals(dst)) or pat.is_null(src):
        return True
    if pat.is_dictionary(src):
        return _compatible(src.value_type, dst, None)
    if pat.is_timestamp(src) and pat.is_timestamp(dst):
        return src.tz == dst.tz
    if pat.is_floating(src) and pat.is_floating(dst):
        return src.bit_width <= dst.bit_width
    family = _family(src)
    return family is not None and family == _family(dst)


def evolve_schema(
    dataset: pa.Schema,
    incoming: pa.Schema,
    *,
    allow_new_columns: bool,
    key: str,
    partition_by: Sequence[str] = (),
    names_checked: bool = False,
) -> pa.Schema:
    """The dataset schema after appending data of schema ``incoming``.

    Column order may differ. A column's type may differ if its values convert
    to the dataset's type without loss of meaning (another integer width, a
    timestamp unit, ``large_string`` for ``string``, ...; the values
    themselves are checked when they are converted). New columns are added at
    the end, with their stored types, only with ``allow_new_columns`` and only
    if nullable. ``names_checked``: the caller ran :func:`check_column_names` on ``incoming`` already.

    Raises:
        ValueError: columns repeat, are missing, have incompatible types, or are
            new without the opt-in; the message names every differing column.
        TypeError: a new column's type cannot be stored in Parquet.
    """
    if not names_checked:
        check_column_names(incoming, key=key)
    problems: list[str] = []
    missing = [f.name for f in dataset if incoming.get_field_index(f.name) < 0]
    if missing:
        problems.append(f"missing columns {missing}")
    try:
        stored_in = stored_schema(pa.schema([f for f in incoming if f.name not in partition_by]), key=key)
    except TypeError:
        stored_in = None
    for field in incoming:
        idx = dataset.get_field_index(field.name)
        if idx < 0:
            continue
        want = dataset.field(idx).type
        stored = None
        if stored_in is not None and field.name not in partition_by:
            stored = stored_in.field(field.name).type
        if not _compatible(field.type, want, stored):
            hint = ""
            if pat.is_floating(field.type) and pat.is_integer(want):
                hint = (
                    " (a pandas integer column with missing values turns float; keep it integer with the "
                    f"nullable 'Int64' dtype, e.g. df[{field.name!r}] = df[{field.name!r}].astype('Int64'))"
                )
            problems.append(f"column {field.name!r} is {field.type} but the dataset has {want}{hint}")
    new = [f for f in incoming if dataset.get_field_index(f.name) < 0]
    if new and not allow_new_columns:
        problems.append(f"new columns {[f.name for f in new]} (pass allow_new_columns=True to add them)")
    not_nullable = [f.name for f in new if not f.nullable]
    if new and allow_new_columns and not_nullable:
        problems.append(f"new columns {not_nullable} are not nullable; older files cannot hold them")
    if problems:
        raise ValueError(f"dataset {key!r}: the data's schema differs: " + "; ".join(problems))
    added = list(recorded_schema(pa.schema(new), key=key, names_checked=True)) if new else []
    return pa.schema(list(dataset) + added, metadata=dataset.metadata)


def _conform_column(
    column: pa.Array | pa.ChunkedArray, field: pa.Field, target: pa.Field, exact: bool, key: str
) -> tuple[pa.Array | pa.ChunkedArray, pa.Field]:
    if not target.nullable and column.null_count:
        raise ValueError(
            f"dataset {key!r}: column {target.name!r} has {column.null_count} null value(s) but the dataset's "
            "column is not nullable; fill or drop them first"
        )
    if not column.type.equals(target.type):
        try:
            column = column.cast(target.type, safe=True)
        except pa.ArrowNotImplementedError:
            if exact or not stored_schema(pa.schema([field])).field(0).type.equals(target.type):
                raise ValueError(
                    f"dataset {key!r}: column {target.name!r} ({field.type}) cannot be converted to the "
                    f"dataset's {target.type}; cast it first"
                ) from None
            # Parquet stores it as the dataset's type: the writer converts it.
            return column, pa.field(target.name, column.type, target.nullable, target.metadata)
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as exc:
            raise ValueError(
                f"dataset {key!r}: column {target.name!r} ({field.type}) does not convert to the "
                f"dataset's {target.type} without loss: {exc}"
            ) from None
    return column, target


def _conform_batch(
    batch: pa.Table | pa.RecordBatch, schema: pa.Schema, exact: bool, key: str
) -> pa.Table | pa.RecordBatch:
    columns, fields = [], []
    for target in schema:
        idx = batch.schema.get_field_index(target.name)
        column, field = _conform_column(batch.column(idx), batch.schema.field(idx), target, exact, key)
        columns.append(column)
        fields.append(field)
    out_schema = pa.schema(fields, metadata=schema.metadata)
    if isinstance(batch, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(columns, schema=out_schema)
    return pa.Table.from_arrays(columns, schema=out_schema)


def check_same_columns(names: Sequence[str], schema: pa.Schema, *, key: str) -> None:
    """Refuse data whose column set differs from ``schema``'s.

    Raises:
        ValueError: a column of ``schema`` is missing or the data has one it lacks; the message names them.
    """
    missing = [n for n in schema.names if n not in names]
    extra = [n for n in names if schema.get_field_index(n) < 0]
    if missing or extra:
        raise ValueError(f"dataset {key!r}: the source's columns differ: missing {missing}, unknown {extra}")


def conform_table(table: pa.Table, schema: pa.Schema, *, key: str) -> pa.Table:
    """``table`` with ``schema``'s column order, types and nullability (checked casts only).

    Raises:
        ValueError: a column repeats, is missing or extra, holds nulls where
            ``schema`` does not allow them, or cannot be cast without loss; the
            message names the column.
    """
    check_column_names(table.schema, key=key)
    check_same_columns(table.column_names, schema, key=key)
    return cast_to(table, schema, key=key, exact=True)  # type: ignore[return-value]


def conform_data(
    data: pa.Table | pa.RecordBatchReader, schema: pa.Schema, *, key: str
) -> pa.Table | pa.RecordBatchReader:
    """``data`` (a table, or a stream converted batch by batch) fitted to ``schema``
    so that its Parquet parts read back exactly as ``schema``.

    Columns are put in ``schema``'s order and cast to its types and nullability;
    a type pyarrow cannot cast but Parquet stores as ``schema``'s is left for the
    writer to convert.

    Raises:
        ValueError: as :func:`conform_table`; for a stream, when the offending
            batch is reached (nothing is committed then).
    """
    check_column_names(data.schema, key=key)
    check_same_columns(data.schema.names, schema, key=key)
    return cast_to(data, schema, key=key, exact=False)


def conformed_schema(incoming: pa.Schema, schema: pa.Schema, *, key: str, exact: bool) -> pa.Schema:
    """The schema data of ``incoming`` has once :func:`cast_to` fitted it to ``schema`` (the column names
    already checked): ``schema``, except where a type pyarrow cannot cast is left for the Parquet writer
    (``exact=False``).

    Raises:
        ValueError: a column cannot be cast to ``schema``'s type (without ``exact``: nor stored as it).
    """
    return _conform_batch(incoming.empty_table(), schema, exact, key).schema


def cast_to(
    data: pa.Table | pa.RecordBatchReader,
    schema: pa.Schema,
    *,
    key: str,
    exact: bool,
    conformed: pa.Schema | None = None,
) -> pa.Table | pa.RecordBatchReader:
    """``data``, whose column names and set were checked against ``schema`` already, fitted to it:
    :func:`conform_table` (``exact``: checked casts only, a table already of ``schema`` as it is) or
    :func:`conform_data` (a stream converted batch by batch) without their checks.
    ``conformed``: :func:`conformed_schema` of ``data``'s schema, if known.

    Raises:
        ValueError: as :func:`conform_table`; for a stream, when the offending batch is reached.
    """
    if isinstance(data, pa.Table):
        if exact and data.schema.equals(schema) and data.schema.names == schema.names:
            return data
        return _conform_batch(data, schema, exact, key)  # type: ignore[return-value]
    first = conformed if conformed is not None else conformed_schema(data.schema, schema, key=key, exact=exact)

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in data:
            yield _conform_batch(batch, schema, exact, key)  # type: ignore[misc]

    return pa.RecordBatchReader.from_batches(first, batches())
