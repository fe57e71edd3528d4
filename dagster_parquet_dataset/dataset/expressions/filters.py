"""Filters in disjunctive normal form: parsing and normalization, and the Arrow row filter.

Filters follow pyarrow's DNF: a list of ``(column, op, value)`` tuples is one
conjunction (AND); a list of such lists is a disjunction (OR) of
conjunctions. Semantics are SQL's (and those of the pyarrow expression that
``to_expression`` builds): a null never satisfies a comparison, ``!=``,
``in`` or ``not in``; only ``is null`` matches it. ``normalize_filters``
checks every term against the schema and puts each literal in its column's
comparable domain (``format.values.normalize_literal``), so that ``pruning`` can
compare it with statistics. Pure functions, no I/O.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..format.values import (
    decimal_bounds,
    int_like_range,
    normalize_literal,
    stats_supported,
    type_kind,
)

__all__ = [
    "DNF",
    "SUPPORTED_OPS",
    "Predicate",
    "discrete_bounds",
    "filter_columns",
    "normalize_filters",
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
            ``format.values.normalize_literal``); for ``in``/``not in`` a frozenset of
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
