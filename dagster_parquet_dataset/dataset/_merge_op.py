"""The merge operation (seed 003): plan candidate files from the manifest, confirm
them by reading key columns only, rewrite exactly the files holding matched
keys, and commit once through the commit path (planning again when a
concurrent commit touched the files it planned on)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..storage.base import Store
from ._commit import PendingWrite
from ._keys import check_write_fits
from ._merge import KeyIndex, MergeResult, check_merge_types, match_keys
from ._partition import encode_partition_values
from ._pruning import partition_stats
from ._read import file_constants, parallel_map, read_parts
from ._schema import conform_table
from ._stats import decode_stats
from ._write import PartJob, PartOptions, encode_parts
from .manifest import DatasetManifest, FileEntry

if TYPE_CHECKING:
    from .store import ParquetDatasetStore


class Replan(Exception):
    """A concurrent commit touched the files a merge planned on: plan again."""


def merge_into(
    ds: ParquetDatasetStore,
    key: str,
    current: DatasetManifest,
    token: str | None,
    source: pa.Table,
    keys: list[str],
    strategy: str,
    partition_by: Sequence[str] | None,
    run_id: str | None,
    metadata: dict[str, str] | None,
) -> MergeResult:
    """Merge ``source`` into version ``current`` of ``key`` (see :meth:`ParquetDatasetStore.merge_dataset`).

    Raises:
        Replan: a concurrent commit changed files this merge planned on.
        PartsVanished: a candidate file disappeared while it was read.
        ValueError: as ``merge_dataset``.
    """
    schema = current.schema
    if schema is None:
        raise ValueError(f"dataset {key!r} has a Spec 042-only manifest without a schema; overwrite it to merge")
    partition = current.partition_by
    if partition_by is not None and tuple(partition_by) != partition:
        raise ValueError(f"dataset {key!r} is partitioned by {list(partition)}, not {list(partition_by)}")
    source = conform_table(source, schema, key=key)
    check_write_fits(ds.store, key, source, partition)
    check_merge_types(source.schema, keys)
    index = KeyIndex(source, keys)
    source_partitions = _encoded_partitions(source, partition) if partition else set()

    # Plan: which files may hold source keys, from partition values and key statistics alone.
    rewrite_candidates: list[FileEntry] = []
    move_candidates: list[FileEntry] = []
    for entry in current.files:
        stats = decode_stats({c: s for c, s in (entry.stats or {}).items() if c in keys}, schema)
        for col, value in file_constants(entry, schema).items():
            stats[col] = partition_stats(value, entry.row_count)
        if not index.might_contain(stats):
            continue
        if partition and _partition_tuple(entry, partition) not in source_partitions:
            move_candidates.append(entry)
        else:
            rewrite_candidates.append(entry)

    # Confirm by reading only key columns.
    matched_source = np.zeros(source.num_rows, dtype=bool)
    file_matches: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    elsewhere = {e.path for e in move_candidates}
    for entry, found in zip(
        rewrite_candidates + move_candidates,
        parallel_map(
            lambda e: _read_file(ds.store, key, current, schema, e, keys), rewrite_candidates + move_candidates
        ),
        strict=True,
    ):
        target_rows, source_rows = match_keys(found, source, keys)
        if not len(source_rows):
            continue
        moved = partition and _encoded_partitions(source.take(pa.array(source_rows)), partition) != {
            _partition_tuple(entry, partition)
        }
        if entry.path in elsewhere or moved:
            example = {k: source.column(k)[int(source_rows[0])].as_py() for k in keys}
            raise ValueError(
                f"dataset {key!r}: key {example} exists in partition "
                f"{_partition_tuple(entry, partition)} but the source puts it in another; "
                "partition columns cannot change for existing keys"
            )
        matched_source[source_rows] = True
        file_matches[entry.path] = (target_rows, source_rows)

    rewrite = [e for e in rewrite_candidates if e.path in file_matches] if strategy != "insert" else []
    insert_rows = np.flatnonzero(~matched_source) if strategy != "update" else np.array([], dtype=np.int64)
    updated = int(sum(len(file_matches[e.path][1]) for e in rewrite))
    if not rewrite and not len(insert_rows):
        return MergeResult(0, 0, (), tuple(current.parts), (), None)

    txn = uuid.uuid4().hex[:16]
    pending = PendingWrite(key, txn, False, True, run_id, metadata, current, token)
    options = PartOptions(ds.compression, ds.row_group_size)
    attempted: list[str] = []
    try:
        jobs: list[PartJob] = []
        for n, entry in enumerate(rewrite):
            target_rows, source_rows = file_matches[entry.path]
            old = _read_file(ds.store, key, current, schema, entry, None)
            keep_mask = np.ones(old.num_rows, dtype=bool)
            keep_mask[target_rows] = False
            merged = pa.concat_tables([old.filter(pa.array(keep_mask)), source.take(pa.array(source_rows))])
            folder = entry.path.rpartition("/")[0]
            name = f"{folder}/{_merge_name(n, txn)}" if folder else _merge_name(n, txn)
            jobs.append(PartJob(f"{key}/{name}", name, merged.drop_columns(list(partition)), entry.partition_values))
        inserts = source.take(pa.array(insert_rows)) if len(insert_rows) else None
        new_entries = encode_parts(ds.store, jobs, options, attempted, ds.max_workers)
        if inserts is not None:
            new_entries += ds._write_parts(inserts, pending, partition, attempted)
    except BaseException:
        ds._committer.delete_quietly(attempted)
        raise

    rewritten = {e.path for e in rewrite}
    touched = {e.path for e in rewrite_candidates + move_candidates}

    def build(latest: DatasetManifest | None) -> DatasetManifest:
        if latest is None or latest.version != current.version:
            if latest is None or not _rebase_safe(latest, current, touched, rewritten, index, schema):
                raise Replan()
        base = latest
        files = [f for f in base.files if f.path not in rewritten] + new_entries
        return ds._manifest(key, files, schema, run_id, metadata, partition, "merge")

    try:
        committed = ds._committer.commit(pending, build, attempted, exclusive=False)
    except Replan:
        ds._committer.delete_quietly(attempted)
        raise
    new_paths = tuple(e.path for e in new_entries)
    preserved = tuple(p for p in committed.parts if p not in set(new_paths))
    return MergeResult(
        inserted=len(insert_rows),
        updated=updated,
        rewritten_files=tuple(sorted(rewritten)),
        preserved_files=preserved,
        new_files=new_paths,
        version=committed.version,
    )


def _partition_tuple(entry: FileEntry, partition: Sequence[str]) -> tuple[Any, ...]:
    values = entry.partition_values or {}
    return tuple(values.get(c) for c in partition)


def _rebase_safe(
    latest: DatasetManifest,
    planned: DatasetManifest,
    touched: set[str],
    rewritten: set[str],
    index: KeyIndex,
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
        stats = decode_stats(entry.stats or {}, schema)
        for col, value in file_constants(entry, schema).items():
            stats[col] = partition_stats(value, entry.row_count)
        if index.might_contain(stats):
            return False
    return True


def _read_file(
    store: Store,
    key: str,
    manifest: DatasetManifest,
    schema: pa.Schema,
    entry: FileEntry,
    columns: Sequence[str] | None,
) -> pa.Table:
    single = replace(manifest, parts=[entry.path], files=(entry,), row_count=entry.row_count or 0)
    return read_parts(store, key, single, columns)


def _encoded_partitions(table: pa.Table, partition: Sequence[str]) -> set[tuple[Any, ...]]:
    """The distinct partition values of ``table``'s rows, in the manifest's encoded form."""
    distinct = table.select(list(partition)).group_by(list(partition), use_threads=False).aggregate([])
    return {
        tuple(encode_partition_values(partition, [row[c] for c in partition], table.schema).values())
        for row in distinct.to_pylist()
    }


def _merge_name(index: int, txn: str) -> str:
    return f"part-{index:05d}-{txn}-m.parquet"
