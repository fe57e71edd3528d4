"""``head KEY``: the first rows of a dataset, reading only the files those rows are in."""

from __future__ import annotations

import argparse
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads

from ..dataset import ParquetDatasetStore
from ._format import plural, table
from ._maintenance_commands import parsed_filters
from ._output import OK, emit
from ._targets import require_dataset
from ._usage_error import UsageError

_MAX_CELL = 60


def cmd_head(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    if args.n < 0:
        raise UsageError(f"-n must be 0 or more, got {args.n}")
    key = require_dataset(ds, args.key, command="head")
    terms = parsed_filters(args, ds, key)
    columns = _columns(args.columns)
    rows = None if terms else _head_direct(ds, key, args.n, columns, args.dataset_version)
    if rows is None:
        scan = ds.scan_dataset(key, columns=columns, filters=terms or None, version=args.dataset_version)
        # One file at a time, one batch at a time: the scan stops as soon as it holds n rows, so only the
        # files (and row groups) those rows are in are read.
        rows = scan.head(args.n, batch_size=max(args.n, 1), batch_readahead=0, fragment_readahead=0)
    if columns is not None:
        rows = rows.select(columns)  # filters' columns are carried after the asked-for ones
    records = rows.to_pylist()
    document = {"key": key, "columns": rows.column_names, "rows": records}
    text = table(rows.column_names, [[_cell(r[c]) for c in rows.column_names] for r in records])
    text += f"\n({plural(len(records), 'row')})"
    emit(args, document, text)
    return OK


def _head_direct(
    ds: ParquetDatasetStore, key: str, n: int, columns: list[str] | None, version: int | None
) -> pa.Table | None:
    """The first ``n`` rows read straight from the first parts, or ``None`` when the general scan is needed.

    Each part is opened with its recorded size (no ``HEAD`` request on S3), its footer read, then only the
    row group the rows are in: about two requests per part. The scan is needed for partition columns (not in the
    files), and for a part whose columns differ from the manifest's schema (columns added later).

    Raises:
        NotFound / DatasetIncomplete: as :meth:`ParquetDatasetStore.plan_read`.
    """
    plan = ds.plan_read(key, version=version)
    manifest = getattr(plan, "manifest", None) or ds.read_manifest(key, version=plan.version)
    schema = manifest.schema
    if schema is None or manifest.partition_by:
        return None
    names = columns if columns is not None else schema.names
    if any(schema.get_field_index(name) < 0 for name in names):
        return None  # the scan names the unknown column in its error
    wanted = pa.schema([schema.field(name) for name in names])
    filesystem, base = ds.store.arrow_filesystem()
    batches: list[pa.RecordBatch] = []
    got = 0
    for entry in plan.selected:
        if got >= n:
            break
        if entry.size_bytes is None:
            return None
        path = f"{base}/{key}/{entry.path}" if base else f"{key}/{entry.path}"
        # The recorded size spares the HEAD request pyarrow would otherwise send to learn it.
        fragment = pads.ParquetFileFormat().make_fragment(path, filesystem, file_size=entry.size_bytes)
        found = fragment.physical_schema
        if any(found.get_field_index(f.name) < 0 or found.field(f.name).type != f.type for f in wanted):
            return None
        for batch in fragment.to_batches(columns=names, batch_size=max(1, n - got), batch_readahead=0):
            batches.append(batch.slice(0, n - got))
            got += batches[-1].num_rows
            if got >= n:
                break
    if not batches:
        return wanted.empty_table()
    return pa.Table.from_batches(batches)


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
