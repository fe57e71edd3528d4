"""Write and overwrite: in-process (:func:`write_dataset`) and with parts written elsewhere
(:func:`begin_write` / :func:`commit_write`), both through the write pipeline (:mod:`.write_pipeline`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from ...storage.base import validate_key
from .._dataset_options import DatasetOptions
from ..commit.external_entries import check_external_entries
from ..commit.live import LiveVersion, begin_point
from ..commit.new_version import new_manifest
from ..commit.transaction import PendingWrite, Transaction
from ..delta import check_delta_schema
from ..io.key_checks import check_key_fits
from ..manifest import DatasetManifest, FileEntry
from .write_pipeline import Mode, begin, decide_schema, write_version


def check_input(table: object, action: str) -> None:
    """Raises ``TypeError``: ``table`` is neither a ``pyarrow.Table`` nor a ``RecordBatchReader``."""
    if not isinstance(table, (pa.Table, pa.RecordBatchReader)):
        hint = " (convert with pyarrow.Table.from_pandas)" if type(table).__name__ == "DataFrame" else ""
        raise TypeError(
            f"{action} takes a pyarrow.Table or pyarrow.RecordBatchReader, "
            f"got {type(table).__module__}.{type(table).__name__}{hint}"
        )


def write_dataset(
    options: DatasetOptions,
    table: pa.Table | pa.RecordBatchReader,
    key: str,
    overwrite: bool,
    run_id: str | None,
    *,
    metadata: dict[str, str] | None,
    partition_by: Sequence[str] | None,
    expect_owner: Mapping[str, str | None] | None = None,
    live: LiveVersion | None = None,
) -> DatasetManifest:
    """See :meth:`ParquetDatasetStore.write_dataset` (``live``: the live version already read, see
    :mod:`..commit.live`): the write pipeline's :func:`~.write_pipeline.write_version`."""
    key = validate_key(key, what="dataset key")
    check_input(table, "write_dataset")
    check_key_fits(options.store, key)
    return write_version(
        options,
        table,
        key,
        overwrite=overwrite,
        run_id=run_id,
        metadata=metadata,
        partition_by=partition_by,
        expect_owner=expect_owner,
        at=begin_point(live, key),
    )


def begin_write(
    options: DatasetOptions,
    key: str,
    overwrite: bool,
    run_id: str | None,
    metadata: dict[str, str] | None,
    *,
    expect_owner: Mapping[str, str | None] | None = None,
) -> PendingWrite:
    """See :meth:`ParquetDatasetStore.begin_write`: the pipeline's begin (the schema is decided at the commit)."""
    key = validate_key(key, what="dataset key")
    check_key_fits(options.store, key)
    mode: Mode = "overwrite" if overwrite else "write"
    return begin(options, key, mode=mode, run_id=run_id, metadata=metadata, expect_owner=expect_owner).pending


def commit_write(
    options: DatasetOptions,
    pending: PendingWrite,
    entries: Sequence[FileEntry],
    schema: pa.Schema,
    *,
    partition_by: Sequence[str] | None,
) -> DatasetManifest:
    """See :meth:`ParquetDatasetStore.commit_write`."""
    if not isinstance(pending, PendingWrite):
        raise TypeError(f"pending must come from begin_write, got {type(pending).__name__}")
    if not isinstance(schema, pa.Schema):
        raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
    check_key_fits(options.store, pending.key)
    if options.delta_log:
        check_delta_schema(schema, key=pending.key)
    mode: Mode = "overwrite" if pending.overwrite else "write"
    decision = decide_schema(pending.key, schema, mode=mode, current=None, partition_by=partition_by)
    # An overwrite's parts are new files too: reusing one the live version lists would let the
    # clean-up of a failed commit, or the next overwrite's obsolete list, delete a live file.
    listed = pending.current.parts if pending.current is not None else ()
    entries = check_external_entries(
        options.store, pending.key, entries, decision.recorded, decision.partition_by, listed=listed
    )
    base = new_manifest(
        options,
        pending.key,
        entries,
        decision.recorded,
        run_id=pending.run_id,
        metadata=pending.metadata,
        partition_by=decision.partition_by,
        operation="overwrite" if pending.token is not None else "write",
    )
    txn = Transaction.resume(options, pending, exclusive=not pending.overwrite)
    txn.adopt(e.path for e in entries)
    return txn.commit(lambda _current: base)


def abandon_write(options: DatasetOptions, write: PendingWrite, parts: Sequence[str]) -> None:
    """See :meth:`ParquetDatasetStore.abandon_write`: delete the ``parts`` (relative paths) this write
    created, never one a live or retained version lists, and release its claim."""
    txn = Transaction.resume(options, write)
    txn.adopt(parts)
    txn.abandon()
