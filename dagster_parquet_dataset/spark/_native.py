"""Spark's own Parquet writer (``mode="native"``): the choice of write path, and the native write itself.

Spark's writer (and its output committer) writes into a staging folder under
the dataset. Spark's writer offers no hook for the bytes it writes, so a small
Spark job then hashes each part's bytes before its footer on the executors
(:func:`hash_parts`: one task per core, each reading its files once and
returning only ``(path, content hash, size)``; the same hash the executor-side
writer records while writing; with a local master, whose executors are the
driver's machine, driver threads do the same reads without a job's latency).
The driver reads only each file's footer, for its row count, schema and
statistics, and, on a store that can rename, moves the files to the dataset
layer's names. Elsewhere (``s3a://``) the files stay
where Spark put them; the manifest is the only list of parts either way.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from ..dataset import FileEntry, ParquetDatasetStore
from ..dataset.engine import file_column_stats, hash_before_footer
from ..errors import CapabilityNotSupported, RemoteStoreError
from ..storage.base import Store
from ..storage.local import LocalStore
from ..storage.s3 import S3Store
from . import _parts
from ._jobs import run_job
from ._parts import drop_staging, place, staging_folder
from ._stores import check_shared_store, s3a_available, spark_uri

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession

_MODES = ("auto", "arrow", "native")

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


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def native_folder(datasets: ParquetDatasetStore, txn: str) -> str:
    """The folder under the dataset key that Spark's writer writes the write ``txn`` into."""
    return staging_folder(datasets.store, txn) or f"spark-{txn}"


@dataclass(frozen=True)
class PartHash:
    """What :func:`hash_parts` found for one file: its content hash, size and the CPU seconds the hash took."""

    content_hash: str
    size: int
    seconds: float


@dataclass(frozen=True)
class _HashFiles:
    """The function each hashing task runs (pickled with the store): ``(path, hash, size, CPU s)`` per path."""

    store: Store

    def __call__(self, paths: Iterable[str]) -> Iterator[tuple[str, str, int, float]]:
        for path in paths:
            start = time.thread_time()
            with self.store.open_input(path) as source:
                size = source.size()
                digest = hash_before_footer(source, size, chunk=_CHUNK)
            yield path, digest, size, time.thread_time() - start


#: Bytes each hashing task (or thread) reads at a time: memory stays flat whatever the part sizes.
_CHUNK = 1024 * 1024


def hash_on_driver(sc: SparkContext) -> bool:
    """Whether :func:`hash_parts` hashes on the driver's threads: with a local master, whose executors
    are this machine's cores and disk, a Spark job would add only its own latency (about 0.15 s on
    ``local[2]``, 5% of an 80 MiB write) to the same reads."""
    return str(sc.master).startswith("local")


def hash_parts(sc: SparkContext, store: Store, paths: Sequence[str]) -> dict[str, PartHash]:
    """The content hash (bytes before the footer, as :func:`encode_part` records it) of each Parquet
    file at ``paths`` on ``store``, computed on the executors: one Spark job, one task per core at
    most, each reading its files once, ``_CHUNK`` bytes at a time; only the hashes and sizes come
    back to the driver. With a local master (:func:`hash_on_driver`) the same reads run on as many
    driver threads as Spark has cores (SHA-256 releases the GIL), without a job.

    Raises:
        pyspark.errors.PySparkException: the job failed (a file is missing, unreadable, or not
            Parquet: the task's ``NotFound``/``OSError``/``ValueError`` is in the message).
        NotFound, OSError, ValueError: the same, on the driver's threads.
    """
    if not paths:
        return {}
    hasher = _HashFiles(store)
    cores = max(1, min(len(paths), sc.defaultParallelism))
    if hash_on_driver(sc):
        with ThreadPoolExecutor(max_workers=cores, thread_name_prefix="pds-hash") as pool:
            rows = [row for rows in pool.map(lambda path: list(hasher([path])), paths) for row in rows]
    else:
        rows = run_job(sc, sc.parallelize(list(paths), cores).mapPartitions(hasher).collect)
    return {path: PartHash(digest, size, seconds) for path, digest, size, seconds in rows}


