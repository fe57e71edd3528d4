"""Spark <-> Arrow schema conversion.

Writing: :func:`spark_schema_to_arrow` gives the Arrow schema a Spark
DataFrame is stored with. It mirrors the Arrow batches Spark hands to
``mapInArrow`` (list items named ``element``, map entries ``key``/``value``,
Spark's nullability), except that ``TimestampType`` is always
``timestamp[us, tz=UTC]``: the instant is what Spark means, not the session
time zone the batches happen to be labelled with.

Reading: :func:`arrow_schema_to_spark` gives the Spark schema a stored Arrow
schema is read as, so a dataset written by pandas or pyarrow reads too
(unsigned integers widen, ``timestamp[ns]`` becomes ``TimestampType``,
dictionaries become their values). :func:`spark_readable_arrow_schema` is the
Arrow schema of the batches that produce such a DataFrame.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T


def _unsupported(path: str, what: str, hint: str) -> TypeError:
    return TypeError(f"column {path!r} has type {what}, which cannot be stored as a Parquet dataset column; {hint}")


#: Spark types without parameters and the Arrow type each is stored as (in the order they are tried:
#: ``TimestampNTZType`` before ``TimestampType``).
_SCALARS: tuple[tuple[type[T.DataType] | tuple[type[T.DataType], ...], pa.DataType], ...] = (
    (T.BooleanType, pa.bool_()),
    (T.ByteType, pa.int8()),
    (T.ShortType, pa.int16()),
    (T.IntegerType, pa.int32()),
    (T.LongType, pa.int64()),
    (T.FloatType, pa.float32()),
    (T.DoubleType, pa.float64()),
    ((T.StringType, T.CharType, T.VarcharType), pa.string()),
    (T.BinaryType, pa.binary()),
    (T.DateType, pa.date32()),
    (T.TimestampNTZType, pa.timestamp("us")),
    (T.TimestampType, pa.timestamp("us", tz="UTC")),
    (T.DayTimeIntervalType, pa.duration("us")),
    (T.NullType, pa.null()),
)


def spark_type_to_arrow(dt: T.DataType, path: str = "<value>") -> pa.DataType:
    """The Arrow type a Spark type is stored as (see the module docstring).

    Raises:
        TypeError: the type has no faithful Arrow/Parquet representation
            (intervals other than day-time, variant, time, user-defined types);
            the message names the column.
    """
    for spark_type, arrow_type in _SCALARS:
        if isinstance(dt, spark_type):
            return arrow_type
    if isinstance(dt, T.DecimalType):
        return pa.decimal128(dt.precision, dt.scale)
    if isinstance(dt, T.ArrayType):
        item = spark_type_to_arrow(dt.elementType, f"{path}[]")
        return pa.list_(pa.field("element", item, nullable=dt.containsNull))
    if isinstance(dt, T.MapType):
        key = spark_type_to_arrow(dt.keyType, f"{path}.key")
        value = spark_type_to_arrow(dt.valueType, f"{path}.value")
        return pa.map_(pa.field("key", key, nullable=False), pa.field("value", value, nullable=dt.valueContainsNull))
    if isinstance(dt, T.StructType):
        return pa.struct(_arrow_fields(dt, path + "."))
    hint = "cast it to a supported type (for example a string) or drop it before writing"
    raise _unsupported(path, dt.simpleString(), hint)


def _arrow_fields(schema: T.StructType, prefix: str = "") -> list[pa.Field]:
    return [
        pa.field(f.name, spark_type_to_arrow(f.dataType, prefix + f.name), nullable=f.nullable) for f in schema.fields
    ]


def spark_schema_to_arrow(schema: T.StructType) -> pa.Schema:
    """The Arrow schema a DataFrame with this Spark schema is stored with.

    Raises:
        TypeError: a column's type cannot be stored (the message names the column).
        ValueError: two top-level columns share a name (Parquet needs unique names).
    """
    if not isinstance(schema, T.StructType):
        raise TypeError(f"expected a pyspark StructType, got {type(schema).__name__}")
    names = [f.name for f in schema.fields]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(
            f"the DataFrame has duplicate column names {duplicates}; rename them (e.g. withColumnRenamed) before writing"
        )
    return pa.schema(_arrow_fields(schema))


def arrow_type_to_spark(at: pa.DataType, path: str = "<value>") -> T.DataType:
    """The Spark type a stored Arrow type is read as.

    Raises:
        TypeError: Spark has no type for it (time of day, decimals wider than
            38 digits, unions, ...); the message names the column and suggests
            leaving it out with ``columns=``.
    """
    if pa.types.is_dictionary(at):
        return arrow_type_to_spark(at.value_type, path)
    if pa.types.is_boolean(at):
        return T.BooleanType()
    if pa.types.is_int8(at):
        return T.ByteType()
    if pa.types.is_int16(at) or pa.types.is_uint8(at):
        return T.ShortType()
    if pa.types.is_int32(at) or pa.types.is_uint16(at):
        return T.IntegerType()
    if pa.types.is_int64(at) or pa.types.is_uint32(at):
        return T.LongType()
    if pa.types.is_uint64(at):
        return T.DecimalType(20, 0)
    if pa.types.is_float16(at) or pa.types.is_float32(at):
        return T.FloatType()
    if pa.types.is_float64(at):
        return T.DoubleType()
    if pa.types.is_decimal(at) and at.precision <= 38:
        return T.DecimalType(at.precision, at.scale)
    if pa.types.is_string(at) or pa.types.is_large_string(at) or pa.types.is_string_view(at):
        return T.StringType()
    if (
        pa.types.is_binary(at)
        or pa.types.is_large_binary(at)
        or pa.types.is_fixed_size_binary(at)
        or pa.types.is_binary_view(at)
    ):
        return T.BinaryType()
    if pa.types.is_date(at):
        return T.DateType()
    if pa.types.is_timestamp(at):
        return T.TimestampType() if at.tz is not None else T.TimestampNTZType()
    if pa.types.is_duration(at):
        return T.DayTimeIntervalType()
    if pa.types.is_null(at):
        return T.NullType()
    if pa.types.is_map(at):
        return T.MapType(
            arrow_type_to_spark(at.key_type, f"{path}.key"),
            arrow_type_to_spark(at.item_type, f"{path}.value"),
            valueContainsNull=at.item_field.nullable,
        )
    if (
        pa.types.is_list(at)
        or pa.types.is_large_list(at)
        or pa.types.is_fixed_size_list(at)
        or pa.types.is_list_view(at)
        or pa.types.is_large_list_view(at)
    ):
        return T.ArrayType(arrow_type_to_spark(at.value_type, f"{path}[]"), containsNull=at.value_field.nullable)
    if pa.types.is_struct(at):
        return T.StructType(
            [
                T.StructField(f.name, arrow_type_to_spark(f.type, f"{path}.{f.name}"), nullable=f.nullable)
                for f in at.fields
            ]
        )
    raise TypeError(
        f"column {path!r} has Arrow type {at}, which Spark cannot represent; "
        "leave it out of the read with columns=[...]"
    )


def arrow_schema_to_spark(schema: pa.Schema) -> T.StructType:
    """The Spark schema a stored Arrow schema is read as.

    Raises:
        TypeError: a column has no Spark type (the message names it).
    """
    return T.StructType(
        [T.StructField(f.name, arrow_type_to_spark(f.type, f.name), nullable=f.nullable) for f in schema]
    )


def spark_readable_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema of batches that make the DataFrame :func:`arrow_schema_to_spark` describes.

    Raises:
        TypeError: a column has no Spark type.
    """
    return spark_schema_to_arrow(arrow_schema_to_spark(schema))


