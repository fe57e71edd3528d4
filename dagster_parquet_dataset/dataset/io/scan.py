"""Lazy scans: a ``pyarrow.dataset.Dataset`` over the files a manifest selects.

Planning is the same as for reads (``plan``: partition values and statistics
prune files from the manifest alone). The result is one ``FileSystemDataset``
whose fragments are exactly the selected parts, each built from its manifest
path and size, with its partition values as the fragment's partition
expression (so pyarrow fills the partition columns, and skips fragments a
later filter excludes). Columns a part lacks (added to the dataset after it
was written) are read as nulls. The row filter is attached with
``Dataset.filter``, so pyarrow, DuckDB and polars push it down to the Parquet
reader; terms that NaN satisfies are written so that row-group statistics
(which leave NaN out) cannot skip NaN rows.

No Python code runs on Arrow's or DuckDB's I/O threads (a Python filesystem
handler there can deadlock against the GIL: apache/arrow ARROW-16413,
duckdb/duckdb 16501). The parts are checked before the scan is returned,
on this package's own threads: each must exist with the size the manifest
records (one metadata request each, in parallel: a ``HEAD`` on S3, a ``stat``
on disk), else :class:`~dagster_parquet_dataset.errors.DatasetIncomplete`.
The data is then read through the store's native pyarrow filesystem. A store
whose filesystem is a Python ``PyFileSystem`` (``MemoryStore``, custom
stores) is never read through it: the selected parts are copied, when the
scan is created, into a native in-memory filesystem that the scan reads.
"""

from __future__ import annotations

import atexit
import functools
import gc
import operator
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from ...errors import DatasetIncomplete, NotFound
from ...storage.base import Store
from ..expressions.pruning import DNF, Predicate, filter_columns, normalize_filters, to_expression
from ..format.partition import partition_scalar
from ..manifest import DatasetManifest, FileEntry
from .parallel import parallel_map, store_threads
from .read_parts import _check_row_filterable, _open_verified, check_columns, plan

# Scans leave objects holding pyarrow S3 file handles to the garbage collector; at interpreter exit
# they would outlive pyarrow's S3 finalizer (registered when pyarrow.fs was imported, so it runs
# after this hook) and abort the process ("terminate called without an active exception").
atexit.register(gc.collect)


@dataclass(frozen=True)
class _Part:
    dataset_key: str
    entry: FileEntry
    location: str  # the part's path on the scan's filesystem

    def missing(self) -> DatasetIncomplete:
        return DatasetIncomplete(
            f"dataset {self.dataset_key!r}: part {self.entry.path!r} listed in the manifest is missing",
            key=self.dataset_key,
        )

    def check_size(self, actual: int) -> None:
        """Raises: DatasetIncomplete: ``actual`` is not the size the manifest records."""
        recorded = self.entry.size_bytes
        if recorded is not None and actual != recorded:
            raise DatasetIncomplete(
                f"dataset {self.dataset_key!r}: part {self.entry.path!r} is {actual} bytes but the manifest "
                f"records {recorded}: it is truncated or was replaced",
                key=self.dataset_key,
            )


def _check_parts(filesystem: pafs.FileSystem, parts: Sequence[_Part]) -> None:
    """Each part exists on ``filesystem`` with its recorded size: one metadata request each (a ``stat`` on
    disk, a ``HEAD`` on S3, in parallel on this package's threads).

    Raises:
        DatasetIncomplete: a part is missing, or of another size than the manifest records.
    """
    if isinstance(filesystem, pafs.LocalFileSystem):
        infos = filesystem.get_file_info([p.location for p in parts])
    else:
        infos = parallel_map(lambda p: filesystem.get_file_info(p.location), parts)
    for part, info in zip(parts, infos, strict=True):
        if info.type != pafs.FileType.File:
            raise part.missing()
        part.check_size(info.size)


def _snapshot(store: Store, parts: Sequence[_Part]) -> pafs.FileSystem:
    """A native in-memory filesystem holding a copy of each part, read now through the store.

    Raises:
        DatasetIncomplete: a part is missing, or of another size than the manifest records.
    """

    def fetch(part: _Part) -> pa.Buffer:
        try:
            source = store.open_input(f"{part.dataset_key}/{part.entry.path}")
        except (NotFound, FileNotFoundError):
            raise part.missing() from None
        with source:
            part.check_size(source.size())
            return source.read_buffer()

    buffers = parallel_map(fetch, parts, store_threads(store))
    filesystem = pafs._MockFileSystem()
    for part, buffer in zip(parts, buffers, strict=True):
        folder = posixpath.dirname(part.location)
        if folder:
            filesystem.create_dir(folder, recursive=True)
        with filesystem.open_output_stream(part.location) as out:
            out.write(buffer)
    return filesystem


