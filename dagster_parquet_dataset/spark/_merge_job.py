"""The one Spark job that matches a merge's changes with the candidate files and writes the new parts.

:func:`run_merge_job` runs a single Spark job (an RDD pipeline: no adaptive
query stages, so no extra jobs). The changes are read in one task per core
(a narrow ``coalesce``: each task costs Python workers' round trips) and cast
to the types Spark gives the dataset's columns. Two plans:

* **Direct** (the candidates hold at most :data:`DIRECT_CANDIDATE_ROWS` rows,
  and no ``repartition`` of a partitioned dataset's inserts), two stages:

  1. Each source task reads every candidate file's key and partition columns
     once (through the store, as the executor-side read does), finds the
     matched keys, the file holding each and keys whose partition values would
     change, and sends each matched row to its file's group and every other
     row to a group chosen by a hash of its key (inserted there, or for the
     ``insert``/``update`` strategies only checked), as Arrow IPC payloads.
  2. Each group refuses duplicate keys (a key always lands in one group), then
     as stage 3 below.

* **Shuffled** (more candidate rows), three stages:

  1. The source rows and the candidate files' key and partition columns are
     cut into Arrow IPC payloads by a hash of their keys, and shuffled by it.
  2. Each key bucket finds its duplicate source keys, the matched keys (and the
     file holding each) and keys whose partition values would change, and sends
     the matched source rows to their file's group and the unmatched ones to an
     insert group.
  3. Each file group that received matched rows reads its file, drops the matched
     keys, adds the changes and writes one replacement part in the file's folder;
     each insert group writes its rows into the dataset's partition folders.

Only small records come back to the driver: one descriptor per written part,
per-file match counts, and the first duplicate or moved key if any.
"""

from __future__ import annotations

import io
import pickle
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..dataset import FileEntry, MergePlan, ParquetDatasetStore
from ._descriptor import entries_by_group, first_error
from ._jobs import run_job
from ._parts import Destination, delete_attempt_leftovers, part_options, quietly
from ._spark_read import _Source, _TaskReader
from ._spark_schema import arrow_schema_to_spark, spark_schema_to_arrow
from ._task_writer import TaskWriter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

FILE = "__pds_file"
_ROW = "__pds_row"
_SRC = "__pds_src_"
_OUT = "b int, side int, payload binary"


