"""Per-file column statistics for the manifest: aggregated from Parquet footers, decoded for planning.

Pure functions, no I/O. The dataset layer takes ``file_column_stats`` of each
part from the Parquet writer's own metadata (``writer.writer.metadata`` after
``ParquetWriter.close()``), stores the result in the part's manifest entry,
and the planner decodes it with ``decode_stats`` to prune files (see
``expressions.pruning``).

Values are in the comparable domain of ``values`` (``decode_value``,
``encode_value``).

Exactness: a min/max is recorded only when it is an exact value of the file
(the true smallest/largest non-null value), never a bound:

* Arrow C++ (``parquet-cpp-arrow``) never truncates string statistics: a
  value longer than its statistics size limit (4096 bytes) makes it drop the
  row group's min/max instead (``has_min_max`` false), which this module
  treats as "unknown". Other writers may truncate (DuckDB does; parquet-java
  can be configured to) and pyarrow 26 exposes no ``is_min_value_exact``, so
  string min/max from any writer other than Arrow C++ are ignored unless the
  caller passes ``trust_string_stats=True``.
* Parquet writers leave NaN out of float min/max. A float min/max therefore
  bounds the non-NaN values only; NaN never satisfies ``==``/``<``/``<=``/
  ``>``/``>=``, so those prune soundly, while ``!=`` and ``not in`` (which NaN
  does satisfy) must never be pruned from float min/max (``expressions.pruning`` does
  not). Infinite min/max are not encodable in strict JSON: the column keeps
  its null count only.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .values import (
    _BOOL,
    _DATE,
    _DEC,
    _DECODERS,
    _EPOCH_DATE,
    _FLOAT,
    _INT,
    _INT_RANGES,
    _KINDS,
    _NS_PER_UNIT,
    _STR,
    _TS,
    EXACT_STRING_STATS_WRITERS,
    decimal_bounds,
    decode_value,
    encode_value,
    int_like_range,
    normalize_literal,
    stats_supported,
    type_kind,
)

__all__ = [
    "EXACT_STRING_STATS_WRITERS",
    "ColumnStats",
    "FooterStats",
    "decimal_bounds",
    "decode_stats",
    "decode_value",
    "encode_value",
    "file_column_stats",
    "int_like_range",
    "normalize_literal",
    "stats_supported",
    "type_kind",
]

_PARQUET_UNITS = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}


@dataclass(frozen=True, slots=True)
class ColumnStats:
    """Decoded statistics of one column of one file.

    Attributes:
        min: smallest non-null value in the column's comparable domain, ``None`` if unknown.
        max: largest non-null value, ``None`` if unknown.
        null_count: number of nulls, ``None`` if unknown.
    """

    min: Any = None
    max: Any = None
    null_count: int | None = None


# --------------------------------------------------------------------------------------------
# Extraction from Parquet metadata


def _leaf_indices(metadata: pq.FileMetaData) -> dict[str, int | None]:
    """Top-level (non-repeated) leaf path -> leaf index; ``None`` for an ambiguous path."""
    out: dict[str, int | None] = {}
    pschema = metadata.schema
    for i in range(metadata.num_columns):
        col = pschema.column(i)
        if col.max_repetition_level != 0:
            continue
        path = col.path
        out[path] = None if path in out else i
    return out


def _checked_minmax(cls: type, problem: str) -> Any:
    """A reader of ``(st.min, st.max)`` that raises ``ValueError(problem)`` unless both are ``cls`` instances."""

    def read(st: Any) -> tuple[Any, Any]:
        mn, mx = st.min, st.max
        if not isinstance(mn, cls) or not isinstance(mx, cls):
            raise ValueError(problem)
        return mn, mx

    return read


def _minmax_reader(kind: str, typ: pa.DataType, col: Any) -> Any:
    """A function ``Statistics -> (min, max)`` in the comparable domain, or ``None`` if the
    Parquet column's physical/logical type is not the expected encoding of ``typ``."""
    physical = col.physical_type
    logical = col.logical_type.type
    if kind == _INT:
        if physical not in ("INT32", "INT64"):
            return None
        lo, hi = _INT_RANGES[typ.id]

        def read_int(st: Any) -> tuple[Any, Any]:
            mn, mx = st.min, st.max
            if type(mn) is not int or type(mx) is not int or not (lo <= mn <= mx <= hi):
                raise ValueError("integer statistics out of range")
            return mn, mx

        return read_int
    if kind == _FLOAT:
        if physical not in ("FLOAT", "DOUBLE"):
            return None
        return lambda st: (float(st.min), float(st.max))
    if kind == _BOOL:
        if physical != "BOOLEAN":
            return None
        return lambda st: (bool(st.min), bool(st.max))
    if kind == _STR:
        if physical != "BYTE_ARRAY":
            return None

        return _checked_minmax(str, "string statistics are not UTF-8")
    if kind == _DATE:
        if physical != "INT32" or logical != "DATE":
            return None
        return lambda st: (_EPOCH_DATE + timedelta(days=st.min_raw), _EPOCH_DATE + timedelta(days=st.max_raw))
    if kind == _TS:
        if physical != "INT64" or logical != "TIMESTAMP":
            return None
        unit = _PARQUET_UNITS.get(json.loads(col.logical_type.to_json()).get("timeUnit"))
        if unit is None:
            return None
        src, dst = _NS_PER_UNIT[unit], _NS_PER_UNIT[typ.unit]

        def read_ts(st: Any) -> tuple[Any, Any]:
            mn, mx = st.min_raw * src, st.max_raw * src
            if mn % dst or mx % dst:
                raise ValueError("timestamp statistics are finer than the column's unit")
            return mn // dst, mx // dst

        return read_ts
    if kind == _DEC:
        if logical != "DECIMAL":
            return None

        return _checked_minmax(Decimal, "decimal statistics did not decode")
    return None


