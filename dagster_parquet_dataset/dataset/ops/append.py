"""Append: new rows in new files, committed on top of whatever version is live.

In-process (:func:`append_dataset`) or with parts written elsewhere
(:func:`begin_append` fixes the schema and partitioning the parts must have,
:func:`commit_append` commits them), both through the write pipeline (:mod:`.write_pipeline`);
both rebase with :func:`append_builder`.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import pyarrow as pa

from ...errors import CommitConflict
from ...storage.base import validate_key
from .._dataset_options import DatasetOptions
from ..commit.external_entries import check_external_entries
from ..commit.live import LiveVersion, begin_point
from ..commit.new_version import new_manifest
from ..commit.transaction import Build, PendingWrite, Transaction, repair_success
from ..delta import check_delta_schema, delta_ready
from ..format.data_version import entries_hash
from ..format.layout import SUCCESS_NAME
from ..io.key_checks import check_key_fits, check_write_fits
from ..manifest import SEGMENTED_FORMAT, DatasetManifest, FileEntry
from .write import check_input
from .write_pipeline import SchemaDecision, begin, conform, decide_schema, encode, plan_parts


@dataclass(frozen=True)
class PendingAppend:
    """An append begun by :meth:`ParquetDatasetStore.begin_append`.

    Attributes:
        key: the validated dataset key.
        txn: unique token of this append; part names must carry it.
        schema: the Arrow schema the appended rows must have, columns in this
            order (partition columns included): the dataset's schema plus any
            new columns, or the incoming schema for a new dataset.
        partition_by: the dataset's partition columns (the parts go to their
            ``col=value/`` folders and leave these columns out).
        write: the underlying :class:`PendingWrite` (for part names).
        idempotency_key: set it (``dataclasses.replace``) to commit as
            :meth:`ParquetDatasetStore.append_dataset`'s ``idempotency_key`` does, with the
            entries' content hashes as the content (entries without one are not keyed): a version
            that already records both is returned instead and the entries' parts are deleted.
        decision: the schema decision ``begin_append`` made (:class:`~.write_pipeline.SchemaDecision`);
            the commit decides again only if the live schema moved meanwhile.
    """

    key: str
    txn: str
    schema: pa.Schema
    partition_by: tuple[str, ...]
    write: PendingWrite = field(repr=False)
    allow_new_columns: bool = False
    idempotency_key: str | None = None
    decision: SchemaDecision | None = field(default=None, repr=False, compare=False)


def append_builder(
    options: DatasetOptions,
    entries: Sequence[FileEntry],
    decision: SchemaDecision,
    *,
    pending: PendingWrite,
) -> Build:
    """The append's manifest on top of whatever version is live when it commits: its schema is
    ``decision``'s, decided again only if the live schema is not the one it was decided on."""
    key, incoming, partition = decision.key, decision.recorded, decision.partition_by
    run_id, metadata = pending.run_id, pending.metadata

    def make(files: Sequence[FileEntry], schema: pa.Schema) -> DatasetManifest:
        return new_manifest(
            options, key, files, schema, run_id=run_id, metadata=metadata, partition_by=partition, operation="append"
        )

    def build(latest: DatasetManifest | None) -> DatasetManifest:
        if latest is None:
            return make(entries, incoming)
        if latest.partition_by != partition:
            raise CommitConflict(f"dataset {key!r} was repartitioned by a concurrent write; append again")
        clash = sorted({e.path for e in entries}.intersection(_parts_to_check(latest, entries, pending)))
        if clash:
            raise ValueError(f"part {clash[0]!r} is already listed by the live version of dataset {key!r}")
        schema = decision.on(latest)
        added = [n for n in schema.names if latest.schema is not None and n not in latest.schema.names]
        ours = [replace(f, missing_columns=tuple(n for n in schema.names if n not in incoming.names)) for f in entries]
        if not added and latest.format_version >= SEGMENTED_FORMAT and (latest.segments or latest.added):
            # Only files added: the live segments stay as they are, nothing else is loaded.
            made = make([], schema).evolve(
                parts=[*latest.parts, *(e.path for e in ours)] if latest.parts_listed() else None,
                part_count=latest.part_count() + len(ours),
                row_count=latest.row_count + sum(e.row_count or 0 for e in ours),
                segments=latest.segments,
                added=(*latest.added, *ours),
                files=(),
            )
            made.__dict__["_adds_to"] = weakref.ref(latest)  # only adds files to it (clean-up needs no set of parts)
            return made
        old = [replace(f, missing_columns=f.missing_columns + tuple(added)) if added else f for f in latest.files]
        return make([*old, *ours], schema)

    return build


def _parts_to_check(latest: DatasetManifest, entries: Sequence[FileEntry], pending: PendingWrite) -> Sequence[str]:
    """The live parts an append's new files could clash with: all of them, or (a format-3 version, whose
    parts are in its segments) none when every new file carries this write's token, which no other write uses."""
    if latest.parts_listed() or not all(pending.txn in e.path.rpartition("/")[2] for e in entries):
        return latest.parts
    return ()