def _ipc(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _table(payload: bytes) -> pa.Table:
    return pa.ipc.open_stream(payload).read_all()


def _buckets(table: pa.Table, columns: Sequence[str], n: int) -> np.ndarray:
    """A deterministic bucket in ``[0, n)`` for each row, from a hash of ``columns``."""
    import pandas as pd

    hashed = pd.util.hash_pandas_object(table.select(list(columns)).to_pandas(), index=False).to_numpy()
    return (hashed % np.uint64(n)).astype(np.int64)


def _split(table: pa.Table, buckets: np.ndarray) -> Iterator[tuple[int, pa.Table]]:
    for b in np.unique(buckets):
        yield int(b), table.filter(pa.array(buckets == b))


def _out(bucket: int, side: int, table: pa.Table) -> pa.RecordBatch:
    return pa.record_batch(
        [pa.array([bucket], pa.int32()), pa.array([side], pa.int32()), pa.array([_ipc(table)], pa.binary())],
        names=["b", "side", "payload"],
    )


@dataclass(frozen=True)
class _SourceBuckets:
    """Source batches, cast to ``schema``, as key-bucketed payloads (side ``-1``)."""

    schema: pa.Schema
    keys: tuple[str, ...]
    n: int

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if batch.num_rows:
                table = pa.Table.from_batches([batch]).select(self.schema.names).cast(self.schema)
                for b, piece in _split(table, _buckets(table, self.keys, self.n)):
                    yield _out(b, -1, piece)


@dataclass(frozen=True)
class _TargetBuckets:
    """The key and partition columns of the candidate files whose indices arrive, as key-bucketed payloads
    (side: the file's index)."""

    reader: _TaskReader
    keys: tuple[str, ...]
    n: int

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                for out in self.reader._read(self.reader.parts[index]):
                    table = pa.Table.from_batches([out])
                    table = table.append_column(FILE, pa.array(np.full(table.num_rows, index, dtype=np.int64)))
                    for b, piece in _split(table, _buckets(table, self.keys, self.n)):
                        yield _out(b, index, piece)


def _pair(row: Any) -> tuple[int, tuple[int, bytes]]:
    return int(row[0]), (int(row[1]), bytes(row[2]))


def _identity(key: int) -> int:
    return key


def _null_safe_differs(a: pa.ChunkedArray, b: pa.ChunkedArray) -> pa.ChunkedArray:
    neq = pc.fill_null(pc.not_equal(a, b), False)
    return pc.or_(neq, pc.not_equal(pc.is_null(a), pc.is_null(b)))


def _first_row(table: pa.Table, columns: Sequence[str]) -> dict[str, Any]:
    ordered = table.sort_by([(c, "ascending") for c in columns])
    return ordered.slice(0, 1).to_pylist()[0]


def _duplicate_keys(table: pa.Table, keys: Sequence[str]) -> tuple[int, dict[str, Any]] | None:
    """How many keys repeat in ``table`` and the first of them (with its ``count_all``), or ``None``."""
    counted = table.select(list(keys)).group_by(list(keys)).aggregate([([], "count_all")])
    dups = counted.filter(pc.greater(counted["count_all"], 1))
    return (dups.num_rows, _first_row(dups, keys)) if dups.num_rows else None


@dataclass(frozen=True)
class _Matched:
    """The source rows whose keys the candidates hold: row numbers, each one's candidate, count per candidate."""

    rows: np.ndarray
    files: np.ndarray
    counts: dict[int, int]


def _match(
    src: pa.Table, targets: pa.Table, keys: Sequence[str], partition: Sequence[str]
) -> _Matched | tuple[dict[str, Any], int]:
    """Match ``src`` with the candidates' keys (``targets``: keys, partition columns, :data:`FILE`), or the
    first key whose partition values would change, with its candidate."""
    left = src.select(list(keys)).append_column(_ROW, pa.array(np.arange(src.num_rows, dtype=np.int64)))
    for c in partition:
        left = left.append_column(_SRC + c, src[c])
    joined = left.join(targets, list(keys), join_type="inner")
    moved = pa.array(np.zeros(joined.num_rows, dtype=bool))
    for c in partition:
        moved = pc.or_(moved, _null_safe_differs(joined[c], joined[_SRC + c]))
    bad = joined.filter(moved)
    if bad.num_rows:
        first = _first_row(bad, keys)
        return {k: first[k] for k in keys}, int(first[FILE])
    counts = joined.group_by([FILE]).aggregate([([], "count_all")]).to_pylist()
    return _Matched(
        joined[_ROW].to_numpy(), joined[FILE].to_numpy(), {int(r[FILE]): int(r["count_all"]) for r in counts}
    )


@dataclass(frozen=True)
class _Match:
    """Stage 2: one key bucket's source rows against the candidate files' keys."""

    keys: tuple[str, ...]
    partition: tuple[str, ...]
    strategy: str
    n_rewrite: int
    n_insert: int
    repartition: bool

    def __call__(self, items: Iterable[tuple[int, tuple[int, bytes]]]) -> Iterator[tuple[int, tuple[str, Any]]]:
        sources: list[pa.Table] = []
        targets: list[pa.Table] = []
        bucket = 0
        for b, (side, payload) in items:
            bucket = b  # every item of this task has the same bucket
            (sources if side < 0 else targets).append(_table(payload))
        if not sources:
            return
        src = pa.concat_tables(sources)
        dup = _duplicate_keys(src, self.keys)
        if dup is not None:
            yield 0, ("dup", dup)
            return
        matched_rows = np.zeros(0, dtype=np.int64)
        if targets:
            found = _match(src, pa.concat_tables(targets), self.keys, self.partition)
            if not isinstance(found, _Matched):
                yield 0, ("moved", found)
                return
            yield 0, ("count", found.counts)
            matched_rows = found.rows
            if self.strategy != "insert":
                for f in np.unique(found.files):
                    if f < self.n_rewrite:
                        yield int(f), ("rows", _ipc(src.take(pa.array(matched_rows[found.files == f]))))
        if self.strategy == "update":
            return
        mask = np.ones(src.num_rows, dtype=bool)
        mask[matched_rows] = False
        inserts = src.filter(pa.array(mask))
        if not inserts.num_rows:
            return
        if self.repartition and self.partition:
            for g, piece in _split(inserts, _buckets(inserts, self.partition, self.n_insert)):
                yield self.n_rewrite + g, ("ins", _ipc(piece))
        else:
            yield self.n_rewrite + bucket % self.n_insert, ("ins", _ipc(inserts))


#: The direct plan (:class:`_Route`) reads every candidate file's keys in each source task; above this many
#: candidate rows (or with ``repartition`` on a partitioned dataset) the merge shuffles keys instead.
DIRECT_CANDIDATE_ROWS = 1_000_000


def _record(group: int, kind: str, value: Any) -> pa.RecordBatch:
    payload = value if isinstance(value, bytes) else pickle.dumps(value)
    return pa.record_batch(
        [pa.array([group], pa.int32()), pa.array([kind], pa.string()), pa.array([payload], pa.binary())],
        names=["g", "kind", "payload"],
    )


def _item(row: Any) -> tuple[int, tuple[str, Any]]:
    kind, payload = str(row[1]), bytes(row[2])
    return int(row[0]), (kind, payload if kind in ("rows", "ins", "key") else pickle.loads(payload))


@dataclass(frozen=True)
class _Route:
    """Stage 1 of the direct plan: match each source batch with the candidate files' keys (read once per
    task) and send its rows to their group: a matched row to its file's group, the others to a group by a
    hash of their key (inserted there, or only checked for duplicates: a key always lands in one group)."""

    schema: pa.Schema
    reader: _TaskReader | None
    keys: tuple[str, ...]
    partition: tuple[str, ...]
    strategy: str
    n_rewrite: int
    n_keyed: int

    def _targets(self) -> pa.Table | None:
        if self.reader is None:
            return None
        tables = []
        for index, part in enumerate(self.reader.parts):
            for out in self.reader._read(part):
                table = pa.Table.from_batches([out])
                tables.append(table.append_column(FILE, pa.array(np.full(table.num_rows, index, dtype=np.int64))))
        return pa.concat_tables(tables) if tables else None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        keys = list(self.keys)
        targets: pa.Table | None = None
        loaded = False
        for batch in batches:
            if not batch.num_rows:
                continue
            src = pa.Table.from_batches([batch]).select(self.schema.names).cast(self.schema)
            if not loaded:
                targets, loaded = self._targets(), True
            matched = np.zeros(src.num_rows, dtype=bool)
            if targets is not None:
                found = _match(src, targets, keys, self.partition)
                if not isinstance(found, _Matched):
                    yield _record(0, "moved", found)
                    return
                yield _record(0, "count", found.counts)
                matched[found.rows] = True
                if self.strategy == "insert":  # matched rows are dropped, once checked for duplicates
                    yield from self._keyed(src.filter(pa.array(matched)).select(keys), "key")
                for f in np.unique(found.files) if self.strategy != "insert" else ():
                    if f < self.n_rewrite:
                        yield _record(int(f), "rows", _ipc(src.take(pa.array(found.rows[found.files == f]))))
            rest = src.filter(pa.array(~matched))
            if self.strategy == "update":  # unmatched rows are dropped, once checked for duplicates
                yield from self._keyed(rest.select(keys), "key")
            else:
                yield from self._keyed(rest, "ins")

    def _keyed(self, table: pa.Table, kind: str) -> Iterator[pa.RecordBatch]:
        if table.num_rows:
            for b, piece in _split(table, _buckets(table, self.keys, self.n_keyed)):
                yield _record(self.n_rewrite + b, kind, _ipc(piece))


@dataclass(frozen=True)
class _Write:
    """Stage 3: write one group's rows (a rewritten file's replacement, or inserted rows); pass records on."""

    reader: _TaskReader  # reads the rewritten files' stored columns
    keys: tuple[str, ...]
    partition: tuple[str, ...]
    n_rewrite: int
    files: TaskWriter
    inserts: TaskWriter
    check_duplicates: bool = False  # the direct plan: no stage before found duplicate keys

    def __call__(self, items: Iterable[tuple[int, tuple[str, Any]]]) -> Iterator[tuple[str, Any]]:
        changes: dict[int, list[pa.Table]] = {}
        checked: dict[int, list[pa.Table]] = {}  # keys only checked for duplicates ("key"), never written
        for group, (kind, value) in items:
            if kind in ("rows", "ins"):
                changes.setdefault(group, []).append(_table(value))
            elif kind == "key":
                checked.setdefault(group, []).append(_table(value))
            else:
                yield kind, value
        if self.check_duplicates:
            found = list(self._duplicates(changes, checked))
            yield from found
            if found:
                return  # the driver discards the whole job's output
        for group in sorted(changes):
            rows = pa.concat_tables(changes[group], promote_options="permissive")
            if group < self.n_rewrite:
                yield from self._rewrite(group, rows)
            else:
                if self.partition:
                    rows = rows.sort_by([(c, "ascending") for c in self.partition])
                for batch in self.inserts(iter(rows.to_batches())):
                    for row in batch.to_pylist():
                        yield "ins", row

    def _duplicates(
        self, changes: dict[int, list[pa.Table]], checked: dict[int, list[pa.Table]]
    ) -> Iterator[tuple[str, Any]]:
        """One ``("dup", (count, first key))`` per group whose keys repeat (a key only ever lands in one group)."""
        for group in sorted({*changes, *checked}):
            tables = [t.select(list(self.keys)) for t in [*changes.get(group, []), *checked.get(group, [])]]
            dup = _duplicate_keys(pa.concat_tables(tables), self.keys)
            if dup is not None:
                yield "dup", dup

    def _rewrite(self, group: int, changed: pa.Table) -> Iterator[tuple[str, Any]]:
        keys = list(self.keys)
        stored = pa.Table.from_batches(list(self.reader._read(self.reader.parts[group])), self.reader.target)
        numbered = stored.select(keys).append_column(_ROW, pa.array(np.arange(stored.num_rows, dtype=np.int64)))
        hit = numbered.join(changed.select(keys), keys, join_type="left semi")[_ROW].to_numpy()
        mask = np.ones(stored.num_rows, dtype=bool)
        mask[hit] = False
        names = stored.schema.names
        kept = stored.filter(pa.array(mask))
        replacement = pa.concat_tables([kept, changed.select(names).cast(stored.schema)])
        replacement = replacement.append_column(FILE, pa.array(np.full(replacement.num_rows, group, dtype=np.int64)))
        for batch in self.files(iter(replacement.to_batches())):
            for row in batch.to_pylist():
                yield "file", row


@dataclass(frozen=True)
class MergeOutcome:
    """What the merge job wrote and found.

    Attributes:
        rewritten: indices (into the plan's candidates) of the files replaced, ascending.
        written: the replacement parts (in ``rewritten`` order), then the inserted parts.
        inserted: rows inserted.
        per_file: per candidate index, how many of its keys the changes matched.
    """

    rewritten: list[int]
    written: list[FileEntry]
    inserted: int
    per_file: dict[int, int]


def _reader(
    datasets: ParquetDatasetStore, plan: MergePlan, entries: Sequence[FileEntry], columns: Sequence[str]
) -> _TaskReader:
    assert plan.schema is not None and plan.manifest is not None
    selected = pa.schema([plan.schema.field(c) for c in columns])
    source = _Source(plan.key, plan.manifest, plan.schema, tuple(entries), None)
    target = spark_schema_to_arrow(arrow_schema_to_spark(selected))
    return _TaskReader(store=datasets.store, schema=plan.schema, parts=tuple(source.parts()), target=target)


def _direct(candidates: Sequence[FileEntry], partition: Sequence[str], *, repartition: bool) -> bool:
    """Whether the merge takes the direct plan (:class:`_Route`): few candidate rows, no repartitioned inserts."""
    if repartition and partition:
        return False  # inserts go to groups by their partition values, so a key's group would not be one
    rows = [f.row_count for f in candidates]
    return all(r is not None for r in rows) and sum(r or 0 for r in rows) <= DIRECT_CANDIDATE_ROWS


def run_merge_job(
    changes: DataFrame, datasets: ParquetDatasetStore, plan: MergePlan, *, repartition: bool
) -> MergeOutcome:
    """Match ``changes`` with the plan's candidate files and write the new parts, in one Spark job.

    Nothing is committed; the caller commits the outcome or deletes ``written``.

    Raises:
        ValueError: duplicate keys in the changes, or a key whose partition values would change;
            every part the job wrote is deleted.
        TypeError: the changes do not convert to the dataset's types; nothing is kept.
        pyspark.errors.PySparkException: the Spark job failed; once its tasks stopped, its files are removed.
    """
    assert plan.schema is not None
    schema, partition, keys = plan.schema, tuple(plan.partition_by), tuple(plan.key_columns)
    spark = changes.sparkSession
    sc = spark.sparkContext
    candidates = [*plan.candidates, *plan.elsewhere]
    n_rewrite = len(plan.candidates) if plan.strategy != "insert" else 0
    n = max(1, sc.defaultParallelism)
    spark_types = spark_schema_to_arrow(arrow_schema_to_spark(schema))
    # One source task per core (a narrow coalesce): each task costs two Python workers' round trips.
    source = changes.coalesce(n)
    reader = _reader(datasets, plan, candidates, [*keys, *partition]) if candidates else None
    direct = _direct(candidates, partition, repartition=repartition)
    if direct:
        route = _Route(spark_types, reader, keys, partition, plan.strategy, n_rewrite, n)
        routed = source.mapInArrow(route, "g int, kind string, payload binary").rdd.map(_item)
    else:
        rdd = source.mapInArrow(_SourceBuckets(spark_types, keys, n), _OUT).rdd.map(_pair)
        if reader is not None:
            target = spark.range(0, len(candidates), 1, len(candidates))
            rdd = rdd.union(target.mapInArrow(_TargetBuckets(reader, keys, n), _OUT).rdd.map(_pair))
    data_names = [c for c in schema.names if c not in partition]
    file_schema = pa.schema([schema.field(c) for c in data_names], metadata=schema.metadata)
    options = part_options(datasets)
    txn = plan.txn
    file_token, insert_token = f"{txn}-j{uuid.uuid4().hex[:6]}", f"{txn}-j{uuid.uuid4().hex[:6]}"
    dests = tuple(
        Destination(plan.key, f.path.rpartition("/")[0], dict(f.partition_values or {}) if partition else None)
        for f in candidates[:n_rewrite]
    )
    files_writer = TaskWriter(
        store=datasets.store,
        token=file_token,
        schema=pa.schema([*file_schema, pa.field(FILE, pa.int64())], metadata=schema.metadata),
        value_schema=schema,
        destinations=dests or (Destination(plan.key),),
        group_column=FILE,
        error_column=None,
        partition_by=(),
        options=options,
        max_rows_per_file=None,  # one replacement part per rewritten file
        suffix="-m",
    )
    inserts_writer = TaskWriter(
        store=datasets.store,
        token=insert_token,
        schema=schema,
        value_schema=schema,
        destinations=(Destination(plan.key),),
        group_column=None,
        error_column=None,
        partition_by=partition,
        options=options,
        max_rows_per_file=datasets.max_rows_per_file,
    )
    n_insert = n if plan.strategy != "update" or direct else 0
    write = _Write(
        _reader(datasets, plan, candidates[:n_rewrite], data_names),
        keys,
        partition,
        n_rewrite,
        files_writer,
        inserts_writer,
        check_duplicates=direct,
    )
    groups = max(1, n_rewrite + n_insert)
    if direct:
        pipeline = routed.partitionBy(groups, _identity).mapPartitions(write)
    else:
        match = _Match(keys, partition, plan.strategy, n_rewrite, max(1, n_insert), repartition)
        shuffled = rdd.partitionBy(n, _identity).mapPartitions(match)
        pipeline = shuffled.partitionBy(groups, _identity).mapPartitions(write)

    def discard() -> None:
        for token in (file_token, insert_token):
            quietly(lambda t=token: delete_attempt_leftovers(datasets.store, plan.key, t, set()))  # type: ignore[misc]

    try:
        records = run_job(sc, pipeline.collect)
    except BaseException:
        discard()
        raise
    file_rows = [v for k, v in records if k == "file"]
    insert_rows = [v for k, v in records if k == "ins"]
    dups = [v for k, v in records if k == "dup"]
    moved = [v for k, v in records if k == "moved"]
    error = first_error([*file_rows, *insert_rows])
    if dups or moved or error is not None:
        discard()
    if dups:
        count = sum(d[0] for d in dups)
        first = min((d[1] for d in dups), key=lambda r: tuple(r[k] for k in keys))
        example = {k: first[k] for k in keys}
        raise ValueError(
            f"the source has {count} duplicate keys (e.g. {example} appears {first['count_all']} times); "
            "each key may appear once"
        )
    if moved:
        example, index = min(moved, key=lambda m: tuple(m[0][k] for k in keys))
        values = tuple((candidates[index].partition_values or {}).get(c) for c in partition)
        raise ValueError(
            f"dataset {plan.key!r}: key {example} exists in partition {values} but the source puts it in "
            "another; partition columns cannot change for existing keys"
        )
    if error is not None:
        raise error
    per_file: dict[int, int] = {}
    for k, v in records:
        if k == "count":
            for f, c in v.items():
                per_file[f] = per_file.get(f, 0) + c
    by_file = entries_by_group(file_rows)
    by_insert = entries_by_group(insert_rows)
    inserted_entries = [e for i in sorted(by_insert) for e in by_insert[i]]
    delete_attempt_leftovers(
        datasets.store,
        plan.key,
        file_token,
        {e.path for es in by_file.values() for e in es},
    )
    delete_attempt_leftovers(datasets.store, plan.key, insert_token, {e.path for e in inserted_entries})
    rewritten = sorted(by_file)
    written = [e for i in rewritten for e in by_file[i]] + inserted_entries
    return MergeOutcome(rewritten, written, sum(e.row_count or 0 for e in inserted_entries), per_file)
