"""Writing a Spark DataFrame as a dataset: executors write the parts, the driver commits once.

Two paths, same result (the dataset layer's format and commit):

``arrow`` (any shared :class:`Store`)
    ``DataFrame.mapInArrow``: every task streams its Arrow batches into
    Parquet parts through the pickled store and yields one small row per part
    (name, rows and bytes from the Parquet writer's own metadata, the task
    attempt). The driver collects those rows, which Spark returns for exactly
    one successful attempt per partition, and commits them.

``native`` (a :class:`LocalStore`; an ``S3Store`` when Spark has ``s3a://``)
    Spark's own Parquet writer (and its output committer) writes into a
    staging folder under the dataset; the driver reads each file's footer for
    its row count and schema, moves the files into the dataset folder, and
    commits.

Failed, retried or speculative task attempts never reach the manifest: every
attempt writes files whose names carry the write's token and the attempt's
unique task id, the driver keeps only the attempt Spark returned for each
partition and deletes the rest.

On a :class:`LocalStore` the committed parts are renamed to the dataset
layer's names (``part-NNNNN.parquet`` for a new dataset, with the write token
otherwise). Other stores have no cheap rename (on S3 it is a full copy), so
there the parts keep the names the tasks gave them; the manifest is the only
list of parts either way.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from ..dataset._stats import file_column_stats
from ..dataset._write import PartOptions, encode_part
from ..dataset.manifest import DatasetManifest, FileEntry
from ..dataset.store import ParquetDatasetStore, PendingWrite
from ..errors import CapabilityNotSupported, RemoteStoreError
from ..storage.base import Store
from ..storage.local import LocalStore
from ..storage.memory import MemoryStore
from ..storage.s3 import S3Store
from ._schema import spark_schema_to_arrow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

WriteMode = Literal["auto", "arrow", "native"]
_MODES = ("auto", "arrow", "native")

#: Test-only knob, read from the Spark *local property* of this name: attempt 0
#: of the task for the partition it names raises right after publishing its
#: first part, so tests can exercise Spark's real task retry. Nothing sets it
#: outside the test suite.
FAIL_AFTER_PART_PROPERTY = "dagster_parquet_dataset.testing.fail_after_part"

#: What each write task returns per part it wrote.
_DESCRIPTOR_DDL = (
    "partition int, chunk int, task_attempt long, attempt int, path string, row_count long, size_bytes long, "
    "stats string"
)
_DESCRIPTOR_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("chunk", pa.int32()),
        ("task_attempt", pa.int64()),
        ("attempt", pa.int32()),
        ("path", pa.string()),
        ("row_count", pa.int64()),
        ("size_bytes", pa.int64()),
        ("stats", pa.string()),  # the part's per-column statistics (JSON), from the writer's metadata
    ]
)

#: Row-group bounds for parts encoded on the executors (when ``row_group_size`` is unset):
#: pyarrow's default row count, and Spark's default Parquet block size.
_GROUP_ROWS = 1024 * 1024
_GROUP_BYTES = 128 * 1024 * 1024

#: Spark's name for each codec the dataset layer accepts (``None``: Spark cannot write it).
_SPARK_CODECS: dict[str, str | None] = {
    "zstd": "zstd",
    "snappy": "snappy",
    "gzip": "gzip",
    "lz4": "lz4_raw",  # pyarrow's "lz4" is Parquet LZ4_RAW
    "none": "none",
    "uncompressed": "none",
    "brotli": None,  # needs a codec jar Spark does not ship
}

_STAGING = "_spark_staging-"


class _InjectedTaskFailure(RuntimeError):
    """Raised by the test-only :data:`FAIL_AFTER_PART_PROPERTY` knob."""


# --------------------------------------------------------------------------- checks


def check_shared_store(store: Store, action: str) -> None:
    """Refuse a store that Spark's executor processes cannot see.

    Raises:
        CapabilityNotSupported: ``store`` is a :class:`MemoryStore`.
    """
    if isinstance(store, MemoryStore):
        raise CapabilityNotSupported(
            f"cannot {action} with a MemoryStore: it lives in this Python process, and Spark runs its tasks in "
            "separate Python worker processes that would each get a private copy. Use a LocalStore (on a disk "
            "every executor sees) or an S3Store."
        )


def spark_uri(store: Store, path: str) -> str | None:
    """The Hadoop path under which Spark itself reaches ``path`` of ``store``, or ``None`` if it cannot.

    Not percent-encoded: Hadoop's ``Path`` quotes the characters a URI needs
    quoted itself, so ``Path.as_uri()`` would encode twice (``a b`` would
    become a folder literally named ``a%20b``).
    """
    if isinstance(store, LocalStore):
        return "file://" + os.path.join(store.root, *path.split("/"))
    if isinstance(store, S3Store):
        return f"s3a://{store.bucket}/" + "/".join(p for p in (store.prefix, path) if p)
    return None


_GLOB_CHARS = frozenset("{}[]*?")


def spark_read_uri(store: Store, path: str) -> str | None:
    """:func:`spark_uri` with Hadoop's glob characters escaped, for ``spark.read`` (which globs its paths)."""
    uri = spark_uri(store, path)
    if uri is None:
        return None
    return "".join("\\" + c if c in _GLOB_CHARS else c for c in uri)


