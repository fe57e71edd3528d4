"""The one write pipeline: write, overwrite, append and merge, in-process and through ``begin_*``/``commit_*``.

Every write goes through the same steps, each in one place:

1. **begin** (:func:`begin`): the one read of the live version (or the one a caller read already,
   ``live=``) and the operation's :class:`~..commit.transaction.Transaction`;
2. **decide** (:func:`decide_schema`): the schema, once, as one value (:class:`SchemaDecision`): what
   the manifest records, the parts' file schema, the partition columns, the new columns, the casts.
   A write's (or overwrite's) schema does not depend on the live version, so it is decided before
   the begin (whose ``_claim`` writes): bad input changes nothing;
3. **conform** (:func:`conform`): the data fitted to the decision, batch by batch for a stream;
4. **plan** (:func:`plan_parts`): the part jobs (split by partition, chunked by ``max_rows_per_file``,
   a stream one part after another);
5. **encode** (:func:`encode`): the one entry point that encodes parts (:func:`..io.encode.encode_parts`);
6. **commit**: ``Transaction.commit`` with a build function that rebases on the live version and
   decides the schema again (:meth:`SchemaDecision.on`) only when the live schema moved.

:func:`write_version` runs the whole pipeline for a write or an overwrite; a merge into a dataset
that does not exist yet runs it too, from the version the merge read. The operations in
:mod:`.write`, :mod:`.append` and :mod:`.merge` compose these steps; external writers (the Spark
layer) run begin and decide on the driver (``begin_write``, ``begin_append``, ``plan_merge``),
encode on executors, and commit with the same build functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from ...errors import AlreadyExists
from ...storage.base import Capability
from .._dataset_options import DatasetOptions, check_metadata, check_run_id
from ..commit.new_version import new_manifest
from ..commit.transaction import PendingWrite, Transaction, repair_success
from ..delta import delta_ready
from ..format.layout import SUCCESS_NAME
from ..format.partition import check_partition_by, encode_partition_values, partition_folder, split_by_partition
from ..format.schema import (
    cast_to,
    check_column_names,
    check_same_columns,
    conformed_schema,
    evolve_schema,
    recorded_schema,
)
from ..io.encode import DEFAULT_ROW_GROUP, PartJob, chunk_batches, encode_parts, single_job, stream_jobs, table_chunks
from ..io.key_checks import check_folder_fits, check_write_fits
from ..manifest import DatasetManifest, FileEntry
from .history import read_manifest

Mode = Literal["write", "overwrite", "append", "merge"]

_NEEDS: dict[str, tuple[tuple[Capability, ...], str]] = {
    "write": ((Capability.ATOMIC_WRITE, Capability.CONDITIONAL_WRITE), "write datasets"),
    "overwrite": (
        (Capability.ATOMIC_WRITE, Capability.CONDITIONAL_WRITE, Capability.DELETE),
        "write datasets with overwrite=True",
    ),
    "append": ((Capability.ATOMIC_WRITE, Capability.CONDITIONAL_WRITE), "append to datasets"),
    "merge": ((Capability.ATOMIC_WRITE, Capability.CONDITIONAL_WRITE, Capability.DELETE), "merge"),
}


# ------------------------------------------------------------------ 1. begin


def require(options: DatasetOptions, mode: Mode) -> None:
    """Raises ``CapabilityNotSupported``: the store cannot do what a ``mode`` write needs."""
    needed, action = _NEEDS[mode]
    options.require(*needed, action=action)


def begin(
    options: DatasetOptions,
    key: str,
    *,
    mode: Mode,
    run_id: str | None,
    metadata: dict[str, str] | None,
    expect_owner: Mapping[str, str | None] | None,
    at: tuple[DatasetManifest | None, str | None] | None = None,
) -> Transaction:
    """The write's transaction, begun on the live version of ``key`` (read once here) or on ``at``,
    a ``(manifest, token)`` read already.

    A write (``mode="write"``) tries a new dataset's ``_claim`` and refuses an existing one; an
    append or a merge refuses a live manifest it cannot parse.

    Raises:
        TypeError / ValueError: a bad ``run_id``, ``metadata`` or ``expect_owner``.
        CapabilityNotSupported: the store cannot do what the write needs.
        OwnerMismatch: the live version records another owner than ``expect_owner``.
        AlreadyExists: ``mode="write"`` and the dataset exists (a committed one missing its
            ``_SUCCESS`` gets it first).
        ManifestCorrupted: ``mode="append"`` or ``"merge"`` and the live manifest cannot be parsed.
    """
    check_run_id(run_id)
    metadata = check_metadata(metadata)
    require(options, mode)
    txn = Transaction.begin(
        options,
        key,
        overwrite=mode in ("overwrite", "merge"),
        run_id=run_id,
        metadata=metadata,
        claim=mode in ("write", "overwrite"),
        exclusive=mode == "write",
        current=at,
        expect_owner=expect_owner,
    )
    if mode == "write" and txn.exists:
        if txn.current is not None and not options.store.exists(f"{key}/{SUCCESS_NAME}"):
            repair_success(options.store, key)  # its writer died after committing: make it whole
        raise AlreadyExists(f"dataset {key!r} already exists; pass overwrite=True to replace it")
    if mode in ("append", "merge") and txn.current is None and txn.exists:
        read_manifest(options.store, key)  # raises ManifestCorrupted with the reason
    return txn


# ------------------------------------------------------------------ 2. decide


@dataclass(frozen=True, kw_only=True)
class SchemaDecision:
    """The schema of one write, decided once (:func:`decide_schema`).

    Attributes:
        key: the dataset key.
        partition_by: the partition columns (the dataset's, for an append or a merge into one).
        target: the schema the data is fitted to (column order, types, nullability); the
            manifest records it when the write commits on :attr:`based_on`.
        recorded: what the manifest records for data of :attr:`target`: file columns as Parquet
            reads them back, partition columns as given; external parts are checked against it.
        based_on: the live schema it was decided against (``None``: a new dataset, or a write
            that replaces it); a commit on another live schema decides again (:meth:`on`).
        conformed: the schema the data has once fitted (:func:`conform`); ``None`` when it is
            taken as given.
        new_columns: columns :attr:`target` adds to :attr:`based_on` (an append's ``allow_new_columns``).
        casts: the data's columns whose type is converted to :attr:`target`'s.
        allow_new_columns: as given (an append's rebase may add columns again).
    """

    key: str
    partition_by: tuple[str, ...]
    target: pa.Schema
    recorded: pa.Schema
    based_on: pa.Schema | None = None
    conformed: pa.Schema | None = None
    new_columns: tuple[str, ...] = ()
    casts: tuple[str, ...] = ()
    allow_new_columns: bool = False

    @property
    def file_schema(self) -> pa.Schema:
        """The parts' schema: :attr:`recorded` without the partition columns."""
        return pa.schema([f for f in self.recorded if f.name not in self.partition_by])

    def on(self, latest: DatasetManifest) -> pa.Schema:
        """The schema a commit of this write on ``latest`` records: :attr:`target` if ``latest``'s schema
        is the one decided against, else decided again (``latest``'s schema evolved by :attr:`recorded`).

        Raises:
            ValueError: ``latest`` has no schema (a Spec 042-only manifest), or the data no longer fits it.
        """
        if (
            latest.schema is not None
            and self.based_on is not None
            and latest.schema.equals(self.based_on, check_metadata=True)
        ):
            return self.target
        return _evolved(self.key, latest, self.recorded, self.allow_new_columns)


def _evolved(key: str, current: DatasetManifest, incoming: pa.Schema, allow_new_columns: bool) -> pa.Schema:
    schema = current.schema
    if schema is None:
        raise ValueError(f"dataset {key!r} has a Spec 042-only manifest without a schema; overwrite it to append")
    return evolve_schema(
        schema,
        incoming,
        allow_new_columns=allow_new_columns,
        key=key,
        partition_by=current.partition_by,
        names_checked=True,
    )


def decide_schema(
    key: str,
    incoming: pa.Schema,
    *,
    mode: Mode,
    current: DatasetManifest | None,
    partition_by: Sequence[str] | None,
    allow_new_columns: bool = False,
    exact: bool = False,
    names_checked: bool = False,
) -> SchemaDecision:
    """The one schema decision of a write of data of schema ``incoming`` on ``current`` (the live version).

    A write, an overwrite, or an append or merge on no dataset: ``incoming`` as given, partitioned by
    ``partition_by``. An append on ``current``: its schema evolved by ``incoming`` (new columns only with
    ``allow_new_columns``) and its partitioning. A merge on ``current``: exactly its schema and partitioning.
    ``exact``: casts must be checked Arrow casts (an external writer's parts), not types the Parquet
    writer converts. ``names_checked``: the caller ran :func:`check_column_names` on ``incoming`` already.

    Raises:
        ValueError: a column name repeats, the columns or types do not fit, ``partition_by`` is bad or
            differs from the dataset's, a Spec 042-only manifest without a schema; the message names them.
        TypeError: a bad ``partition_by``, or a column Parquet cannot store.
    """
    if not names_checked:
        check_column_names(incoming, key=key)
    if current is None or mode in ("write", "overwrite"):
        partition = check_partition_by(partition_by, incoming)
        recorded = recorded_schema(incoming, partition, key=key, names_checked=True)
        return SchemaDecision(key=key, partition_by=partition, target=incoming, recorded=recorded)
    action = "merge" if mode == "merge" else "append"
    if current.schema is None:
        raise ValueError(f"dataset {key!r} has a Spec 042-only manifest without a schema; overwrite it to {action}")
    partition = current.partition_by
    if partition_by is not None and tuple(partition_by) != partition:
        keeps = "; an append keeps the dataset's partitioning" if mode == "append" else ""
        raise ValueError(f"dataset {key!r} is partitioned by {list(partition)}, not {list(partition_by)}{keeps}")
    if mode == "merge":
        target = recorded = current.schema
        check_same_columns(incoming.names, target, key=key)
    else:
        target = _evolved(key, current, incoming, allow_new_columns)
        recorded = recorded_schema(target, partition, key=key, names_checked=True)
    casts = tuple(f.name for f in incoming if not f.type.equals(target.field(f.name).type))
    return SchemaDecision(
        key=key,
        partition_by=partition,
        target=target,
        recorded=recorded,
        based_on=current.schema,
        conformed=conformed_schema(incoming, target, key=key, exact=exact),
        new_columns=tuple(n for n in target.names if current.schema.get_field_index(n) < 0),
        casts=casts,
        allow_new_columns=allow_new_columns,
    )


# ------------------------------------------------------------------ 3. conform


def conform(
    data: pa.Table | pa.RecordBatchReader, decision: SchemaDecision, *, exact: bool = False
) -> pa.Table | pa.RecordBatchReader:
    """``data`` fitted to ``decision`` (a stream batch by batch); as given when the decision takes it as given.

    Raises:
        ValueError: a value does not convert (nulls in a non-nullable column, a lossy cast); for a stream,
            when the offending batch is reached (nothing is committed then).
    """
    if decision.conformed is None:
        return data
    return cast_to(data, decision.target, key=decision.key, exact=exact, conformed=decision.conformed)


# ------------------------------------------------------------------ 4. plan


@dataclass(frozen=True)
class PartPlan:
    """The part jobs of a write; ``sequential``: they pull from one stream, encode them one after another."""

    jobs: Iterable[PartJob]
    sequential: bool = False


def plan_parts(
    options: DatasetOptions, pending: PendingWrite, data: pa.Table | pa.RecordBatchReader, partition_by: Sequence[str]
) -> PartPlan:
    """The part jobs for ``data``, named by ``pending`` (its Spec names or its token).

    Unpartitioned: one part (``max_rows_per_file`` unset), consecutive parts of a stream, or slices of a
    table; partitioned: one job per (partition, chunk of at most ``max_rows_per_file`` rows).
    """
    key, limit = pending.key, options.max_rows_per_file
    group = options.part_options.row_group_size
    if partition_by:
        return PartPlan(_partition_jobs(options, data, pending, partition_by))
    if limit is None:
        name = pending.single_name()
        return PartPlan((single_job(f"{key}/{name}", name, data, row_group_size=group),), sequential=True)
    if not isinstance(data, pa.Table):  # a stream: one row group in memory at a time
        return PartPlan(stream_jobs(key, pending.part_name, data, limit, row_group_size=group), sequential=True)
    chunks = enumerate(table_chunks(data, limit))
    return PartPlan(PartJob.of(f"{key}/{pending.part_name(i)}", pending.part_name(i), c) for i, c in chunks)


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
                yield PartJob.of(f"{pending.key}/{name}", name, chunk, encoded)


# ------------------------------------------------------------------ 5. encode


def encode(options: DatasetOptions, txn: Transaction, plan: PartPlan) -> list[FileEntry]:
    """Encode ``plan``'s parts, recording each path in ``txn.created`` before it is written.

    Raises:
        Whatever writing a part raises (the store's errors, Arrow's); call it inside ``txn.writing()``.
    """
    return encode_parts(
        options.store,
        plan.jobs,
        options=options.part_options,
        attempted=txn.created,
        max_workers=options.max_workers,
        sequential=plan.sequential,
    )


# ------------------------------------------------------------------ the whole pipeline of a write


def write_version(
    options: DatasetOptions,
    data: pa.Table | pa.RecordBatchReader,
    key: str,
    *,
    overwrite: bool,
    run_id: str | None,
    metadata: dict[str, str] | None,
    partition_by: Sequence[str] | None,
    expect_owner: Mapping[str, str | None] | None,
    at: tuple[DatasetManifest | None, str | None] | None,
) -> DatasetManifest:
    """Write ``data`` as a new version of ``key`` (``key`` validated, ``data`` a table or a reader):
    decide, begin on ``at`` (or the live version, read once), plan, encode, commit.

    Raises:
        As :meth:`ParquetDatasetStore.write_dataset`.
    """
    if options.delta_log:
        data = delta_ready(data, key=key)
    decision = decide_schema(
        key, data.schema, mode="overwrite" if overwrite else "write", current=None, partition_by=partition_by
    )
    check_write_fits(options.store, key, data, decision.partition_by)
    txn = begin(
        options,
        key,
        mode="overwrite" if overwrite else "write",
        run_id=run_id,
        metadata=metadata,
        expect_owner=expect_owner,
        at=at,
    )
    with txn.writing():
        entries = encode(options, txn, plan_parts(options, txn.pending, data, decision.partition_by))
    base = new_manifest(
        options,
        key,
        entries,
        decision.recorded,
        run_id=run_id,
        metadata=txn.pending.metadata,
        partition_by=decision.partition_by,
        operation="overwrite" if txn.exists else "write",
    )
    return txn.commit(lambda _current: base)