def append_dataset(
    options: DatasetOptions,
    table: pa.Table | pa.RecordBatchReader,
    key: str,
    run_id: str | None,
    metadata: dict[str, str] | None,
    *,
    partition_by: Sequence[str] | None,
    allow_new_columns: bool,
    expect_owner: Mapping[str, str | None] | None = None,
    idempotency_key: str | None = None,
    live: LiveVersion | None = None,
) -> DatasetManifest:
    """See :meth:`ParquetDatasetStore.append_dataset` (``live``: the live version already read, see :mod:`..commit.live`)."""
    key = validate_key(key, what="dataset key")
    check_input(table, "append_dataset")
    check_key_fits(options.store, key)
    if options.delta_log:
        table = delta_ready(table, key=key)
    txn = begin(
        options,
        key,
        mode="append",
        run_id=run_id,
        metadata=metadata,
        expect_owner=expect_owner,
        at=begin_point(live, key),
    )
    decision = decide_schema(
        key,
        table.schema,
        mode="append",
        current=txn.current,
        partition_by=partition_by,
        allow_new_columns=allow_new_columns,
    )
    table = conform(table, decision)
    check_write_fits(options.store, key, table, decision.partition_by)
    with txn.writing():
        entries = encode(options, txn, plan_parts(options, txn.pending, table, decision.partition_by))
    build = append_builder(options, entries, decision, pending=txn.pending)
    content = entries_hash(entries) if idempotency_key is not None else None
    committed = txn.commit(
        build, idempotency=None if idempotency_key is None or content is None else (idempotency_key, content)
    )
    if txn.recognised:
        complete_recognised(options, key)
    return committed


def complete_recognised(options: DatasetOptions, key: str) -> None:
    """After a recognised exactly-once retry: write the ``_SUCCESS`` the earlier attempt may have died
    before writing (this package's readers repair it, a Spec 042 reader raises ``DatasetIncomplete``).

    Costs one ``exists``; never raises for a marker it cannot write (as a read's repair).
    """
    if not options.store.exists(f"{key}/{SUCCESS_NAME}"):
        repair_success(options.store, key)


def begin_append(
    options: DatasetOptions,
    key: str,
    schema: pa.Schema,
    run_id: str | None,
    metadata: dict[str, str] | None,
    *,
    partition_by: Sequence[str] | None,
    allow_new_columns: bool,
    expect_owner: Mapping[str, str | None] | None = None,
) -> PendingAppend:
    """See :meth:`ParquetDatasetStore.begin_append`."""
    key = validate_key(key, what="dataset key")
    if not isinstance(schema, pa.Schema):
        raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
    if options.delta_log:
        check_delta_schema(schema, key=key)
    check_key_fits(options.store, key)
    txn = begin(options, key, mode="append", run_id=run_id, metadata=metadata, expect_owner=expect_owner)
    decision = decide_schema(
        key,
        schema,
        mode="append",
        current=txn.current,
        partition_by=partition_by,
        allow_new_columns=allow_new_columns,
        exact=True,  # the parts come from another writer: checked Arrow casts only, before any write
    )
    return PendingAppend(
        key=key,
        txn=txn.txn,
        schema=decision.target,
        partition_by=decision.partition_by,
        write=txn.pending,
        allow_new_columns=allow_new_columns,
        decision=decision,
    )


def commit_append(
    options: DatasetOptions,
    pending: PendingAppend,
    entries: Sequence[FileEntry],
) -> DatasetManifest:
    """See :meth:`ParquetDatasetStore.commit_append` (and :attr:`PendingAppend.idempotency_key`)."""
    if not isinstance(pending, PendingAppend):
        raise TypeError(f"pending must come from begin_append, got {type(pending).__name__}")
    check_key_fits(options.store, pending.key)
    decision = pending.decision
    if decision is None or decision.target is not pending.schema:  # not from begin_append, or changed since
        # Decided here with no live schema, so every commit attempt evolves the live one by it.
        decision = decide_schema(
            pending.key, pending.schema, mode="write", current=None, partition_by=pending.partition_by
        )
        decision = replace(decision, allow_new_columns=pending.allow_new_columns)
    txn = Transaction.resume(options, pending.write)
    live = txn.current.parts if txn.current is not None else ()
    entries = check_external_entries(
        options.store, pending.key, entries, decision.recorded, pending.partition_by, listed=live
    )
    txn.adopt(e.path for e in entries)
    build = append_builder(options, entries, decision, pending=pending.write)
    key = pending.idempotency_key
    content = entries_hash(entries) if key is not None else None
    return txn.commit(build, idempotency=None if key is None or content is None else (key, content))
