"""Encoding Arrow data into Parquet parts that stream straight to a store."""

from __future__ import annotations

import hashlib
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ...storage.base import Store
from ..format.schema import stored_schema
from ..format.stats import file_column_stats
from ..manifest import FileEntry

#: Footer key-value metadata key holding a part's own path relative to the
#: dataset key, so a read can tell a part that was moved or swapped on storage.
PART_PATH_KEY = "dagster_parquet_dataset.part_path"

#: Rows buffered per row group when a stream of small batches is written and
#: no ``row_group_size`` is set; pyarrow's own default for tables.
DEFAULT_ROW_GROUP = 1024 * 1024


#: Prefix of :attr:`FileEntry.content_hash`: the algorithm, so another one can be told apart later.
HASH_PREFIX = "sha256:"


@dataclass(frozen=True)
class PartOptions:
    compression: str
    row_group_size: int | None
    hash_content: bool = True
    """Whether parts record :attr:`FileEntry.content_hash` (off only to measure its cost)."""


class _HashingSink:
    """A write-only file object that hashes every byte on its way to ``inner``.

    The Parquet writer hands its pages here as it encodes them (about a thousand calls for
    a 2M-row part), so the hash costs no second read of the part. :meth:`digest` is taken
    before the footer is written: the footer records the part's own path (which carries the
    write's unique token), and equal data must give an equal content hash. SHA-256 because
    hashlib's is the fastest here (CPU SHA extensions: about twice blake2b's speed).
    """

    def __init__(self, inner: pa.NativeFile | None) -> None:
        self._inner = inner  # None: hash only
        self._hash = hashlib.sha256()
        self._position = 0
        self.closed = False
        self.seconds = 0.0
        """CPU seconds this thread spent in the hash so far (what the hash costs the writer)."""

    def write(self, data: Any) -> int:
        start = time.thread_time()
        self._hash.update(data)
        self.seconds += time.thread_time() - start
        self._position += len(data)
        return self._inner.write(data) if self._inner is not None else len(data)

    def tell(self) -> int:
        return self._inner.tell() if self._inner is not None else self._position

    def flush(self) -> None:
        if self._inner is not None:
            self._inner.flush()

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True  # the store closes (and publishes) ``inner`` itself

    def digest(self) -> str:
        """The hash of every byte written so far, as ``sha256:<hex>``."""
        return HASH_PREFIX + self._hash.hexdigest()


def hash_before_footer(source: pa.NativeFile, size: int, *, chunk: int = 8 * 1024 * 1024) -> str:
    """``sha256:<hex>`` of a written Parquet file's bytes before its footer: the content hash
    :func:`encode_part` records, for a part another writer produced (Spark's own writer).

    Reads the file once, ``chunk`` bytes at a time (the footer's length comes from its last 8 bytes).

    Raises:
        ValueError: ``size`` bytes cannot be a Parquet file (no ``PAR1`` trailer, or a footer
            longer than the file).
        OSError: the store failed to read.
    """
    if size < 12:
        raise ValueError(f"a Parquet file has at least 12 bytes, this one {size}")
    source.seek(size - 8)
    trailer = source.read(8)
    footer = int.from_bytes(trailer[:4], "little")
    if trailer[4:] != b"PAR1" or footer + 8 > size:
        raise ValueError("not a Parquet file: no PAR1 trailer, or a footer longer than the file")
    hashing = _HashingSink(None)
    source.seek(0)
    left = size - 8 - footer
    while left > 0:
        data = source.read(min(chunk, left))
        if not data:
            raise ValueError(f"the file ended {left} bytes before its footer")
        hashing.write(data)
        left -= len(data)
    return hashing.digest()


def table_hash(table: pa.Table) -> str:
    """``sha256:<hex>`` of ``table``'s Arrow IPC stream (schema and rows, in order), without copying it."""
    hashing = _HashingSink(None)
    with pa.ipc.new_stream(pa.PythonFile(hashing, mode="w"), table.schema) as stream:
        stream.write_table(table)
    return hashing.digest()


def chunk_batches(batches: Iterable[pa.RecordBatch], schema: pa.Schema, rows: int) -> Iterator[pa.Table]:
    """Regroup a stream of batches into tables of exactly ``rows`` rows (the last fewer).

    Always yields at least one table, so an empty stream still produces a part
    that carries the schema. Only one chunk is held at a time.
    """
    pending: list[pa.RecordBatch] = []
    held = 0
    emitted = False
    for batch in batches:
        while batch.num_rows:
            take = min(rows - held, batch.num_rows)
            pending.append(batch.slice(0, take))
            held += take
            batch = batch.slice(take)
            if held == rows:
                yield pa.Table.from_batches(pending, schema)
                emitted = True
                pending, held = [], 0
    if pending or not emitted:
        yield pa.Table.from_batches(pending, schema)


def table_chunks(table: pa.Table, rows: int) -> Iterator[pa.Table]:
    """Zero-copy slices of ``table`` of ``rows`` rows (at least one slice)."""
    if table.num_rows == 0:
        yield table
        return
    for start in range(0, table.num_rows, rows):
        yield table.slice(start, rows)


