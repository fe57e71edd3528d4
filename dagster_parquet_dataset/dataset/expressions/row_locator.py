"""Mapping rows to a run's partition keys by column values: plain data, pyarrow and numpy only.

A :class:`RowLocator` holds, per partitions dimension, the column to read, the
run's keys and, for time windows, each key's window as microseconds since the
epoch (both as UTC instants and as wall-clock times). It is built from Dagster
definitions by the Dagster layer (``PartitionLocator.build``) and pickled as
is to Spark executors, which need neither Dagster nor anything else but
pyarrow and numpy to run it:

* time windows: a ``timestamp`` with a time zone is an instant and lands in
  the window that contains it; a ``timestamp`` without one, a ``date32`` or a
  ``date64`` is wall-clock time (a date is its midnight); a string must equal
  the key;
* other partitions: the value's ``str()`` form must equal the key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: How messages name the setting that picks the partition columns.
_EXPR = "partition_expr"

_UNIT_US = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": None}

#: Codes :meth:`Dimension.codes` gives a value of no key, and a null.
OUTSIDE = -1
_NULL = -2


@dataclass(frozen=True)
class Dimension:
    """How one column maps to the run's keys of one partitions dimension (plain data).

    Attributes:
        column: the column holding the dimension's value.
        keys: the run's distinct keys of this dimension; a row's code is an index into it.
        windows: for time-window partitions, ``(start, end)`` per key as UTC instants and as
            wall-clock times (microseconds since the epoch): ``(start_i, end_i, start_w, end_w)``.
    """

    column: str
    keys: tuple[str, ...]
    windows: tuple[tuple[int, int, int, int], ...] | None = None

    def codes(self, values: pa.ChunkedArray | pa.Array) -> np.ndarray:
        """Index into :attr:`keys` per row; ``-1`` for a value of no key, ``-2`` for a null.

        Raises:
            TypeError: the column's type cannot map to this kind of partition.
        """
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        typ = values.type
        if self.windows is not None and not (pa.types.is_string(typ) or pa.types.is_large_string(typ)):
            out = self._window_codes(values)
        else:
            out = self._key_codes(values)
        if values.null_count:
            out[np.asarray(values.is_null())] = _NULL
        return out

    def _window_codes(self, values: pa.Array) -> np.ndarray:
        typ = values.type
        filled = values.fill_null(0) if values.null_count else values
        if pa.types.is_timestamp(typ):
            raw = filled.view(pa.int64()).to_numpy()
            factor = _UNIT_US[typ.unit]
            moments = raw // 1000 if factor is None else raw * factor
            instant = typ.tz is not None
        elif pa.types.is_date32(typ):
            moments = filled.view(pa.int32()).to_numpy().astype(np.int64) * 86_400_000_000
            instant = False
        elif pa.types.is_date64(typ):
            moments = filled.view(pa.int64()).to_numpy() * 1000
            instant = False
        else:
            raise TypeError(
                f"column {self.column!r} is {typ}, but time-window partitions map a date, datetime or timestamp "
                "(or the partition key as a string) to the window that contains it"
            )
        assert self.windows is not None
        bounds = np.array(self.windows, dtype=np.int64).reshape(-1, 4)
        starts, ends = (bounds[:, 0], bounds[:, 1]) if instant else (bounds[:, 2], bounds[:, 3])
        order = np.argsort(starts, kind="stable")
        sorted_starts, sorted_ends = starts[order], ends[order]
        pos = np.searchsorted(sorted_starts, moments, side="right") - 1
        safe = np.clip(pos, 0, len(order) - 1)
        inside = (pos >= 0) & (moments < sorted_ends[safe])
        return np.where(inside, order[safe], OUTSIDE).astype(np.int64)

    def _key_codes(self, values: pa.Array) -> np.ndarray:
        typ = values.type
        key_set = pa.array(self.keys, pa.string())
        if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_integer(typ):
            # Arrow's string form of an integer is Python's str() of it.
            found = pc.index_in(values.cast(pa.string()), value_set=key_set)
            return found.fill_null(OUTSIDE).to_numpy(zero_copy_only=False).astype(np.int64)
        # Other types: str() of each distinct value, in Python (partition columns have few distinct values).
        distinct = pc.unique(values)
        index = {k: i for i, k in enumerate(self.keys)}
        lookup = np.array(
            [OUTSIDE if v is None else index.get(str(v), OUTSIDE) for v in distinct.to_pylist()] or [OUTSIDE],
            dtype=np.int64,
        )
        where = pc.index_in(values, value_set=distinct).fill_null(0).to_numpy(zero_copy_only=False)
        return lookup[where]


@dataclass(frozen=True)
class RowLocator:
    """Maps rows to a run's partition keys: plain data and pyarrow/numpy code, picklable to Spark executors.

    Attributes:
        dimensions: one per partitions dimension (sorted by name for multi-partitions).
        lookup: combined dimension codes (mixed radix, first dimension most significant) ->
            index of the run's partition key, ``-1`` for a combination the run does not cover.
        partition_keys: the run's partition keys, in order; a row's target is an index into it.
    """

    dimensions: tuple[Dimension, ...]
    lookup: tuple[int, ...]
    partition_keys: tuple[str, ...]

    @property
    def columns(self) -> list[str]:
        """The columns the locator reads."""
        return [d.column for d in self.dimensions]

    def codes(self, data: pa.Table | pa.RecordBatch) -> np.ndarray:
        """The index of each row's partition key in :attr:`partition_keys`.

        Raises:
            ValueError: a column is missing, or a row's value is null or maps to no key
                of the run (the message names the value, the column and the run's keys).
            TypeError: a column's type cannot map to its kind of partition.
        """
        names = data.schema.names
        total = np.zeros(data.num_rows, dtype=np.int64)
        for dim in self.dimensions:
            if dim.column not in names:
                raise ValueError(f"the {_EXPR} column {dim.column!r} is not in the output; its columns are {names}")
            codes = dim.codes(data.column(dim.column))
            bad = np.flatnonzero(codes < 0)
            if bad.size:
                self._raise_bad(data, dim, int(bad[0]), int(codes[bad[0]]))
            total = total * len(dim.keys) + codes
        targets = np.asarray(self.lookup, dtype=np.int64)[total] if len(self.dimensions) > 1 else total
        outside = np.flatnonzero(targets < 0)
        if outside.size:
            row = int(outside[0])
            values = ", ".join(f"{d.column}={data.column(d.column)[row].as_py()!r}" for d in self.dimensions)
            raise ValueError(
                f"row {row} ({values}) maps to a partition this run does not cover; the run covers "
                f"{self._describe_keys(self.partition_keys)}. Nothing was written."
            )
        return targets

    def _raise_bad(self, data: pa.Table | pa.RecordBatch, dim: Dimension, row: int, code: int) -> None:
        if code == _NULL:
            raise ValueError(
                f"row {row} has a null in the {_EXPR} column {dim.column!r}; every row needs a "
                f"value of one of this run's partitions ({self._describe_keys(dim.keys)}). Nothing was written."
            )
        value = data.column(dim.column)[row].as_py()
        raise ValueError(
            f"row {row} has {dim.column}={value!r} in the {_EXPR} column {dim.column!r}, which is "
            f"in no partition of this run ({self._describe_keys(dim.keys)}). Nothing was written."
        )

    @staticmethod
    def _describe_keys(keys: Sequence[str]) -> str:
        if len(keys) <= 6:
            return ", ".join(map(repr, keys))
        return f"{len(keys)} keys: {keys[0]!r}, {keys[1]!r}, ..., {keys[-1]!r}"
