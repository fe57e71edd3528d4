"""Verified reads of the parts a manifest lists."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DatasetIncomplete, NotFound
from ..storage.base import Store
from .manifest import DatasetManifest, FileEntry, schema_hash

_MAX_IO_THREADS = 16


class PartsVanished(Exception):
    """Parts listed in the manifest are missing; the manifest may have moved on."""

    def __init__(self, missing: list[str], detail: str = "") -> None:
        super().__init__(", ".join(missing) + (f": {detail}" if detail else ""))
        self.missing = missing


def _map(fn, items: Sequence, workers: int = _MAX_IO_THREADS) -> list:  # type: ignore[no-untyped-def, type-arg]
    if len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="pds-read") as pool:
        return list(pool.map(fn, items))


def check_columns(columns: Sequence[str] | None, schema: pa.Schema, dataset_key: str) -> list[str] | None:
    """Validate a projection against ``schema``.

    Raises:
        TypeError: ``columns`` is a string or holds non-strings.
        ValueError: a column is not in the dataset; the message names it.
    """
    if columns is None:
        return None
    if isinstance(columns, (str, bytes)):
        raise TypeError(f"columns must be a list of column names, not a single string {columns!r}")
    cols = list(columns)
    for c in cols:
        if not isinstance(c, str):
            raise TypeError(f"column names must be strings, got {c!r}")
    unknown = [c for c in cols if schema.get_field_index(c) < 0]
    if unknown:
        raise ValueError(
            f"dataset {dataset_key!r} has no column {', '.join(map(repr, unknown))}; its columns are {schema.names}"
        )
    return cols


def verify_present(store: Store, dataset_key: str, entries: Sequence[FileEntry]) -> None:
    """Check that every part exists (and has its recorded size) before any is read.

    Raises:
        PartsVanished: some parts are missing.
        DatasetIncomplete: a part's size differs from the manifest (truncated).
    """

    def _size(entry: FileEntry) -> tuple[FileEntry, int | None]:
        try:
            return entry, store.size(f"{dataset_key}/{entry.path}")
        except NotFound:
            return entry, None

    sizes = _map(_size, entries)
    missing = [e.path for e, size in sizes if size is None]
    if missing:
        raise PartsVanished(missing)
    for entry, size in sizes:
        if entry.size_bytes is not None and size != entry.size_bytes:
            raise DatasetIncomplete(
                f"dataset {dataset_key!r}: part {entry.path!r} is {size} bytes but the manifest "
                f"records {entry.size_bytes}; it is truncated or was replaced"
            )


def _read_part(
    store: Store,
    dataset_key: str,
    entry: FileEntry,
    columns: list[str] | None,
    expected_schema: pa.Schema | None,
    expected_hash: str | None,
) -> pa.Table:
    path = f"{dataset_key}/{entry.path}"
    try:
        source = store.open_input(path)
    except NotFound:
        raise PartsVanished([entry.path]) from None
    with source:
        try:
            parquet = pq.ParquetFile(source, pre_buffer=True)
        except (pa.ArrowException, OSError) as exc:
            raise DatasetIncomplete(
                f"dataset {dataset_key!r}: part {entry.path!r} is not a readable Parquet file ({exc})"
            ) from None
        rows = parquet.metadata.num_rows
        if entry.row_count is not None and rows != entry.row_count:
            raise DatasetIncomplete(
                f"dataset {dataset_key!r}: part {entry.path!r} holds {rows} rows but the manifest "
                f"records {entry.row_count}"
            )
        schema = parquet.schema_arrow
        if expected_schema is not None:
            if not schema.equals(expected_schema, check_metadata=False):
                raise DatasetIncomplete(
                    f"dataset {dataset_key!r}: part {entry.path!r} has schema {schema} "
                    f"but the manifest records {expected_schema}"
                )
        elif expected_hash is not None and schema_hash(schema) != expected_hash:
            raise DatasetIncomplete(
                f"dataset {dataset_key!r}: part {entry.path!r} has a schema whose hash "
                f"{schema_hash(schema)} differs from the manifest's {expected_hash}"
            )
        try:
            table = parquet.read(columns=columns, use_threads=True)
        except (pa.ArrowException, OSError) as exc:
            raise PartsVanished([entry.path], str(exc)) from None
    if columns is not None and table.column_names != columns:
        table = table.select(columns)
    return table


def read_parts(
    store: Store,
    dataset_key: str,
    manifest: DatasetManifest,
    columns: Sequence[str] | None,
) -> pa.Table:
    """Read and concatenate the manifest's parts, verifying each against it.

    Raises:
        PartsVanished: a part is missing or disappeared while being read
            (the caller re-reads the manifest to tell a race from damage).
        DatasetIncomplete: a part is truncated, unreadable, or its row count
            or schema disagrees with the manifest.
        ValueError / TypeError: bad ``columns``.
    """
    entries = manifest.file_entries()
    expected_schema = manifest.schema
    projection: list[str] | None
    if expected_schema is not None:
        projection = check_columns(columns, expected_schema, dataset_key)
    else:
        projection = None if columns is None else list(columns)
    verify_present(store, dataset_key, entries)
    if expected_schema is None and entries and projection is not None:
        # Spec-only manifest: the first part's footer is the schema to check against.
        with store.open_input(f"{dataset_key}/{entries[0].path}") as first:
            check_columns(projection, pq.ParquetFile(first).schema_arrow, dataset_key)
    expected_hash = manifest.schema_hash if expected_schema is None else None
    tables = _map(
        lambda e: _read_part(store, dataset_key, e, projection, expected_schema, expected_hash),
        entries,
    )
    if not tables:
        schema = expected_schema if expected_schema is not None else pa.schema([])
        if projection is not None:
            schema = pa.schema([schema.field(c) for c in projection])
        return schema.empty_table()
    if expected_schema is None:
        total = sum(t.num_rows for t in tables)
        if total != manifest.row_count:
            raise DatasetIncomplete(
                f"dataset {dataset_key!r}: parts hold {total} rows but the manifest records {manifest.row_count}"
            )
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]
