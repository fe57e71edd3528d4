"""The ``pandas.DataFrame`` handler: the index (named, multi-level or a range) round-trips."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ..dataset import ParquetDatasetStore
from ..errors import ManifestCorrupted, NotFound
from ._handler_base import ArrowConvertingHandler, is_subclass


def _index_columns(schema: pa.Schema | None) -> list[Any] | None:
    """The ``index_columns`` pyarrow's pandas metadata in ``schema`` records; ``None`` without readable metadata."""
    raw = (schema.metadata or {}).get(b"pandas") if schema is not None else None
    if raw is None:
        return None
    try:
        return list(json.loads(raw).get("index_columns", []))
    except ValueError:
        return None


def _why(frame: Any, exc: Exception) -> str:
    """What ``pyarrow.Table.from_pandas`` failed on: the first column that does not convert by itself, with
    the Python types of an ``object`` column's values and the cast that fixes it; else ``exc`` as it is."""
    for name in frame.columns:
        column = frame[name]
        if not hasattr(column, "dtype"):
            continue  # a repeated column name: pyarrow's own message says so
        try:
            pa.array(column, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as own:
            kinds = sorted(
                {type(v).__name__ for v in column if v is not None and not (isinstance(v, float) and v != v)}
            )
            if column.dtype != object or len(kinds) < 2:
                return f"column {name!r} ({column.dtype}) cannot be converted: {own}"
            return (
                f"column {name!r} is an object column holding values of several Python types "
                f"({', '.join(kinds)}), which one Parquet column cannot hold; cast it to one type first, e.g. "
                f"df[{name!r}] = df[{name!r}].astype('string') (or map the values to one type)"
            )
    return str(exc)


class PandasDataFrameHandler(ArrowConvertingHandler):
    """``pandas.DataFrame``; the index (named, multi-level or a range) round-trips.

    The DataFrame goes through ``pyarrow.Table.from_pandas`` with
    ``preserve_index=None``: a non-default index is stored as columns and a
    ``RangeIndex`` as metadata only, and pyarrow's pandas metadata restores
    either on load. A column projection keeps the index columns.
    """

    type_name = "pandas.DataFrame"

    def handles(self, python_type: type) -> bool:
        return is_subclass(python_type, "pandas", "DataFrame")

    def to_arrow(self, obj: Any) -> pa.Table:
        """``pyarrow.Table.from_pandas(obj, preserve_index=None)``.

        Raises:
            TypeError: a column cannot be converted; the message names it and, for an ``object``
                column of values of several Python types, lists them and says how to cast it.
        """
        try:
            return pa.Table.from_pandas(obj, preserve_index=None)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise TypeError(f"cannot store this pandas.DataFrame as Parquet: {_why(obj, exc)}") from None

    def from_arrow(self, table: pa.Table) -> Any:
        return table.to_pandas()

    def columns_to_read(
        self, datasets: ParquetDatasetStore, key: str, columns: Sequence[str] | None, version: int | None
    ) -> Sequence[str] | None:
        """``columns`` plus the index columns the dataset's pandas metadata names."""
        if columns is None or isinstance(columns, (str, bytes)):
            return columns
        try:
            schema = datasets.read_manifest(key, version=version).schema
        except (NotFound, ManifestCorrupted):
            # The read itself reports it precisely: absent, incomplete, or version not retained.
            return columns
        index_columns = _index_columns(schema) or []
        return list(columns) + [c for c in index_columns if isinstance(c, str) and c not in columns]

    def _scan_fits(self, schema: pa.Schema) -> bool:
        # Only an index stored as columns survives one scan unchanged. A RangeIndex (stored as
        # metadata), or no pandas metadata at all, gives each partition its own 0..n-1 index, which
        # the concatenation keeps and one scanned table cannot rebuild: those read per partition.
        index_columns = _index_columns(schema)
        return bool(index_columns) and all(isinstance(c, str) for c in index_columns or ())

    def combine(self, objs: Sequence[Any]) -> Any:
        """The partitions' frames one after the other. Frames that each have an unnamed ``RangeIndex`` (the
        default index, stored as metadata only) get one fresh ``RangeIndex`` over all rows, as
        dagster-deltalake gives; any other index (``order_id``, a multi-level one) is kept as written.

        Raises:
            ValueError: the frames cannot be concatenated.
        """
        import pandas as pd

        frames = list(objs)
        fresh = all(isinstance(f.index, pd.RangeIndex) and f.index.name is None for f in frames)
        try:
            return pd.concat(frames, ignore_index=fresh)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the partitions cannot be concatenated: {exc}") from None
