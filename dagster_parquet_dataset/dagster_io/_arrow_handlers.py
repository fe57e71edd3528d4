"""Handlers for pyarrow's own types: ``Table``, ``RecordBatchReader`` and ``dataset.Dataset``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ._handler_base import ArrowConvertingHandler, concat_arrow, is_subclass, scanner_columns


class ArrowTableHandler(ArrowConvertingHandler):
    """``pyarrow.Table``, written and read as is."""

    type_name = "pyarrow.Table"

    def handles(self, python_type: type) -> bool:
        return isinstance(python_type, type) and issubclass(python_type, pa.Table)

    def to_arrow(self, obj: Any) -> pa.Table:
        return obj  # type: ignore[no-any-return]

    def from_arrow(self, table: pa.Table) -> pa.Table:
        return table

    def combine(self, objs: Sequence[Any]) -> pa.Table:
        return concat_arrow(objs)


class RecordBatchReaderHandler(ArrowConvertingHandler):
    """``pyarrow.RecordBatchReader``: an output is streamed part by part, never held whole.

    Loading is lazy: the reader streams a scan (``scan_dataset`` / ``scan_datasets``
    over every partition the input asks for) with ``columns`` and ``filters``
    pushed down; nothing is read until it is consumed.
    """

    type_name = "pyarrow.RecordBatchReader"
    lazy = True

    def handles(self, python_type: type) -> bool:
        return isinstance(python_type, type) and issubclass(python_type, pa.RecordBatchReader)

    def to_arrow(self, obj: Any) -> pa.RecordBatchReader:
        return obj  # type: ignore[no-any-return]

    def from_arrow(self, table: pa.Table) -> pa.RecordBatchReader:
        return table.to_reader()

    def from_scan(self, dataset: Any, columns: Sequence[str] | None) -> pa.RecordBatchReader:
        return dataset.scanner(columns=scanner_columns(columns)).to_reader()

    def combine(self, objs: Sequence[Any]) -> pa.RecordBatchReader:
        return concat_arrow([r.read_all() for r in objs]).to_reader()


class ArrowDatasetHandler(ArrowConvertingHandler):
    """``pyarrow.dataset.Dataset``: written by streaming its batches; loaded as a lazy scan.

    Loading returns ``ParquetDatasetStore.scan_dataset`` (one partition) or
    ``scan_datasets`` (the union of every partition the input asks for), with
    ``filters`` attached as the dataset's row filter (pushed down to the Parquet
    reader) and ``columns`` as its columns. Nothing is read until it is scanned.
    Where ``filters`` name columns outside ``columns``, the dataset carries
    those too, after ``columns``.
    """

    type_name = "pyarrow.dataset.Dataset"
    lazy = True

    def handles(self, python_type: type) -> bool:
        return is_subclass(python_type, "pyarrow.dataset", "Dataset")

    def to_arrow(self, obj: Any) -> pa.RecordBatchReader:
        return obj.scanner().to_reader()  # type: ignore[no-any-return]

    def from_arrow(self, table: pa.Table) -> Any:
        import pyarrow.dataset as pads

        return pads.dataset(table)

    def from_scan(self, dataset: Any, columns: Sequence[str] | None) -> Any:
        return dataset

    def combine(self, objs: Sequence[Any]) -> Any:
        import pyarrow.dataset as pads

        try:
            return pads.dataset(list(objs))
        except ValueError:  # filtered datasets cannot form a UnionDataset
            return pads.dataset(concat_arrow([d.to_table() for d in objs]))
