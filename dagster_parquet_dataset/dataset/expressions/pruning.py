"""File pruning from statistics and partition values (filters are normalized by ``filters``).

Pure functions, no I/O, in the style of pyiceberg's inclusive metrics
evaluator: ``might_match`` is a small function of a predicate and one file's
statistics that answers "might match" (``True``) or "cannot match"
(``False``), and answers ``True`` whenever the statistics are missing or do
not prove anything.

Planning (one manifest read, nothing else)::

    dnf = normalize_filters(filters, schema)
    answers = plan_files(dnf, schema, [(f.column_stats, f.partition_values, f.row_count) for f in files])
    for f, answer in zip(files, answers):
        if answer is False:
            pruned.append(f)
        elif answer is True or answer is None:
            read(f)                                      # every row matches
        else:
            read(f).filter(to_expression(answer))        # residual row filter

``plan_files`` is built from the primitives ``residual_filters`` (partition
values, exact), ``decode_stats`` and ``might_match`` (statistics,
conservative), which can also be used one file at a time.
"""

from __future__ import annotations

import bisect
import reprlib
from collections.abc import Iterable, Mapping
from datetime import date
from decimal import Decimal
from typing import Any

import pyarrow as pa

from ..format.stats import ColumnStats, column_decoders, decode_entry
from ..format.values import decode_value, stats_supported, type_kind
from .filters import (
    DNF,
    SUPPORTED_OPS,
    Predicate,
    discrete_bounds,
    filter_columns,
    normalize_filters,
    to_expression,
)

__all__ = [
    "DNF",
    "SUPPORTED_OPS",
    "ColumnStats",
    "Predicate",
    "Residual",
    "discrete_bounds",
    "filter_columns",
    "might_match",
    "normalize_filters",
    "partition_stats",
    "plan_files",
    "residual_filters",
    "to_expression",
]

#: ``residual_filters`` may also answer ``True`` (no row filter needed) or ``False`` (no row can match).
Residual = DNF | bool | None


# --------------------------------------------------------------------------------------------
# Pruning


def partition_stats(value: Any, row_count: int | None) -> ColumnStats:
    """Statistics of a column that is constant in a file (a partition column).

    ``value`` is in the column's comparable domain (``decode_value``), ``None``
    for a null partition value.
    """
    if value is None:
        return ColumnStats(None, None, row_count)
    return ColumnStats(value, value, 0)


def _term_might_match(p: Predicate, st: ColumnStats | None, rows: int | None) -> bool:
    """False only if ``st`` proves that no row satisfies ``p``."""
    if st is None:
        return True
    return _bounds_might_match(p, st.min, st.max, st.null_count, rows)


def _bounds_might_match(p: Predicate, lo: Any, hi: Any, nulls: int | None, rows: int | None) -> bool:
    """False only if a column's (min, max, null count) prove that no row satisfies ``p``.

    The single statement of the pruning rules, for ``might_match`` and ``plan_files``.
    """
    op = p.op
    if op == "is null":
        return nulls is None or nulls > 0
    if op == "is not null":
        return nulls is None or rows is None or nulls < rows
    # Every other operator is false on a null: an all-null file cannot match.
    if nulls is not None and rows is not None and nulls >= rows:
        return False
    if not p.prunable:
        return True
    v = p.value
    try:
        if op == "==":
            return (lo is None or not v < lo) and (hi is None or not v > hi)
        if op == "<":
            return lo is None or lo < v
        if op == "<=":
            return lo is None or lo <= v
        if op == ">":
            return hi is None or hi > v
        if op == ">=":
            return hi is None or hi >= v
        if op == "in":
            ordered = p.sorted_values
            if ordered is not None and lo is not None:
                i = bisect.bisect_left(ordered, lo)
                return i < len(ordered) and (hi is None or not ordered[i] > hi)
            return any((lo is None or not x < lo) and (hi is None or not x > hi) for x in v)
        # "!=" / "not in" are disproved only when every non-null value is the same excluded one.
        # Float min/max leave NaN out, and NaN satisfies both: never prune floats on them.
        if lo is None or hi is None or type(lo) is float or lo != hi:
            return True
        if op == "!=":
            return lo != v
        if op == "not in":
            return lo not in v
    except TypeError:  # a literal from another domain: prove nothing
        return True
    return True


def might_match(dnf: DNF | bool | None, stats: Mapping[str, ColumnStats], row_count: int | None) -> bool:
    """Whether some row of a file might satisfy ``dnf``, judging from its statistics alone.

    ``False`` only when the statistics prove that no row can: every
    conjunction has a term that no row satisfies. Missing column statistics,
    a missing min/max, an unknown null count or an unknown ``row_count`` prove
    nothing. A file with ``row_count == 0`` matches nothing.

    Args:
        dnf: from ``normalize_filters`` (``None``: no filter), or a
            ``residual_filters`` answer (``True``/``False``).
        stats: per column, ``decode_stats`` results and/or ``partition_stats``.
        row_count: the file's rows, ``None`` if unknown.

    Raises:
        Nothing: values of a foreign type compare as "might match".
    """
    if dnf is None or dnf is True:
        return True
    if dnf is False or row_count == 0:
        return False
    get = stats.get
    for conjunction in dnf:
        for p in conjunction:
            if not _term_might_match(p, get(p.column), row_count):
                break
        else:
            return True
    return False


# --------------------------------------------------------------------------------------------
# Residual filters


_DOMAIN_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (float, int),
    "bool": (bool,),
    "str": (str,),
    "date": (date,),
    "ts": (int,),
    "dec": (Decimal,),
}


