"""``ParquetDatasetStore``: Spec 042 datasets with crash-safe, conflict-safe commits.

Commit protocol (DESIGN.md "Guarantees"):

1. Read the live ``manifest.json`` and its version token.
2. Write the new parts. A new dataset's parts get the Spec names
   (``data.parquet``, ``part-NNNNN.parquet``) once this writer wins the
   dataset's ``_claim`` object; every other write uses names made unique by a
   per-write token, so it never touches a file a manifest references.
3. Commit by compare-and-swap of ``manifest.json`` against the token from
   step 1. An overwrite that loses the race re-reads and commits on top; a
   create that loses raises :class:`AlreadyExists`.
4. Write ``_SUCCESS``, then delete the files only the replaced version used.
   The manifest records them as ``obsolete``, so if this writer dies before
   deleting them, the next commit does.

A crash before step 3 leaves the previous version untouched; after it, the
new version is complete. Readers read the manifest, verify every part, and
re-read the manifest if parts vanish under them (a racing overwrite).
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..errors import (
    AlreadyExists,
    CapabilityNotSupported,
    CommitConflict,
    DatasetIncomplete,
    DatasetNotFound,
    ManifestCorrupted,
    NotFound,
    VersionNotRetained,
)
from ..storage.base import Capability, Store, validate_key
from ._commit import Committer, PendingWrite
from ._compact import DEFAULT_TARGET_FILE_BYTES, CompactResult, compact
from ._external import (
    MergePlan,
    PendingAppend,
    append_builder,
    begin_append,
    check_entries,
    commit_append,
    commit_merge,
    plan_merge,
)
from ._keys import check_folder_fits, check_key_fits, check_write_fits, missing_dataset_error
from ._layout import (
    MANIFEST_NAME,
    SUCCESS_NAME,
    version_of,
    version_path,
)
from ._list import DatasetListing, list_datasets
from ._merge import MergeResult, check_merge_args
from ._merge_op import Replan, merge_into
from ._partition import check_partition_by, encode_partition_values, partition_folder, split_by_partition
from ._read import PartsVanished, ReadPlan, parallel_map, plan, read_parts
from ._schema import check_column_names, conform_data, evolve_schema, recorded_schema
from ._vacuum import VacuumResult, own_files, plan_vacuum
from ._verify import VerifyReport, manifest_problem, missing_manifest, verify_parts
from ._write import (
    DEFAULT_ROW_GROUP,
    PartJob,
    PartOptions,
    chunk_batches,
    encode_parts,
    stream_parts,
    stream_single,
    table_chunks,
)
from .manifest import FORMAT_VERSION, DatasetManifest, FileEntry, encode_schema, schema_hash

if TYPE_CHECKING:
    import pyarrow.dataset as pads

log = logging.getLogger(__name__)

_DEFAULT: Any = object()

_COMPRESSIONS = ("none", "uncompressed", "snappy", "gzip", "brotli", "lz4", "zstd")
_READ_ATTEMPTS = 10


def _is_spec_name(path: str) -> bool:
    name = path.rpartition("/")[2]
    return name == "data.parquet" or (name.startswith("part-") and name[5:10].isdigit() and name[10:] == ".parquet")


def _now_utc() -> str:
    return datetime.now(timezone.utc).isoformat()


def _check_positive(name: str, value: int | None) -> None:
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int or None, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive number of rows, got {value}")


def _check_metadata(metadata: Mapping[str, str] | None) -> dict[str, str] | None:
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a dict of str to str, got {type(metadata).__name__}")
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"metadata must map str to str; entry {k!r}: {v!r} does not")
    return dict(metadata)


class ParquetDatasetStore:
    """Write and read Parquet datasets (parts + ``manifest.json`` + ``_SUCCESS``) on a Store.

    Args:
        store: the backend; needs ``ATOMIC_WRITE`` and ``CONDITIONAL_WRITE``
            to write, plus ``DELETE`` to overwrite or delete.
        compression: Parquet codec (``zstd``, ``snappy``, ``gzip``, ``brotli``,
            ``lz4``, ``none``).
        row_group_size: rows per row group (pyarrow's default when ``None``).
        max_rows_per_file: split writes into ``part-NNNNN.parquet`` files of at
            most this many rows, encoded in parallel; ``None`` writes one
            ``data.parquet`` (one file per partition folder when partitioned).
        max_workers: threads that encode parts (default: CPU count).
        retain_versions: how many versions stay readable after a commit. ``1``
            (the default) keeps only the newest version's files, as Spec 042
            expects of an overwrite; ``N`` keeps the newest ``N`` versions
            readable with ``read_dataset(..., version=...)``; ``None`` keeps every
            version until :meth:`vacuum`.
        commit_timeout: seconds a commit keeps retrying when other writers
            commit first (jittered exponential backoff) before it raises
            :class:`CommitConflict`.

    Construction does no I/O.

    Raises:
        TypeError: ``store`` is not a :class:`Store`, or an option has the wrong type.
        ValueError: an option is out of range or the codec is unknown.
    """

    def __init__(
        self,
        store: Store,
        *,
        compression: str = "zstd",
        row_group_size: int | None = None,
        max_rows_per_file: int | None = None,
        max_workers: int | None = None,
        retain_versions: int | None = 1,
        commit_timeout: float = 60.0,
    ) -> None:
        if not isinstance(store, Store):
            raise TypeError(f"store must be a dagster_parquet_dataset Store, got {type(store).__name__}")
        if not isinstance(compression, str) or compression.lower() not in _COMPRESSIONS:
            raise ValueError(f"unknown compression {compression!r}; choose one of {', '.join(_COMPRESSIONS)}")
        _check_positive("row_group_size", row_group_size)
        _check_positive("max_rows_per_file", max_rows_per_file)
        _check_positive("max_workers", max_workers)
        _check_positive("retain_versions", retain_versions)
        self.store = store
        self.compression = compression.lower()
        self.row_group_size = row_group_size
        self.max_rows_per_file = max_rows_per_file
        self.max_workers = max_workers
        self.retain_versions = retain_versions
        if isinstance(commit_timeout, bool) or not isinstance(commit_timeout, (int, float)) or commit_timeout < 0:
            raise ValueError(f"commit_timeout must be a non-negative number of seconds, got {commit_timeout!r}")
        self.commit_timeout = float(commit_timeout)
        self._committer = Committer(store, retain_versions, self.commit_timeout)

    def __repr__(self) -> str:
        return (
            f"ParquetDatasetStore({self.store!r}, compression={self.compression!r}, "
            f"row_group_size={self.row_group_size}, max_rows_per_file={self.max_rows_per_file}, "
            f"retain_versions={self.retain_versions})"
        )

    # ------------------------------------------------------------------ helpers

    def _require(self, *capabilities: Capability, action: str) -> None:
        missing = [c.name for c in capabilities if not self.store.supports(c)]
        if missing:
            raise CapabilityNotSupported(f"{self.store!r} cannot {action}: it lacks {', '.join(missing)}")

    @staticmethod
    def _key(key: str) -> str:
        return validate_key(key, what="dataset key")

    def _read_current(self, key: str) -> tuple[DatasetManifest | None, str | None]:
        return self._committer.read_current(key)

    @staticmethod
    def _check_input(table: object, action: str) -> None:
        if not isinstance(table, (pa.Table, pa.RecordBatchReader)):
            hint = " (convert with pyarrow.Table.from_pandas)" if type(table).__name__ == "DataFrame" else ""
            raise TypeError(
                f"{action} takes a pyarrow.Table or pyarrow.RecordBatchReader, "
                f"got {type(table).__module__}.{type(table).__name__}{hint}"
            )

    # -------------------------------------------------------------------- write

    def write_dataset(
        self,
        table: pa.Table | pa.RecordBatchReader,
        key: str,
        *,
        overwrite: bool = False,
        run_id: str | None = None,
        metadata: dict[str, str] | None = None,
        partition_by: Sequence[str] | None = None,
    ) -> DatasetManifest:
        """Write ``table`` as the dataset ``key`` and commit it atomically (PDS-002).

        ``table`` may be a :class:`pyarrow.RecordBatchReader`, which is streamed
        part by part and never held whole. With ``partition_by``, rows go to
        ``col=value/`` folders and the files leave those columns out; reads put
        them back with their types.

        Returns:
            The committed manifest.

        Raises:
            AlreadyExists: the dataset exists (or was created concurrently) and
                ``overwrite`` is false.
            CommitConflict: an overwrite kept losing the commit race.
            CapabilityNotSupported: the store cannot write (or delete, to overwrite).
            TypeError / ValueError: bad input; nothing is written.
        """
        key = self._key(key)
        self._check_input(table, "write_dataset")
        check_column_names(table.schema, key=key)
        partition = check_partition_by(partition_by, table.schema)
        check_write_fits(self.store, key, table, partition)
        schema = recorded_schema(table.schema, partition, key=key)
        pending = self.begin_write(key, overwrite=overwrite, run_id=run_id, metadata=metadata)
        attempted: list[str] = []
        try:
            entries = self._write_parts(table, pending, partition, attempted)
        except BaseException:
            self._committer.abandon(pending, attempted)
            raise
        operation = "overwrite" if pending.token is not None else "write"
        base = self._manifest(key, entries, schema, pending.run_id, pending.metadata, partition, operation)
        return self._committer.commit(pending, lambda _current: base, attempted, exclusive=not overwrite)

    def begin_write(
        self,
        key: str,
        *,
        overwrite: bool = False,
        run_id: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> PendingWrite:
        """Start a write whose parts the caller writes itself; finish it with :meth:`commit_write`.

        Reads the live manifest (the version the commit will replace) and, for
        a new dataset, tries to win its ``_claim`` so the parts may carry the
        Spec names (:meth:`PendingWrite.part_name`). Nothing else is written.

        Raises:
            AlreadyExists: the dataset exists and ``overwrite`` is false.
            CapabilityNotSupported: the store cannot write (or delete, to overwrite).
            TypeError / ValueError: bad key, ``run_id`` or ``metadata``.
        """
        key = self._key(key)
        check_key_fits(self.store, key)
        if run_id is not None and not isinstance(run_id, str):
            raise TypeError(f"run_id must be a str or None, got {type(run_id).__name__}")
        metadata = _check_metadata(metadata)
        needed = [Capability.ATOMIC_WRITE, Capability.CONDITIONAL_WRITE]
        if overwrite:
            needed.append(Capability.DELETE)
        self._require(*needed, action="write datasets" + (" with overwrite=True" if overwrite else ""))

        current, token = self._committer.read_current(key)
        if token is not None and not overwrite:
            if current is not None and not self.store.exists(f"{key}/{SUCCESS_NAME}"):
                self._committer.repair_success(key)  # its writer died after committing: make it whole
            raise AlreadyExists(f"dataset {key!r} already exists; pass overwrite=True to replace it")

        txn = uuid.uuid4().hex[:16]
        spec_names = token is None and self._committer.claim(key, txn)
        return PendingWrite(key, txn, spec_names, overwrite, run_id, metadata, current, token)

    def commit_write(
        self,
        pending: PendingWrite,
        entries: Sequence[FileEntry],
        schema: pa.Schema,
        *,
        partition_by: Sequence[str] | None = None,
    ) -> DatasetManifest:
        """Commit parts already written under ``pending.key`` as the dataset's new version.

        ``entries`` are the parts in order, with paths relative to the dataset
        key and their row counts and sizes (from the writers' metadata). The
        commit is the same as :meth:`write_dataset`'s: compare-and-swap of the
        manifest, then ``_SUCCESS``, then deleting the files of the replaced
        version. If the commit fails, the given parts are deleted. With
        ``partition_by``, ``schema`` includes those columns, the parts leave
        them out and every entry carries its ``partition_values``.

        Returns:
            The committed manifest.

        Raises:
            AlreadyExists: another writer created the dataset meanwhile (``overwrite`` false).
            CommitConflict: an overwrite kept losing the commit race.
            TypeError / ValueError: an entry is not a :class:`FileEntry` with a safe
                relative path and a row count, or ``schema`` is not a ``pyarrow.Schema``;
                the parts are left in place.
        """
        if not isinstance(pending, PendingWrite):
            raise TypeError(f"pending must come from begin_write, got {type(pending).__name__}")
        if not isinstance(schema, pa.Schema):
            raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
        partition = check_partition_by(partition_by, schema)
        schema = recorded_schema(schema, partition, key=pending.key)
        entries = check_entries(pending.key, entries)
        operation = "overwrite" if pending.token is not None else "write"
        base = self._manifest(pending.key, entries, schema, pending.run_id, pending.metadata, partition, operation)
        attempted = [f"{pending.key}/{e.path}" for e in entries]
        return self._committer.commit(pending, lambda _current: base, attempted, exclusive=not pending.overwrite)

    def abandon_write(self, pending: PendingWrite | PendingAppend | MergePlan, parts: Sequence[str] = ()) -> None:
        """Give up a write begun with :meth:`begin_write`, :meth:`begin_append` or :meth:`plan_merge`.

        Call it once the writers of ``parts`` (paths relative to the dataset key)
        have stopped and the write will not be committed. It deletes only the
        parts this write created: names that carry its token, or Spec names
        when it held the new dataset's ``_claim``; never a file the live
        version lists. A first write also releases its ``_claim``, so the key
        reads as absent again. Never raises for a file it cannot delete
        (vacuum removes leftovers).

        Raises:
            TypeError: ``pending`` did not come from one of those methods.
        """
        write = pending.write if isinstance(pending, PendingAppend) else pending
        if isinstance(write, MergePlan):
            write = PendingWrite(write.key, write.txn, False, True, None, None, write.manifest, write.token)
        if not isinstance(write, PendingWrite):
            raise TypeError(
                f"pending must come from begin_write, begin_append or plan_merge, got {type(pending).__name__}"
            )
        live, _token = self._committer.read_current(write.key)
        listed = set(live.parts) if live is not None else set()
        own = [
            p
            for p in parts
            if p not in listed and (write.txn in p.rpartition("/")[2] or (write.spec_names and _is_spec_name(p)))
        ]
        self._committer.abandon(write, [f"{write.key}/{p}" for p in own])

    def _manifest(
        self,
        key: str,
        entries: Sequence[FileEntry],
        schema: pa.Schema,
        run_id: str | None,
        metadata: dict[str, str] | None,
        partition_by: Sequence[str],
        operation: str,
    ) -> DatasetManifest:
        return DatasetManifest(
            dataset_key=key,
            parts=[e.path for e in entries],
            row_count=sum(e.row_count or 0 for e in entries),
            schema_hash=schema_hash(schema),
            compression=self.compression,
            created_at_utc=_now_utc(),
            run_id=run_id,
            metadata=metadata,
            format_version=FORMAT_VERSION,
            version=1,
            files=tuple(entries),
            arrow_schema=encode_schema(schema),
            partition_by=tuple(partition_by),
            operation=operation,
        )

    def _write_parts(
        self,
        data: pa.Table | pa.RecordBatchReader,
        pending: PendingWrite,
        partition_by: Sequence[str],
        attempted: list[str],
    ) -> list[FileEntry]:
        options = PartOptions(self.compression, self.row_group_size)
        key = pending.key
        if not partition_by:
            if self.max_rows_per_file is None:
                name = pending.single_name()
                return [stream_single(self.store, f"{key}/{name}", name, data, options, attempted)]
            if not isinstance(data, pa.Table):  # a stream: one row group in memory at a time
                return stream_parts(
                    self.store, key, pending.part_name, data, self.max_rows_per_file, options, attempted
                )
            chunks = table_chunks(data, self.max_rows_per_file)
            jobs = (
                PartJob(f"{key}/{pending.part_name(i)}", pending.part_name(i), chunk) for i, chunk in enumerate(chunks)
            )
            return encode_parts(self.store, jobs, options, attempted, self.max_workers)
        return encode_parts(
            self.store, self._partition_jobs(data, pending, partition_by), options, attempted, self.max_workers
        )

    def _partition_jobs(
        self, data: pa.Table | pa.RecordBatchReader, pending: PendingWrite, partition_by: Sequence[str]
    ) -> Iterator[PartJob]:
        """One job per (partition, chunk of at most ``max_rows_per_file`` rows).

        A table is split one partition at a time; a stream is cut into chunks
        first, so memory stays bounded either way.
        """
        schema = data.schema
        limit = self.max_rows_per_file or DEFAULT_ROW_GROUP
        pieces = [data] if isinstance(data, pa.Table) else chunk_batches(data, schema, limit)
        index = 0
        for piece in pieces:
            for values, rows in split_by_partition(piece, partition_by):
                check_folder_fits(self.store, pending.key, partition_by, values)
                folder = partition_folder(partition_by, values)
                encoded = encode_partition_values(partition_by, values, schema)
                for chunk in table_chunks(rows, self.max_rows_per_file or max(rows.num_rows, 1)):
                    name = f"{folder}/{pending.part_name(index)}"
                    index += 1
                    yield PartJob(f"{pending.key}/{name}", name, chunk, encoded)

    # ------------------------------------------------------------------- append

    def append_dataset(
        self,
        table: pa.Table | pa.RecordBatchReader,
        key: str,
        *,
        run_id: str | None = None,
        metadata: dict[str, str] | None = None,
        partition_by: Sequence[str] | None = None,
        allow_new_columns: bool = False,
    ) -> DatasetManifest:
        """Add ``table``'s rows to the dataset ``key`` as a new version (creating it if absent).

        Existing files stay as they are; the new rows go to new files (in the
        dataset's partition folders, if it is partitioned). Concurrent appends
        never lose rows: a commit that loses the race is rebased on the latest
        version and retried.

        Returns:
            The committed manifest.

        Raises:
            ValueError: the data's schema differs from the dataset's (the message
                names the columns), new columns without ``allow_new_columns``,
                or ``partition_by`` differs from the dataset's.
            ManifestCorrupted: the live manifest cannot be parsed.
            TypeError: bad input; nothing is written.
        """
        key = self._key(key)
        self._check_input(table, "append_dataset")
        check_column_names(table.schema, key=key)
        metadata = _check_metadata(metadata)
        if run_id is not None and not isinstance(run_id, str):
            raise TypeError(f"run_id must be a str or None, got {type(run_id).__name__}")
        self._require(Capability.ATOMIC_WRITE, Capability.CONDITIONAL_WRITE, action="append to datasets")
        current, token = self._committer.read_current(key)
        if current is None and token is not None:
            self.read_manifest(key)  # raises ManifestCorrupted with the reason
        if current is None:
            partition = check_partition_by(partition_by, table.schema)
        else:
            partition = current.partition_by
            if partition_by is not None and tuple(partition_by) != partition:
                raise ValueError(
                    f"dataset {key!r} is partitioned by {list(partition)}, not {list(partition_by)}; "
                    "an append keeps the dataset's partitioning"
                )
            table = conform_data(table, self._append_schema(key, current, table.schema, allow_new_columns), key=key)
        check_write_fits(self.store, key, table, partition)
        incoming = recorded_schema(table.schema, partition, key=key)
        txn = uuid.uuid4().hex[:16]
        pending = PendingWrite(key, txn, False, False, run_id, metadata, current, token)
        attempted: list[str] = []
        try:
            entries = self._write_parts(table, pending, partition, attempted)
        except BaseException:
            self._committer.delete_quietly(attempted)
            raise

        build = append_builder(self, key, entries, incoming, partition, run_id, metadata, allow_new_columns)
        return self._committer.commit(pending, build, attempted, exclusive=False)

    @staticmethod
    def _append_schema(key: str, current: DatasetManifest, incoming: pa.Schema, allow_new_columns: bool) -> pa.Schema:
        schema = current.schema
        if schema is None:
            raise ValueError(f"dataset {key!r} has a Spec 042-only manifest without a schema; overwrite it to append")
        return evolve_schema(
            schema, incoming, allow_new_columns=allow_new_columns, key=key, partition_by=current.partition_by
        )

    # -------------------------------------------------------------------- merge

    def merge_dataset(
        self,
        source: pa.Table,
        key: str,
        *,
        key_columns: Sequence[str],
        strategy: str = "upsert",
        partition_by: Sequence[str] | None = None,
        run_id: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> MergeResult:
        """Merge ``source`` into the dataset by ``key_columns`` (seed 003).

        ``upsert`` replaces matching rows whole and inserts the rest; ``update``
        only replaces; ``insert`` only adds rows whose key is new. Candidate
        files come from partition and statistics pruning (conservative when
        statistics are missing) and are confirmed by reading only their key
        columns; exactly the files holding matched keys are rewritten, every
        other file stays referenced as it is. A concurrent commit that touches
        the merge's files makes it plan again.

        Returns:
            A :class:`MergeResult`.

        Raises:
            ValueError: duplicate or null keys in the source, unknown strategy,
                a schema the dataset's cannot take, or a key whose partition
                values would change (partition columns cannot change for
                existing keys).
            DatasetNotFound: ``strategy="update"`` on a dataset that does not exist.
            TypeError: ``source`` is not a ``pyarrow.Table``.
        """
        key = self._key(key)
        keys = check_merge_args(source, key_columns, strategy)
        check_key_fits(self.store, key)
        metadata = _check_metadata(metadata)
        self._require(Capability.ATOMIC_WRITE, Capability.CONDITIONAL_WRITE, Capability.DELETE, action="merge")
        deadline = time.monotonic() + self.commit_timeout
        delay = 0.005
        while True:
            current, token = self._committer.read_current(key)
            if current is None and token is not None:
                self.read_manifest(key)  # raises ManifestCorrupted with the reason
            if current is None:
                if strategy == "update":
                    raise DatasetNotFound(f"dataset {key!r} does not exist; nothing to update")
                try:
                    manifest = self.write_dataset(
                        source, key, run_id=run_id, metadata=metadata, partition_by=partition_by
                    )
                except AlreadyExists:
                    continue  # created meanwhile: merge into it
                return MergeResult(source.num_rows, 0, (), (), tuple(manifest.parts), manifest.version)
            try:
                return merge_into(self, key, current, token, source, keys, strategy, partition_by, run_id, metadata)
            except (Replan, PartsVanished):
                pass  # a concurrent commit replaced files this merge planned on: plan again
            if time.monotonic() >= deadline:
                raise CommitConflict(
                    f"dataset {key!r}: gave up merging after {self.commit_timeout:g} s; concurrent commits "
                    "kept changing the files it planned on (raise commit_timeout to wait longer)"
                )
            time.sleep(random.uniform(0, delay))
            delay = min(delay * 2, 1.0)

    # ------------------------------------------------------------------ compact

    def compact_dataset(
        self,
        key: str,
        *,
        target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES,
        filters: Any = None,
        dry_run: bool = False,
        run_id: str | None = None,
    ) -> CompactResult:
        """Rewrite runs of small files of each partition folder into files near ``target_file_bytes``.

        Consecutive files of one partition folder (of the whole dataset, when
        unpartitioned) smaller than half the target are packed, in manifest
        order, into new files of at most about the target, so rows keep their
        order within each folder. ``filters`` restrict compaction to the files
        a read with them would select. The new version replaces exactly the
        files read and is committed atomically (operation ``"compact"``, with
        ``run_id`` and the live version's metadata); appends committed
        meanwhile are kept, while a commit that removed or changed a file read
        makes compaction plan again. Nothing to compact: no new version.
        ``dry_run`` only plans (``bytes_after`` is then ``None``).

        Returns:
            A :class:`CompactResult`.

        Raises:
            DatasetNotFound: nothing is stored under ``key``.
            ManifestCorrupted: the live manifest cannot be parsed.
            ValueError: ``target_file_bytes`` is not a positive int, malformed
                filters, or a Spec 042-only manifest without a schema.
            CommitConflict: concurrent commits kept replacing the files read
                for ``commit_timeout`` seconds; nothing was committed.
            CapabilityNotSupported: the store cannot write, swap or delete.
            DatasetIncomplete: a file to compact is damaged or missing.
        """
        return compact(self, self._key(key), target_file_bytes, filters, dry_run, run_id)

    # ------------------------------------------------- external writers (Spark)

    def begin_append(
        self,
        key: str,
        schema: pa.Schema,
        *,
        run_id: str | None = None,
        metadata: dict[str, str] | None = None,
        partition_by: Sequence[str] | None = None,
        allow_new_columns: bool = False,
    ) -> PendingAppend:
        """Start an append whose parts the caller writes itself; finish it with :meth:`commit_append`.

        Reads the live version and checks ``schema`` (the appended rows') against
        it by :meth:`append_dataset`'s rules. The parts must hold rows of
        :attr:`PendingAppend.schema` (in that column order, without the partition
        columns, in the dataset's partition folders) under names carrying
        :attr:`PendingAppend.txn`. Nothing is written.

        Raises:
            ValueError: the schema differs from the dataset's (named columns), new columns
                without ``allow_new_columns``, or ``partition_by`` differs from the dataset's.
            ManifestCorrupted: the live manifest cannot be parsed.
            CapabilityNotSupported: the store cannot write.
            TypeError: bad key, schema, ``run_id`` or ``metadata``.
        """
        return begin_append(
            self,
            key,
            schema,
            run_id=run_id,
            metadata=_check_metadata(metadata),
            partition_by=partition_by,
            allow_new_columns=allow_new_columns,
        )

    def commit_append(self, pending: PendingAppend, entries: Sequence[FileEntry]) -> DatasetManifest:
        """Commit parts written for ``pending`` as an append, rebased on concurrent commits.

        ``entries`` are the parts (paths relative to the dataset key, row counts,
        sizes, statistics and, when partitioned, partition values). The commit is
        :meth:`append_dataset`'s: the existing files stay, a lost race is rebased
        on the latest version and retried; if it fails, the parts are deleted.

        Returns:
            The committed manifest.

        Raises:
            CommitConflict: the dataset was repartitioned meanwhile, or commits kept winning.
            ValueError: a concurrent commit changed the schema so the parts no longer fit.
            TypeError / ValueError: a bad entry (not a ``FileEntry``, unsafe path, no row count).
        """
        return commit_append(self, pending, entries)

    def plan_merge(
        self,
        key: str,
        *,
        source_schema: pa.Schema,
        key_columns: Sequence[str],
        strategy: str = "upsert",
        key_ranges: Mapping[str, tuple[Any, Any]],
        partitions: Sequence[Sequence[Any]] | None = None,
        partition_by: Sequence[str] | None = None,
        run_id: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> MergePlan:
        """Plan a merge whose parts the caller writes itself; finish it with :meth:`commit_merge`.

        The caller has checked the changes (no null or duplicate keys) and
        aggregated them: ``key_ranges`` maps each key column to the changes'
        ``(min, max)`` (empty when there are no changes), and ``partitions`` lists
        the changes' distinct partition values (tuples in ``partition_by``
        order, ``None`` for a null). From the manifest alone the plan lists
        :attr:`MergePlan.candidates` (files that may hold matched keys) and
        :attr:`MergePlan.elsewhere` (files of other partitions that may hold
        them). The caller rewrites exactly the candidates that hold matched keys
        (same folder and partition values, names from :meth:`MergePlan.part_name`)
        and writes the inserted rows, then commits.

        Raises:
            ValueError: unknown strategy, a key column missing from the source or of a
                type a merge cannot match, a schema the dataset's cannot take, or a
                ``partition_by`` that differs from the dataset's.
            ManifestCorrupted: the live manifest cannot be parsed.
            TypeError: bad ``key_columns`` or ``source_schema``.
        """
        return plan_merge(
            self,
            key,
            source_schema=source_schema,
            key_columns=key_columns,
            strategy=strategy,
            key_ranges=key_ranges,
            partitions=partitions,
            partition_by=partition_by,
            run_id=run_id,
            metadata=_check_metadata(metadata),
        )

    def commit_merge(
        self,
        plan: MergePlan,
        *,
        rewritten: Sequence[str],
        new_entries: Sequence[FileEntry],
        inserted: int,
        updated: int,
    ) -> MergeResult:
        """Commit a planned merge: drop the ``rewritten`` candidates, add ``new_entries``, once.

        Returns:
            A :class:`MergeResult` (``version`` ``None`` when nothing changed).

        Raises:
            MergeReplanNeeded: a concurrent commit changed files the plan relied on, or
                added files that may hold the changes' keys; the parts were deleted --
                plan again.
            CommitConflict: other commits kept winning for ``commit_timeout``.
            TypeError / ValueError: ``plan`` is not from :meth:`plan_merge` on an existing
                dataset, a rewritten file is not a candidate, or a bad entry.
        """
        return commit_merge(
            self, plan, rewritten=rewritten, new_entries=new_entries, inserted=inserted, updated=updated
        )

    # --------------------------------------------------------------------- read

    def read_manifest(self, key: str, *, version: int | None = None) -> DatasetManifest:
        """Read and parse ``{key}/manifest.json`` (PDS-012), or a retained past version's.

        Raises:
            NotFound: no manifest, or ``version`` is newer than the latest.
            VersionNotRetained: ``version`` is older than the latest and no longer kept
                (a ``NotFound``).
            ManifestCorrupted: the manifest cannot be parsed or is invalid.
        """
        key = self._key(key)
        live = self._parse(key, MANIFEST_NAME)
        if version is None or version == live.version:
            return live
        _check_positive("version", version)
        if version > live.version:
            raise NotFound(f"dataset {key!r} has no version {version}; the latest is {live.version}")
        try:
            return self._parse(key, version_path(version))
        except NotFound:
            raise VersionNotRetained(
                f"version {version} of dataset {key!r} is not retained "
                f"(retained: {[m.version for m in self.history(key)]})"
            ) from None

    def _parse(self, key: str, name: str) -> DatasetManifest:
        try:
            raw = self.store.read_bytes(f"{key}/{name}")
        except NotFound:
            raise NotFound(f"dataset {key!r} has no {name}") from None
        try:
            return DatasetManifest.from_json(raw)
        except ManifestCorrupted as exc:
            raise ManifestCorrupted(f"dataset {key!r}: {exc}", reason=exc.reason) from None

    def history(self, key: str) -> list[DatasetManifest]:
        """Manifests of the retained versions a reader can open, newest first.

        The live manifest always comes first. A ``_versions/`` copy is listed
        only if it parses, is older than the live version, and every part it
        lists still exists (a leftover of an interrupted write or a version
        half-dropped by a crash is not a version).

        Raises:
            NotFound: the dataset has no manifest.
            ManifestCorrupted: the live manifest cannot be parsed.
        """
        key = self._key(key)
        live = self.read_manifest(key)
        versions = {live.version: live}
        if self.store.supports(Capability.LIST):
            present = {f.path[len(key) + 1 :] for f in self.store.list_files(key)}
            for rel in sorted(present):
                number = version_of(rel)
                if number is None or number >= live.version:
                    continue
                old = self._committer.read_version_copy(key, number)
                if old is not None and old.version == number and all(p in present for p in old.parts):
                    versions[number] = old
        return [versions[v] for v in sorted(versions, reverse=True)]

    def _committed_manifest(self, key: str, version: int | None = None) -> DatasetManifest:
        if not self.store.exists(f"{key}/{SUCCESS_NAME}"):
            if self.store.exists(f"{key}/{MANIFEST_NAME}"):
                if self._committer.repair_success(key) is not None:
                    return self.read_manifest(key, version=version)
                raise DatasetIncomplete(
                    f"dataset {key!r} has a manifest but no {SUCCESS_NAME}: its first write did not finish"
                )
            if self.store.supports(Capability.LIST):
                raise missing_dataset_error(key, (f.path for f in self.store.list_files(key)))
            raise DatasetNotFound(f"dataset {key!r} does not exist")
        try:
            return self.read_manifest(key, version=version)
        except NotFound as exc:
            if version is not None:
                raise
            raise DatasetIncomplete(f"dataset {key!r} has {SUCCESS_NAME} but no {MANIFEST_NAME}") from exc

    def plan_read(self, key: str, *, filters: Any = None, version: int | None = None) -> ReadPlan:
        """Which files a read with ``filters`` would touch and which it prunes (one manifest read).

        Raises:
            DatasetNotFound / DatasetIncomplete / NotFound: as :meth:`read_dataset`.
            ValueError / TypeError: malformed filters or an unknown column.
        """
        key = self._key(key)
        manifest = self._committed_manifest(key, version)
        schema = manifest.schema
        if schema is None:
            if filters:
                raise ValueError(f"dataset {key!r} has a Spec 042-only manifest without a schema; it cannot be planned")
            return ReadPlan(key, manifest.version, manifest.file_entries(), (), None, manifest)
        return plan(manifest, schema, filters)

    def read_dataset(
        self,
        key: str,
        *,
        columns: Sequence[str] | None = None,
        filters: Any = None,
        version: int | None = None,
    ) -> pa.Table:
        """Read the committed dataset ``key`` as one table (PDS-003, PDS-006).

        ``filters`` (DNF: a list of ``(column, op, value)`` tuples, or a list of
        such lists; ``"="`` means ``"=="``, as in pyarrow) prune files by partition
        values and statistics from the manifest alone, then filter rows. Every
        selected part's footer is checked (exists, size, row count, schema,
        statistics, the path it was written under) before any data is read. If
        parts vanish because a commit replaced them meanwhile, the read starts
        again on the new manifest. ``version`` reads a retained past version.

        Raises:
            DatasetNotFound: nothing is stored under ``key``, or only datasets
                nested below it (a ``NotFound`` and a ``DatasetIncomplete``).
            DatasetIncomplete: ``_SUCCESS`` or a part is missing, or a part is
                truncated or disagrees with the manifest.
            NotFound: ``version`` is not retained.
            ManifestCorrupted: the manifest cannot be parsed or lists a part twice.
            ValueError / TypeError: an unknown column (named in the message),
                malformed filters, or a filter pyarrow cannot evaluate on the
                column types involved.
        """
        key = self._key(key)
        manifest = self._committed_manifest(key, version)
        for attempt in range(_READ_ATTEMPTS):
            if attempt:
                time.sleep(random.uniform(0, 0.01 * attempt))  # let a burst of commits pass
            try:
                return read_parts(self.store, key, manifest, columns, filters)
            except PartsVanished as exc:
                if version is not None:
                    raise DatasetIncomplete(
                        f"version {version} of dataset {key!r} can no longer be read (its files were removed): {exc}"
                    ) from None
                latest, _token = self._committer.read_current(key)
                if latest is None or (latest.version, latest.parts) == (manifest.version, manifest.parts):
                    raise DatasetIncomplete(
                        f"dataset {key!r}: parts listed in the manifest are missing or unreadable: {exc}"
                    ) from None
                manifest = latest
        raise DatasetIncomplete(f"dataset {key!r} kept changing while it was read; try again")

    def scan_dataset(
        self,
        key: str,
        *,
        columns: Sequence[str] | None = None,
        filters: Any = None,
        version: int | None = None,
    ) -> pads.Dataset:
        """A lazy ``pyarrow.dataset.Dataset`` over the committed dataset ``key`` (see docs/scans.md).

        Only the manifest is read now; the files are read when the caller scans
        (``to_table``, ``to_batches``, DuckDB, ``polars.scan_pyarrow_dataset``).
        The dataset holds exactly the parts :meth:`plan_read` selects, with
        partition columns and later-added columns (nulls) as :meth:`read_dataset`
        returns them, and ``filters`` attached as its row filter, so
        ``scan_dataset(...).to_table()`` equals ``read_dataset(...)`` for the same
        arguments. Columns that ``filters`` names but ``columns`` leaves out are
        carried after ``columns``. Unlike :meth:`read_dataset`, a scan does not
        retry when a concurrent commit removes a part it planned on.

        Raises:
            DatasetNotFound / DatasetIncomplete / NotFound / ManifestCorrupted: as :meth:`read_dataset`.
            ValueError / TypeError: an unknown column, malformed filters.
            CapabilityNotSupported: the store cannot be read through a pyarrow filesystem.
            DatasetIncomplete: when scanned: a part is missing, truncated or replaced.
        """
        from ._scan import scan_manifests  # pyarrow.dataset is slow to import: only when scanning

        key = self._key(key)
        return scan_manifests(self.store, [(key, self._committed_manifest(key, version))], columns, filters)

    def scan_datasets(
        self, keys: Sequence[str], *, columns: Sequence[str] | None = None, filters: Any = None
    ) -> pads.Dataset:
        """One lazy ``pyarrow.dataset.Dataset`` over the latest versions of several datasets.

        The union of each dataset's selected parts, in the order of ``keys``
        (as :meth:`scan_dataset`, one dataset). Its schema unifies theirs: a
        column some datasets lack reads as nulls there.

        Raises:
            TypeError: ``keys`` is a single string.
            ValueError: ``keys`` is empty or repeats a key, the schemas disagree
                (a column of different types), an unknown column, malformed filters.
            DatasetNotFound / DatasetIncomplete / ManifestCorrupted: as :meth:`read_dataset`, for any key.
            CapabilityNotSupported: the store cannot be read through a pyarrow filesystem.
        """
        if isinstance(keys, (str, bytes)):
            raise TypeError(f"keys must be a list of dataset keys, not a single string {keys!r}")
        checked = [self._key(k) for k in keys]
        if not checked:
            raise ValueError("scan_datasets needs at least one dataset key")
        if len(set(checked)) != len(checked):
            raise ValueError(f"scan_datasets got a key more than once ({checked}); its rows would be read twice")
        from ._scan import scan_manifests

        manifests = list(zip(checked, parallel_map(self._committed_manifest, checked), strict=True))
        return scan_manifests(self.store, manifests, columns, filters)

    def dataset_exists(self, key: str) -> bool:
        """Whether ``{key}/_SUCCESS`` exists (PDS-007).

        A dataset whose last writer committed its manifest but died before
        writing ``_SUCCESS`` is complete: its ``_SUCCESS`` is written here and
        the answer is ``True``.
        """
        key = self._key(key)
        if self.store.exists(f"{key}/{SUCCESS_NAME}"):
            return True
        return self.store.exists(f"{key}/{MANIFEST_NAME}") and self._committer.repair_success(key) is not None

    # --------------------------------------------------------------------- list

    def list_datasets(self, prefix: str = "") -> list[DatasetListing]:
        """The datasets whose key is ``prefix`` or lies under the folder ``prefix``, sorted by key.

        ``prefix=""`` lists the whole store. Costs one listing plus one manifest
        read per dataset (parallel threads); nothing else is opened. A dataset
        whose manifest cannot be parsed is listed with its ``error``.

        Raises:
            CapabilityNotSupported: the store cannot list.
            ValueError: ``prefix`` is not a safe key.
        """
        if prefix:
            prefix = self._key(prefix.strip("/"))
        self._require(Capability.LIST, action="list datasets")
        return list_datasets(self.store, prefix)

    # ------------------------------------------------------------------- verify

    def verify_dataset(
        self,
        key: str,
        *,
        version: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> VerifyReport:
        """Check every part of the dataset (or of a retained ``version``) against its manifest.

        Each part must exist with the recorded size, and its footer must hold
        the recorded row count, a schema the manifest's schema reads, the
        statistics the manifest recorded, and (for parts this package wrote) its
        own path. Only footers are read, never data pages, on parallel threads.
        Every problem is reported, not just the first; a missing, unreadable or
        invalid manifest is a problem of kind ``"manifest"``, not an exception.
        ``progress(done, total)`` is called after each part (from worker threads).

        Returns:
            A :class:`VerifyReport`; ``report.ok`` is true when nothing is wrong.

        Raises:
            DatasetNotFound: nothing is stored under ``key`` (or only nested datasets).
            NotFound / VersionNotRetained: ``version`` is not a retained version.
            StoreAccessError / OSError: the store cannot be reached.
            ValueError / TypeError: a bad key or version.
        """
        key = self._key(key)
        try:
            manifest = self.read_manifest(key, version=version)
        except ManifestCorrupted as exc:
            return manifest_problem(key, str(exc))
        except NotFound:
            if version is not None and self.store.exists(f"{key}/{MANIFEST_NAME}"):
                raise
            return missing_manifest(self.store, key)
        return verify_parts(self.store, key, manifest, progress)

    # ------------------------------------------------------------------- vacuum

    def vacuum(
        self,
        key: str,
        *,
        retain_versions: int | None = _DEFAULT,  # type: ignore[assignment]
        older_than: timedelta | float | None = None,
        grace_period: timedelta | float = timedelta(hours=1),
        dry_run: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> VacuumResult:
        """Delete files no retained version references.

        Retained: the live version always; the newest ``retain_versions``
        versions (default: the store's setting; ``None`` keeps all), minus any
        created more than ``older_than`` ago. Files of dropped versions are
        deleted at once; files no version ever listed (leftovers of failed
        writes) only once older than ``grace_period``, so a write still in
        progress is never touched. Datasets nested under ``key`` are left alone.
        ``progress(done, total)`` is called after each deletion.

        Returns:
            The deleted (or, with ``dry_run``, deletable) paths and the retained versions.

        Raises:
            NotFound: the dataset has no manifest.
            CapabilityNotSupported: the store cannot list or delete.
        """
        key = self._key(key)
        self._require(Capability.LIST, Capability.DELETE, action="vacuum datasets")
        keep_count = self.retain_versions if retain_versions is _DEFAULT else retain_versions
        _check_positive("retain_versions", keep_count)
        max_age = older_than.total_seconds() if isinstance(older_than, timedelta) else older_than
        grace = grace_period.total_seconds() if isinstance(grace_period, timedelta) else float(grace_period)
        versions = self.history(key)  # the live manifest first, then older complete copies
        doomed, retained = plan_vacuum(
            key, versions, own_files(self.store, key), keep_count, max_age, grace, time.time()
        )
        if not dry_run:
            for done, path in enumerate(doomed, 1):
                self.store.delete(path, missing_ok=True)
                if progress is not None:
                    progress(done, len(doomed))
        return VacuumResult(tuple(doomed), tuple(m.version for m in retained), dry_run)

    # ------------------------------------------------------------------- delete

    def delete_dataset(self, key: str) -> None:
        """Delete the dataset ``key`` and every file under its folder (PDS-010).

        ``_SUCCESS`` and the manifest go first, so readers see "absent" rather
        than a half-deleted dataset. Datasets nested under ``key`` (another
        folder holding its own ``manifest.json``) are left alone.

        Raises:
            NotFound: nothing is stored under ``key``.
            CapabilityNotSupported: the store cannot delete or list.
        """
        key = self._key(key)
        self._require(Capability.DELETE, Capability.LIST, action="delete datasets")
        files = [f.path for f in own_files(self.store, key)]
        if not files:
            raise NotFound(f"dataset {key!r} does not exist")
        everything = [f.path for f in self.store.list_files(key)]
        first = [f"{key}/{SUCCESS_NAME}", f"{key}/{MANIFEST_NAME}"]
        for marker in first:
            self.store.delete(marker, missing_ok=True)
        if len(files) == len(everything):
            try:
                self.store.delete_folder(key)
            except NotFound:
                pass  # the markers were all there was
            return
        for path in files:
            if path not in first:
                self.store.delete(path, missing_ok=True)