class FooterReadingDataset(pads.FileSystemDataset):
    """A ``FileSystemDataset`` whose every scan reads each part's footer again.

    pyarrow keeps a Parquet fragment's footer once it read it (a scan with ``cache_metadata`` on, the default;
    ``count_rows``; a fragment's ``metadata``), and every later scan of that fragment trusts it without reading
    the end of the file again: a part truncated after an earlier scan would be read from its (still whole) data
    pages and return rows. Every scan pyarrow, DuckDB or polars starts from a dataset object goes through its
    ``scanner`` (``to_table``, ``to_batches``, ``count_rows``, ``head`` and ``take`` call it), so here ``scanner``
    scans a fresh copy of the dataset (same paths, partition expressions, filesystem and row filter; no I/O)
    whose fragments hold no footer: each scan reads every footer, with the file's size as it is now, and a
    truncated part fails with pyarrow's own error. The copy is built on the calling thread (with the GIL), never
    on Arrow's I/O threads, and this object is never changed, so threads may scan it at once (re-initialising it
    in place while another thread scanned it crashed the process). ``Scanner.from_dataset`` called on it
    directly scans its own fragments with ``cache_metadata`` off; a direct ``count_rows`` still leaves their
    footers cached for later direct scans (``docs/scans.md`` says so). ``filter()`` keeps this class; pickling
    rebuilds it.
    """

    def _fresh(self) -> pads.FileSystemDataset:
        fragments = [
            self.format.make_fragment(f.path, f.filesystem, f.partition_expression) for f in self._get_fragments(None)
        ]
        fresh = pads.FileSystemDataset(fragments, self.schema, self.format, self.filesystem, self.partition_expression)
        fresh._scan_options = self._scan_options  # the row filter of filter()
        return fresh

    def scanner(self, *args: Any, **kwargs: Any) -> pads.Scanner:
        return self._fresh().scanner(*args, **kwargs)

    def _scanner_options(self, options: dict[str, Any]) -> dict[str, Any]:
        return {**super()._scanner_options(options), "cache_metadata": False}

    def __reduce__(self) -> tuple[Any, ...]:
        _cls, args = super().__reduce__()
        return FooterReadingDataset, args


# Always true (false) on rows, but not decidable from statistics: ``random`` is impure, so pyarrow never
# folds it into a constant when it simplifies a filter against a row group's statistics.
_RANDOM = pc.Expression._call("random", [], pc.RandomOptions())
_UNDECIDABLE_TRUE = _RANDOM >= 0
_UNDECIDABLE_FALSE = _RANDOM < 0


def _nan_matches(expression: pc.Expression, column: str, typ: pa.DataType) -> bool:
    probe = pa.table({column: pa.array([float("nan")], pa.float64()).cast(typ)})
    return bool(probe.filter(expression).num_rows == 1)


def _term(p: Predicate) -> pc.Expression:
    """``p``'s row filter; on a floating column, one that statistics cannot decide wrongly.

    pyarrow decides a filter for a whole Parquet row group from its min/max statistics, which leave
    NaN out: in a group ``[NaN, 1.0]`` (min = max = 1.0), ``x != 1.0`` looks false for every row (the
    group was skipped, losing the NaN) and ``x == 1.0`` true for every row (``count_rows`` counted the
    NaN). Even ``is_nan(x)`` is folded once pyarrow takes ``x`` to be ``1.0``. So a comparison that a
    NaN satisfies (``!=``, ``not in``) is or-ed with an always-false term statistics cannot decide,
    and one a NaN fails is and-ed with an always-true one: the rows are the same, and statistics still
    skip a group (or count it whole) where that is right for a NaN too.
    """
    expression = to_expression([[p]])
    typ = p.arrow_type
    if typ is None or not pa.types.is_floating(typ) or p.op in ("is null", "is not null"):
        return expression
    if _nan_matches(expression, p.column, typ):
        return expression | _UNDECIDABLE_FALSE
    return expression & _UNDECIDABLE_TRUE


def _row_filter(dnf: DNF) -> pc.Expression:
    """``to_expression(dnf)`` (the rows ``read_dataset`` keeps), safe from NaN-blind statistics.

    ``dnf`` is normalized: at least one conjunction, none empty.
    """
    return functools.reduce(operator.or_, (functools.reduce(operator.and_, map(_term, c)) for c in dnf))


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
    Every selected part is checked (exists, recorded size) before this returns.

    Raises:
        ValueError: an unknown column, malformed filters, or datasets whose
            schemas disagree (a column of different types).
        TypeError: a bad ``columns`` argument, or a filter on a column pyarrow cannot filter.
        CapabilityNotSupported: the store cannot be read through a pyarrow filesystem.
        DatasetIncomplete: a selected part is missing, truncated or replaced.
    """
    keys = [key for key, _ in datasets]
    where = keys[0] if len(keys) == 1 else ", ".join(keys)
    filesystem, base = store.arrow_filesystem()
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

    parts: list[_Part] = []
    for key, manifest, own in found:
        if own is None:
            continue
        entries = plan(manifest, schema, filters).selected if dnf is not None else manifest.file_entries()
        for entry in entries:
            location = f"{base}/{key}/{entry.path}" if base else f"{key}/{entry.path}"
            parts.append(_Part(key, entry, location))
    if isinstance(filesystem, pafs.PyFileSystem):
        filesystem = _snapshot(store, parts)  # never call back into Python from Arrow's threads
    else:
        _check_parts(filesystem, parts)
    fmt = pads.ParquetFileFormat()
    fragments = []
    for part in parts:
        kwargs: dict[str, Any] = {}
        expr = _partition_expression(part.entry, scan_schema)
        if expr is not None:
            kwargs["partition_expression"] = expr
        # No file_size: pyarrow asks for the part's size when it opens it, so a part truncated after this check
        # fails with pyarrow's own error; told the recorded size, it would read past a shorter object's end.
        fragments.append(fmt.make_fragment(part.location, filesystem, **kwargs))
    dataset = FooterReadingDataset(fragments, scan_schema, fmt, filesystem)
    if dnf is not None:
        dataset = dataset.filter(_row_filter(dnf))
    return dataset
