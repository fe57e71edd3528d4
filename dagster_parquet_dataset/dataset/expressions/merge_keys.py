"""Merge planning helpers: source-key checks, file pruning by key, key matching."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from .pruning import ColumnStats

if TYPE_CHECKING:
    from ..manifest import DatasetManifest

STRATEGIES = ("upsert", "insert", "update")


@dataclass(frozen=True)
class MergeResult:
    """What a merge did.

    Attributes:
        inserted: source rows added as new rows.
        updated: source rows whose key matched existing rows, which they replaced
            whole (a key stored in two rows is one update that replaces both), so
            ``inserted + updated`` is the source's row count for an upsert.
        rewritten_files: files that held matched keys; the new version no longer
            references them.
        preserved_files: files the new version keeps as they were.
        new_files: files the merge wrote (rewrites of matched files, inserts).
        version: the committed version (``None`` when nothing changed).
        manifest: the committed manifest, or the live one when nothing changed (``None`` when
            the merge's writer does not know it); not part of equality.
    """

    inserted: int
    updated: int
    rewritten_files: tuple[str, ...]
    preserved_files: tuple[str, ...]
    new_files: tuple[str, ...]
    version: int | None
    manifest: DatasetManifest | None = field(default=None, repr=False, compare=False)

    @classmethod
    def committed(
        cls,
        manifest: DatasetManifest,
        new_files: Iterable[str] = (),
        *,
        rewritten: Iterable[str] = (),
        inserted: int = 0,
        updated: int = 0,
    ) -> MergeResult:
        """The result of a merge that committed ``manifest``, writing ``new_files`` in place of ``rewritten``
        (paths relative to the dataset key): every other part of ``manifest`` was preserved. With no new and
        no rewritten files: a merge an earlier attempt committed already."""
        new = tuple(new_files)
        new_set = set(new)
        return cls(
            inserted=inserted,
            updated=updated,
            rewritten_files=tuple(sorted(rewritten)),
            preserved_files=tuple(p for p in manifest.parts if p not in new_set),
            new_files=new,
            version=manifest.version,
            manifest=manifest,
        )

    @classmethod
    def unchanged(cls, live: DatasetManifest) -> MergeResult:
        """The result of a merge with nothing to do on ``live``: nothing committed, every part preserved."""
        return cls(0, 0, (), tuple(live.parts), (), None, live)


def check_key_columns(key_columns: Any, strategy: Any, names: Sequence[str]) -> list[str]:
    """``key_columns`` as a list, checked against the source's column ``names``, and ``strategy``.

    Raises:
        TypeError: ``key_columns`` is not a non-empty list of column names.
        ValueError: unknown strategy, a key column missing from the source, or a repeated key column.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown merge strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if isinstance(key_columns, (str, bytes)) or not isinstance(key_columns, Sequence) or not key_columns:
        raise TypeError(f"key_columns must be a non-empty list of column names, got {key_columns!r}")
    keys = list(key_columns)
    for col in keys:
        if not isinstance(col, str):
            raise TypeError(f"key_columns must hold column names, got {col!r}")
        if col not in names:
            raise ValueError(f"key column {col!r} is not in the source; its columns are {list(names)}")
    if len(set(keys)) != len(keys):
        raise ValueError(f"key_columns repeats a column: {keys}")
    return keys


def check_merge_args(source: Any, key_columns: Any, strategy: Any) -> list[str]:
    """Validate the source table, key columns and strategy.

    Raises:
        TypeError: ``source`` is not a ``pyarrow.Table`` or ``key_columns`` is not a list of names.
        ValueError: unknown strategy, a repeated column name, key column missing from
            the source, a column type a merge cannot handle (see :func:`check_merge_types`),
            null or NaN keys, or duplicate keys (the message shows one; ``-0.0`` and
            ``0.0`` are the same key).
    """
    if not isinstance(source, pa.Table):
        raise TypeError(f"merge source must be a pyarrow.Table, got {type(source).__module__}.{type(source).__name__}")
    names = source.column_names
    repeated = sorted({n for n in names if names.count(n) > 1}) if len(set(names)) != len(names) else []
    if repeated:
        raise ValueError(f"the source names the column(s) {repeated} more than once; column names must be unique")
    keys = check_key_columns(key_columns, strategy, source.column_names)
    for col in keys:
        nulls = source.column(col).null_count
        if nulls:
            raise ValueError(f"key column {col!r} has {nulls} null values in the source; keys must not be null")
        if pat.is_floating(source.schema.field(col).type):
            nans = pc.sum(pc.is_nan(source.column(col))).as_py() or 0
            if nans:
                raise ValueError(
                    f"key column {col!r} has {nans} NaN values in the source; NaN equals no value (not even "
                    "itself), so it cannot identify a row: keys must not be NaN"
                )
    check_merge_types(source.schema, keys)
    if source.num_rows:
        counts = _key_table(source, keys).group_by(keys, use_threads=False).aggregate([([], "count_all")])
        dup = counts.filter(pc.greater(counts.column("count_all"), 1))
        if dup.num_rows:
            example = {k: dup.column(k)[0].as_py() for k in keys}
            raise ValueError(
                f"the source has {dup.num_rows} duplicate keys (e.g. {example} appears "
                f"{dup.column('count_all')[0].as_py()} times); each key may appear once"
            )
    return keys


def _probe(fn: Any) -> bool:
    try:
        fn()
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
        return False
    return True


@lru_cache(maxsize=128)
def _usable_key(typ: pa.DataType) -> bool:
    one = pa.table({"k": pa.nulls(1, typ)})
    return _probe(lambda: one.join(one, keys=["k"])) and _probe(lambda: pc.sort_indices(one.column("k")))


@lru_cache(maxsize=128)
def _movable(typ: pa.DataType) -> bool:
    return _probe(lambda: pa.nulls(1, typ).take(pa.array([0])))


def check_merge_types(schema: pa.Schema, keys: Sequence[str]) -> None:
    """Refuse column types a merge cannot handle, before anything is read or written.

    Key columns must support pyarrow's hash join and sort (no structs, lists,
    maps or string_view); every column must support ``take`` (no string_view or
    binary_view), since a merge moves rows between files.

    Raises:
        ValueError: a key column or a column of ``schema`` has such a type; the
            message names it.
    """
    bad_keys = [f"{k!r} ({schema.field(k).type})" for k in keys if not _usable_key(schema.field(k).type)]
    if bad_keys:
        raise ValueError(
            f"merge key column(s) {', '.join(bad_keys)} cannot be matched: pyarrow cannot join or sort on that "
            "type; use scalar key columns (integers, strings, dates, timestamps, decimals)"
        )
    bad = [f"{f.name!r} ({f.type})" for f in schema if not _movable(f.type)]
    if bad:
        raise ValueError(
            f"cannot merge data with column(s) {', '.join(bad)}: pyarrow cannot move rows of that type; "
            "store them as string/binary instead of string_view/binary_view to merge"
        )


def _normalized(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """``column`` with ``-0.0`` turned into ``0.0`` if it is a float column (IEEE: ``-0.0 + 0.0 == +0.0``),
    so that hashing (joins, group-bys) treats them as the one key that ``==`` says they are."""
    if pat.is_floating(column.type) and not pat.is_float16(column.type):
        return pc.add(column, pa.scalar(0.0, column.type))
    return column


def _key_table(table: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """The key columns of ``table``, float keys normalised (see :func:`_normalized`)."""
    keys = table.select(list(key_columns))
    return pa.table([_normalized(keys.column(i)) for i in range(keys.num_columns)], names=keys.column_names)


def _comparable(column: pa.ChunkedArray | pa.Array) -> list[Any]:
    """Sorted distinct values in the domain the statistics decode to."""
    column = _normalized(column)
    if pat.is_timestamp(column.type):
        column = column.cast(pa.int64())
    unique = pc.unique(column)
    return unique.take(pc.sort_indices(unique)).to_pylist()  # type: ignore[no-any-return]


class KeyIndex:
    """The source's keys, sorted per key column, to ask "might this file hold one?" in O(log n)."""

    def __init__(self, source: pa.Table, key_columns: Sequence[str]) -> None:
        self._values = {col: _comparable(source.column(col)) for col in key_columns}

    def might_contain(self, stats: Mapping[str, ColumnStats]) -> bool:
        """False only if, for some key column, no source value lies in the file's [min, max]."""
        for col, values in self._values.items():
            s = stats.get(col)
            if s is None or s.min is None or s.max is None:
                continue  # unknown: cannot rule the file out on this column
            if not values:
                return False
            i = bisect_left(values, s.min)
            if i == len(values) or values[i] > s.max:
                return False
        return True


def match_keys(target: pa.Table, source: pa.Table, key_columns: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(target_rows, source_rows)`` of equal keys (an inner hash join on the keys only).

    Keys are equal as ``==`` says: ``-0.0`` matches ``0.0``; NaN and null match nothing. A target key
    stored in several rows gives one pair per row, so a source row may appear more than once in
    ``source_rows``: count distinct source rows (``np.unique``) to count updates.
    """
    left = _key_table(target, key_columns).append_column(
        "__pds_t", pa.array(np.arange(target.num_rows, dtype=np.int64))
    )
    right = _key_table(source, key_columns).append_column(
        "__pds_s", pa.array(np.arange(source.num_rows, dtype=np.int64))
    )
    joined = left.join(right, keys=list(key_columns), join_type="inner", use_threads=True)
    return (
        joined.column("__pds_t").to_numpy(zero_copy_only=False),
        joined.column("__pds_s").to_numpy(zero_copy_only=False),
    )