def s3a_available(spark: SparkSession) -> bool:
    """Whether Spark's JVM has the ``s3a://`` filesystem (the hadoop-aws jar)."""
    try:
        loader = spark.sparkContext._jvm.java.lang.Thread.currentThread().getContextClassLoader()  # type: ignore[union-attr]
        loader.loadClass("org.apache.hadoop.fs.s3a.S3AFileSystem")
        return True
    except Exception:
        return False


def _native_problem(spark: SparkSession, datasets: ParquetDatasetStore) -> str | None:
    """Why Spark's own writer cannot write this dataset (``None`` if it can)."""
    store = datasets.store
    if isinstance(store, S3Store):
        if not s3a_available(spark):
            return (
                "Spark has no s3a:// filesystem (the hadoop-aws jar is not on its classpath), so it cannot write "
                f"to {store!r} itself; use mode='arrow', which writes through the S3Store on the executors"
            )
    elif not isinstance(store, LocalStore):
        return f"Spark cannot write to {store!r} itself; use mode='arrow'"
    if _SPARK_CODECS.get(datasets.compression) is None:
        return f"Spark's Parquet writer has no {datasets.compression!r} codec; use mode='arrow' or another codec"
    if datasets.row_group_size is not None:
        return (
            "Spark's Parquet writer sizes row groups in bytes, not rows, so it cannot honour "
            f"row_group_size={datasets.row_group_size}; use mode='arrow' or leave row_group_size unset"
        )
    return None


def resolve_write_mode(spark: SparkSession, datasets: ParquetDatasetStore, mode: str) -> str:
    """``"arrow"`` or ``"native"`` for ``mode`` (``"auto"`` picks native on a LocalStore when it can).

    Raises:
        ValueError: ``mode`` is not one of auto/arrow/native.
        CapabilityNotSupported: the store is process-local, or ``mode="native"`` is impossible (the message says why).
    """
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, _MODES))}, got {mode!r}")
    check_shared_store(datasets.store, "write a Spark DataFrame")
    if mode == "arrow":
        return "arrow"
    if mode == "auto":
        if isinstance(datasets.store, LocalStore) and _native_problem(spark, datasets) is None:
            return "native"
        return "arrow"
    problem = _native_problem(spark, datasets)
    if problem is not None:
        raise CapabilityNotSupported(f"mode='native' is not possible: {problem}")
    return "native"


# ------------------------------------------------------------------ executor side


def _regroup(batches: Iterator[pa.RecordBatch], schema: pa.Schema, rows: int) -> Iterator[pa.Table]:
    """Tables of at most ``rows`` rows (and about ``_GROUP_BYTES``), one Parquet row group each."""
    pending: list[pa.RecordBatch] = []
    held = held_bytes = 0
    for batch in batches:
        while batch.num_rows:
            take = min(rows - held, batch.num_rows)
            piece = batch.slice(0, take)
            pending.append(piece)
            held += take
            held_bytes += piece.nbytes
            batch = batch.slice(take)
            if held == rows or held_bytes >= _GROUP_BYTES:
                yield pa.Table.from_batches(pending, schema)
                pending, held, held_bytes = [], 0, 0
    if pending:
        yield pa.Table.from_batches(pending, schema)


class _Splitter:
    """Splits a stream of batches into consecutive parts of at most ``rows`` rows, lazily.

    Each part must be consumed before the next is requested. Empty batches are
    dropped, so an empty stream has no parts.
    """

    def __init__(self, batches: Iterator[pa.RecordBatch], rows: int | None) -> None:
        self._it = (b for b in batches if b.num_rows)
        self._head: pa.RecordBatch | None = next(self._it, None)
        self._rows = rows

    def parts(self) -> Iterator[Iterator[pa.RecordBatch]]:
        while self._head is not None:
            yield self._part()

    def _part(self) -> Iterator[pa.RecordBatch]:
        left = self._rows
        while self._head is not None and (left is None or left > 0):
            batch = self._head
            if left is None or batch.num_rows <= left:
                self._head = next(self._it, None)
                if left is not None:
                    left -= batch.num_rows
                yield batch
            else:
                self._head = batch.slice(left)
                yield batch.slice(0, left)
                left = 0


