"""Planning a merge whose parts an external writer (Spark's executors) writes.

:func:`plan_merge` picks the candidate files from the manifest alone (partition
values and key statistics against the changes' key ranges and partition
values); the writer finds which candidates hold matched keys, writes their
replacements and the inserted rows, then :func:`~.merge.commit_merge` commits
once, or raises :class:`MergeReplanNeeded` when a concurrent commit touched
what the plan relied on (the writer then deletes its parts and plans again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from ...storage.base import validate_key
from .._dataset_options import DatasetOptions
from ..commit.owner import check_expect_owner
from ..commit.retry import Replan
from ..commit.transaction import PendingWrite
from ..expressions.merge_keys import check_key_columns, check_merge_types
from ..expressions.pruning import ColumnStats, partition_stats
from ..format.layout import part_name
from ..format.partition import check_partition_by, encode_partition_values
from ..format.schema import check_column_names
from ..format.stats import decode_stats
from ..io.key_checks import check_key_fits
from ..io.read_parts import file_constants
from ..manifest import DatasetManifest, FileEntry
from .write_pipeline import begin, decide_schema


class MergeReplanNeeded(Replan):
    """A concurrent commit changed files an external merge planned on: delete the parts and plan again."""


def file_stats(entry: FileEntry, schema: pa.Schema, keys: Sequence[str] | None = None) -> dict[str, ColumnStats]:
    """A file's statistics (of ``keys`` only, if given) with its partition values as constant columns."""
    recorded = entry.stats or {}
    stats = decode_stats(recorded if keys is None else {c: s for c, s in recorded.items() if c in keys}, schema)
    for col, value in file_constants(entry, schema).items():
        stats[col] = partition_stats(value, entry.row_count)
    return stats


def split_candidates(
    files: Sequence[FileEntry],
    schema: pa.Schema,
    keys: Sequence[str],
    partition: Sequence[str],
    index: Any,
    *,
    wanted: set[tuple[Any, ...]],
) -> tuple[list[FileEntry], list[FileEntry]]:
    """The files whose statistics ``index`` says may hold a key: those in the ``wanted`` partitions
    (all, when unpartitioned) and those elsewhere."""
    candidates: list[FileEntry] = []
    elsewhere: list[FileEntry] = []
    for entry in files:
        if not index.might_contain(file_stats(entry, schema, keys)):
            continue
        if partition and partition_tuple(entry, partition) not in wanted:
            elsewhere.append(entry)
        else:
            candidates.append(entry)
    return candidates, elsewhere


def partition_tuple(entry: FileEntry, partition: Sequence[str]) -> tuple[Any, ...]:
    """A file's encoded partition values, in ``partition`` order."""
    values = entry.partition_values or {}
    return tuple(values.get(c) for c in partition)


class RangeIndex:
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
        write: the merge's :class:`PendingWrite`, begun as every write is (:func:`.write_pipeline.begin`):
            its ``run_id``, ``metadata``, ``expect_owner`` and the planned-on version (:attr:`manifest`).
        idempotency_key, source_hash: set both (``dataclasses.replace``; ``source_hash`` a hash of
            the merge's source rows the caller computes) to commit as
            :meth:`ParquetDatasetStore.merge_dataset`'s ``idempotency_key`` does: a version that
            already records the key with the same source, strategy and key columns is returned
            instead (no rows counted) and the new entries' parts are deleted.
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
    write: PendingWrite = field(repr=False)
    ranges: Mapping[str, tuple[Any, Any]] = field(default_factory=dict, repr=False)
    idempotency_key: str | None = None
    source_hash: str | None = None

    @property
    def manifest(self) -> DatasetManifest | None:
        """The planned-on version's manifest (:attr:`write`'s; ``None`` if the dataset does not exist)."""
        return self.write.current

    def part_name(self, index: int) -> str:
        """A name for new part ``index`` of this merge (carries :attr:`txn`)."""
        return part_name(index, txn=self.txn, kind="m")


def plan_merge(
    options: DatasetOptions,
    key: str,
    source_schema: pa.Schema,
    key_columns: Sequence[str],
    strategy: str,
    *,
    key_ranges: Mapping[str, tuple[Any, Any]],
    partitions: Sequence[Sequence[Any]] | None,
    partition_by: Sequence[str] | None,
    run_id: str | None,
    metadata: dict[str, str] | None,
    expect_owner: Mapping[str, str | None] | None = None,
) -> MergePlan:
    """See :meth:`ParquetDatasetStore.plan_merge`."""
    owner = check_expect_owner(expect_owner)
    key = validate_key(key, what="dataset key")
    check_key_fits(options.store, key)
    if not isinstance(source_schema, pa.Schema):
        raise TypeError(f"source_schema must be a pyarrow.Schema, got {type(source_schema).__name__}")
    check_column_names(source_schema, key=key)
    keys = tuple(check_key_columns(key_columns, strategy, source_schema.names))
    check_merge_types(source_schema, keys)
    txn = begin(options, key, mode="merge", run_id=run_id, metadata=metadata, expect_owner=owner)
    current = txn.current  # None: no dataset, or a delete's tombstone (a corrupt manifest raised)
    unplanned = MergePlan(
        key=key,
        txn=txn.txn,
        exists=False,
        schema=None,
        partition_by=(),
        key_columns=keys,
        strategy=strategy,
        candidates=(),
        elsewhere=(),
        version=None,
        write=txn.pending,
    )
    if current is None:  # the writer writes the changes as a new dataset (begin_write decides its schema)
        return replace(unplanned, partition_by=check_partition_by(partition_by, source_schema))
    decision = decide_schema(
        key, source_schema, mode="merge", current=current, partition_by=partition_by, exact=True, names_checked=True
    )
    schema, partition = decision.target, decision.partition_by  # same columns, castable types
    check_merge_types(schema, keys)
    ranges = {c: tuple(_domain(key_ranges[c], schema.field(c).type)) for c in keys} if key_ranges else {}
    index = RangeIndex(ranges)  # type: ignore[arg-type]
    wanted = {tuple(encode_partition_values(partition, list(p), schema).values()) for p in partitions or ()}
    files = current.files if key_ranges else ()  # no changes: nothing can match
    candidates, elsewhere = split_candidates(files, schema, keys, partition, index, wanted=wanted)
    return replace(
        unplanned,
        exists=True,
        schema=schema,
        partition_by=partition,
        candidates=tuple(candidates),
        elsewhere=tuple(elsewhere),
        version=current.version,
        ranges=ranges,
    )