def write_native(
    df: DataFrame, datasets: ParquetDatasetStore, key: str, txn: str, schema: pa.Schema, *, name: Callable[[int], str]
) -> tuple[list[FileEntry], pa.Schema]:
    """Write ``df`` with Spark's own Parquet writer as parts of ``key``; returns the entries and their schema.

    The caller has checked with :func:`resolve_write_mode` that Spark can write there. On failure the
    caller removes :func:`native_folder` (Spark's job has stopped once its ``save`` returns or raises).

    Raises:
        RemoteStoreError: Spark wrote nowhere visible, parts with different schemas, or a part that
            changed size between the executors' hash and the driver's footer read.
        AlreadyExists: a final part name is taken.
        pyspark.errors.PySparkException: the Spark job failed (the write, or :func:`hash_parts`).
    """
    store = datasets.store
    codec = _SPARK_CODECS[datasets.compression]
    folder = native_folder(datasets, txn)
    renames = folder != f"spark-{txn}"
    uri = spark_uri(store, f"{key}/{folder}")
    assert uri is not None and codec is not None
    writer = (
        df.write.format("parquet")
        .mode("errorifexists")
        .option("compression", codec)
        .option("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    )
    if datasets.max_rows_per_file is not None:
        writer = writer.option("maxRecordsPerFile", datasets.max_rows_per_file)
    run_job(df.sparkSession.sparkContext, lambda: writer.save(uri))

    prefix = f"{key}/{folder}/"
    listed = [info.path[len(prefix) :] for info in store.list_files(f"{key}/{folder}")]
    if not listed:
        # Spark always leaves at least _SUCCESS or an empty part; nothing means it wrote elsewhere.
        raise RemoteStoreError(
            f"Spark's writer left nothing at {uri}; it wrote somewhere else, so nothing is committed"
        )
    names = sorted(n for n in listed if "/" not in n and n.startswith("part-") and n.endswith(".parquet"))
    entries: list[FileEntry] = []
    found: pa.Schema | None = None

    def inspect(part: str) -> tuple[int, pq.FileMetaData]:
        with store.open_input(f"{key}/{folder}/{part}") as source:
            return source.size(), pq.read_metadata(source)  # the footer alone

    paths = [f"{prefix}{part}" for part in names]
    with ThreadPoolExecutor(max_workers=min(8, max(1, len(names))), thread_name_prefix="pds-native") as pool:
        footers = pool.map(inspect, names)  # while the executors hash the data pages
        hashes = hash_parts(df.sparkSession.sparkContext, store, paths) if _parts.HASH_CONTENT else {}
        inspected = list(footers)
    _parts.HASH_CLOCK.add(sum(h.seconds for h in hashes.values()))
    for part, path, (size, meta) in zip(names, paths, inspected, strict=True):
        relative = f"{folder}/{part}"
        hashed = hashes.get(path)
        if hashed is not None and hashed.size != size:
            raise RemoteStoreError(
                f"Spark's part {relative} changed size while it was read ({hashed.size} then {size} bytes); "
                "nothing committed"
            )
        content_hash = hashed.content_hash if hashed is not None else None
        file_schema = meta.schema.to_arrow_schema().remove_metadata()
        if found is None:
            found = file_schema
        elif not file_schema.equals(found):
            raise RemoteStoreError(
                f"Spark wrote parts with different schemas ({part}: {file_schema} vs {found}); nothing committed"
            )
        stats = file_column_stats(meta, found) or None
        entries.append(FileEntry(relative, meta.num_rows, size, stats=stats, content_hash=content_hash))
    if found is None:  # Spark wrote no file at all: an empty dataset that still carries the schema
        found = schema
    if not renames:
        store.delete(f"{prefix}_SUCCESS", missing_ok=True)
        return entries, found
    if isinstance(store, LocalStore) and store.durable:  # Spark's writer does not fsync its files
        for entry in entries:
            _fsync(os.path.join(store.root, *f"{key}/{entry.path}".split("/")))
    try:
        return place(store, key, entries, name), found
    finally:
        drop_staging(store, key, txn)