def _constant_outcome(p: Predicate, c: Any) -> bool | None:
    """The exact truth of ``p`` on a file where its column is constantly ``c``; ``None`` if unknown."""
    op = p.op
    if c is None:
        return op == "is null"
    if op == "is null":
        return False
    if op == "is not null":
        return True
    if not p.prunable:
        return None
    if p.arrow_type is not None:
        kind = type_kind(p.arrow_type)
        allowed = _DOMAIN_TYPES.get(kind or "")
        if allowed is not None and (
            not isinstance(c, allowed)
            or (kind != "bool" and isinstance(c, bool))
            or (kind == "date" and type(c) is not date)
        ):
            raise TypeError(
                f"constant {c!r} for column {p.column!r} ({p.arrow_type}) is not in the column's comparable "
                "domain; decode partition values with decode_value first"
            )
    if isinstance(c, float) and c != c:  # NaN: leave it to the row filter
        return None
    v = p.value
    try:
        if op == "==":
            return bool(c == v)
        if op == "!=":
            return bool(c != v)
        if op == "<":
            return bool(c < v)
        if op == "<=":
            return bool(c <= v)
        if op == ">":
            return bool(c > v)
        if op == ">=":
            return bool(c >= v)
        if op == "in":
            return c in v
        if op == "not in":
            return c not in v
    except TypeError:
        return None
    return None


def residual_filters(dnf: DNF | bool | None, constants: Mapping[str, Any]) -> Residual:
    """Simplify ``dnf`` for a file whose columns in ``constants`` are constant (its partition values).

    Each term on a constant column is evaluated exactly (SQL null semantics:
    with a null constant only ``is null`` holds): true terms are dropped, and a
    conjunction with a false term is dropped.

    Args:
        dnf: from ``normalize_filters``; ``None`` (no filter) is returned as is.
        constants: column -> value in the column's comparable domain
            (``decode_value``), ``None`` for null.

    Returns:
        ``True`` if some conjunction became empty (every row matches: no row
        filter needed), ``False`` if every conjunction was dropped (no row can
        match: the file can be pruned), otherwise the remaining DNF.

    Raises:
        TypeError: a constant is not in its column's comparable domain (for
            example an undecoded string for a date column).
    """
    if dnf is None or isinstance(dnf, bool):
        return dnf
    out: DNF = []
    for conjunction in dnf:
        kept: list[Predicate] = []
        for p in conjunction:
            if p.column in constants:
                outcome = _constant_outcome(p, constants[p.column])
                if outcome is True:
                    continue
                if outcome is False:
                    break
            kept.append(p)
        else:
            if not kept:
                return True
            out.append(kept)
    return out if out else False


# --------------------------------------------------------------------------------------------
# Planning many files


_MISSING = object()


def plan_files(
    dnf: DNF | None,
    schema: pa.Schema,
    files: Iterable[tuple[Mapping[str, Any] | None, Mapping[str, Any] | None, int | None]],
) -> list[Residual]:
    """Prune a manifest's files, and give each kept file its residual row filter.

    The fast path for planning (``benchmarks/bench_planning.py``): partition
    values are decoded and substituted once per distinct partition
    (``residual_filters``), and a file's statistics are decoded lazily, only
    for the terms that evaluation reaches, under exactly the rules of
    ``might_match``.

    Args:
        dnf: from ``normalize_filters``.
        schema: the dataset's Arrow schema (partition columns included).
        files: per file ``(column_stats, partition_values, row_count)``: the
            raw manifest statistics (``file_column_stats`` output, or ``None``),
            the partition values in their JSON form (``encode_value``; ``None``
            for a null value; the mapping ``None`` when unpartitioned) and the
            row count (``None`` if unknown).

    Returns:
        One answer per file, in order: ``False`` the file cannot match (skip
        it); ``True`` every row matches (read it unfiltered); a DNF: read it
        and filter rows with ``to_expression`` of it (it never references the
        partition columns); ``None`` when ``dnf`` is ``None``.

    Raises:
        ValueError: malformed partition values, or malformed statistics of a column that evaluation
            reaches (see ``decode_value``, ``decode_stats``).
    """
    if dnf is None:
        return [None for _ in files]
    types = {f.name: f.type for f in schema}
    decoders = column_decoders(schema)
    residuals: dict[Any, Residual] = {}
    out: list[Residual] = []
    append = out.append
    for column_stats, partition_values, rows in files:
        if rows == 0:
            append(False)
            continue
        key: Any = tuple(partition_values.items()) if partition_values else ()
        residual: Any
        try:
            residual = residuals.get(key, _MISSING)
        except TypeError:  # an unhashable (malformed) value: no memo
            key = residual = _MISSING
        if residual is _MISSING:
            constants = {}
            for name, raw in (partition_values or {}).items():
                typ = types.get(name)
                if typ is not None and (raw is None or stats_supported(typ)):
                    constants[name] = decode_value(raw, typ)
            residual = residual_filters(dnf, constants)
            if key is not _MISSING:
                residuals[key] = residual
        if residual is True or residual is False:
            append(residual)
            continue
        if not column_stats:
            append(residual)
            continue
        if type(column_stats) is not dict and not isinstance(column_stats, Mapping):
            raise ValueError(f"file statistics are not an object: {reprlib.repr(column_stats)}")
        # Statistics are decoded lazily, only for the terms evaluation reaches.
        get = column_stats.get
        for conjunction in residual:
            for p in conjunction:
                entry = get(p.column)
                if entry is None:
                    continue
                spec = decoders.get(p.column)
                if spec is None:
                    continue
                lo, hi, nulls = decode_entry(p.column, entry, spec)
                if not _bounds_might_match(p, lo, hi, nulls, rows):
                    break
            else:
                append(residual)
                break
        else:
            append(False)
    return out
