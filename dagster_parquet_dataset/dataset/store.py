"""``ParquetDatasetStore``: Spec 042 datasets with crash-safe, conflict-safe commits.

The facade: it validates its options once (:class:`DatasetOptions`) and delegates each method, by keyword, to its
operation module in :mod:`.ops`, each of which commits through the one transaction (:mod:`.commit.transaction`).
See docs/architecture.md for the layout and docs/guarantees.md for the promises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..storage.base import Capability, Store, validate_key
from ._dataset_options import DatasetOptions, check_metadata
from .commit.transaction import PendingWrite
from .expressions.merge_keys import MergeResult
from .io.read_parts import ReadPlan
from .io.verify_parts import Progress, VerifyReport
from .manifest import DatasetManifest, FileEntry
from .ops import append, delete, history, many, merge, read, verify, write
from .ops.append import PendingAppend
from .ops.as_of import resolve_version, version_at
from .ops.compact import DEFAULT_TARGET_FILE_BYTES, CompactResult, compact
from .ops.listing import DatasetListing, list_datasets
from .ops.maintenance_methods import MaintenanceMethods
from .ops.merge_plan import MergePlan, plan_merge

if TYPE_CHECKING:
    import pyarrow.dataset as pads

    from .commit.live import LiveVersion
    from .ops.many import CommittedManifests


class ParquetDatasetStore(MaintenanceMethods):
    """Write and read Parquet datasets (parts + ``manifest.json`` + ``_SUCCESS``) on a Store.

    Args:
        store: the backend; needs ``ATOMIC_WRITE`` and ``CONDITIONAL_WRITE`` to write, plus ``DELETE`` to
            overwrite or delete.
        compression: Parquet codec (``zstd``, ``snappy``, ``gzip``, ``brotli``, ``lz4``, ``none``).
        row_group_size: rows per row group (pyarrow's default when ``None``).
        max_rows_per_file: split writes into ``part-NNNNN.parquet`` files of at most this many rows, encoded
            in parallel; ``None`` writes one ``data.parquet`` (one file per partition folder when partitioned).
        max_workers: threads that encode parts (default: CPU count).
        retain_versions: versions kept readable, the live one included (``None``, the default: no count limit;
            ``1``: a commit deletes what it replaces; racing readers/writers re-read or retry, ``as_of`` finds none).
        retain_for: how long a replaced version stays readable, from the commit that replaced it (``timedelta`` or
            seconds; 7 days by default, ``None``: no limit). Both limits apply (see ``commit.retention``).
        commit_timeout: seconds a commit keeps retrying when other writers commit first (jittered
            exponential backoff) before it raises :class:`CommitConflict`.
        delta_log: also keep each dataset's Delta log (``_delta_log/``) after every commit, so the
            dataset is a Delta table too, and write data Delta can hold (see docs/delta.md).

    ``expect_owner``: the owner each commit's replaced version must record, else ``OwnerMismatch`` (see ``commit.owner``).
    Every method's ``key`` is a dataset key: a relative, ``/``-separated path.
    Construction does no I/O.

    Raises:
        TypeError: ``store`` is not a :class:`Store`, or an option has the wrong type.
        ValueError: an option is out of range (``commit_timeout`` NaN, infinite or negative) or an unknown codec.
    """

    def __init__(
        self,
        store: Store,
        *,
        compression: str = "zstd",
        row_group_size: int | None = None,
        max_rows_per_file: int | None = None,
        max_workers: int | None = None,
        retain_versions: int | None = None,
        retain_for: timedelta | float | None = timedelta(days=7),
        commit_timeout: float = 60.0,
        delta_log: bool = False,
    ) -> None:
        self._options = options = DatasetOptions(
            store=store,
            compression=compression,
            row_group_size=row_group_size,
            max_rows_per_file=max_rows_per_file,
            max_workers=max_workers,
            retain_versions=retain_versions,
            retain_for=retain_for,
            commit_timeout=commit_timeout,
            delta_log=delta_log,
        )
        self.store, self.compression, self.commit_timeout = store, options.compression, options.commit_timeout
        self.row_group_size, self.max_rows_per_file = row_group_size, max_rows_per_file
        self.max_workers, self.retain_versions, self.delta_log = max_workers, retain_versions, options.delta_log
        self.retain_for = options.retain_period

    def __repr__(self) -> str:
        return (
            f"ParquetDatasetStore({self.store!r}, compression={self.compression!r}, "
            f"row_group_size={self.row_group_size}, max_rows_per_file={self.max_rows_per_file}, "
            f"retain_versions={self.retain_versions}, retain_for={self.retain_for}, delta_log={self.delta_log})"
        )

    @staticmethod
    def _key(key: str) -> str:
        return validate_key(key, what="dataset key")

    def _live_for(self, key: str) -> LiveVersion | None:
        """The live version a write, append or merge of ``key`` begins from instead of reading the manifest:
        none here (a view made by :func:`~._pinned.write_from_live` holds one for its dataset)."""
        return None

    def _pinned_for(self, key: str, version: int | None) -> CommittedManifests | None:
        """The committed manifests a read of ``key`` (``version``: ``None`` for the latest) starts from instead
        of fetching ``key``'s: none here (a view made by :func:`~._pinned.pin_manifests` holds them)."""
        return None

    def _resolve(
        self, key: str, version: int | None, as_of: datetime | None
    ) -> tuple[str, int | None, CommittedManifests | None]:
        """A read's ``key`` validated, the version it reads (``as_of`` resolved) and the manifests it starts from.

        Raises:
            ValueError / TypeError: a bad key; both ``version`` and ``as_of``; a naive ``as_of``.
            NotFound / VersionNotRetained: as :func:`~.ops.as_of.version_at` for ``as_of``.
        """
        key = self._key(key)
        version = resolve_version(self.store, key, version, as_of)
        return key, version, self._pinned_for(key, version)

    def write_dataset(
        self,
        table: pa.Table | pa.RecordBatchReader,
        key: str,
        *,
        overwrite: bool = False,
        run_id: str | None = None,
        metadata: dict[str, str] | None = None,
        partition_by: Sequence[str] | None = None,
        expect_owner: Mapping[str, str | None] | None = None,
    ) -> DatasetManifest:
        """Write ``table`` as the dataset ``key`` and commit it atomically (PDS-002).

        The parts are encoded (in parallel, ``max_rows_per_file`` rows each; a ``RecordBatchReader`` is
        streamed) and written first; the new version becomes visible only when its ``manifest.json`` is
        swapped in, and a failed write deletes the parts it wrote.

        Args:
            table: the rows, as a ``pyarrow.Table`` or a ``pyarrow.RecordBatchReader``.
            key: the dataset key (a relative, ``/``-separated path).
            overwrite: replace an existing dataset with a new version; without it an existing dataset is an error.
            run_id, metadata: recorded in the manifest (``metadata``: string entries).
            partition_by: columns to split into Hive-style ``col=value/`` folders (left out of the files).
            expect_owner: the owner the replaced version must record (see :mod:`.commit.owner`).


        Raises:
            AlreadyExists: the dataset exists (or was created concurrently) and ``overwrite`` is false.
            CommitConflict: an overwrite kept losing the commit race, or the dataset was deleted meanwhile.
            OwnerMismatch: the version it would replace records another owner than ``expect_owner``.
            CapabilityNotSupported / TypeError / ValueError: the store cannot write (or delete) / bad input.
        """
        return write.write_dataset(
            self._options,
            table,
            key,
            overwrite=overwrite,
            run_id=run_id,
            metadata=metadata,
            partition_by=partition_by,
            expect_owner=expect_owner,
            live=self._live_for(key),
        )

    def begin_write(
        self,
        key: str,
        *,
        overwrite: bool = False,
        run_id: str | None = None,
        metadata: dict[str, str] | None = None,
        expect_owner: Mapping[str, str | None] | None = None,
    ) -> PendingWrite:
        """Start a write whose parts the caller writes itself; finish it with :meth:`commit_write`.

        The live version is read once here (and the new dataset's claim taken when there is none); part
        names must come from the returned :class:`PendingWrite` so the commit and clean-up recognise them.
        Give the write up with :meth:`abandon_write`.

        Args:
            overwrite, run_id, metadata, expect_owner: as :meth:`write_dataset`.


        Raises:
            AlreadyExists / CapabilityNotSupported: as :meth:`write_dataset`.
            OwnerMismatch: the live version records another owner than ``expect_owner``.
            TypeError / ValueError: bad key, ``run_id`` or ``metadata``.
        """
        return write.begin_write(
            self._options, key, overwrite=overwrite, run_id=run_id, metadata=metadata, expect_owner=expect_owner
        )

    def commit_write(
        self,
        pending: PendingWrite,
        entries: Sequence[FileEntry],
        schema: pa.Schema,
        *,
        partition_by: Sequence[str] | None = None,
    ) -> DatasetManifest:
        """Commit parts already written under ``pending.key`` as the dataset's new version.

        Every entry is checked against its file (exists, size, row count, schema, a name carrying the write
        token) before anything is committed.

        Args:
            pending: from :meth:`begin_write`.
            entries: one :class:`FileEntry` per part written, paths relative to the dataset key.
            schema: the dataset's Arrow schema (partition columns included).
            partition_by: the partition columns the parts were split by.


        Raises:
            AlreadyExists / CommitConflict: another writer created the dataset / an overwrite kept losing the race.
            DatasetIncomplete: a part is missing or disagrees with its entry; nothing is committed.
            TypeError / ValueError: a malformed entry or schema; nothing is committed.
        """
        return write.commit_write(self._options, pending, entries, schema, partition_by=partition_by)

    def abandon_write(self, pending: PendingWrite | PendingAppend | MergePlan, parts: Sequence[str] = ()) -> None:
        """Give up a write begun with :meth:`begin_write`, :meth:`begin_append` or :meth:`plan_merge`.

        Deletes the ``parts`` (paths relative to the dataset key) the write created, never one a live or
        retained version lists, and releases the new dataset's claim. Nothing is committed.

        Args:
            pending: the pending write, append or merge plan.
            parts: the parts the caller wrote for it.

        Raises:
            TypeError: ``pending`` did not come from one of those methods.
        """
        base = pending.write if isinstance(pending, PendingAppend | MergePlan) else pending
        if not isinstance(base, PendingWrite):
            raise TypeError(
                f"pending must come from begin_write, begin_append or plan_merge, got {type(pending).__name__}"
            )
        write.abandon_write(self._options, base, parts)

    def append_dataset(
        self,
        table: pa.Table | pa.RecordBatchReader,
        key: str,
        *,
        run_id: str | None = None,
        metadata: dict[str, str] | None = None,
        partition_by: Sequence[str] | None = None,
        allow_new_columns: bool = False,
        expect_owner: Mapping[str, str | None] | None = None,
        idempotency_key: str | None = None,
    ) -> DatasetManifest:
        """Add ``table``'s rows to ``key`` as a new version, creating it if absent.

        The rows are fitted to the dataset's schema (column order, nullability, checked casts); existing files
        stay as they are. A commit that loses a race rebases on the new live version, so concurrent appenders
        lose no rows.

        Args:
            table: the rows, as a ``pyarrow.Table`` or a ``pyarrow.RecordBatchReader``.
            run_id, metadata, expect_owner: as :meth:`write_dataset`.
            partition_by: must be the dataset's partition columns (or ``None`` to take them from it).
            allow_new_columns: accept new nullable columns (older files read them as nulls).
            idempotency_key: with the same key and the same rows, an append already committed is not
                committed again (docs/dagster.md, "Exactly-once retries").

        Returns:
            The committed manifest (the earlier one when ``idempotency_key`` recognised the append).

        Raises:
            ValueError: the schema (named columns) or ``partition_by`` differs; new columns need ``allow_new_columns``.
            ManifestCorrupted: the live manifest cannot be parsed.
            CommitConflict / OwnerMismatch: commits kept winning for ``commit_timeout`` / another owner.
            TypeError: bad input; nothing is written.
        """
        return append.append_dataset(
            self._options,
            table,
            key,
            run_id=run_id,
            metadata=metadata,
            partition_by=partition_by,
            allow_new_columns=allow_new_columns,
            expect_owner=expect_owner,
            idempotency_key=idempotency_key,
            live=self._live_for(key),
        )

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
        expect_owner: Mapping[str, str | None] | None = None,
        idempotency_key: str | None = None,
    ) -> MergeResult:
        """Merge ``source`` into ``key`` by ``key_columns`` (docs/datasets.md, "Merge").

        Candidate files are found from the manifest (partition values and key statistics), confirmed by
        reading their key columns only, and exactly the files holding matched keys are rewritten; every other
        file stays as it is. A merge into a dataset that does not exist writes ``source`` as the dataset. A
        concurrent commit that touches the planned files makes the merge plan again.

        Args:
            source: the changes, one row per key.
            key_columns: the columns that identify a row.
            strategy: ``"upsert"`` (update matched keys, insert the others), ``"insert"`` (new keys only) or
                ``"update"`` (existing keys only).
            partition_by, run_id, metadata, expect_owner: as :meth:`write_dataset`.
            idempotency_key: as :meth:`append_dataset` (docs/dagster.md, "Exactly-once retries").


        Raises:
            ValueError: duplicate/null source keys, unknown strategy, an unfit schema, a key changing partition.
            DatasetNotFound: ``strategy="update"`` on a dataset that does not exist.
            OwnerMismatch: the live version records another owner than ``expect_owner``.
            CommitConflict / TypeError: commits kept changing its files / ``source`` is not a ``pyarrow.Table``.
        """
        return merge.merge_dataset(
            self._options,
            source,
            key,
            key_columns=key_columns,
            strategy=strategy,
            partition_by=partition_by,
            run_id=run_id,
            metadata=metadata,
            expect_owner=expect_owner,
            idempotency_key=idempotency_key,
            live=self._live_for(key),
        )

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

        Consecutive small files of a folder are packed into groups of at most ``target_file_bytes`` and each
        group becomes one file, committed as one new version (``operation: "compact"``); rows keep their order
        and nothing to do commits nothing (docs/compaction.md).

        Args:
            target_file_bytes: the compressed size new files aim at.
            filters: as :meth:`read_dataset`: compact only the files a read with them would select.
            dry_run: only plan: read the manifest, write nothing.
            run_id: recorded in the new version's manifest.


        Raises:
            DatasetNotFound / ManifestCorrupted: nothing is stored under ``key`` / its manifest cannot be parsed.
            ValueError: a bad ``target_file_bytes``, malformed filters, a manifest without a schema.
            CommitConflict: concurrent commits kept replacing the files read for ``commit_timeout``.
            CapabilityNotSupported / DatasetIncomplete: the store cannot write, swap or delete / a damaged file.
        """
        return compact(
            self._options,
            self._key(key),
            target_file_bytes=target_file_bytes,
            filters=filters,
            run_id=run_id,
            dry_run=dry_run,
        )

    def begin_append(
        self,
        key: str,
        schema: pa.Schema,
        *,
        run_id: str | None = None,
        metadata: dict[str, str] | None = None,
        partition_by: Sequence[str] | None = None,
        allow_new_columns: bool = False,
        expect_owner: Mapping[str, str | None] | None = None,
    ) -> PendingAppend:
        """Start an append whose parts the caller writes itself; finish it with :meth:`commit_append`.

        Fixes the schema and partitioning the parts must have (:attr:`PendingAppend.schema`) from the live
        version; give it up with :meth:`abandon_write`.

        Args:
            schema: the Arrow schema of the rows to append.
            run_id, metadata, partition_by, allow_new_columns, expect_owner: as :meth:`append_dataset`.


        Raises:
            ValueError: the schema or ``partition_by`` differs; new columns need ``allow_new_columns``.
            ManifestCorrupted / CapabilityNotSupported: the live manifest cannot be parsed / the store cannot write.
            OwnerMismatch: the live version records another owner than ``expect_owner``.
            TypeError: bad key, schema, ``run_id`` or ``metadata``.
        """
        return append.begin_append(
            self._options,
            key,
            schema,
            run_id=run_id,
            metadata=check_metadata(metadata),
            partition_by=partition_by,
            allow_new_columns=allow_new_columns,
            expect_owner=expect_owner,
        )

    def commit_append(self, pending: PendingAppend, entries: Sequence[FileEntry]) -> DatasetManifest:
        """Commit parts written for ``pending`` as an append, rebased on concurrent commits.

        Args:
            pending: from :meth:`begin_append`.
            entries: one :class:`FileEntry` per part written, checked against its file before the commit.


        Raises:
            CommitConflict: the dataset was repartitioned meanwhile, or commits kept winning.
            DatasetIncomplete / TypeError / ValueError: as :meth:`commit_write`, or a commit changed the schema.
        """
        return append.commit_append(self._options, pending, entries)

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
        expect_owner: Mapping[str, str | None] | None = None,
    ) -> MergePlan:
        """Plan a merge whose parts the caller writes itself; finish it with :meth:`commit_merge`.

        Picks the candidate files from the manifest alone (partition values and key statistics against the
        changes' key ranges and partitions); the caller finds which candidates hold matched keys, writes their
        rewrites and the inserts, and commits. Give it up with :meth:`abandon_write`.

        Args:
            source_schema: the Arrow schema of the changes.
            key_columns, strategy: as :meth:`merge_dataset`.
            key_ranges: per key column, the ``(min, max)`` of the changes' keys.
            partitions: the partition values the changes hold (one sequence per partition), if partitioned.
            partition_by, run_id, metadata, expect_owner: as :meth:`merge_dataset`.


        Raises:
            ValueError: unknown strategy, a bad key column, an unfit schema, a ``partition_by`` that differs.
            ManifestCorrupted / TypeError: the live manifest cannot be parsed / bad ``key_columns``, schema,
                ``run_id``, ``metadata`` or ``expect_owner``.
            OwnerMismatch: the live version records another owner than ``expect_owner``.
        """
        return plan_merge(
            self._options,
            key,
            source_schema=source_schema,
            key_columns=key_columns,
            strategy=strategy,
            key_ranges=key_ranges,
            partitions=partitions,
            partition_by=partition_by,
            run_id=run_id,
            metadata=check_metadata(metadata),
            expect_owner=expect_owner,
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

        Args:
            plan: from :meth:`plan_merge`.
            rewritten: the candidates (paths relative to the dataset key) that held matched keys.
            new_entries: the parts written (rewrites of matched files, inserts), checked before the commit.
            inserted, updated: the rows inserted and updated, reported in the result.


        Raises:
            MergeReplanNeeded / CommitConflict: a commit changed files the plan relied on / commits kept winning.
            DatasetIncomplete: a part is missing or disagrees with its entry; nothing is committed.
            TypeError / ValueError: ``plan`` not from :meth:`plan_merge`, a non-candidate rewritten file, a bad entry.
        """
        return merge.commit_merge(
            self._options, plan, rewritten=rewritten, new_entries=new_entries, inserted=inserted, updated=updated
        )

    def read_manifest(self, key: str, *, version: int | None = None, as_of: datetime | None = None) -> DatasetManifest:
        """Read and parse ``{key}/manifest.json`` (PDS-012), or a retained ``version``'s, or ``as_of``'s.

        Args:
            version: a retained version's number instead of the live one.
            as_of: an aware ``datetime``: the version live at that instant (docs/datasets.md, "Time travel").


        Raises:
            NotFound: no manifest, or ``version`` is newer than the latest; ``as_of`` before the first version.
            VersionNotRetained: ``version`` (or the one live at ``as_of``) is no longer kept (a ``NotFound``).
            ManifestCorrupted: the manifest cannot be parsed or is invalid.
            ValueError / TypeError: both ``version`` and ``as_of``, or a naive ``as_of``.
        """
        key = self._key(key)
        return history.read_manifest(self.store, key, version=resolve_version(self.store, key, version, as_of))

    def version_at(self, key: str, as_of: datetime) -> int:
        """The version live at the aware ``as_of``: the newest whose ``created_at_utc`` is at or before it.

        Reads the live manifest, then the retained version copies newest first until one is old enough.

        Raises:
            VersionNotRetained / NotFound / ValueError / TypeError: as :meth:`read_dataset` for ``as_of``.
            DatasetNotFound / DatasetIncomplete / ManifestCorrupted: as :meth:`read_dataset`.
        """
        return version_at(self.store, self._key(key), as_of)

    def history(self, key: str) -> list[DatasetManifest]:
        """Manifests of the retained versions a reader can open, newest first (the live one first).

        Raises:
            NotFound / ManifestCorrupted: the dataset has no manifest / it cannot be parsed.
        """
        return history.history(self.store, self._key(key))

    def plan_read(
        self, key: str, *, filters: Any = None, version: int | None = None, as_of: datetime | None = None
    ) -> ReadPlan:
        """Which files a read with ``filters`` would touch and which it prunes (one manifest read).

        Args:
            filters, version, as_of: as :meth:`read_dataset`.


        Raises:
            DatasetNotFound / DatasetIncomplete / NotFound / ValueError / TypeError: as :meth:`read_dataset`.
        """
        key = self._key(key)
        version = resolve_version(self.store, key, version, as_of)
        return read.plan_read(self.store, key, filters=filters, version=version)

    def read_dataset(
        self,
        key: str,
        *,
        columns: Sequence[str] | None = None,
        filters: Any = None,
        version: int | None = None,
        as_of: datetime | None = None,
    ) -> pa.Table:
        """Read the committed dataset ``key`` (or ``version``, or the one live at ``as_of``) as one table.

        Files are pruned from the manifest (partition values, statistics), every selected part is checked
        against its manifest entry before its data is read, rows are filtered, and partition columns are put
        back.

        Args:
            columns: the columns to read (all when ``None``).
            filters: DNF filters: ``(column, op, value)`` tuples (AND), or a list of such lists (OR).
            version: a retained version instead of the live one.
            as_of: an aware ``datetime``: the version live at that instant (not with ``version``).


        Raises:
            DatasetNotFound: nothing (or only nested datasets) under ``key``, or it was deleted while it was read.
            DatasetIncomplete: ``_SUCCESS`` or a part is missing, truncated or mismatched.
            NotFound: ``version`` is not retained (``VersionNotRetained``), ``as_of`` is before the first version.
            ManifestCorrupted: the manifest cannot be parsed or lists a part twice.
            ValueError / TypeError: an unknown column, bad filters; both ``version`` and ``as_of``; a naive ``as_of``.
        """
        key, version, pinned = self._resolve(key, version, as_of)
        committed = pinned.manifest(key) if pinned is not None else None
        return read.read_dataset(
            self.store, key, columns=columns, filters=filters, version=version, committed=committed
        )

    def scan_dataset(
        self,
        key: str,
        *,
        columns: Sequence[str] | None = None,
        filters: Any = None,
        version: int | None = None,
        as_of: datetime | None = None,
    ) -> pads.Dataset:
        """A lazy ``pyarrow.dataset.Dataset`` over the committed dataset ``key`` (see docs/scans.md).

        Its fragments are exactly the parts the manifest selects, each checked before the scan is returned.

        Args:
            columns, filters, version, as_of: as :meth:`read_dataset`.


        Raises:
            DatasetNotFound / DatasetIncomplete / NotFound / ManifestCorrupted: as :meth:`read_dataset`.
            ValueError / TypeError: an unknown column, malformed filters; a bad ``as_of`` as :meth:`read_dataset`.
            CapabilityNotSupported: the store cannot be read through a pyarrow filesystem.
        """
        key, version, pinned = self._resolve(key, version, as_of)
        if pinned is not None:  # the latest version, from the manifests a pinned view holds
            return many.scan_many(self.store, [key], columns=columns, filters=filters, committed=pinned)
        return read.scan(self.store, key, columns=columns, filters=filters, version=version)

    def scan_datasets(
        self, keys: Sequence[str], *, columns: Sequence[str] | None = None, filters: Any = None
    ) -> pads.Dataset:
        """One lazy ``pyarrow.dataset.Dataset`` over the latest versions of several datasets.

        The manifests are fetched in parallel, one request each; a dataset whose schema lacks a column of
        the others reads it as nulls.

        Args:
            keys: the dataset keys (at least one, no repeats).
            columns, filters: as :meth:`read_dataset`.


        Raises:
            TypeError: ``keys`` is a single string.
            ValueError: ``keys`` is empty or repeats a key, the schemas disagree, an unknown column, malformed filters.
            DatasetNotFound / DatasetIncomplete / ManifestCorrupted: as :meth:`read_dataset`.
            CapabilityNotSupported: the store cannot be read through a pyarrow filesystem.
        """
        return many.scan_many(self.store, read.check_scan_keys(keys), columns=columns, filters=filters)

    def dataset_exists(self, key: str) -> bool:
        """Whether ``{key}/_SUCCESS`` exists (PDS-007); a missing ``_SUCCESS`` after a commit is repaired.

        Raises:
            ValueError / TypeError: ``key`` is not a safe dataset key.
            StoreAccessError / OSError: the store cannot be reached.
        """
        return read.dataset_exists(self.store, self._key(key))

    def list_datasets(self, prefix: str = "") -> list[DatasetListing]:
        """The datasets whose key is ``prefix`` or lies under the folder ``prefix``, sorted by key.

        One listing, then one manifest read per dataset, in parallel.

        Raises:
            CapabilityNotSupported / ValueError: the store cannot list / ``prefix`` is not a safe key.
        """
        prefix = self._key(prefix.strip("/")) if prefix else ""
        self._options.require(Capability.LIST, action="list datasets")
        return list_datasets(self.store, prefix)

    def verify_dataset(
        self, key: str, *, version: int | None = None, progress: Progress | None = None, threads: int = 16
    ) -> VerifyReport:
        """Check every part of the dataset (or a retained ``version``) against its manifest, on ``threads`` threads.

        Reads footers only (never a data page) and reports every problem rather than stopping at the first.

        Args:
            version: a retained version instead of the live one.
            progress: called with ``(parts checked, parts)`` as the check goes.
            threads: how many parts are checked at once.


        Raises:
            DatasetNotFound / NotFound: nothing under ``key`` / ``version`` is not retained (``VersionNotRetained``).
            StoreAccessError / OSError / ValueError / TypeError: unreachable store / a bad key, version or thread count.
        """
        return verify.verify_dataset(self.store, self._key(key), version=version, progress=progress, threads=threads)

    def delete_dataset(self, key: str) -> None:
        """Delete the dataset ``key`` and every file under its folder (PDS-010), as a commit.

        A tombstone manifest is swapped in first (from then on readers see the dataset absent, and the
        delete is ordered with every other commit), then ``_SUCCESS`` goes, then the files that were there
        when the tombstone landed, then the tombstone (only on its token: a version a writer committed on
        top of it stays, with its files) with the folder. A file a writer publishes meanwhile
        keeps the tombstone in place, so the key reads as absent, never incomplete. Files of a dataset
        nested in its folder are kept. See ``docs/guarantees.md`` for the races with writers.

        Raises:
            NotFound / CapabilityNotSupported: nothing is stored under ``key`` / the store cannot delete or list.
            CommitConflict: other writers kept committing for ``commit_timeout``.
        """
        delete.delete_dataset(self._options, self._key(key))