def _natively_readable(at: pa.DataType) -> bool:
    if pa.types.is_timestamp(at):
        return at.unit in ("ms", "us")
    if pa.types.is_nested(at):
        if pa.types.is_map(at):
            return _natively_readable(at.key_type) and _natively_readable(at.item_type)
        if pa.types.is_list(at) or pa.types.is_large_list(at):
            return _natively_readable(at.value_type)
        if pa.types.is_struct(at):
            return all(_natively_readable(f.type) for f in at.fields)
        return False
    if pa.types.is_dictionary(at):
        return _natively_readable(at.value_type)
    return not (
        pa.types.is_duration(at)
        or pa.types.is_time(at)
        or pa.types.is_null(at)
        or pa.types.is_float16(at)
        or pa.types.is_uint64(at)
        or pa.types.is_string_view(at)
        or pa.types.is_binary_view(at)
        or pa.types.is_fixed_size_binary(at)
        or (pa.types.is_decimal(at) and at.precision > 38)
    )


def natively_readable(schema: pa.Schema) -> bool:
    """Whether Spark's own Parquet reader reads files of this Arrow schema as :func:`arrow_schema_to_spark` says.

    It does not for nanosecond timestamps (Spark rejects them), durations,
    time of day, null columns, half floats and unsigned 64-bit integers;
    those datasets are read through Arrow on the executors instead.
    """
    return all(_natively_readable(f.type) for f in schema)
