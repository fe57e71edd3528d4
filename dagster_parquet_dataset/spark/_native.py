"""Spark's own Parquet writer (``mode="native"``): the choice of write path, and the native write itself.

Spark's writer (and its output committer) writes into a staging folder under
the dataset; the driver reads each file's footer for its row count, schema
and statistics, hashes its bytes before the footer (the part's content hash,
as the executor-side writer records it while writing; Spark's writer offers
no hook, so here it costs one read of the data pages) and, on a store that
can rename, moves the files to the dataset layer's names. Elsewhere (``s3a://``) the files stay where Spark put
them; the manifest is the only list of parts either way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from ..dataset import FileEntry, ParquetDatasetStore
from ..dataset.engine import file_column_stats, hash_before_footer
from ..errors import CapabilityNotSupported, RemoteStoreError
from ..storage.local import LocalStore
from ..storage.s3 import S3Store
from . import _parts
from ._jobs import run_job
from ._parts import drop_staging, place, staging_folder
from ._stores import check_shared_store, s3a_available, spark_uri

if TYPE_CHECKING:
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


def write_native(
    df: DataFrame, datasets: ParquetDatasetStore, key: str, txn: str, schema: pa.Schema, *, name: Callable[[int], str]
) -> tuple[list[FileEntry], pa.Schema]:
    """Write ``df`` with Spark's own Parquet writer as parts of ``key``; returns the entries and their schema.

    The caller has checked with :func:`resolve_write_mode` that Spark can write there. On failure the
    caller removes :func:`native_folder` (Spark's job has stopped once its ``save`` returns or raises).

    Raises:
        RemoteStoreError: Spark wrote nowhere visible, or parts with different schemas.
        AlreadyExists: a final part name is taken.
        pyspark.errors.PySparkException: the Spark job failed.
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

    hashed = _parts.HASH_CONTENT

    def inspect(part: str) -> tuple[int, pq.FileMetaData, str | None]:
        # Spark's writer has no hook for the bytes it writes: the content hash reads the data pages once here.
        with store.open_input(f"{key}/{folder}/{part}") as source:
            size = source.size()
            meta = pq.read_metadata(source)
            return size, meta, hash_before_footer(source, size) if hashed else None

    with ThreadPoolExecutor(max_workers=min(8, max(1, len(names))), thread_name_prefix="pds-native") as pool:
        inspected = list(pool.map(inspect, names))
    for part, (size, meta, content_hash) in zip(names, inspected, strict=True):
        relative = f"{folder}/{part}"
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