def _conform(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Cast Spark's batches to the stored schema (in practice: relabel timestamps as UTC)."""
    for batch in batches:
        if batch.schema.equals(schema, check_metadata=False):
            yield batch
            continue
        try:
            cast = batch.cast(schema, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise TypeError(
                f"Spark's Arrow batch {batch.schema} does not convert to the stored schema {schema}: {exc}"
            ) from None
        yield cast


@dataclass(frozen=True)
class _TaskWriter:
    """The function ``mapInArrow`` runs on the executors (pickled with the store)."""

    store: Store
    key: str
    folder: str  # dataset-relative folder of the task files ("" or the staging folder)
    txn: str
    schema: pa.Schema
    compression: str
    row_group_size: int | None
    max_rows_per_file: int | None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:  # pragma: no cover - mapInArrow always runs in a task
            raise RuntimeError("the Spark write function must run inside a Spark task")
        partition, attempt, task = ctx.partitionId(), ctx.attemptNumber(), ctx.taskAttemptId()
        fail_partition = ctx.getLocalProperty(FAIL_AFTER_PART_PROPERTY)
        options = PartOptions(self.compression, self.row_group_size)
        group = self.row_group_size or _GROUP_ROWS
        splitter = _Splitter(_conform(batches, self.schema), self.max_rows_per_file)
        for chunk, part in enumerate(splitter.parts()):
            name = f"{self.folder}part-{partition:05d}-{chunk:05d}-{self.txn}-t{task}.parquet"
            entry = encode_part(
                self.store, f"{self.key}/{name}", name, self.schema, _regroup(part, self.schema, group), options
            )
            yield pa.RecordBatch.from_pylist(
                [
                    {
                        "partition": partition,
                        "chunk": chunk,
                        "task_attempt": task,
                        "attempt": attempt,
                        "path": entry.path,
                        "row_count": entry.row_count,
                        "size_bytes": entry.size_bytes,
                        "stats": json.dumps(entry.stats) if getattr(entry, "stats", None) else None,
                    }
                ],
                schema=_DESCRIPTOR_SCHEMA,
            )
            if fail_partition is not None and fail_partition == str(partition) and attempt == 0:
                raise _InjectedTaskFailure(
                    f"test knob {FAIL_AFTER_PART_PROPERTY}: attempt 0 of partition {partition} fails after "
                    f"writing {name}"
                )


# -------------------------------------------------------------------- driver side


@dataclass(frozen=True)
class _Written:
    entries: list[FileEntry]  # the parts to commit, in order, dataset-relative
    schema: pa.Schema


def _keep_one_attempt(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """The descriptors of one attempt per partition (Spark returns one; this makes sure), in part order."""
    chosen: dict[int, int] = {}
    for row in rows:
        chosen.setdefault(int(row["partition"]), int(row["task_attempt"]))  # type: ignore[call-overload]
    kept = [r for r in rows if chosen[int(r["partition"])] == int(r["task_attempt"])]  # type: ignore[call-overload]
    return sorted(kept, key=lambda r: (int(r["partition"]), int(r["chunk"])))  # type: ignore[call-overload]


def _fsync(path: str, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _SparkWrite:
    """One write of a DataFrame: the executors' job, then placing and committing the parts."""

    def __init__(self, df: DataFrame, datasets: ParquetDatasetStore, pending: PendingWrite, schema: pa.Schema) -> None:
        self.df = df
        self.datasets = datasets
        self.store = datasets.store
        self.pending = pending
        self.key = pending.key
        self.schema = schema
        # Stores with a cheap rename get their files staged, then renamed to the dataset layer's names.
        self.renames = isinstance(self.store, LocalStore)
        self.placed: list[str] = []  # store paths of parts moved into the dataset folder

    def _local(self, path: str) -> str:
        assert isinstance(self.store, LocalStore)
        return os.path.join(self.store.root, *path.split("/"))

    # ---------------------------------------------------------------- arrow

    def arrow(self) -> _Written:
        staging = f"{_STAGING}{self.pending.txn}/" if self.renames else ""
        writer = _TaskWriter(
            store=self.store,
            key=self.key,
            folder=staging,
            txn=self.pending.txn,
            schema=self.schema,
            compression=self.datasets.compression,
            row_group_size=self.datasets.row_group_size,
            max_rows_per_file=self.datasets.max_rows_per_file,
        )
        rows = [r.asDict() for r in self.df.mapInArrow(writer, _DESCRIPTOR_DDL).collect()]
        kept = _keep_one_attempt(rows)
        entries = [
            FileEntry(
                str(r["path"]),
                int(r["row_count"]),  # type: ignore[call-overload]
                int(r["size_bytes"]),  # type: ignore[call-overload]
                stats=json.loads(str(r["stats"])) if r["stats"] else None,
            )
            for r in kept
        ]
        if self.renames:
            entries = self._place(entries)
            self._drop_staging()
        else:
            self._delete_other_attempts({e.path for e in entries})
        return _Written(entries, self.schema)

    def _delete_other_attempts(self, kept: set[str]) -> None:
        """Delete files of this write's failed or duplicate attempts (they are in no manifest)."""
        from ._partitioned import delete_attempt_leftovers

        delete_attempt_leftovers(self.store, self.key, self.pending.txn, kept)

    # --------------------------------------------------------------- native

    def native(self) -> _Written:
        codec = _SPARK_CODECS[self.datasets.compression]
        folder = f"{_STAGING}{self.pending.txn}" if self.renames else f"spark-{self.pending.txn}"
        uri = spark_uri(self.store, f"{self.key}/{folder}")
        assert uri is not None and codec is not None
        writer = (
            self.df.write.format("parquet")
            .mode("errorifexists")
            .option("compression", codec)
            .option("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        )
        if self.datasets.max_rows_per_file is not None:
            writer = writer.option("maxRecordsPerFile", self.datasets.max_rows_per_file)
        writer.save(uri)

        prefix = f"{self.key}/{folder}/"
        if next(iter(self.store.list_files(f"{self.key}/{folder}")), None) is None:
            # Spark always leaves at least _SUCCESS or an empty part; nothing means it wrote elsewhere.
            raise RemoteStoreError(
                f"Spark's writer left nothing at {uri}; it wrote somewhere else, so nothing is committed"
            )
        names = sorted(
            info.path[len(prefix) :]
            for info in self.store.list_files(f"{self.key}/{folder}")
            if "/" not in info.path[len(prefix) :]
            and info.path[len(prefix) :].startswith("part-")
            and info.path.endswith(".parquet")
        )
        entries: list[FileEntry] = []
        schema: pa.Schema | None = None
        for name in names:
            relative = f"{folder}/{name}"
            with self.store.open_input(f"{self.key}/{relative}") as source:
                size = source.size()
                meta = pq.read_metadata(source)
            file_schema = meta.schema.to_arrow_schema().remove_metadata()
            if schema is None:
                schema = file_schema
            elif not file_schema.equals(schema):
                raise RemoteStoreError(
                    f"Spark wrote parts with different schemas ({name}: {file_schema} vs {schema}); nothing committed"
                )
            entries.append(FileEntry(relative, meta.num_rows, size, stats=file_column_stats(meta, schema) or None))
        if schema is None:  # Spark wrote no file at all: an empty dataset that still carries the schema
            schema = self.schema
        if self.renames:
            if getattr(self.store, "durable", True):
                for entry in entries:
                    _fsync(self._local(f"{self.key}/{entry.path}"))
            entries = self._place(entries)
            self._drop_staging()
        else:
            self.store.delete(f"{self.key}/{folder}/_SUCCESS", missing_ok=True)
        return _Written(entries, schema)

    # ---------------------------------------------------------------- common

    def _place(self, entries: list[FileEntry]) -> list[FileEntry]:
        """Rename staged parts to the dataset layer's names, in order (LocalStore only)."""
        placed: list[FileEntry] = []
        for i, entry in enumerate(entries):
            final = self.pending.part_name(i)
            target = self._local(f"{self.key}/{final}")
            if os.path.lexists(target):
                raise RemoteStoreError(
                    f"dataset {self.key!r}: {final} already exists; another writer is using this write's names"
                )
            os.rename(self._local(f"{self.key}/{entry.path}"), target)
            self.placed.append(f"{self.key}/{final}")
            placed.append(replace(entry, path=final))
        if placed and getattr(self.store, "durable", True):
            _fsync(self._local(self.key), directory=True)
        return placed

    def _drop_staging(self) -> None:
        shutil.rmtree(self._local(f"{self.key}/{_STAGING}{self.pending.txn}"), ignore_errors=True)

    def cleanup(self) -> None:
        """After a failure: remove everything this write put on the store (never raises)."""
        try:
            for path in self.placed:
                self.store.delete(path, missing_ok=True)
            if self.renames:
                self._drop_staging()
            else:
                self._delete_other_attempts(set())
                try:
                    self.store.delete_folder(f"{self.key}/spark-{self.pending.txn}")
                except Exception:
                    pass
        except Exception as exc:  # cleanup must not hide the real error
            log.warning("could not clean up after a failed Spark write to %r: %s", self.key, exc)


def write_spark_dataset(
    df: DataFrame,
    datasets: ParquetDatasetStore,
    key: str,
    *,
    overwrite: bool = False,
    run_id: str | None = None,
    metadata: dict[str, str] | None = None,
    mode: WriteMode = "auto",
    partition_by: Sequence[str] | None = None,
    repartition: bool = False,
) -> DatasetManifest:
    """Write a Spark DataFrame as the dataset ``key``: executors write the parts, the driver commits once.

    The dataset has the dataset layer's format and guarantees (manifest with
    per-file row counts and sizes taken from the Parquet writers, the Arrow
    schema, ``_SUCCESS``; atomic, conflict-checked commit; a crash leaves the
    previous version intact). ``datasets``' ``compression``,
    ``max_rows_per_file`` (per Spark partition) and ``row_group_size`` apply.
    The DataFrame is computed once.

    Args:
        df: the DataFrame. Its Spark schema is stored as Arrow:
            ``TimestampType`` as ``timestamp[us, tz=UTC]``, ``TimestampNTZType``
            as ``timestamp[us]``, decimals, arrays, maps and structs as such.
        datasets: the dataset store; its store must be reachable from the
            executors (a ``LocalStore`` on a shared disk, or an ``S3Store``).
        key: the dataset key.
        overwrite: replace an existing dataset.
        run_id, metadata: recorded in the manifest.
        mode: ``"arrow"`` writes through the store from the executors
            (``mapInArrow``; any shared store, the only way to S3 without
            hadoop-aws); ``"native"`` uses Spark's own Parquet writer (a
            ``LocalStore``, or an ``S3Store`` when Spark has ``s3a://``);
            ``"auto"`` picks native on a ``LocalStore`` when the codec and
            options allow it, else arrow. A ``partition_by`` write always
            takes the arrow path.
        partition_by: split the rows into ``col=value/`` folders named and
            encoded exactly as :meth:`ParquetDatasetStore.write_dataset` does
            (null and empty values in ``__HIVE_DEFAULT_PARTITION__``, non-ASCII
            kept); each task writes one part per folder it touches.
        repartition: with ``partition_by``, first repartition the rows by the
            partition columns (a shuffle) so each folder gets few, large files.

    Returns:
        The committed manifest.

    Raises:
        TypeError: ``df`` is not a Spark DataFrame, or a column's type cannot be
            stored (the message names the column); nothing is written.
        ValueError: bad ``mode``, duplicate column names, or a bad key.
        CapabilityNotSupported: a ``MemoryStore`` (invisible to executors), or
            ``mode="native"`` where Spark cannot write (the message says why).
        AlreadyExists: the dataset exists and ``overwrite`` is false.
        CommitConflict: an overwrite kept losing the commit race.
        pyspark.errors.PySparkException: the Spark job failed (after Spark's
            own task retries); what the write put on the store is removed.
    """
    from pyspark.sql import DataFrame as SparkDataFrame

    if not isinstance(df, SparkDataFrame):
        raise TypeError(
            f"write_spark_dataset takes a pyspark.sql.DataFrame, got {type(df).__module__}.{type(df).__name__}"
        )
    if not isinstance(datasets, ParquetDatasetStore):
        raise TypeError(f"datasets must be a ParquetDatasetStore, got {type(datasets).__name__}")
    resolved = resolve_write_mode(df.sparkSession, datasets, mode)
    schema = spark_schema_to_arrow(df.schema)
    if partition_by is not None and len(partition_by):
        from ._partitioned import write_partitioned

        return write_partitioned(df, datasets, key, schema, partition_by, repartition, overwrite, run_id, metadata)
    pending = datasets.begin_write(key, overwrite=overwrite, run_id=run_id, metadata=metadata)
    write = _SparkWrite(df, datasets, pending, schema)
    try:
        written = write.native() if resolved == "native" else write.arrow()
    except BaseException:
        write.cleanup()
        raise
    return datasets.commit_write(pending, written.entries, written.schema)
