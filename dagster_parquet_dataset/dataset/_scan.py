"""Lazy scans: a ``pyarrow.dataset.Dataset`` over the files a manifest selects.

Planning is the same as for reads (``plan``: partition values and statistics
prune files from the manifest alone). The result is one ``FileSystemDataset``
whose fragments are exactly the selected parts, each built from its manifest
path and size, with its partition values as the fragment's partition
expression (so pyarrow fills the partition columns, and skips fragments a
later filter excludes). Columns a part lacks (added to the dataset after it
was written) are read as nulls. The row filter is attached with
``Dataset.filter``, so pyarrow, DuckDB and polars push it down to the Parquet
reader. Nothing is read until the caller scans.

Reads go through the store's own pyarrow filesystem (:meth:`Store.arrow_filesystem`)
wrapped in a thin checking layer: when the scan opens a part, the part must
exist and have the size the manifest records (one metadata request on S3),
else the scan raises :class:`~dagster_parquet_dataset.errors.DatasetIncomplete`
naming the dataset and the part. The data itself is read by pyarrow's native
file objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from ..errors import DatasetIncomplete
from ..storage.base import Store
from ._partition import partition_scalar
from ._pruning import filter_columns, normalize_filters, to_expression
from ._read import _check_row_filterable, _open_verified, check_columns, plan
from .manifest import DatasetManifest, FileEntry


@dataclass(frozen=True)
class _Part:
    dataset_key: str
    path: str
    size: int | None


class _CheckedHandler(pafs.FileSystemHandler):
    """Reads through ``inner``; opening a listed part checks that it exists with its recorded size.

    Raises (from ``open_input_file``, when a scan reaches the part):
        DatasetIncomplete: the part is missing, or its size differs from the manifest's
            (truncated or replaced); the message names the dataset and the part.
    """

    def __init__(self, inner: pafs.FileSystem, parts: dict[str, _Part]) -> None:
        self._inner = inner
        self._parts = parts

    def __eq__(self, other: object) -> bool:
        return other is self

    def __ne__(self, other: object) -> bool:
        return other is not self

    def __hash__(self) -> int:
        return id(self)

    def get_type_name(self) -> str:
        return f"pds-checked+{self._inner.type_name}"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return self._inner.get_file_info(paths)  # type: ignore[no-any-return]

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return self._inner.get_file_info(selector)  # type: ignore[no-any-return]

    def open_input_file(self, path: str) -> pa.NativeFile:
        part = self._parts.get(path)
        try:
            # Without a size, pyarrow asks the server (HEAD on S3): the real size, not the recorded one.
            source = self._inner.open_input_file(path)
        except FileNotFoundError:
            if part is None:
                raise
            raise DatasetIncomplete(
                f"dataset {part.dataset_key!r}: part {part.path!r} listed in the manifest is missing"
            ) from None
        if part is not None and part.size is not None:
            actual = source.size()
            if actual != part.size:
                source.close()
                raise DatasetIncomplete(
                    f"dataset {part.dataset_key!r}: part {part.path!r} is {actual} bytes but the manifest "
                    f"records {part.size}: it is truncated or was replaced"
                )
        return source

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.open_input_file(path)

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise OSError("a dataset scan's filesystem is read-only")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = _read_only
    delete_file = move = copy_file = open_output_stream = open_append_stream = _read_only


def _partition_expression(entry: FileEntry, schema: pa.Schema) -> pc.Expression | None:
    """``col == value`` (``col is null``) for each partition value of a column in ``schema``."""
    expr: pc.Expression | None = None
    for col, raw in (entry.partition_values or {}).items():
        index = schema.get_field_index(col)
        if index < 0:
            continue
        term = pc.field(col).is_null() if raw is None else pc.field(col) == partition_scalar(raw, schema[index].type)
        expr = term if expr is None else expr & term
    return expr


def _schema_of(store: Store, key: str, manifest: DatasetManifest) -> pa.Schema | None:
    schema = manifest.schema
    if schema is None and manifest.file_entries():
        # A Spec-only manifest: the first part's footer gives the schema (its one eager read).
        source, footer = _open_verified(store, key, manifest, None, manifest.file_entries()[0])
        source.close()
        schema = footer.schema_arrow
    return schema


def _union_schema(keys: Sequence[str], schemas: Sequence[pa.Schema]) -> pa.Schema:
    if len(schemas) == 1:
        return schemas[0]
    try:
        return pa.unify_schemas(list(schemas))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ValueError(
            f"datasets {list(keys)} cannot be scanned together: their schemas disagree ({exc}); "
            "scan them separately or pass columns= with the columns they share"
        ) from None


def scan_manifests(
    store: Store,
    datasets: Sequence[tuple[str, DatasetManifest]],
    columns: Sequence[str] | None = None,
    filters: Any = None,
) -> pads.Dataset:
    """One lazy ``pyarrow.dataset.Dataset`` over the parts of ``datasets`` that ``filters`` may match.

    Fragments come in the order of ``datasets``, then manifest order. The
    dataset's columns are ``columns`` (all columns of the union schema when
    ``None``, in the order of the first dataset, then columns only later ones
    have), followed by any column ``filters`` names that ``columns`` leaves out
    (the attached row filter needs it). Datasets missing a column read it as nulls.

    Raises:
        ValueError: an unknown column, malformed filters, or datasets whose
            schemas disagree (a column of different types).
        TypeError: a bad ``columns`` argument, or a filter on a column pyarrow cannot filter.
        CapabilityNotSupported: the store cannot be read through a pyarrow filesystem.
        DatasetIncomplete: (when scanned) a part is missing, truncated or replaced.
    """
    keys = [key for key, _ in datasets]
    where = keys[0] if len(keys) == 1 else ", ".join(keys)
    inner, base = store.arrow_filesystem()
    found = [(key, m, _schema_of(store, key, m)) for key, m in datasets]
    schemas = [s for _, _, s in found if s is not None]
    schema = _union_schema(keys, schemas) if schemas else pa.schema([])
    projection = check_columns(columns, schema, where)
    output = list(projection) if projection is not None else list(schema.names)
    dnf = normalize_filters(filters, schema)
    carried = output
    if dnf is not None:
        needed = filter_columns(dnf)
        _check_row_filterable(where, schema, [*output, *needed])
        carried = output + [c for c in schema.names if c in needed and c not in output]
    scan_schema = pa.schema([schema.field(c) for c in carried], metadata=schema.metadata)

    parts: dict[str, _Part] = {}
    selected: list[tuple[str, FileEntry]] = []
    for key, manifest, own in found:
        if own is None:
            continue
        entries = plan(manifest, schema, filters).selected if dnf is not None else manifest.file_entries()
        for entry in entries:
            path = f"{base}/{key}/{entry.path}" if base else f"{key}/{entry.path}"
            parts[path] = _Part(key, entry.path, entry.size_bytes)
            selected.append((path, entry))
    filesystem = pafs.PyFileSystem(_CheckedHandler(inner, parts))
    fmt = pads.ParquetFileFormat()
    fragments = []
    for path, entry in selected:
        kwargs: dict[str, Any] = {}
        expr = _partition_expression(entry, scan_schema)
        if expr is not None:
            kwargs["partition_expression"] = expr
        if entry.size_bytes is not None:
            kwargs["file_size"] = entry.size_bytes
        fragments.append(fmt.make_fragment(path, filesystem, **kwargs))
    dataset = pads.FileSystemDataset(fragments, scan_schema, fmt, filesystem)
    if dnf is not None:
        dataset = dataset.filter(to_expression(dnf))
    return dataset