def encode_part(
    store: Store,
    path: str,
    relative: str,
    schema: pa.Schema,
    tables: Iterable[pa.Table],
    *,
    options: PartOptions,
    partition_values: dict[str, Any] | None = None,
    tag: bool = False,
    on_hashed: Callable[[float], None] | None = None,
) -> FileEntry:
    """Stream ``tables`` into one Parquet object at ``path``; atomic on success.

    Row count, byte size and per-column statistics come from the writer
    itself, not from a second pass over the data; statistics are in the types
    the file reads back as. With ``tag``, the footer records ``relative``
    under :data:`PART_PATH_KEY` (only for parts that are never renamed).
    The entry's ``content_hash`` hashes every byte before the footer (the data pages, in order)
    as the writer produced them (see :class:`_HashingSink`). ``on_hashed``, if given, is called with
    the CPU seconds the hash took (when ``options.hash_content``; a measurement, e.g. for benchmarks).
    """
    content_hash = None
    with store.open_output(path) as sink:
        hashing = _HashingSink(sink) if options.hash_content else None
        target = pa.PythonFile(hashing, mode="w") if hashing is not None else sink
        writer = pq.ParquetWriter(target, schema, compression=options.compression)
        for table in tables:
            writer.write_table(table, row_group_size=options.row_group_size)
        if hashing is not None:
            content_hash = hashing.digest()
            if on_hashed is not None:
                on_hashed(hashing.seconds)
        if tag:
            writer.add_key_value_metadata({PART_PATH_KEY: relative})
        writer.close()
        size = sink.tell()
    metadata = writer.writer.metadata
    return FileEntry(
        path=relative,
        row_count=metadata.num_rows,
        size_bytes=size,
        partition_values=partition_values,
        stats=file_column_stats(metadata, stored_schema(schema)) or None,
        content_hash=content_hash,
    )


@dataclass(frozen=True)
class PartJob:
    """One part to encode: where it goes and what it holds (``tables``, each of ``schema``)."""

    path: str
    relative: str
    schema: pa.Schema
    tables: Iterable[pa.Table]
    partition_values: dict[str, Any] | None = None

    @classmethod
    def of(cls, path: str, relative: str, table: pa.Table, partition_values: dict[str, Any] | None = None) -> PartJob:
        """A part holding exactly ``table``."""
        return cls(path, relative, table.schema, (table,), partition_values)


def encode_parts(
    store: Store,
    jobs: Iterable[PartJob],
    *,
    options: PartOptions,
    attempted: list[str],
    max_workers: int | None = None,
    sequential: bool = False,
) -> list[FileEntry]:
    """Encode each job as its own part, with bounded memory: the one way parts of this package's
    writes are encoded (the write pipeline, :mod:`..ops.write_pipeline`, plans the jobs).

    At most ``max_workers`` jobs are in flight, so a streamed input is never
    held whole; with ``sequential``, one job at a time in the calling thread (jobs
    that pull their tables from one shared stream, see :func:`stream_jobs`). Every store
    path started is appended to ``attempted`` before it is written, so the caller can
    clean up after a failure. Entries come back in job order.

    Raises:
        Whatever encoding a part raises (the store's errors, Arrow's); jobs not started are dropped.
    """
    if sequential:
        entries: list[FileEntry] = []
        for job in jobs:
            attempted.append(job.path)
            entries.append(_encode_job(store, job, options))
        return entries
    workers = max_workers or os.cpu_count() or 1
    entries = []
    in_flight: deque[Future[FileEntry]] = deque()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pds-encode") as pool:
        try:
            for job in jobs:
                while len(in_flight) >= workers:
                    entries.append(in_flight.popleft().result())
                attempted.append(job.path)
                in_flight.append(pool.submit(_encode_job, store, job, options))
            while in_flight:
                entries.append(in_flight.popleft().result())
        except BaseException:
            for future in in_flight:
                future.cancel()
            raise
    return entries


def _encode_job(store: Store, job: PartJob, options: PartOptions) -> FileEntry:
    return encode_part(
        store,
        job.path,
        job.relative,
        job.schema,
        job.tables,
        options=options,
        partition_values=job.partition_values,
        tag=True,
    )


def single_job(
    path: str, relative: str, data: pa.Table | pa.RecordBatchReader, *, row_group_size: int | None
) -> PartJob:
    """All of ``data`` as one part; a reader streamed one row group (``row_group_size`` rows, or
    :data:`DEFAULT_ROW_GROUP`) at a time."""
    if isinstance(data, pa.Table):
        return PartJob.of(path, relative, data)
    return PartJob(path, relative, data.schema, chunk_batches(data, data.schema, row_group_size or DEFAULT_ROW_GROUP))


def stream_jobs(
    key: str,
    part_name: Callable[[int], str],
    data: pa.RecordBatchReader,
    rows_per_file: int,
    *,
    row_group_size: int | None,
) -> Iterator[PartJob]:
    """A stream as consecutive parts of at most ``rows_per_file`` rows, one row group at a time.

    Each job's tables are pulled from the one stream, so encode them in order, each before the
    next job is asked for (:func:`encode_parts` with ``sequential``): memory holds one row group
    (``row_group_size`` rows, or :data:`DEFAULT_ROW_GROUP`, at most ``rows_per_file``) whatever
    the part size. An empty stream still gives one part carrying the schema. Part ``i`` goes to
    ``{key}/{part_name(i)}``.
    """
    schema = data.schema
    group = min(row_group_size or DEFAULT_ROW_GROUP, rows_per_file)
    source = chunk_batches(data, schema, group)
    carry: list[pa.Table] = [next(source)]  # chunk_batches always yields at least one table

    def part_tables() -> Iterator[pa.Table]:
        room = rows_per_file
        while room > 0:
            table = carry.pop() if carry else next(source, None)
            if table is None:
                return
            if table.num_rows > room:
                carry.append(table.slice(room))
                table = table.slice(0, room)
            room -= table.num_rows
            yield table
            if table.num_rows == 0:
                return

    index = 0
    while carry:
        name = part_name(index)
        index += 1
        yield PartJob(f"{key}/{name}", name, schema, part_tables())
        if not carry:
            following = next(source, None)
            if following is not None and following.num_rows:
                carry.append(following)
