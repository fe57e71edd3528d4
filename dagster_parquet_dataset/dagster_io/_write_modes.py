"""One output to the dataset layer, by its write mode (overwrite, append, merge; ``partition_by``).

:func:`write_output` is the one place that decides how an output is written:
through its handler (which may write elsewhere, e.g. Spark on its executors)
or converted to Arrow here and handed to ``write_dataset``, ``append_dataset``
or ``merge_dataset``. It returns a :class:`Written` for the output metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from dagster import MetadataValue, OutputContext

from ..dataset import DatasetManifest, MergeResult, ParquetDatasetStore
from ..errors import VersionNotRetained
from . import _ownership as _own
from . import _retries
from ._handler_base import PARTITION_KEY_KEY, TypeHandler, require_parquet_types
from ._presentation import Presentation
from .options import ALLOW_NEW_COLUMNS_KEY, WriteOptions


@dataclass(frozen=True)
class Written:
    """What one output's write committed, for its output metadata.

    Attributes:
        manifest: the committed manifest (the live one if a merge changed nothing).
        rows: rows this output wrote (see ``RemoteStoreIOManager``'s docstring).
        bytes: bytes of the files this output wrote, when known exactly (``None`` for appends).
        extra: mode-specific output metadata.
    """

    manifest: DatasetManifest
    rows: int
    bytes: int | None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def replaced(cls, manifest: DatasetManifest) -> Written:
        """An overwrite that committed ``manifest``: every row and byte of it was written."""
        return cls(manifest, manifest.row_count, total_bytes(manifest))


def total_bytes(manifest: DatasetManifest) -> int:
    """Bytes of every file ``manifest`` lists."""
    return sum(e.size_bytes or 0 for e in manifest.file_entries())


def _counted(
    data: pa.Table | pa.RecordBatchReader,
) -> tuple[pa.Table | pa.RecordBatchReader, Callable[[], int]]:
    """``data`` and a function returning how many rows were taken from it (a reader is counted as it streams)."""
    if isinstance(data, pa.Table):
        return data, lambda: data.num_rows
    seen = [0]

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in data:
            seen[0] += batch.num_rows
            yield batch

    return pa.RecordBatchReader.from_batches(data.schema, batches()), lambda: seen[0]


def _arrow_of(handler: TypeHandler, obj: Any, presentation: Presentation | None) -> pa.Table | pa.RecordBatchReader:
    """``handler.to_arrow(obj)``, checked for types Parquet cannot hold, then presented.

    Raises:
        TypeError: ``obj`` cannot be converted, or a column's type cannot be stored (named).
    """
    data = handler.to_arrow(obj)
    require_parquet_types(data.schema, f"this {handler.type_name}")
    return presentation.present(data) if presentation is not None else data


def write_output(
    context: OutputContext | None,
    datasets: ParquetDatasetStore,
    handler: TypeHandler,
    key: str,
    obj: Any,
    options: WriteOptions,
    *,
    run_id: str | None,
    metadata: dict[str, str],
    presentation: Presentation | None = None,
) -> Written:
    """Route one output to the dataset layer by its write mode.

    A handler that converts in this process (:meth:`TypeHandler.converts_in_process`)
    is converted with :meth:`TypeHandler.to_arrow`, checked, presented and handed to
    ``write_dataset``, ``append_dataset`` or ``merge_dataset``. Any other handler
    writes itself: :meth:`TypeHandler.write` for a plain overwrite, otherwise
    :meth:`TypeHandler.write_with_options` (Spark appends and merges on its
    executors) or, when that returns ``None``, the Arrow route.

    The Arrow route passes the owner ``metadata`` records as ``expect_owner``,
    so the commit itself refuses a dataset another asset or partition wrote
    meanwhile (see :mod:`._ownership`).

    Raises:
        TypeError: the handler cannot convert the output to Arrow, or a column's type cannot be
            stored as Parquet (the message names it); nothing is written.
        DatasetKeyCollision: the dataset records another owner, checked by the commit; nothing
            was committed.
        RemoteStoreError / ValueError: as the dataset layer's call.
    """
    with _own.collisions(key):
        own = None
        if not handler.converts_in_process():
            if options.is_default:
                manifest = handler.write(context, datasets, key, obj, run_id=run_id, metadata=metadata)
                if presentation is not None:
                    presentation.preview_by_limit(obj)
                return Written.replaced(manifest)
            own = handler.write_with_options(context, datasets, key, obj, options, run_id=run_id, metadata=metadata)
            if own is not None and presentation is not None:
                presentation.preview_by_limit(obj)
            if own is not None and own.merge is None and own.manifest is not None:
                rows = own.rows if own.rows is not None else own.manifest.row_count
                if options.write_mode == "append":
                    return Written(own.manifest, rows, None, {"rows_appended": MetadataValue.int(rows)})
                return Written(own.manifest, rows, total_bytes(own.manifest))
        if own is not None and own.merge is not None:
            return _merged(datasets, key, options, own.merge)
        data = _arrow_of(handler, obj, presentation)
        owner = _own.commit_owner(metadata)
        idem = (
            _retries.idempotency_key(context, metadata.get(PARTITION_KEY_KEY))
            if options.write_mode != "overwrite"
            else None
        )
        before = _retries.live_entry(datasets, key, idem)
        if options.write_mode == "overwrite":
            manifest = datasets.write_dataset(
                data,
                key,
                overwrite=True,
                run_id=run_id,
                metadata=metadata,
                partition_by=options.partition_by,
                expect_owner=owner,
            )
            return Written.replaced(manifest)
        if options.write_mode == "append":
            data, taken = _counted(data)
            kwargs = options.append_kwargs()
            try:
                manifest = datasets.append_dataset(
                    data, key, run_id=run_id, metadata=metadata, expect_owner=owner, idempotency_key=idem, **kwargs
                )
            except ValueError as exc:
                raise _in_dagster_terms(exc) from None
            appended = taken()
            extra = {"rows_appended": MetadataValue.int(appended), **_retries.recognised(before, manifest, idem)}
            return Written(manifest, appended, None, extra)
        source = data.read_all() if isinstance(data, pa.RecordBatchReader) else data
        kwargs = {**options.merge_kwargs(), "idempotency_key": idem}
        result = datasets.merge_dataset(source, key, run_id=run_id, metadata=metadata, expect_owner=owner, **kwargs)
        written = _merged(datasets, key, options, result)
        written.extra.update(_retries.recognised(before, written.manifest, idem))
        return written


def _in_dagster_terms(exc: ValueError) -> ValueError:
    """The dataset layer's refusal of new columns, saying what a Dagster user writes: output metadata."""
    message = str(exc)
    python = "(pass allow_new_columns=True to add them)"
    if python not in message:
        return exc
    dagster = f"(add them with the output metadata {{{ALLOW_NEW_COLUMNS_KEY!r}: True}}, next to 'write_mode': 'append')"
    return type(exc)(message.replace(python, dagster))


def _merged(datasets: ParquetDatasetStore, key: str, options: WriteOptions, result: MergeResult) -> Written:
    """What a merge wrote: inserted plus updated rows, the bytes of its new files, and the merge's counts."""
    manifest = _manifest_after(datasets, key, result.version)
    sizes = {e.path: e.size_bytes or 0 for e in manifest.file_entries()}
    extra: dict[str, Any] = {
        "merge_strategy": MetadataValue.text(options.merge_strategy),
        "key_columns": MetadataValue.json(list(options.key_columns or ())),
        "rows_inserted": MetadataValue.int(result.inserted),
        "rows_updated": MetadataValue.int(result.updated),
        "files_rewritten": MetadataValue.int(len(result.rewritten_files)),
        "files_preserved": MetadataValue.int(len(result.preserved_files)),
        "files_added": MetadataValue.int(len(result.new_files)),
    }
    if result.version is None:
        extra["note"] = MetadataValue.text("the merge changed nothing, so no new version was committed")
    return Written(manifest, result.inserted + result.updated, sum(sizes.get(p, 0) for p in result.new_files), extra)


def _manifest_after(datasets: ParquetDatasetStore, key: str, version: int | None) -> DatasetManifest:
    """The manifest a merge committed (the live one when it committed nothing)."""
    if version is not None:
        try:
            return datasets.read_manifest(key, version=version)
        except VersionNotRetained:
            pass  # a later commit replaced it already: report the live one
    return datasets.read_manifest(key)
