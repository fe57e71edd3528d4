"""One output to the dataset layer, by its write mode (overwrite, append, merge; ``partition_by``).

The IO manager hands an :class:`~._target.OutputTarget` to the handler's one
write hook (``write_output`` in :mod:`._special_outputs`). :func:`by_mode` is the one place write modes are told apart
(every handler's write goes through it, so each mode reports the same
:class:`Written`); :func:`write_arrow` is the in-process route of an output
converted to Arrow, to ``write_dataset``, ``append_dataset`` or ``merge_dataset``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from dagster import MetadataValue

from ..dataset import DatasetManifest, MergeResult, ParquetDatasetStore, read_live, write_from_live
from ..errors import VersionNotRetained
from . import _retries
from .options import ALLOW_NEW_COLUMNS_KEY, WriteOptions

if TYPE_CHECKING:
    from ._target import OutputTarget


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


def by_mode(
    target: OutputTarget,
    datasets: ParquetDatasetStore,
    *,
    overwrite: Callable[[], DatasetManifest],
    append: Callable[[], tuple[DatasetManifest, int]],
    merge: Callable[[], MergeResult],
) -> Written:
    """The one place write modes are told apart: run the call for ``target``'s ``write_mode`` and say what it wrote.

    ``overwrite`` returns the committed manifest, ``append`` the committed manifest and the rows
    it added, ``merge`` the merge's result. Every handler's write goes through here (the Arrow
    route of :func:`write_arrow`, Spark's executors), so each mode reports the same metadata.

    Raises:
        Whatever the chosen call raises.
    """
    mode = target.options.write_mode
    if mode == "overwrite":
        return Written.replaced(overwrite())
    idem = target.idempotency_key
    before = _retries.window_entry(target.live.manifest if target.live is not None else None, idem)
    if mode == "append":
        manifest, appended = append()
        written = Written(manifest, appended, None, {"rows_appended": MetadataValue.int(appended)})
    else:
        written = _merged(datasets, target.dataset_key, target.options, merge())
    written.extra.update(_retries.recognised(before, written.manifest, idem))
    return written


def write_arrow(target: OutputTarget, datasets: ParquetDatasetStore, data: pa.Table | pa.RecordBatchReader) -> Written:
    """Write ``data`` (an output already converted to Arrow, checked and presented) to ``target``.

    The write begins from the live version the step read at its start
    (``target.live``; read here when not given), in which the exactly-once window
    is looked up too, so the step reads the manifest once; the commit's
    compare-and-swap refuses it if another writer committed meanwhile, and the
    write rebuilds on that. The owner ``target.metadata`` records is the commit's
    ``expect_owner``, so it refuses a dataset another asset or partition wrote
    meanwhile (see :mod:`._ownership`).

    Raises:
        DatasetKeyCollision / OwnerMismatch: the dataset records another owner (checked by the commit).
        RemoteStoreError / ValueError: as the dataset layer's call.
    """
    key, options, idem = target.dataset_key, target.options, target.idempotency_key
    if target.live is None:
        target = replace(target, live=read_live(datasets, key))
    assert target.live is not None
    view = write_from_live(datasets, target.live)  # the write begins from the live version read
    commit = target.commit_kwargs()

    def overwrite() -> DatasetManifest:
        return view.write_dataset(data, key, overwrite=True, partition_by=options.partition_by, **commit)

    def append() -> tuple[DatasetManifest, int]:
        counted, taken = _counted(data)
        try:
            manifest = view.append_dataset(counted, key, idempotency_key=idem, **commit, **options.append_kwargs())
        except ValueError as exc:
            raise _in_dagster_terms(exc) from None
        return manifest, taken()

    def merge() -> MergeResult:
        source = data.read_all() if isinstance(data, pa.RecordBatchReader) else data
        return view.merge_dataset(source, key, idempotency_key=idem, **commit, **options.merge_kwargs())

    return by_mode(target, datasets, overwrite=overwrite, append=append, merge=merge)


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
    manifest = result.manifest if result.manifest is not None else _manifest_after(datasets, key, result.version)
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
