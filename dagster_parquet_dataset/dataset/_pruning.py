"""Filters in disjunctive normal form, and file pruning from statistics and partition values.

Pure functions, no I/O, in the style of pyiceberg's inclusive metrics
evaluator: ``might_match`` is a small function of a predicate and one file's
statistics that answers "might match" (``True``) or "cannot match"
(``False``), and answers ``True`` whenever the statistics are missing or do
not prove anything.

Filters follow pyarrow's DNF: a list of ``(column, op, value)`` tuples is one
conjunction (AND); a list of such lists is a disjunction (OR) of
conjunctions. Semantics are SQL's (and those of the pyarrow expression that
``to_expression`` builds): a null never satisfies a comparison, ``!=``,
``in`` or ``not in``; only ``is null`` matches it.

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
import math
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ._stats import (
    ColumnStats,
    column_decoders,
    decimal_bounds,
    decode_entry,
    decode_value,
    int_like_range,
    normalize_literal,
    stats_supported,
    type_kind,
)

__all__ = [
    "DNF",
    "SUPPORTED_OPS",
    "Predicate",
    "filter_columns",
    "might_match",
    "normalize_filters",
    "partition_stats",
    "plan_files",
    "residual_filters",
    "to_expression",
]

#: Canonical operators, in the order error messages list them.
SUPPORTED_OPS: tuple[str, ...] = ("==", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null")
_ALIASES = {op: op for op in SUPPORTED_OPS} | {"=": "=="}
_NULL_OPS = frozenset({"is null", "is not null"})
_SET_OPS = frozenset({"in", "not in"})


@dataclass(frozen=True, slots=True)
class Predicate:
    """One normalized filter term ``column op value``.

    Attributes:
        column: the column's name.
        op: one of ``SUPPORTED_OPS`` (``"="`` is normalized to ``"=="``).
        value: the literal in the column's comparable domain (see
            ``_stats.normalize_literal``); for ``in``/``not in`` a frozenset of
            them; ``None`` for ``is null``/``is not null``. For a column whose
            type has no statistics the literal is kept as given (a tuple for
            ``in``/``not in``).
        arrow_type: the column's Arrow type (used to build pyarrow literals);
            ``None`` when unknown (the literal is then passed to pyarrow as is).
        prunable: whether statistics may be compared with ``value``: false for
            columns whose type has no statistics.
    """

    column: str
    op: str
    value: Any = None
    arrow_type: pa.DataType | None = field(default=None, compare=False)
    prunable: bool = field(default=True, compare=False)
    sorted_values: tuple[Any, ...] | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.op in _SET_OPS and self.prunable:
            try:
                object.__setattr__(self, "sorted_values", tuple(sorted(self.value)))
            except TypeError:
                pass


#: A normalized filter: a disjunction (list) of conjunctions (lists) of predicates.
DNF = list[list[Predicate]]
#: ``residual_filters`` may also answer ``True`` (no row filter needed) or ``False`` (no row can match).
Residual = DNF | bool | None


# --------------------------------------------------------------------------------------------
# Normalization


def _short(value: Any) -> str:
    """``repr`` bounded in size, for error messages about possibly huge filters."""
    return reprlib.repr(value)


def _is_term(item: Any) -> bool:
    return isinstance(item, (tuple, list)) and len(item) in (2, 3) and isinstance(item[0], str)


def _canonical_op(op: Any, item: Any) -> str:
    canonical = _ALIASES.get(" ".join(op.lower().split())) if isinstance(op, str) else None
    if canonical is None:
        raise ValueError(
            f"filter {_short(item)}: unknown operator {op!r}; supported operators: {', '.join(SUPPORTED_OPS)} (and '=')"
        )
    return canonical


def _as_values(value: Any, column: str, op: str) -> list[Any]:
    if isinstance(value, (str, bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(
            f"filter on column {column!r}: operator {op!r} needs a collection of values "
            f"(list, tuple or set), got {type(value).__name__} {_short(value)}"
        )
    if hasattr(value, "to_pylist"):  # pyarrow arrays
        return list(value.to_pylist())
    return list(value)


def _check_unprunable_literal(value: Any, typ: pa.DataType, column: str) -> None:
    """Literals for columns without statistics are kept as given; fail early if pyarrow cannot use them."""
    if value is None:
        raise ValueError(f"column {column!r} is {typ}; cannot compare with None: use 'is null' / 'is not null'")
    try:
        pa.scalar(value, type=typ)
        return
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        pass
    try:
        pa.scalar(value)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        raise TypeError(f"column {column!r} is {typ}; cannot compare with {value!r}") from None


def _make_predicate(item: Sequence[Any], schema: pa.Schema) -> Predicate:
    column = item[0]
    op = _canonical_op(item[1], item)
    idx = schema.get_field_index(column)
    if idx < 0:
        if column in schema.names:
            raise ValueError(f"filter column {column!r} is ambiguous: the dataset has several columns of that name")
        raise ValueError(
            f"filter column {column!r} is not in the dataset; its columns are: {', '.join(map(repr, schema.names))}"
        )
    typ = schema.field(idx).type
    prunable = stats_supported(typ)
    if op in _NULL_OPS:
        return _checked(Predicate(column, op, None, typ, prunable))
    if len(item) != 3:
        raise ValueError(f"filter {_short(tuple(item))}: operator {op!r} needs a value: (column, op, value)")
    value = item[2]
    if op in _SET_OPS:
        values = _as_values(value, column, op)
        if any(v is None for v in values):
            raise ValueError(
                f"filter on column {column!r}: None in an {op!r} list never matches (SQL semantics); "
                "use 'is null' / 'is not null' for nulls"
            )
        if prunable:
            return Predicate(column, op, frozenset(normalize_literal(v, typ, column=column) for v in values), typ)
        for v in values:
            _check_unprunable_literal(v, typ, column)
        return _checked(Predicate(column, op, tuple(values), typ, False))
    if prunable:
        return Predicate(column, op, normalize_literal(value, typ, column=column), typ)
    _check_unprunable_literal(value, typ, column)
    return _checked(Predicate(column, op, value, typ, False))


def _checked(p: Predicate) -> Predicate:
    """``p``, once pyarrow has shown it can evaluate it (on one null of the column's type).

    Columns with statistics always can; for the others (lists, structs,
    string_view, float16, ...) pyarrow may lack the kernel.

    Raises:
        TypeError: pyarrow cannot evaluate ``p`` on its column's type.
    """
    if p.prunable or p.arrow_type is None:
        return p
    probe = pa.table({p.column: pa.nulls(1, p.arrow_type)})
    try:
        probe.filter(to_expression([[p]]))
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid) as exc:
        raise TypeError(
            f"filter on column {p.column!r}: pyarrow cannot evaluate {p.op!r} on its type {p.arrow_type} "
            f"({exc}); filter on another column, or filter the rows after reading"
        ) from None
    return p


def normalize_filters(filters: Any, schema: pa.Schema) -> DNF | None:
    """Validate DNF ``filters`` against ``schema`` and return them normalized.

    Accepted: ``None`` or ``[]`` (no filter, returns ``None``); a list of
    terms (one conjunction); a list of lists of terms (a disjunction of
    conjunctions). A term is ``(column, op, value)``, or ``(column, op)`` for
    ``is null``/``is not null`` (whose value, if given, is ignored). Operators:
    ``SUPPORTED_OPS`` plus ``"="``, which means ``"=="`` (as in pyarrow's own
    ``filters``); case and spacing are ignored. Literals are
    converted with ``normalize_literal`` for columns with statistics; other
    columns keep the literal as given (they are filtered after reading, never
    pruned on).

    Raises:
        ValueError: an unknown column (the message names it and lists the
            dataset's columns), an unknown operator (the message lists the
            supported ones), a malformed structure (an empty conjunction, a
            term that is not a 2/3-tuple starting with a column name, a missing
            value), ``None`` as a comparison literal or inside an ``in`` list,
            or a literal with no exact value for its column (see
            ``normalize_literal``).
        TypeError: ``filters`` is not a list, ``in``/``not in`` is given a
            non-collection, a literal's kind cannot be compared with its
            column, or pyarrow cannot evaluate the operator on the column's
            type (a list or struct compared with ``==``, any filter on
            ``string_view``).
    """
    if filters is None:
        return None
    if isinstance(filters, (str, bytes, Mapping)) or not isinstance(filters, (list, tuple)):
        raise TypeError(
            "filters must be a list of (column, op, value) tuples, or a list of such lists (OR of ANDs); "
            f"got {type(filters).__name__}"
        )
    if len(filters) == 0:
        return None
    first = filters[0]
    if isinstance(first, (list, tuple)) and len(first) > 0 and not isinstance(first[0], (list, tuple)):
        conjunctions: Sequence[Any] = [filters]  # a list of terms: one conjunction
    else:
        conjunctions = filters  # a list of lists of terms
    out: DNF = []
    for conjunction in conjunctions:
        if not isinstance(conjunction, (list, tuple)):
            raise ValueError(
                f"malformed filters: {_short(conjunction)} is not a list of terms; use a list of "
                "(column, op, value) tuples, or a list of such lists (OR of ANDs)"
            )
        if len(conjunction) == 0:
            raise ValueError(f"malformed filters: empty conjunction in {_short(filters)}")
        terms = []
        for item in conjunction:
            if not _is_term(item):
                raise ValueError(
                    f"malformed filter term {_short(item)}: expected (column, op, value) or (column, 'is null') "
                    "with a column name string"
                )
            terms.append(_make_predicate(item, schema))
        out.append(terms)
    return out


def filter_columns(dnf: DNF | bool | None) -> frozenset[str]:
    """The columns a normalized filter references (pass them to ``decode_stats(columns=...)``)."""
    if dnf is None or isinstance(dnf, bool):
        return frozenset()
    return frozenset(p.column for conjunction in dnf for p in conjunction)


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
            raise ValueError(f"file statistics are not an object: {_short(column_stats)}")
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


# --------------------------------------------------------------------------------------------
# Row filter expression


_FALSE = pc.scalar(False)
_TRUE = pc.scalar(True)


def _scalar(value: Any, typ: pa.DataType | None) -> Any:
    if typ is None:
        return value
    try:
        return pa.scalar(value, type=typ)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return value  # columns without statistics: let pyarrow cast


def discrete_bounds(v: Any, typ: pa.DataType, kind: str) -> tuple[Any, Any]:
    """(largest value of integer or decimal ``typ`` <= v, smallest >= v), ``None`` where none exists.

    Shared with the Spark layer, so both compare literals with a column exactly alike.
    """
    if kind == "dec":
        return decimal_bounds(v if isinstance(v, Decimal) else Decimal(v), typ)
    lo, hi = int_like_range(typ)  # type: ignore[misc]
    if v > hi:
        return hi, None
    if v < lo:
        return None, lo
    return math.floor(v), math.ceil(v)


def _comparison(p: Predicate) -> pc.Expression:
    f = pc.field(p.column)
    op, v, typ = p.op, p.value, p.arrow_type
    kind = type_kind(typ) if (typ is not None and p.prunable) else None
    if kind in ("int", "ts", "dec"):
        # The literal may fall between or beyond the column's values (1.5 for an int, 1.234 for a
        # decimal(10, 2), 1000 for an int8): compare with the nearest representable values instead.
        floor, ceil = discrete_bounds(v, typ, kind)  # type: ignore[arg-type]
        exact = floor is not None and floor == ceil
        if op == "==":
            return f == pa.scalar(floor, typ) if exact else _FALSE
        if op == "!=":
            return f != pa.scalar(floor, typ) if exact else f.is_valid()
        if op == "<":
            if exact:
                return f < pa.scalar(floor, typ)
            return _FALSE if floor is None else f <= pa.scalar(floor, typ)
        if op == "<=":
            return _FALSE if floor is None else f <= pa.scalar(floor, typ)
        if op == ">":
            if exact:
                return f > pa.scalar(ceil, typ)
            return _FALSE if ceil is None else f >= pa.scalar(ceil, typ)
        return _FALSE if ceil is None else f >= pa.scalar(ceil, typ)  # ">="
    s = _scalar(v, typ)
    if op == "==":
        return f == s
    if op == "!=":
        return f != s
    if op == "<":
        return f < s
    if op == "<=":
        return f <= s
    if op == ">":
        return f > s
    return f >= s  # ">="


def _value_set(p: Predicate) -> pa.Array:
    typ = p.arrow_type
    values = list(p.sorted_values if p.sorted_values is not None else p.value)
    kind = type_kind(typ) if (typ is not None and p.prunable) else None
    if kind in ("int", "ts", "dec"):
        kept = []
        for v in values:  # values the column cannot hold can neither match nor exclude anything
            floor, ceil = discrete_bounds(v, typ, kind)  # type: ignore[arg-type]
            if floor is not None and floor == ceil:
                kept.append(floor)
        values = kept
    elif kind == "float" and any(v == 0 for v in values):
        # is_in hashes floats, so -0.0 and 0.0 differ there; as with ==, they must be equal.
        values = [v for v in values if v != 0] + [0.0, -0.0]
    if typ is None:
        return pa.array(values)
    try:
        return pa.array(values, type=typ)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return pa.array(values)


def _term_expression(p: Predicate) -> pc.Expression:
    f = pc.field(p.column)
    op = p.op
    if op == "is null":
        return f.is_null()
    if op == "is not null":
        return f.is_valid()
    if op == "in":
        return f.isin(_value_set(p))
    if op == "not in":
        return ~f.isin(_value_set(p)) & f.is_valid()  # a null is not "not in" anything
    if op in ("==", "!=", "<", "<=", ">", ">="):
        return _comparison(p)
    raise ValueError(f"unknown operator {op!r}; supported operators: {', '.join(SUPPORTED_OPS)}")


def to_expression(dnf: DNF | bool) -> pc.Expression:
    """The pyarrow row filter for a normalized DNF (or a ``residual_filters`` answer).

    ``Table.filter``/``Dataset.to_table(filter=...)`` with it keep exactly the
    rows that satisfy ``dnf`` under SQL semantics (nulls satisfy only
    ``is null``; ``!=`` and ``not in`` do not match nulls). Literals are built
    with the column's own Arrow type; a literal the column cannot hold exactly
    (``1.5`` for an int column, ``1.234`` for ``decimal(10, 2)``, ``1000`` for
    ``int8``) is compared through the nearest values the column can hold, so
    the result is the exact comparison with the literal.

    ``True`` gives an always-true expression, ``False`` an always-false one.

    Raises:
        ValueError: a predicate has an unknown operator (hand-built predicates).
    """
    if dnf is True:
        return _TRUE
    if dnf is False:
        return _FALSE
    disjunction: pc.Expression | None = None
    for conjunction in dnf:
        expr: pc.Expression | None = None
        for p in conjunction:
            term = _term_expression(p)
            expr = term if expr is None else expr & term
        if expr is None:
            expr = _TRUE
        disjunction = expr if disjunction is None else disjunction | expr
    return _FALSE if disjunction is None else disjunction
