"""Compaction (delta-rs' ``optimize``): rewrite runs of small files of each
partition folder into files near a target size, as one atomic new version.

Planning is pure (:func:`plan_groups`): walk the manifest's files in order,
per partition folder, and pack consecutive small files into groups of at most
the target size. Only consecutive files of one folder are packed together, so
every row keeps its place relative to the other rows of its folder (and, for
an unpartitioned dataset, its place in the whole dataset). A group of one file
is left alone; so is a file of at least half the target (it is "near" it:
packing it with another would overshoot).

Each group streams into one new file: its files are read in manifest order
(verified, as any read), regrouped into row groups and written part by part,
so memory stays bounded by a row group's worth of rows, not the group's.
The new version replaces exactly the files it read and is committed through
the one commit path. A concurrent commit that only added files (an append) is
rebased on; one that removed or changed a file this compaction read (a merge,
an overwrite) makes it plan again, until ``commit_timeout`` runs out.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from ...errors import DatasetIncomplete
from ...storage.base import Capability
from .._dataset_options import DatasetOptions, check_run_id
from ..commit.new_version import new_manifest
from ..commit.retry import Replan, retry_replans
from ..commit.transaction import Transaction, read_current
from ..format.layout import part_name
from ..io.encode import DEFAULT_ROW_GROUP, chunk_batches, encode_part
from ..io.key_checks import check_key_fits
from ..io.part_check import PartsVanished
from ..io.read_parts import plan, read_parts
from ..manifest import DatasetManifest, FileEntry
from .read import committed_manifest

#: The default target size of a compacted file.
DEFAULT_TARGET_FILE_BYTES = 128 * 1024 * 1024
#: Compressed bytes of input files read at once while a group is rewritten.
_READ_CHUNK_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class CompactResult:
    """What :meth:`ParquetDatasetStore.compact_dataset` did (or, with ``dry_run``, would do).

    Attributes:
        files_read: files replaced (to be replaced, with ``dry_run``).
        files_written: new files written (to be written, with ``dry_run``: one per group).
        bytes_before: total size of the files read.
        bytes_after: total size of the files written; ``None`` with ``dry_run``
            (the size is only known once the files are encoded) and ``0`` when
            there was nothing to compact.
        rows: rows in the files read, which equals the rows written.
        version: the committed version; ``None`` with ``dry_run`` or when there
            was nothing to compact (no new version).
        read_paths: the files read, relative to the dataset key, in manifest order.
        written_paths: the new files, relative to the dataset key (empty with ``dry_run``).
        dry_run: whether this was only a plan.
    """

    files_read: int
    files_written: int
    bytes_before: int
    bytes_after: int | None
    rows: int
    version: int | None
    read_paths: tuple[str, ...] = ()
    written_paths: tuple[str, ...] = ()
    dry_run: bool = False


@dataclass(frozen=True)
class CompactGroup:
    """Consecutive small files of one partition folder that become one file."""

    folder: str
    entries: tuple[FileEntry, ...]

    @property
    def size_bytes(self) -> int:
        return sum(e.size_bytes or 0 for e in self.entries)

    @property
    def rows(self) -> int:
        return sum(e.row_count or 0 for e in self.entries)


def check_target(target_file_bytes: object) -> int:
    """Validate ``target_file_bytes``.

    Raises:
        ValueError: it is not a positive int (a bool, a float or a string is refused too).
    """
    if isinstance(target_file_bytes, bool) or not isinstance(target_file_bytes, int):
        raise ValueError(
            f"target_file_bytes must be a positive int number of bytes, got {type(target_file_bytes).__name__} "
            f"{target_file_bytes!r}"
        )
    if target_file_bytes <= 0:
        raise ValueError(f"target_file_bytes must be a positive number of bytes, got {target_file_bytes}")
    return target_file_bytes


def _folder_key(entry: FileEntry, partition_by: Sequence[str]) -> str:
    """Files that may share a compacted file: same partition values (all files when unpartitioned)."""
    if not partition_by:
        return ""
    return json.dumps(entry.partition_values or {}, sort_keys=True)


def _folder(entry: FileEntry, partition_by: Sequence[str]) -> str:
    return entry.path.rpartition("/")[0] if partition_by else ""


def plan_groups(
    files: Sequence[FileEntry], partition_by: Sequence[str], candidates: set[str], target: int
) -> list[CompactGroup]:
    """The groups of files to rewrite (pure: no I/O), in manifest order of their first file.

    A file is packed only if it is a candidate (selected by the filters), its
    size is known and below half of ``target``. Packing follows manifest order
    within each folder and never skips a file, so a file that is not packed
    ends the run before it. A group holds at most ``target`` bytes and at
    least two files.
    """
    groups: list[CompactGroup] = []
    runs: dict[str, list[FileEntry]] = {}

    held: dict[str, int] = {}  # bytes in each open run

    def close(fkey: str) -> None:
        run = runs.pop(fkey, [])
        held.pop(fkey, None)
        if len(run) >= 2:
            groups.append(CompactGroup(_folder(run[0], partition_by), tuple(run)))

    for entry in files:
        fkey = _folder_key(entry, partition_by)
        size = entry.size_bytes
        if entry.path not in candidates or size is None or entry.row_count is None or size * 2 >= target:
            close(fkey)
            continue
        run = runs.setdefault(fkey, [])
        if run and held[fkey] + size > target:
            close(fkey)
            run = runs.setdefault(fkey, [])
        run.append(entry)
        held[fkey] = held.get(fkey, 0) + size
    for fkey in list(runs):
        close(fkey)
    position = {e.path: i for i, e in enumerate(files)}
    return sorted(groups, key=lambda g: position[g.entries[0].path])


def compact(
    options: DatasetOptions,
    key: str,
    target_file_bytes: int,
    filters: Any,
    run_id: str | None,
    *,
    dry_run: bool,
) -> CompactResult:
    """See :meth:`ParquetDatasetStore.compact_dataset` (``key`` already validated)."""
    target = check_target(target_file_bytes)
    check_run_id(run_id)
    if not isinstance(dry_run, bool):
        raise TypeError(f"dry_run must be a bool, got {type(dry_run).__name__}")
    check_key_fits(options.store, key)

    def attempt() -> CompactResult:
        while True:
            current, token = read_current(options.store, key)
            if current is not None:
                break
            committed_manifest(options.store, key)  # raises DatasetNotFound, DatasetIncomplete or ManifestCorrupted
        schema = current.schema
        if schema is None:
            raise ValueError(
                f"dataset {key!r} has a Spec 042-only manifest without a schema; overwrite it to compact it"
            )
        candidates = {e.path for e in plan(current, schema, filters).selected}
        groups = plan_groups(current.files, current.partition_by, candidates, target)
        read = tuple(e for g in groups for e in g.entries)
        if not groups or dry_run:
            return CompactResult(
                files_read=len(read),
                files_written=len(groups),
                bytes_before=sum(e.size_bytes or 0 for e in read),
                bytes_after=None if groups else 0,
                rows=sum(e.row_count or 0 for e in read),
                version=None,
                read_paths=tuple(e.path for e in read),
                dry_run=dry_run,
            )
        options.require(
            Capability.ATOMIC_WRITE, Capability.CONDITIONAL_WRITE, Capability.DELETE, action="compact datasets"
        )
        try:
            return _rewrite(options, key, current, token, schema, groups=groups, run_id=run_id)
        except PartsVanished as exc:
            latest, _token = read_current(options.store, key)
            if latest is not None and latest.version == current.version:
                # Nothing replaced them: the live version itself is damaged, planning again cannot help.
                raise DatasetIncomplete(
                    f"dataset {key!r}: parts listed in the manifest are missing or unreadable: {exc}"
                ) from None
            raise

    return retry_replans(
        options.commit_timeout,
        attempt,
        lambda: (
            f"dataset {key!r}: gave up compacting after {options.commit_timeout:g} s; concurrent commits kept "
            "replacing the files it read (raise commit_timeout to wait longer, or compact again later)"
        ),
    )


def _rewrite(
    options: DatasetOptions,
    key: str,
    current: DatasetManifest,
    token: str | None,
    schema: pa.Schema,
    *,
    groups: list[CompactGroup],
    run_id: str | None,
) -> CompactResult:
    txn = Transaction.begin(
        options, key, overwrite=False, run_id=run_id, metadata=current.metadata, current=(current, token)
    )
    part_options = options.part_options
    partition = current.partition_by
    file_schema = pa.schema([f for f in schema if f.name not in partition], metadata=schema.metadata)
    names = [part_name(i, txn=txn.txn, kind="c") for i in range(len(groups))]
    names = [f"{g.folder}/{n}" if g.folder else n for g, n in zip(groups, names, strict=True)]
    paths = [f"{key}/{n}" for n in names]
    for path in paths:
        txn.record(path)

    def write(i: int) -> FileEntry:
        group = groups[i]
        tables = _read_group(options, key, current, group, partition)
        first = next(tables)  # read before the output opens: a vanished file costs no write
        batches = (b for t in itertools.chain([first], tables) for b in t.to_batches())
        rows = part_options.row_group_size or DEFAULT_ROW_GROUP
        return encode_part(
            options.store,
            paths[i],
            names[i],
            file_schema,
            chunk_batches(batches, file_schema, rows),
            options=part_options,
            partition_values=group.entries[0].partition_values,
            tag=True,
        )

    workers = min(options.max_workers or os.cpu_count() or 1, len(groups))
    with txn.writing():
        if workers <= 1:
            written = [write(i) for i in range(len(groups))]
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pds-compact") as pool:
                written = list(pool.map(write, range(len(groups))))

    def build(latest: DatasetManifest | None) -> DatasetManifest:
        if latest is None:
            raise Replan()  # deleted meanwhile: planning again says so
        files = rebase(latest, schema, partition, groups, written)
        latest_schema = latest.schema
        assert latest_schema is not None  # rebase checked it
        return new_manifest(
            options,
            key,
            files,
            latest_schema,
            run_id=run_id,
            metadata=latest.metadata,
            partition_by=partition,
            operation="compact",
        )

    committed = txn.commit(build)
    read = [e for g in groups for e in g.entries]
    return CompactResult(
        files_read=len(read),
        files_written=len(written),
        bytes_before=sum(e.size_bytes or 0 for e in read),
        bytes_after=sum(e.size_bytes or 0 for e in written),
        rows=sum(e.row_count or 0 for e in read),
        version=committed.version,
        read_paths=tuple(e.path for e in read),
        written_paths=tuple(e.path for e in written),
    )


def rebase(
    latest: DatasetManifest,
    schema: pa.Schema,
    partition_by: Sequence[str],
    groups: Sequence[CompactGroup],
    written: Sequence[FileEntry],
) -> list[FileEntry]:
    """``latest``'s files with each group replaced by its new file, at the group's first file's place.

    ``latest`` may have moved on from the version the groups were planned on,
    as long as every file read is still there, unchanged and in the same order
    within its folder, and the schema only gained columns (the new files then
    lack those, like the files they replace).

    Raises:
        Replan: a concurrent commit removed, changed or reordered a file read,
            repartitioned the dataset or changed a column's type.
    """
    latest_schema = latest.schema
    if latest_schema is None or tuple(latest.partition_by) != tuple(partition_by):
        raise Replan()
    for field in schema:
        idx = latest_schema.get_field_index(field.name)
        if idx < 0 or not latest_schema.field(idx).type.equals(field.type):
            raise Replan()
    added = tuple(n for n in latest_schema.names if schema.get_field_index(n) < 0)
    present = {f.path: f for f in latest.files}
    # Position of each file among the files of its folder, in the latest manifest.
    order: dict[str, int] = {}
    seen: dict[str, int] = {}
    for f in latest.files:
        fkey = _folder_key(f, partition_by)
        order[f.path] = seen.get(fkey, 0)
        seen[fkey] = order[f.path] + 1
    first: dict[str, FileEntry] = {}
    replaced: set[str] = set()
    for group, new in zip(groups, written, strict=True):
        for n, entry in enumerate(group.entries):
            have = present.get(entry.path)
            if have is None or (have.size_bytes, have.row_count, have.partition_values) != (
                entry.size_bytes,
                entry.row_count,
                entry.partition_values,
            ):
                raise Replan()
            if order[entry.path] != order[group.entries[0].path] + n:
                raise Replan()  # something was put between the group's files
        first[group.entries[0].path] = replace(new, missing_columns=added)
        replaced.update(e.path for e in group.entries)
    files: list[FileEntry] = []
    for f in latest.files:
        if f.path in first:
            files.append(first[f.path])
        elif f.path not in replaced:
            files.append(f)
    return files


def _read_group(
    options: DatasetOptions, key: str, manifest: DatasetManifest, group: CompactGroup, partition_by: Sequence[str]
) -> Iterator[pa.Table]:
    """The group's rows in order, a bounded chunk of files at a time, without partition columns.

    Raises:
        PartsVanished: a file disappeared (a concurrent commit replaced it).
        DatasetIncomplete: a file is damaged or disagrees with the manifest.
    """
    rows_per_chunk = options.row_group_size or DEFAULT_ROW_GROUP
    chunk: list[FileEntry] = []
    rows = size = 0

    def read(entries: list[FileEntry]) -> pa.Table:
        sub = replace(
            manifest,
            parts=[e.path for e in entries],
            files=tuple(entries),
            row_count=sum(e.row_count or 0 for e in entries),
        )
        table = read_parts(options.store, key, sub, None)
        return table.drop_columns(list(partition_by)) if partition_by else table

    for entry in group.entries:
        chunk.append(entry)
        rows += entry.row_count or 0
        size += entry.size_bytes or 0
        if rows >= rows_per_chunk or size >= _READ_CHUNK_BYTES:
            yield read(chunk)
            chunk, rows, size = [], 0, 0
    if chunk:
        yield read(chunk)
