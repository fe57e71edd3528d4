"""Handlers for polars: ``polars.DataFrame`` and ``polars.LazyFrame`` (polars is imported on use)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ._handler_base import ArrowConvertingHandler, is_subclass


def frame_to_arrow(frame: Any) -> pa.Table:
    """``frame.to_arrow()`` for a ``polars.DataFrame``, naming the column when a type cannot be converted.

    A ``pl.Object`` column (Python objects, also inside a list or struct) is refused first: polars
    would hand Arrow the objects' pointers as ``fixed_size_binary[8]`` values.

    Raises:
        TypeError: a column's polars type has no Arrow form (e.g. ``Int128``, ``UInt128``, ``Object``);
            the message names the column and its type.
    """
    for name, dtype in frame.schema.items():
        if _holds_objects(dtype):
            raise TypeError(
                f"cannot store this polars frame as Parquet: column {name!r} has type {dtype}, which holds "
                "Python objects that Arrow and Parquet cannot hold; convert them to a supported type first "
                f"(e.g. pl.col({name!r}).map_elements(str, return_dtype=pl.String))"
            )
    try:
        return frame.to_arrow()  # type: ignore[no-any-return]
    except Exception as whole:  # polars and pyarrow raise several unrelated types for an unsupported dtype
        for name, dtype in frame.schema.items():
            try:
                frame.select(name).to_arrow()
            except Exception as exc:  # noqa: BLE001 - see above
                raise TypeError(
                    f"cannot store this polars frame as Parquet: column {name!r} has type {dtype}, which "
                    f"Arrow and Parquet cannot hold ({exc}); cast it to a supported type first"
                ) from None
        raise TypeError(f"cannot store this polars frame as Parquet: {whole}") from None


def _holds_objects(dtype: Any) -> bool:
    """Whether a polars ``dtype`` is ``Object`` or nests one (in a ``List``, ``Array`` or ``Struct``)."""
    import polars as pl

    if dtype == pl.Object:
        return True
    inner = getattr(dtype, "inner", None)
    if inner is not None and _holds_objects(inner):
        return True
    return any(_holds_objects(f.dtype) for f in getattr(dtype, "fields", None) or ())


class PolarsDataFrameHandler(ArrowConvertingHandler):
    """``polars.DataFrame``."""

    type_name = "polars.DataFrame"

    def handles(self, python_type: type) -> bool:
        return is_subclass(python_type, "polars", "DataFrame")

    def to_arrow(self, obj: Any) -> pa.Table:
        return frame_to_arrow(obj)

    def from_arrow(self, table: pa.Table) -> Any:
        import polars as pl

        return pl.from_arrow(table)

    def combine(self, objs: Sequence[Any]) -> Any:
        import polars as pl

        try:
            return pl.concat(list(objs), how="vertical_relaxed")
        except (pl.exceptions.PolarsError, TypeError, ValueError) as exc:
            raise ValueError(f"the partitions cannot be concatenated: {exc}") from None


class PolarsLazyFrameHandler(ArrowConvertingHandler):
    """``polars.LazyFrame``: collected on write; loaded as ``polars.scan_pyarrow_dataset`` over a lazy scan
    of every partition the input asks for (``columns`` and ``filters`` pushed down, nothing read until
    the frame is collected)."""

    type_name = "polars.LazyFrame"
    lazy = True

    def handles(self, python_type: type) -> bool:
        return is_subclass(python_type, "polars", "LazyFrame")

    def to_arrow(self, obj: Any) -> pa.Table:
        return frame_to_arrow(obj.collect())

    def from_arrow(self, table: pa.Table) -> Any:
        import polars as pl

        return pl.from_arrow(table).lazy()  # type: ignore[union-attr]

    def from_scan(self, dataset: Any, columns: Sequence[str] | None) -> Any:
        import polars as pl

        frame = pl.scan_pyarrow_dataset(dataset)
        return frame.select(list(columns)) if columns is not None else frame

    def combine(self, objs: Sequence[Any]) -> Any:
        import polars as pl

        return pl.concat(list(objs), how="vertical_relaxed")
