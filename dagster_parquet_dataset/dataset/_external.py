"""Appends and merges whose parts an external writer (Spark's executors) writes.

The dataset layer plans and commits; the writer produces the parts. Both
operations commit through the one commit path (:class:`~._commit.Committer`)
with the same manifest-building rules as :meth:`ParquetDatasetStore.append_dataset`
and :meth:`ParquetDatasetStore.merge_dataset`:

* **append** -- :func:`begin_append` reads the live version and fixes the schema
  the parts must have (the dataset's, evolved by the incoming columns) and the
  partitioning; :func:`commit_append` commits the written entries, rebasing on
  whatever concurrent commits added meanwhile (:func:`append_builder`, which
  ``append_dataset`` uses too).
* **merge** -- :func:`plan_merge` picks the candidate files from the manifest
  alone (partition values and key statistics against the changes' key ranges
  and partition values); the writer finds which candidates hold matched keys,
  writes their replacements and the inserted rows, then :func:`commit_merge`
  commits once, or raises :class:`MergeReplanNeeded` when a concurrent commit
  touched what the plan relied on (the writer then deletes its parts and plans
  again).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..errors import CommitConflict
from ..storage.base import Capability, validate_key
from ._commit import PendingWrite
from ._keys import check_key_fits
from ._layout import CLAIM_NAME, MANIFEST_NAME, SUCCESS_NAME, VERSIONS_DIR
from ._merge import STRATEGIES, MergeResult, check_merge_types
from ._merge_op import Replan, _partition_tuple, _rebase_safe
from ._partition import check_partition_by, encode_partition_values
from ._pruning import ColumnStats, partition_stats
from ._read import file_constants
from ._schema import check_column_names, conform_table, recorded_schema
from ._stats import decode_stats
from .manifest import DatasetManifest, FileEntry

if TYPE_CHECKING:
    from .store import ParquetDatasetStore


class MergeReplanNeeded(Replan):
    """A concurrent commit changed files an external merge planned on: delete the parts and plan again."""


# ------------------------------------------------------------------------ append


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
    """

    key: str
    txn: str
    schema: pa.Schema
    partition_by: tuple[str, ...]
    write: PendingWrite = field(repr=False)
    allow_new_columns: bool = False


def append_builder(
    ds: ParquetDatasetStore,
    key: str,
    entries: Sequence[FileEntry],
    incoming: pa.Schema,
    partition: tuple[str, ...],
    run_id: str | None,
    metadata: dict[str, str] | None,
    allow_new_columns: bool,
) -> Callable[[DatasetManifest | None], DatasetManifest]:
    """The append's manifest on top of whatever version is live when it commits."""

    def build(latest: DatasetManifest | None) -> DatasetManifest:
        if latest is None:
            return ds._manifest(key, entries, incoming, run_id, metadata, partition, "append")
        if latest.partition_by != partition:
            raise CommitConflict(f"dataset {key!r} was repartitioned by a concurrent write; append again")
        schema = ds._append_schema(key, latest, incoming, allow_new_columns)
        added = [n for n in schema.names if latest.schema is not None and n not in latest.schema.names]
        old = [replace(f, missing_columns=f.missing_columns + tuple(added)) if added else f for f in latest.files]
        ours = [replace(f, missing_columns=tuple(n for n in schema.names if n not in incoming.names)) for f in entries]
        return ds._manifest(key, [*old, *ours], schema, run_id, metadata, partition, "append")

    return build


def begin_append(
    ds: ParquetDatasetStore,
    key: str,
    schema: pa.Schema,
    *,
    run_id: str | None,
    metadata: dict[str, str] | None,
    partition_by: Sequence[str] | None,
    allow_new_columns: bool,
) -> PendingAppend:
    """See :meth:`ParquetDatasetStore.begin_append`."""
    key = validate_key(key, what="dataset key")
    check_key_fits(ds.store, key)
    if not isinstance(schema, pa.Schema):
        raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
    check_column_names(schema, key=key)
    if run_id is not None and not isinstance(run_id, str):
        raise TypeError(f"run_id must be a str or None, got {type(run_id).__name__}")
    ds._require(Capability.ATOMIC_WRITE, Capability.CONDITIONAL_WRITE, action="append to datasets")
    current, token = ds._committer.read_current(key)
    if current is None and token is not None:
        ds.read_manifest(key)  # raises ManifestCorrupted with the reason
    if current is None:
        partition = check_partition_by(partition_by, schema)
        target = schema
    else:
        partition = current.partition_by
        if partition_by is not None and tuple(partition_by) != partition:
            raise ValueError(
                f"dataset {key!r} is partitioned by {list(partition)}, not {list(partition_by)}; "
                "an append keeps the dataset's partitioning"
            )
        target = ds._append_schema(key, current, schema, allow_new_columns)
        conform_table(schema.empty_table(), target, key=key)  # column set and castability, before any write
    recorded_schema(target, partition, key=key)  # every column storable
    txn = uuid.uuid4().hex[:16]
    pending = PendingWrite(key, txn, False, False, run_id, metadata, current, token)
    return PendingAppend(key, txn, target, tuple(partition), pending, allow_new_columns)


