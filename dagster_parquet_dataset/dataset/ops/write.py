"""Write and overwrite: in-process (:func:`write_dataset`) and with parts written elsewhere
(:func:`begin_write` / :func:`commit_write`); plus :func:`write_parts`, which appends and
merges use to encode their new parts."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa

from ...errors import AlreadyExists
from ...storage.base import Capability, validate_key
from .._dataset_options import DatasetOptions, check_metadata, check_run_id
from ..commit.external_entries import check_external_entries
from ..commit.live import LiveVersion, begin_point
from ..commit.new_version import new_manifest
from ..commit.transaction import PendingWrite, Transaction, repair_success
from ..delta import check_delta_schema, delta_ready
from ..format.layout import SUCCESS_NAME
from ..format.partition import check_partition_by, encode_partition_values, partition_folder, split_by_partition
from ..format.schema import check_column_names, recorded_schema
from ..io.encode import (
    DEFAULT_ROW_GROUP,
    PartJob,
    chunk_batches,
    encode_parts,
    stream_parts,
    stream_single,
    table_chunks,
)
from ..io.key_checks import check_folder_fits, check_key_fits, check_write_fits
from ..manifest import DatasetManifest, FileEntry


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
    """See :meth:`ParquetDatasetStore.write_dataset` (``live``: the live version already read, see :mod:`..commit.live`)."""
    key = validate_key(key, what="dataset key")
    check_input(table, "write_dataset")
    if options.delta_log:
        table = delta_ready(table, key=key)
    check_column_names(table.schema, key=key)
    partition = check_partition_by(partition_by, table.schema)
    check_key_fits(options.store, key)
    check_write_fits(options.store, key, table, partition)
    schema = recorded_schema(table.schema, partition, key=key)
    at = begin_point(live, key)
    txn = _begin(
        options, key, overwrite=overwrite, run_id=run_id, metadata=metadata, expect_owner=expect_owner, current=at
    )
    with txn.writing():
        entries = write_parts(options, txn, table, partition)
    operation = "overwrite" if txn.exists else "write"
    base = new_manifest(
        options,
        key,
        entries,
        schema,
        run_id=run_id,
        metadata=txn.pending.metadata,
        partition_by=partition,
        operation=operation,
    )
    return txn.commit(lambda _current: base)


def begin_write(
    options: DatasetOptions,
    key: str,
    overwrite: bool,
    run_id: str | None,
    metadata: dict[str, str] | None,
    *,
    expect_owner: Mapping[str, str | None] | None = None,
) -> PendingWrite:
    """See :meth:`ParquetDatasetStore.begin_write`."""
    key = validate_key(key, what="dataset key")
    check_key_fits(options.store, key)
    return _begin(
        options, key, overwrite=overwrite, run_id=run_id, metadata=metadata, expect_owner=expect_owner
    ).pending


def _begin(
    options: DatasetOptions,
    key: str,
    *,
    overwrite: bool,
    run_id: str | None,
    metadata: dict[str, str] | None,
    expect_owner: Mapping[str, str | None] | None,
    current: tuple[DatasetManifest | None, str | None] | None = None,
) -> Transaction:
    check_run_id(run_id)
    metadata = check_metadata(metadata)
    needed = [Capability.ATOMIC_WRITE, Capability.CONDITIONAL_WRITE]
    if overwrite:
        needed.append(Capability.DELETE)
    options.require(*needed, action="write datasets" + (" with overwrite=True" if overwrite else ""))
    txn = Transaction.begin(
        options,
        key,
        overwrite=overwrite,
        run_id=run_id,
        metadata=metadata,
        claim=True,
        exclusive=not overwrite,
        current=current,
        expect_owner=expect_owner,
    )
    if txn.exists and not overwrite:
        if txn.current is not None and not options.store.exists(f"{key}/{SUCCESS_NAME}"):
            repair_success(options.store, key)  # its writer died after committing: make it whole
        raise AlreadyExists(f"dataset {key!r} already exists; pass overwrite=True to replace it")
    return txn


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
    partition = check_partition_by(partition_by, schema)
    if options.delta_log:
        check_delta_schema(schema, key=pending.key)
    schema = recorded_schema(schema, partition, key=pending.key)
    # An overwrite's parts are new files too: reusing one the live version lists would let the
    # clean-up of a failed commit, or the next overwrite's obsolete list, delete a live file.
    listed = pending.current.parts if pending.current is not None else ()
    entries = check_external_entries(options.store, pending.key, entries, schema, partition, listed=listed)
    operation = "overwrite" if pending.token is not None else "write"
    base = new_manifest(
        options,
        pending.key,
        entries,
        schema,
        run_id=pending.run_id,
        metadata=pending.metadata,
        partition_by=partition,
        operation=operation,
    )
    txn = Transaction.resume(options, pending, exclusive=not pending.overwrite)
    txn.adopt(e.path for e in entries)
    return txn.commit(lambda _current: base)


def write_parts(
    options: DatasetOptions, txn: Transaction, data: pa.Table | pa.RecordBatchReader, partition_by: Sequence[str]
) -> list[FileEntry]:
    """Encode ``data`` as the transaction's new parts (named by its :class:`PendingWrite`),
    recording each path in ``txn.created`` before it is written."""
    store, key, pending, part_options = options.store, txn.key, txn.pending, options.part_options
    if not partition_by:
        if options.max_rows_per_file is None:
            name = pending.single_name()
            return [stream_single(store, f"{key}/{name}", name, data, part_options, attempted=txn.created)]
        if not isinstance(data, pa.Table):  # a stream: one row group in memory at a time
            return stream_parts(
                store,
                key,
                pending.part_name,
                data,
                options.max_rows_per_file,
                options=part_options,
                attempted=txn.created,
            )
        chunks = table_chunks(data, options.max_rows_per_file)
        jobs = (PartJob(f"{key}/{pending.part_name(i)}", pending.part_name(i), c) for i, c in enumerate(chunks))
        return encode_parts(store, jobs, part_options, txn.created, options.max_workers)
    return encode_parts(
        store, _partition_jobs(options, data, pending, partition_by), part_options, txn.created, options.max_workers
    )


def _partition_jobs(
    options: DatasetOptions, data: pa.Table | pa.RecordBatchReader, pending: PendingWrite, partition_by: Sequence[str]
) -> Iterator[PartJob]:
    """One job per (partition, chunk of at most ``max_rows_per_file`` rows).

    A table is split one partition at a time; a stream is cut into chunks
    first, so memory stays bounded either way.
    """
    schema = data.schema
    limit = options.max_rows_per_file or DEFAULT_ROW_GROUP
    pieces = [data] if isinstance(data, pa.Table) else chunk_batches(data, schema, limit)
    index = 0
    for piece in pieces:
        for values, rows in split_by_partition(piece, partition_by):
            check_folder_fits(options.store, pending.key, partition_by, values)
            folder = partition_folder(partition_by, values)
            encoded = encode_partition_values(partition_by, values, schema)
            for chunk in table_chunks(rows, options.max_rows_per_file or max(rows.num_rows, 1)):
                name = f"{folder}/{pending.part_name(index)}"
                index += 1
                yield PartJob(f"{pending.key}/{name}", name, chunk, encoded)


def abandon_write(options: DatasetOptions, write: PendingWrite, parts: Sequence[str]) -> None:
    """See :meth:`ParquetDatasetStore.abandon_write`: delete the ``parts`` (relative paths) this write
    created, never one a live or retained version lists, and release its claim."""
    txn = Transaction.resume(options, write)
    txn.adopt(parts)
    txn.abandon()
