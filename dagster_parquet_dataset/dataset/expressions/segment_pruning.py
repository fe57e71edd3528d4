"""Vectorized pruning over a segment table (format 2).

A segment carries, next to the entry columns, typed ``min:<col>`` / ``max:<col>``
columns for the dataset's integer, float, string, date and timestamp columns
(partition columns included, where min = max = the file's value), in the
column's comparable domain (``format.values``). ``might_match_mask`` evaluates a
normalized filter over them with Arrow compute and answers, per file, "might
match" (``True``) or "cannot match" (``False``); it is conservative (a missing
or null bound, an operator it does not handle, a column without pruning
columns: ``True``), and the files it keeps go through the exact per-file
planning of ``pruning.plan_files``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..format.stats import column_decoders, decode_entry
from ..format.values import decode_value, type_kind
from .filters import DNF, Predicate

_STORAGE = {"int": pa.int64(), "float": pa.float64(), "str": pa.string(), "date": pa.date32(), "ts": pa.int64()}
#: ``in`` lists longer than this are not evaluated vectorized (the per-file planning still prunes them).
_MAX_IN = 64


def pruning_columns(entries: Sequence[Any], schema: pa.Schema) -> dict[str, pa.Array]:
    """``min:<col>`` / ``max:<col>`` arrays for ``entries`` (``FileEntry`` objects); a bound that
    is unknown or malformed is null (the exact planning then decides, and reports malformed ones)."""
    decoders = column_decoders(schema)
    out: dict[str, pa.Array] = {}
    for field in schema:
        kind = type_kind(field.type)
        storage = _STORAGE.get(kind or "")
        if storage is None or field.name not in decoders:
            continue
        spec = decoders[field.name]
        lows: list[Any] = []
        highs: list[Any] = []
        for e in entries:
            lo = hi = None
            try:
                values = e.partition_values
                if values is not None and field.name in values:
                    raw = values[field.name]
                    lo = hi = None if raw is None else decode_value(raw, field.type)
                elif e.stats and field.name in e.stats:
                    lo, hi, _nulls = decode_entry(field.name, e.stats[field.name], spec)
            except (ValueError, TypeError):
                lo = hi = None
            lows.append(lo)
            highs.append(hi)
        try:
            out[f"min:{field.name}"] = pa.array(lows, storage)
            out[f"max:{field.name}"] = pa.array(highs, storage)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            out.pop(f"min:{field.name}", None)  # e.g. a uint64 beyond int64: no vectorized pruning for it
    return out


def _term(table: pa.Table, p: Predicate) -> pa.ChunkedArray | None:
    """Per file, whether ``p`` might match; ``None`` for "every file might"."""
    names = table.column_names
    if not p.prunable or f"min:{p.column}" not in names or f"max:{p.column}" not in names:
        return None
    lo, hi = table.column(f"min:{p.column}"), table.column(f"max:{p.column}")
    values = sorted(p.value) if p.op == "in" and isinstance(p.value, frozenset) else [p.value]
    if p.op not in ("==", "<", "<=", ">", ">=", "in") or len(values) > _MAX_IN:
        return None
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
        return None
    try:
        scalars = [pa.scalar(v, lo.type) for v in values]
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        return None
    v = scalars[0]
    if p.op == "<":
        result = pc.less(lo, v)
    elif p.op == "<=":
        result = pc.less_equal(lo, v)
    elif p.op == ">":
        result = pc.greater(hi, v)
    elif p.op == ">=":
        result = pc.greater_equal(hi, v)
    else:
        result = None
        for s in scalars:
            one = pc.and_kleene(pc.less_equal(lo, s), pc.greater_equal(hi, s))
            result = one if result is None else pc.or_kleene(result, one)
    return pc.fill_null(result, True)


def might_match_mask(table: pa.Table, dnf: DNF) -> pa.ChunkedArray | None:
    """Per row of ``table`` (a segment table), whether the file might hold rows matching ``dnf``;
    ``None`` when the columns prove nothing."""
    total = None
    for conjunction in dnf:
        conj = None
        for p in conjunction:
            term = _term(table, p)
            if term is not None:
                conj = term if conj is None else pc.and_(conj, term)
        if conj is None:
            return None  # this alternative keeps every file
        total = conj if total is None else pc.or_(total, conj)
    return total
