"""``head KEY``: the first rows of a dataset, reading only the files those rows are in."""

from __future__ import annotations

import argparse
from typing import Any

from ..dataset import ParquetDatasetStore
from ._errors import UsageError
from ._format import plural, table
from ._maintenance import parsed_filters
from ._output import OK, emit
from ._targets import require_dataset

_MAX_CELL = 60


def cmd_head(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    if args.n < 0:
        raise UsageError(f"-n must be 0 or more, got {args.n}")
    key = require_dataset(ds, args.key)
    terms = parsed_filters(args, ds, key)
    columns = _columns(args.columns)
    scan = ds.scan_dataset(key, columns=columns, filters=terms or None, version=args.dataset_version)
    # One file at a time, one batch at a time: the scan stops as soon as it holds n rows, so only the
    # files (and row groups) those rows are in are read.
    rows = scan.head(max(args.n, 0), batch_size=max(args.n, 1), batch_readahead=0, fragment_readahead=0)
    if columns is not None:
        rows = rows.select(columns)  # filters' columns are carried after the asked-for ones
    records = rows.to_pylist()
    document = {"key": key, "columns": rows.column_names, "rows": records}
    text = table(rows.column_names, [[_cell(r[c]) for c in rows.column_names] for r in records])
    text += f"\n({plural(len(records), 'row')})"
    emit(args, document, text)
    return OK


def _columns(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    return names or None


def _cell(value: Any) -> str:
    if value is None:
        return "null"
    text = str(value) if not isinstance(value, bytes) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= _MAX_CELL else text[: _MAX_CELL - 1] + "…"


__all__ = ["cmd_head"]
