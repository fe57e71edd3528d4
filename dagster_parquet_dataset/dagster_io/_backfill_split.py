"""Single-run backfills: one output over several partition keys, split by ``partition_expr``.

A run launched over a range of partitions (``BackfillPolicy.single_run()``,
or the ``dagster/asset_partition_range_start`` / ``_end`` tags) hands the IO
manager one output that holds the rows of every partition of the range. Each
partition is its own dataset (the same keys as one-partition runs), so the
output is split by the column that output definition metadata
``partition_expr`` names, the convention of Dagster's database IO managers:

* a ``str`` for a one-dimension partitions definition;
* a ``dict`` dimension name -> column for a ``MultiPartitionsDefinition``.

How a value maps to a partition key (:class:`PartitionLocator`):

* time-window partitions: a ``timestamp`` with a time zone is an instant and
  lands in the window that contains it; a ``timestamp`` without one, a
  ``date32`` or a ``date64`` is wall-clock time in the partitions
  definition's time zone (a date is its midnight); a string must equal the key;
* static and dynamic partitions: the value's ``str()`` form must equal the key.

Every row is located before anything is written; a null, or a value that maps
to no partition key of the run, raises ``ValueError`` naming the value and the
column. Each partition then commits on its own (in parallel threads), so a
failure part-way leaves every partition at its old or its new version
(:class:`BackfillIncomplete` says which are which).

This module does no Dagster context access beyond reading definitions; the
IO manager builds a :class:`Backfill` and the type handler's
``write_partitions`` hook writes it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
from dagster import MetadataValue, MultiPartitionsDefinition, TimeWindowPartitionsDefinition

from ..dataset.engine import OUTSIDE, Dimension, RowLocator
from ..errors import RemoteStoreError
from .options import WriteOptions

#: Output definition metadata key naming the partition column(s).
PARTITION_EXPR_KEY = "partition_expr"

#: Partitions written at once by a backfill.
BACKFILL_THREADS = 8

_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_US = dt.timedelta(microseconds=1)

R = TypeVar("R")


class BackfillIncomplete(RemoteStoreError):
    """Some partitions of a single-run backfill committed and others did not.

    Each partition's dataset is at its old or its new version; re-running the
    backfill writes the missing ones (and rewrites the others identically).

    Attributes:
        committed: partition keys whose new version is committed.
        failed: partition keys whose write failed or never started (at their old version, unless the
            store lost the response of a commit that did land: ``CommitOutcomeUnknown``).
    """

    def __init__(self, message: str, committed: Sequence[str], failed: Sequence[str]) -> None:
        super().__init__(message)
        self.committed = list(committed)
        self.failed = list(failed)


# ------------------------------------------------------------------ the option


def parse_partition_expr(
    metadata: Mapping[str, Any] | None, partitions_def: Any, what: str
) -> str | dict[str, str] | None:
    """The ``partition_expr`` of an output's definition metadata, checked against its partitions definition.

    Returns ``None`` when it is not set.

    Raises:
        TypeError: not a non-empty ``str`` or a ``dict`` of ``str`` to non-empty ``str``.
        ValueError: a ``str`` for a multi-partitions definition, a ``dict`` for a
            one-dimension one, or a ``dict`` whose keys are not exactly the dimension names.
    """
    raw = (metadata or {}).get(PARTITION_EXPR_KEY)
    value = raw.value if isinstance(raw, MetadataValue) else raw
    if value is None:
        return None
    multi = isinstance(partitions_def, MultiPartitionsDefinition)
    dims = sorted(d.name for d in partitions_def.partitions_defs) if multi else []
    example = "{" + ", ".join(f"{d!r}: '<column>'" for d in dims) + "}"
    if isinstance(value, str):
        if not value:
            raise TypeError(f"{what}: metadata {PARTITION_EXPR_KEY!r} must name a column, got ''")
        if multi:
            raise ValueError(
                f"{what}: metadata {PARTITION_EXPR_KEY!r} is the column {value!r}, but the asset has "
                f"multi-dimension partitions ({', '.join(dims)}); give one column per dimension: {example}"
            )
        return value
    if isinstance(value, Mapping):
        bad = [(k, v) for k, v in value.items() if not isinstance(k, str) or not isinstance(v, str) or not v]
        if bad:
            raise TypeError(
                f"{what}: metadata {PARTITION_EXPR_KEY!r} must map dimension names to column names, got "
                f"{bad[0][0]!r}: {bad[0][1]!r}"
            )
        if not multi:
            raise ValueError(
                f"{what}: metadata {PARTITION_EXPR_KEY!r} is a dict ({dict(value)}), but the asset's partitions "
                "have one dimension; give the column name as a string"
            )
        if sorted(value) != dims:
            raise ValueError(
                f"{what}: metadata {PARTITION_EXPR_KEY!r} names the dimensions {sorted(value)}, but the "
                f"partitions definition has {dims}; give one column per dimension: {example}"
            )
        return dict(value)
    raise TypeError(
        f"{what}: metadata {PARTITION_EXPR_KEY!r} must be a column name (str) or, for multi-dimension "
        f"partitions, a dict dimension name -> column; got {type(value).__name__} {value!r}"
    )


def missing_partition_expr(what: str, count: int, partitions_def: Any) -> ValueError:
    """The error for an output over several partitions without ``partition_expr``."""
    multi = isinstance(partitions_def, MultiPartitionsDefinition)
    example = (
        "{" + ", ".join(f"{d.name!r}: '<column>'" for d in partitions_def.partitions_defs) + "}"
        if multi
        else "'<column>'"
    )
    return ValueError(
        f"{what}: this output covers {count} partitions, and RemoteStoreIOManager stores each partition as "
        f"its own dataset, so it must know which rows belong to which partition. Set output metadata "
        f"{PARTITION_EXPR_KEY!r} to the column holding each row's partition, e.g. "
        f"@asset(metadata={{'{PARTITION_EXPR_KEY}': {example}}}), or launch one run per partition."
    )


# ------------------------------------------------------------- value -> key


def _us_since_epoch(moment: dt.datetime) -> tuple[int, int]:
    """``(instant, wall)``: microseconds since the epoch of the UTC instant and of the wall-clock time."""
    return (moment - _EPOCH_UTC) // _US, (moment.replace(tzinfo=None) - _EPOCH_NAIVE) // _US


class PartitionLocator(RowLocator):
    """A :class:`~dagster_parquet_dataset.dataset.engine.RowLocator` built from Dagster partitions definitions."""

    @classmethod
    def build(
        cls, partition_expr: str | dict[str, str], partitions_def: Any, partition_keys: Sequence[str]
    ) -> PartitionLocator:
        """The locator for ``partition_keys`` of ``partitions_def``, by the columns ``partition_expr`` names."""
        keys = [str(k) for k in partition_keys]
        if isinstance(partitions_def, MultiPartitionsDefinition):
            assert isinstance(partition_expr, dict)
            defs = sorted(partitions_def.partitions_defs, key=lambda d: d.name)
            by_dim = [partitions_def.get_partition_key_from_str(k).keys_by_dimension for k in keys]
            dims = []
            for d in defs:
                dim_keys = list(dict.fromkeys(kd[d.name] for kd in by_dim))
                dims.append(_dimension(partition_expr[d.name], d.partitions_def, dim_keys))
            index = {tuple(kd[d.name] for d in defs): i for i, kd in enumerate(by_dim)}
            lookup = []
            for combo in np.ndindex(*(len(d.keys) for d in dims)):
                lookup.append(index.get(tuple(d.keys[c] for d, c in zip(dims, combo, strict=True)), OUTSIDE))
            return cls(tuple(dims), tuple(lookup), tuple(keys))
        assert isinstance(partition_expr, str)
        dim = _dimension(partition_expr, partitions_def, keys)
        return cls((dim,), tuple(range(len(keys))), tuple(keys))


def _dimension(column: str, partitions_def: Any, keys: Sequence[str]) -> Dimension:
    if isinstance(partitions_def, TimeWindowPartitionsDefinition):
        windows = []
        for key in keys:
            window = partitions_def.time_window_for_partition_key(key)
            windows.append((*_us_since_epoch(window.start), *_us_since_epoch(window.end)))
        # Reorder as (start_instant, end_instant, start_wall, end_wall).
        return Dimension(column, tuple(keys), tuple((s, e, sw, ew) for s, sw, e, ew in windows))
    return Dimension(column, tuple(keys))


# ------------------------------------------------------------------ splitting


def group_rows(table: pa.Table, codes: np.ndarray, count: int) -> list[pa.Table]:
    """Per target ``0..count-1``, its rows of ``table`` (empty tables for targets without rows).

    When each target's rows are contiguous these are zero-copy slices of
    ``table``; otherwise ``table`` is taken once in target order (every row
    copied once) and sliced, so no target scans the whole table.
    """
    counts = np.bincount(codes, minlength=count) if codes.size else np.zeros(count, dtype=np.int64)
    if codes.size:
        run_starts = np.concatenate(([0], np.flatnonzero(np.diff(codes)) + 1))
        if run_starts.size == np.count_nonzero(counts):  # one run per target: slices of the table itself
            out = [table.slice(0, 0)] * count
            for start, code in zip(run_starts.tolist(), codes[run_starts].tolist(), strict=True):
                out[code] = table.slice(start, int(counts[code]))
            return out
        small = codes.astype(np.int16) if count < 2**15 else codes  # numpy's stable sort is a radix sort on int16
        table = table.take(pa.array(np.argsort(small, kind="stable"), pa.int64()))
    offsets = np.concatenate(([0], np.cumsum(counts))).tolist()
    return [table.slice(offsets[i], offsets[i + 1] - offsets[i]) for i in range(count)]


# --------------------------------------------------------------- the backfill


@dataclass(frozen=True)
class PartitionTarget:
    """One partition of a backfill and where it goes.

    Attributes:
        partition_key: the Dagster partition key.
        dataset_key: its dataset (the key a one-partition run writes).
        metadata: the manifest metadata to record (type and owner, as a one-partition run's).
    """

    partition_key: str
    dataset_key: str
    metadata: dict[str, str]


@dataclass(frozen=True)
class Backfill:
    """What a handler's ``write_partitions`` hook writes: one output split over several partitions.

    Attributes:
        what: how messages name the output (``"asset daily_sales"``).
        targets: the run's partitions, in the locator's order.
        locator: maps rows to indices into ``targets``.
        options: the output's write options (``write_mode``, ``partition_by``, ...), applied per partition.
        run_id: recorded in every manifest.
        write_table: writes one partition's rows (an Arrow table) with ``options`` and returns the
            IO manager's record of it; the default hook calls it once per target.
        threads: partitions written at once.
    """

    what: str
    targets: tuple[PartitionTarget, ...]
    locator: PartitionLocator
    options: WriteOptions
    run_id: str | None
    write_table: Callable[[PartitionTarget, pa.Table], Any]
    threads: int = field(default_factory=lambda: BACKFILL_THREADS)

    def locate(self, data: pa.Table) -> np.ndarray:
        """:meth:`PartitionLocator.codes`, with the output named in the error.

        Raises:
            ValueError / TypeError: as :meth:`PartitionLocator.codes`, prefixed with :attr:`what`.
        """
        try:
            return self.locator.codes(data)
        except ValueError as exc:
            raise ValueError(f"{self.what}: {exc}") from None
        except TypeError as exc:
            raise TypeError(f"{self.what}: {exc}") from None


def write_arrow_partitions(data: pa.Table | pa.RecordBatchReader, backfill: Backfill) -> list[Any]:
    """Split ``data`` by partition in memory and write each part with ``backfill.write_table``.

    Every row is located first (nothing is written if one is bad); the rows
    are grouped by partition with at most one ``take`` of the whole table
    (zero-copy slices when each partition's rows are contiguous), and
    the partitions are written in parallel, each committing on its own. A
    partition with no rows gets an empty table with the output's schema.

    Returns:
        ``write_table``'s result per target, in order.

    Raises:
        ValueError / TypeError: a row maps to no partition of the run (or a null);
            nothing was written.
        BackfillIncomplete: some partitions committed and others failed.
        Exception: what ``write_table`` raised, when no partition committed.
    """
    table = data.read_all() if isinstance(data, pa.RecordBatchReader) else data
    codes = backfill.locate(table)
    groups = group_rows(table, codes, len(backfill.targets))
    del codes, table
    return commit_each(
        [t.partition_key for t in backfill.targets],
        lambda i: backfill.write_table(backfill.targets[i], groups[i]),
        backfill.threads,
        backfill.what,
    )


def commit_each(partition_keys: Sequence[str], write: Callable[[int], R], threads: int, what: str) -> list[R]:
    """``write(i)`` for every partition, ``threads`` at a time; each is expected to commit atomically.

    After the first failure no further partition is started.

    Returns:
        The results, in order.

    Raises:
        BackfillIncomplete: some partitions committed, others failed or were not started
            (the first failure is its ``__cause__``).
        Exception: the first failure as raised, when no partition committed.
    """
    count = len(partition_keys)
    if count == 1:
        return [write(0)]
    results: dict[int, R] = {}
    errors: dict[int, BaseException] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(threads, count)), thread_name_prefix="pds-backfill") as pool:
        futures: dict[Future[R], int] = {pool.submit(write, i): i for i in range(count)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for fut in done:
                exc = fut.exception()
                if exc is None:
                    results[futures[fut]] = fut.result()
                else:
                    errors[futures[fut]] = exc
            if errors:
                for fut in pending:
                    fut.cancel()
                finished, _ = wait(pending)
                for fut in finished:
                    if fut.cancelled():
                        continue
                    exc = fut.exception()
                    if exc is None:
                        results[futures[fut]] = fut.result()
                    else:
                        errors[futures[fut]] = exc
                pending = set()
    if not errors:
        return [results[i] for i in range(count)]
    first = errors[min(errors)]
    if not results:
        raise first
    committed = [partition_keys[i] for i in sorted(results)]
    failed = [partition_keys[i] for i in range(count) if i not in results]
    raise BackfillIncomplete(
        f"{what}: the backfill committed {len(committed)} of {count} partitions before "
        f"partition {partition_keys[min(errors)]!r} failed ({type(first).__name__}: {first}). Each partition "
        f"is at its old or its new version: committed {_short(committed)}; failed or not started "
        f"{_short(failed)}. "
        "Re-run the backfill to write the rest.",
        committed,
        failed,
    ) from first


def _short(keys: Sequence[str]) -> str:
    return ", ".join(map(repr, keys)) if len(keys) <= 10 else ", ".join(map(repr, keys[:10])) + ", ..."
