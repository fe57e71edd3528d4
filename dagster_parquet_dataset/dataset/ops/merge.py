"""Merge (upsert, update, insert by key columns): plan candidate files from the
manifest, confirm them by reading key columns only, rewrite exactly the files
holding matched keys, and commit once through the transaction (planning again,
with the transaction's backoff, when a concurrent commit touched the files it
planned on). :func:`commit_merge` commits a merge whose parts an external
writer wrote (planned by :func:`~.merge_plan.plan_merge`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import AlreadyExists, DatasetNotFound
from ...storage.base import Store, validate_key
from .._dataset_options import DatasetOptions, check_metadata
from ..commit.external_entries import check_external_entries
from ..commit.live import LiveVersion, read_live
from ..commit.new_version import new_manifest
from ..commit.owner import check_expect_owner, check_owner
from ..commit.retry import Replan, retry_replans
from ..commit.transaction import Build, PendingWrite, Transaction
from ..expressions.merge_keys import KeyIndex, MergeResult, check_merge_args, check_merge_types, match_keys
from ..format.layout import part_name
from ..format.partition import encode_partition_values
from ..io.encode import PartJob, table_hash
from ..io.key_checks import check_key_fits, check_write_fits
from ..io.parallel import parallel_map
from ..io.read_parts import read_parts
from ..manifest import DatasetManifest, FileEntry
from .append import complete_recognised
from .history import read_manifest
from .merge_plan import MergePlan, MergeReplanNeeded, RangeIndex, file_stats, partition_tuple, split_candidates
from .write_pipeline import PartPlan, begin, conform, decide_schema, encode, plan_parts, require, write_version


def merge_content(source_hash: str, strategy: str, key_columns: Sequence[str]) -> str:
    """What an idempotent merge records as its content: a hash of its source rows, its strategy and
    key columns (a merge's parts depend on the version it merged into, so they cannot stand for it)."""
    return f"{source_hash}/{strategy}/{','.join(key_columns)}"


def merge_dataset(
    options: DatasetOptions,
    source: pa.Table,
    key: str,
    key_columns: Sequence[str],
    strategy: str,
    *,
    partition_by: Sequence[str] | None,
    run_id: str | None,
    metadata: dict[str, str] | None,
    expect_owner: Mapping[str, str | None] | None = None,
    idempotency_key: str | None = None,
    live: LiveVersion | None = None,
) -> MergeResult:
    """See :meth:`ParquetDatasetStore.merge_dataset` (``live``: the live version already read, see :mod:`..commit.live`;
    only the first attempt begins from it)."""
    key = validate_key(key, what="dataset key")
    keys = check_merge_args(source, key_columns, strategy)
    check_key_fits(options.store, key)
    metadata = check_metadata(metadata)
    owner = check_expect_owner(expect_owner)
    require(options, "merge")
    # A merge's parts depend on the version it merges into, so its content is its source's.
    content = merge_content(table_hash(source), strategy, keys) if idempotency_key is not None else None
    idempotency = None if idempotency_key is None or content is None else (idempotency_key, content)

    if live is not None and not isinstance(live, LiveVersion):
        raise TypeError(f"live must come from read_live, got {type(live).__name__}")
    if live is not None:
        live.begin_at(key)  # raises ValueError: read for another key
    given = [live] if live is not None else []

    def attempt() -> MergeResult:
        while True:
            now = given.pop() if given else read_live(options.store, key)  # the one read of each attempt
            if now.corrupt:
                read_manifest(options.store, key)  # raises ManifestCorrupted with the reason
            current = now.manifest
            if current is not None:
                return _merge_into(
                    options,
                    key,
                    current,
                    now.token,
                    source,
                    keys=keys,
                    strategy=strategy,
                    partition_by=partition_by,
                    run_id=run_id,
                    metadata=metadata,
                    expect_owner=owner,
                    idempotency=idempotency,
                )
            if strategy == "update":
                raise DatasetNotFound(f"dataset {key!r} does not exist; nothing to update")
            try:  # a new dataset: the write pipeline, from the version just read (no second read, no second check)
                manifest = write_version(
                    options,
                    source,
                    key,
                    overwrite=False,
                    run_id=run_id,
                    metadata=metadata,
                    partition_by=partition_by,
                    expect_owner=owner,
                    at=now.begin_at(key),
                )
            except AlreadyExists:
                continue  # created meanwhile: merge into it
            return MergeResult.committed(manifest, manifest.parts, inserted=source.num_rows)

    return retry_replans(
        options.commit_timeout,
        attempt,
        lambda: (
            f"dataset {key!r}: gave up merging after {options.commit_timeout:g} s; concurrent commits "
            "kept changing the files it planned on (raise commit_timeout to wait longer)"
        ),
    )


def _merge_into(
    options: DatasetOptions,
    key: str,
    current: DatasetManifest,
    token: str | None,
    source: pa.Table,
    *,
    keys: list[str],
    strategy: str,
    partition_by: Sequence[str] | None,
    run_id: str | None,
    metadata: dict[str, str] | None,
    expect_owner: dict[str, str | None] | None,
    idempotency: tuple[str, str] | None = None,
) -> MergeResult:
    """Merge ``source`` into version ``current`` of ``key`` (see :meth:`ParquetDatasetStore.merge_dataset`).

    Raises:
        OwnerMismatch: ``current`` records another owner than ``expect_owner``.
        Replan: a concurrent commit changed files this merge planned on.
        PartsVanished: a candidate file disappeared while it was read.
        ValueError: as ``merge_dataset``.
    """
    check_owner(key, expect_owner, current)  # also when the merge turns out to change nothing
    decision = decide_schema(key, source.schema, mode="merge", current=current, partition_by=partition_by, exact=True)
    schema, partition = decision.target, decision.partition_by
    source = conform(source, decision, exact=True)
    check_write_fits(options.store, key, source, partition)
    check_merge_types(source.schema, keys)
    index = KeyIndex(source, keys)
    row_partition, encoded = _partition_index(source, partition) if partition else (np.zeros(0, np.int64), [])
    source_partitions = set(encoded)

    # Plan: which files may hold source keys, from partition values and key statistics alone.
    rewrite_candidates, move_candidates = split_candidates(
        current.files, schema, keys, partition, index, wanted=source_partitions
    )

    # Confirm by reading only key columns.
    matched_source = np.zeros(source.num_rows, dtype=bool)
    file_matches: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    elsewhere = {e.path for e in move_candidates}
    for entry, found in zip(
        rewrite_candidates + move_candidates,
        parallel_map(
            lambda e: _read_file(options.store, key, current, schema, e, columns=keys),
            rewrite_candidates + move_candidates,
        ),
        strict=True,
    ):
        target_rows, source_rows = match_keys(found, source, keys)
        if not len(source_rows):
            continue
        moved = bool(partition) and any(
            encoded[g] != partition_tuple(entry, partition) for g in np.unique(row_partition[source_rows])
        )
        if entry.path in elsewhere or moved:
            example = {k: source.column(k)[int(source_rows[0])].as_py() for k in keys}
            raise ValueError(
                f"dataset {key!r}: key {example} exists in partition "
                f"{partition_tuple(entry, partition)} but the source puts it in another; "
                "partition columns cannot change for existing keys"
            )
        matched_source[source_rows] = True
        file_matches[entry.path] = (target_rows, source_rows)

    rewrite = [e for e in rewrite_candidates if e.path in file_matches] if strategy != "insert" else []
    insert_rows = np.flatnonzero(~matched_source) if strategy != "update" else np.array([], dtype=np.int64)
    updated = int(np.count_nonzero(matched_source)) if rewrite else 0
    if not rewrite and not len(insert_rows):
        return MergeResult.unchanged(current)

    txn = begin(
        options, key, mode="merge", run_id=run_id, metadata=metadata, expect_owner=expect_owner, at=(current, token)
    )
    with txn.writing():
        jobs: list[PartJob] = []
        for n, entry in enumerate(rewrite):
            target_rows, source_rows = file_matches[entry.path]
            old = _read_file(options.store, key, current, schema, entry, columns=None)
            keep_mask = np.ones(old.num_rows, dtype=bool)
            keep_mask[target_rows] = False
            merged = pa.concat_tables([old.filter(pa.array(keep_mask)), source.take(pa.array(source_rows))])
            folder = entry.path.rpartition("/")[0]
            name = part_name(n, txn=txn.txn, kind="m")
            name = f"{folder}/{name}" if folder else name
            jobs.append(PartJob.of(f"{key}/{name}", name, merged.drop_columns(list(partition)), entry.partition_values))
        if len(insert_rows):  # the rewrites, then the inserted rows' parts: one plan, encoded once
            inserts = plan_parts(options, txn.pending, source.take(pa.array(insert_rows)), partition)
            plan = PartPlan(chain(jobs, inserts.jobs))
        else:
            plan = PartPlan(jobs)
        new_entries = encode(options, txn, plan)

    rewritten = {e.path for e in rewrite}
    touched = {e.path for e in rewrite_candidates + move_candidates}

    committed = txn.commit(
        _merge_builder(
            options,
            key,
            current,
            touched,
            rewritten,
            new_entries=new_entries,
            index=index,
            schema=schema,
            pending=txn.pending,
            replan=Replan,
        ),
        idempotency=idempotency,
    )
    if txn.recognised:  # an earlier attempt committed this merge: nothing changed now
        complete_recognised(options, key)
        return MergeResult.committed(committed)
    new_files = (e.path for e in new_entries)
    return MergeResult.committed(committed, new_files, rewritten=rewritten, inserted=len(insert_rows), updated=updated)


def _rebase_safe(
    latest: DatasetManifest,
    planned: DatasetManifest,
    touched: set[str],
    rewritten: set[str],
    index: KeyIndex,
    *,
    schema: pa.Schema,
) -> bool:
    """Whether a merge planned on ``planned`` may commit on ``latest`` as it is.

    Only if every file it looked at is still there unchanged and no file the
    concurrent commits added can hold one of the source's keys.
    """
    if latest.schema is None or not latest.schema.equals(schema) or latest.partition_by != planned.partition_by:
        return False
    latest_paths = {f.path for f in latest.files}
    if not touched <= latest_paths or not rewritten <= latest_paths:
        return False
    planned_paths = {f.path for f in planned.files}
    for entry in latest.files:
        if entry.path in planned_paths:
            continue
        if index.might_contain(file_stats(entry, schema)):
            return False
    return True


def _read_file(
    store: Store,
    key: str,
    manifest: DatasetManifest,
    schema: pa.Schema,
    entry: FileEntry,
    *,
    columns: Sequence[str] | None,
) -> pa.Table:
    single = replace(manifest, parts=[entry.path], files=(entry,), row_count=entry.row_count or 0)
    return read_parts(store, key, single, columns)


def _partition_index(table: pa.Table, partition: Sequence[str]) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
    """The distinct partition values of ``table``'s rows in the manifest's encoded form, and each row's
    index into them: computed once per merge attempt."""
    columns = list(partition)
    rows = pa.array(np.arange(table.num_rows, dtype=np.int64))
    grouped = (
        table.select(columns)
        .append_column("__pds_row", rows)
        .group_by(columns, use_threads=False)
        .aggregate([("__pds_row", "list")])
    )
    encoded = [
        tuple(encode_partition_values(partition, [row[c] for c in partition], table.schema).values())
        for row in grouped.select(columns).to_pylist()
    ]
    lists = grouped.column("__pds_row_list")
    index = np.zeros(table.num_rows, dtype=np.int64)
    index[pc.list_flatten(lists).to_numpy()] = pc.list_parent_indices(lists).to_numpy()
    return index, encoded


def _merge_builder(
    options: DatasetOptions,
    key: str,
    planned: DatasetManifest,
    touched: set[str],
    rewritten: set[str],
    *,
    new_entries: Sequence[FileEntry],
    index: Any,
    schema: pa.Schema,
    pending: PendingWrite,
    replan: type[Replan],
) -> Build:
    """The merge's manifest on the live version: the planned one, or one a concurrent commit made
    that left every file the merge looked at alone (else ``replan`` is raised)."""

    def build(latest: DatasetManifest | None) -> DatasetManifest:
        if latest is None or latest.version != planned.version:
            if latest is None or not _rebase_safe(latest, planned, touched, rewritten, index, schema=schema):
                raise replan()
        clash = sorted({e.path for e in new_entries} & set(latest.parts))
        if clash:
            raise ValueError(f"part {clash[0]!r} is already listed by the live version of dataset {key!r}")
        files = [f for f in latest.files if f.path not in rewritten] + list(new_entries)
        return new_manifest(
            options,
            key,
            files,
            schema,
            run_id=pending.run_id,
            metadata=pending.metadata,
            partition_by=planned.partition_by,
            operation="merge",
        )

    return build


def commit_merge(
    options: DatasetOptions,
    plan: MergePlan,
    *,
    rewritten: Sequence[str],
    new_entries: Sequence[FileEntry],
    inserted: int,
    updated: int,
) -> MergeResult:
    """See :meth:`ParquetDatasetStore.commit_merge` (and :attr:`MergePlan.idempotency_key`)."""
    if not isinstance(plan, MergePlan) or not plan.exists or plan.manifest is None or plan.schema is None:
        raise TypeError("plan must come from plan_merge on an existing dataset")
    key, current, schema = plan.key, plan.manifest, plan.schema
    check_key_fits(options.store, key)
    rewritten_set = set(rewritten)
    candidate_paths = {e.path for e in plan.candidates}
    if not rewritten_set <= candidate_paths:
        raise ValueError(
            f"rewritten files must be among the plan's candidates: {sorted(rewritten_set - candidate_paths)}"
        )
    entries = check_external_entries(options.store, key, new_entries, schema, plan.partition_by, listed=current.parts)
    if not rewritten_set and not entries:
        return MergeResult.unchanged(current)
    touched = candidate_paths | {e.path for e in plan.elsewhere}
    txn = Transaction.resume(options, plan.pending())
    txn.adopt(e.path for e in entries)
    build = _merge_builder(
        options,
        key,
        current,
        touched,
        rewritten_set,
        new_entries=entries,
        index=RangeIndex(plan.ranges),
        schema=schema,
        pending=txn.pending,
        replan=MergeReplanNeeded,
    )
    idempotency = None
    if plan.idempotency_key is not None and plan.source_hash is not None:
        idempotency = (plan.idempotency_key, merge_content(plan.source_hash, plan.strategy, plan.key_columns))
    committed = txn.commit(build, idempotency=idempotency)
    if txn.recognised:  # an earlier attempt committed this merge: its parts went, nothing changed now
        return MergeResult(0, 0, (), tuple(committed.parts), (), committed.version)
    new_files = (e.path for e in entries)
    return MergeResult.committed(committed, new_files, rewritten=rewritten_set, inserted=inserted, updated=updated)