#: One column's aggregation step: (leaf index, Arrow type, kind, min/max reader or ``None``).
_Step = tuple[int, pa.DataType, str, Any]


class FooterStats:
    """:func:`file_column_stats` for files written with ``schema``, with the per-schema setup done once.

    The setup (leaf indices, min/max readers) depends only on a file's Parquet
    schema, so it is remembered for the last few distinct Parquet schemas seen:
    checking the many files of one dataset costs one aggregation per file.
    Safe to share between threads (the memo only grows, up to a bound).
    """

    def __init__(self, schema: pa.Schema, *, trust_string_stats: bool | None = None) -> None:
        self.schema = schema
        self.trust_string_stats = trust_string_stats
        names = schema.names
        self._duplicated = {name for name in names if names.count(name) > 1}
        self._plans: list[tuple[pq.ParquetSchema, dict[str, _Step]]] = []

    def _plan(self, metadata: pq.FileMetaData) -> dict[str, _Step]:
        pschema = metadata.schema
        for known, plan in self._plans:
            if known.equals(pschema):
                return plan
        leaves = _leaf_indices(metadata)
        plan = {}
        for field in self.schema:
            kind = _KINDS.get(field.type.id)
            idx = leaves.get(field.name)
            if kind is None or field.name in self._duplicated or idx is None:
                continue
            plan[field.name] = (idx, field.type, kind, _minmax_reader(kind, field.type, pschema.column(idx)))
        if len(self._plans) < 16:
            self._plans.append((pschema, plan))
        return plan

    def __call__(self, metadata: pq.FileMetaData, columns: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
        """The statistics of ``columns`` (default: every column of the schema) in ``metadata``."""
        trust = self.trust_string_stats
        if trust is None:
            trust = (metadata.created_by or "").startswith(EXACT_STRING_STATS_WRITERS)
        plan = self._plan(metadata)
        groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
        out: dict[str, dict[str, Any]] = {}
        for name in plan if columns is None else columns:
            step = plan.get(name)
            if step is not None:
                entry = _aggregate(groups, step, trust)
                if entry:
                    out[name] = entry
        return out


def _aggregate(groups: Sequence[Any], step: _Step, trust_strings: bool) -> dict[str, Any]:
    """One column's ``{"null_count", "min", "max"}`` over the row groups (keys left out where unknown)."""
    idx, typ, kind, reader = step
    use_minmax = reader is not None and (kind != _STR or trust_strings)
    nulls: int | None = 0
    lo: Any = None
    hi: Any = None
    for group in groups:
        rows = group.num_rows
        if rows == 0:
            continue
        st = group.column(idx).statistics
        if st is None:
            nulls, use_minmax = None, False
            break
        group_nulls = st.null_count if st.has_null_count else None
        if nulls is not None:
            nulls = None if group_nulls is None else nulls + group_nulls
        if not use_minmax:
            continue
        if not st.has_min_max:
            if group_nulls != rows:  # values present but no min/max: unknown
                use_minmax = False
            continue
        try:
            mn, mx = reader(st)
        except (ValueError, TypeError, OverflowError):
            use_minmax = False
            continue
        if lo is None or mn < lo:
            lo = mn
        if hi is None or mx > hi:
            hi = mx
    entry: dict[str, Any] = {}
    if nulls is not None:
        entry["null_count"] = nulls
    if use_minmax and lo is not None:
        try:
            emin, emax = encode_value(lo, typ), encode_value(hi, typ)
        except (ValueError, TypeError):
            pass
        else:
            entry["min"], entry["max"] = emin, emax
    return entry


def file_column_stats(
    metadata: pq.FileMetaData, schema: pa.Schema, *, trust_string_stats: bool | None = None
) -> dict[str, dict[str, Any]]:
    """Per-column statistics of one Parquet file, as JSON-able dicts for the manifest.

    For each top-level column of ``schema`` whose type is ``stats_supported``
    and that maps to exactly one Parquet leaf column, aggregates the row
    groups' statistics into ``{"null_count": int, "min": json, "max": json}``
    (JSON forms from ``encode_value``). Nothing is read but ``metadata``.

    * ``min``/``max`` are omitted when any row group with non-null values lacks
      them, when they are not encodable (infinite floats), or when they may be
      inexact (string statistics from a writer not in
      ``EXACT_STRING_STATS_WRITERS``, unless ``trust_string_stats``). Row groups
      that are entirely null do not count against them.
    * ``null_count`` is omitted when any row group lacks it.
    * A column with nothing known is omitted; an all-null column has
      ``null_count`` equal to the row count and no ``min``/``max``.

    Args:
        metadata: the file's footer, e.g. ``writer.writer.metadata`` after
            ``ParquetWriter.close()`` or ``pq.ParquetFile(f).metadata``.
        schema: the Arrow schema the file was written with.
        trust_string_stats: ``True`` to use string min/max from any writer,
            ``False`` never, ``None`` (default) only from writers known exact.

    Raises:
        Nothing for odd metadata: a column whose statistics cannot be read is
        simply left without them.
    """
    return FooterStats(schema, trust_string_stats=trust_string_stats)(metadata)


# --------------------------------------------------------------------------------------------
# Decoding manifest statistics


_schema_cache: dict[int, tuple[pa.Schema, dict[str, tuple[Any, Any]]]] = {}
# Kinds whose JSON form already is the comparable value: checked, not converted.
_IDENTITY_TYPES = {_INT: int, _TS: int, _BOOL: bool, _STR: str}

_new_object = object.__new__
_set_min = ColumnStats.__dict__["min"].__set__  # the slots' member descriptors
_set_max = ColumnStats.__dict__["max"].__set__
_set_nulls = ColumnStats.__dict__["null_count"].__set__


def _make_stats(lo: Any, hi: Any, nulls: int | None) -> ColumnStats:
    """``ColumnStats(lo, hi, nulls)`` without the frozen dataclass ``__init__`` overhead (planning hot path)."""
    stats = _new_object(ColumnStats)
    _set_min(stats, lo)
    _set_max(stats, hi)
    _set_nulls(stats, nulls)
    return stats


def column_decoders(schema: pa.Schema) -> dict[str, tuple[Any, Any]]:
    """name -> (exact JSON type or None, decoder) for the schema's supported, uniquely named
    columns; cached by schema identity (hashing a schema costs more than decoding a file)."""
    hit = _schema_cache.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    names = schema.names
    decoders = {}
    for field in schema:
        kind = _KINDS.get(field.type.id)
        if kind is not None and names.count(field.name) == 1:
            decoders[field.name] = (_IDENTITY_TYPES.get(kind), _DECODERS[kind])
    if len(_schema_cache) >= 64:
        _schema_cache.clear()
    _schema_cache[id(schema)] = (schema, decoders)  # holds the schema, so its id stays unique
    return decoders


def decode_stats(
    raw: Mapping[str, Any], schema: pa.Schema, *, columns: Collection[str] | None = None
) -> dict[str, ColumnStats]:
    """Decode one file's manifest statistics (as written by ``file_column_stats``).

    Entries for columns that are not in ``schema`` or whose type is not
    ``stats_supported`` are ignored (they can only come from another schema).

    Args:
        raw: the file's ``{column: {"null_count", "min", "max"}}`` mapping.
        schema: the dataset's Arrow schema. Pass the same object for every
            file of a plan: per-schema work is cached by identity.
        columns: decode only these columns (the ones a filter references);
            ``None`` decodes all. Planning should pass them: it keeps decoding
            a 10,000-file manifest cheap.

    Raises:
        ValueError: ``raw`` or an entry is malformed (not an object, a negative
            or non-integer null count, a min/max that is not that type's JSON form).
    """
    if columns is None:
        if not isinstance(raw, Mapping):
            raise ValueError(f"file statistics are not an object: {raw!r}")
        columns = raw.keys()
    return decode_columns(raw, column_decoders(schema), columns)


def decode_entry(name: str, entry: Any, spec: tuple[Any, Any]) -> tuple[Any, Any, int | None]:
    """``(min, max, null_count)`` of one column's raw manifest statistics, decoded and checked.

    ``spec`` is the column's ``column_decoders(schema)[name]``.

    Raises:
        ValueError: the entry is malformed.
    """
    if type(entry) is not dict and not isinstance(entry, Mapping):
        raise ValueError(f"statistics of column {name!r} are not an object: {entry!r}")
    nulls = entry.get("null_count")
    if nulls is not None and (type(nulls) is not int or nulls < 0):
        raise ValueError(f"statistics of column {name!r} have a bad null_count: {nulls!r}")
    mn = entry.get("min")
    mx = entry.get("max")
    exact, decode = spec
    if exact is not None:
        if (mn is not None and type(mn) is not exact) or (mx is not None and type(mx) is not exact):
            raise ValueError(
                f"statistics of column {name!r} are malformed: expected {exact.__name__} values, got {mn!r}, {mx!r}"
            )
        return mn, mx, nulls
    try:
        return (None if mn is None else decode(mn)), (None if mx is None else decode(mx)), nulls
    except ValueError as exc:
        raise ValueError(f"statistics of column {name!r} are malformed: {exc}") from None


def decode_columns(
    raw: Mapping[str, Any], decoders: Mapping[str, tuple[Any, Any]], columns: Iterable[str]
) -> dict[str, ColumnStats]:
    """``decode_stats`` with the per-schema decoders already looked up."""
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise ValueError(f"file statistics are not an object: {raw!r}")
    out: dict[str, ColumnStats] = {}
    get = raw.get
    for name in columns:
        entry = get(name)
        if entry is None:
            continue
        spec = decoders.get(name)
        if spec is None:
            continue
        out[name] = _make_stats(*decode_entry(name, entry, spec))
    return out