def check_entries(key: str, entries: Sequence[FileEntry]) -> list[FileEntry]:
    """``entries`` as a list, checked as parts written outside the dataset layer (Spark) must be.

    Raises:
        TypeError: an entry is not a ``FileEntry``.
        ValueError: an unsafe or reserved part path, a missing row count, or a path listed twice.
    """
    entries = list(entries)
    for entry in entries:
        if not isinstance(entry, FileEntry):
            raise TypeError(f"entries must be FileEntry objects, got {type(entry).__name__}")
        validate_key(entry.path, what="part path")
        if entry.path in (MANIFEST_NAME, SUCCESS_NAME, CLAIM_NAME) or entry.path.startswith(VERSIONS_DIR + "/"):
            raise ValueError(f"part path {entry.path!r} is reserved for the dataset's own files")
        if entry.row_count is None:
            raise ValueError(f"part {entry.path!r} has no row count; read it from the file's footer")
    if len({e.path for e in entries}) != len(entries):
        raise ValueError("entries list the same part path more than once")
    return entries


def commit_append(ds: ParquetDatasetStore, pending: PendingAppend, entries: Sequence[FileEntry]) -> DatasetManifest:
    """See :meth:`ParquetDatasetStore.commit_append`."""
    if not isinstance(pending, PendingAppend):
        raise TypeError(f"pending must come from begin_append, got {type(pending).__name__}")
    entries = check_entries(pending.key, entries)
    incoming = recorded_schema(pending.schema, pending.partition_by, key=pending.key)
    w = pending.write
    build = append_builder(
        ds, pending.key, entries, incoming, pending.partition_by, w.run_id, w.metadata, pending.allow_new_columns
    )
    attempted = [f"{pending.key}/{e.path}" for e in entries]
    return ds._committer.commit(w, build, attempted, exclusive=False)


# ------------------------------------------------------------------------- merge


class _RangeIndex:
    """The changes' keys as one ``[min, max]`` range per key column (what Spark aggregates give)."""

    def __init__(self, ranges: Mapping[str, tuple[Any, Any]]) -> None:
        self._ranges = dict(ranges)

    def might_contain(self, stats: Mapping[str, ColumnStats]) -> bool:
        """False only if, for some key column, the file's [min, max] and the changes' range are disjoint."""
        for col, (lo, hi) in self._ranges.items():
            s = stats.get(col)
            if s is None or s.min is None or s.max is None:
                continue
            if s.max < lo or s.min > hi:
                return False
        return True


def _domain(values: Sequence[Any], typ: pa.DataType) -> list[Any]:
    """Python values in the domain the manifest's statistics decode to (timestamps as integers)."""
    arr = pa.array(list(values), type=typ)
    if pa.types.is_timestamp(typ):
        arr = arr.cast(pa.int64())
    return arr.to_pylist()  # type: ignore[no-any-return]


@dataclass(frozen=True)
class MergePlan:
    """A merge planned by :meth:`ParquetDatasetStore.plan_merge` on one version of the dataset.

    Attributes:
        key: the validated dataset key.
        txn: unique token of this merge; names of the parts it writes must carry it.
        exists: whether the dataset exists (if not, write the changes as a new dataset instead).
        schema: the dataset's schema; the changes are converted to it (column order and types).
        partition_by: the dataset's partition columns.
        key_columns, strategy: as given.
        candidates: files in the changes' partitions whose key statistics overlap the changes'
            key ranges: the files that may hold matched keys (rewrite those that do).
        elsewhere: files in *other* partitions that may hold the changes' keys; a matched
            key there means a key's partition values would change, which a merge refuses.
        version: the planned-on version (``None`` if the dataset does not exist).
    """

    key: str
    txn: str
    exists: bool
    schema: pa.Schema | None
    partition_by: tuple[str, ...]
    key_columns: tuple[str, ...]
    strategy: str
    candidates: tuple[FileEntry, ...]
    elsewhere: tuple[FileEntry, ...]
    version: int | None
    run_id: str | None = None
    metadata: dict[str, str] | None = None
    manifest: DatasetManifest | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    ranges: Mapping[str, tuple[Any, Any]] = field(default_factory=dict, repr=False)

    def part_name(self, index: int) -> str:
        """A name for new part ``index`` of this merge (carries :attr:`txn`)."""
        return f"part-{index:05d}-{self.txn}-m.parquet"


def plan_merge(
    ds: ParquetDatasetStore,
    key: str,
    *,
    source_schema: pa.Schema,
    key_columns: Sequence[str],
    strategy: str,
    key_ranges: Mapping[str, tuple[Any, Any]],
    partitions: Sequence[Sequence[Any]] | None,
    partition_by: Sequence[str] | None,
    run_id: str | None,
    metadata: dict[str, str] | None,
) -> MergePlan:
    """See :meth:`ParquetDatasetStore.plan_merge`."""
    key = validate_key(key, what="dataset key")
    check_key_fits(ds.store, key)
    if not isinstance(source_schema, pa.Schema):
        raise TypeError(f"source_schema must be a pyarrow.Schema, got {type(source_schema).__name__}")
    check_column_names(source_schema, key=key)
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown merge strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if isinstance(key_columns, (str, bytes)) or not isinstance(key_columns, Sequence) or not key_columns:
        raise TypeError(f"key_columns must be a non-empty list of column names, got {key_columns!r}")
    keys = tuple(key_columns)
    for col in keys:
        if not isinstance(col, str):
            raise TypeError(f"key_columns must hold column names, got {col!r}")
        if source_schema.get_field_index(col) < 0:
            raise ValueError(f"key column {col!r} is not in the source; its columns are {source_schema.names}")
    if len(set(keys)) != len(keys):
        raise ValueError(f"key_columns repeats a column: {list(keys)}")
    check_merge_types(source_schema, keys)
    ds._require(Capability.ATOMIC_WRITE, Capability.CONDITIONAL_WRITE, Capability.DELETE, action="merge")
    txn = uuid.uuid4().hex[:16]
    current, token = ds._committer.read_current(key)
    if current is None and token is not None:
        ds.read_manifest(key)  # raises ManifestCorrupted with the reason
    if current is None:
        partition = check_partition_by(partition_by, source_schema)
        return MergePlan(key, txn, False, None, partition, keys, strategy, (), (), None, run_id, metadata)
    schema = current.schema
    if schema is None:
        raise ValueError(f"dataset {key!r} has a Spec 042-only manifest without a schema; overwrite it to merge")
    partition = current.partition_by
    if partition_by is not None and tuple(partition_by) != partition:
        raise ValueError(f"dataset {key!r} is partitioned by {list(partition)}, not {list(partition_by)}")
    conform_table(source_schema.empty_table(), schema, key=key)  # same columns, castable types
    check_merge_types(schema, keys)
    ranges = {c: tuple(_domain(key_ranges[c], schema.field(c).type)) for c in keys} if key_ranges else {}
    index = _RangeIndex(ranges)  # type: ignore[arg-type]
    wanted = {tuple(encode_partition_values(partition, list(p), schema).values()) for p in partitions or ()}
    candidates: list[FileEntry] = []
    elsewhere: list[FileEntry] = []
    for entry in current.files:
        if not key_ranges:
            break  # no changes: nothing can match
        stats = decode_stats({c: s for c, s in (entry.stats or {}).items() if c in keys}, schema)
        for col, value in file_constants(entry, schema).items():
            stats[col] = partition_stats(value, entry.row_count)
        if not index.might_contain(stats):
            continue
        if partition and _partition_tuple(entry, partition) not in wanted:
            elsewhere.append(entry)
        else:
            candidates.append(entry)
    return MergePlan(
        key,
        txn,
        True,
        schema,
        partition,
        keys,
        strategy,
        tuple(candidates),
        tuple(elsewhere),
        current.version,
        run_id,
        metadata,
        current,
        token,
        ranges,
    )


def commit_merge(
    ds: ParquetDatasetStore,
    plan: MergePlan,
    *,
    rewritten: Sequence[str],
    new_entries: Sequence[FileEntry],
    inserted: int,
    updated: int,
) -> MergeResult:
    """See :meth:`ParquetDatasetStore.commit_merge`."""
    if not isinstance(plan, MergePlan) or not plan.exists or plan.manifest is None or plan.schema is None:
        raise TypeError("plan must come from plan_merge on an existing dataset")
    key, current, schema = plan.key, plan.manifest, plan.schema
    entries = check_entries(key, new_entries)
    rewritten_set = set(rewritten)
    candidate_paths = {e.path for e in plan.candidates}
    if not rewritten_set <= candidate_paths:
        raise ValueError(
            f"rewritten files must be among the plan's candidates: {sorted(rewritten_set - candidate_paths)}"
        )
    if not rewritten_set and not entries:
        return MergeResult(0, 0, (), tuple(current.parts), (), None)
    touched = candidate_paths | {e.path for e in plan.elsewhere}
    pending = PendingWrite(key, plan.txn, False, True, plan.run_id, plan.metadata, current, plan.token)
    index = _RangeIndex(plan.ranges)
    partition = plan.partition_by

    def build(latest: DatasetManifest | None) -> DatasetManifest:
        if latest is None or latest.version != current.version:
            if latest is None or not _rebase_safe(latest, current, touched, rewritten_set, index, schema):  # type: ignore[arg-type]
                raise MergeReplanNeeded()
        files = [f for f in latest.files if f.path not in rewritten_set] + entries
        return ds._manifest(key, files, schema, plan.run_id, plan.metadata, partition, "merge")

    attempted = [f"{key}/{e.path}" for e in entries]
    committed = ds._committer.commit(pending, build, attempted, exclusive=False)
    new_paths = tuple(e.path for e in entries)
    preserved = tuple(p for p in committed.parts if p not in set(new_paths))
    return MergeResult(
        inserted=inserted,
        updated=updated,
        rewritten_files=tuple(sorted(rewritten_set)),
        preserved_files=preserved,
        new_files=new_paths,
        version=committed.version,
    )
