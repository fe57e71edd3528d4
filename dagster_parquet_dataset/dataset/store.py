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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

import pyarrow as pa

from ..errors import (
    AlreadyExists,
    CapabilityNotSupported,
    CommitConflict,
    DatasetIncomplete,
    DatasetNotFound,
    ManifestCorrupted,
    NotFound,
)
from ..storage.base import Capability, Store, validate_key
from ._read import PartsVanished, read_parts
from ._write import PartOptions, chunk_batches, encode_parts, stream_single, table_chunks
from .manifest import FORMAT_VERSION, DatasetManifest, FileEntry, encode_schema, schema_hash

log = logging.getLogger(__name__)

MANIFEST_NAME = "manifest.json"
SUCCESS_NAME = "_SUCCESS"
CLAIM_NAME = "_claim"
SINGLE_FILE_NAME = "data.parquet"

_COMPRESSIONS = ("none", "uncompressed", "snappy", "gzip", "brotli", "lz4", "zstd")
_COMMIT_ATTEMPTS = 20
_READ_ATTEMPTS = 10


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


@dataclass(frozen=True)
class PendingWrite:
    """A write begun by :meth:`ParquetDatasetStore.begin_write`, to be finished by
    :meth:`ParquetDatasetStore.commit_write`.

    Writers that produce parts themselves (the Spark layer's executors) write
    them under :meth:`part_name` (or any name that carries :attr:`txn`), then
    commit them all at once.

    Attributes:
        key: the validated dataset key.
        txn: a token unique to this write; names of parts that are not Spec
            names carry it.
        spec_names: whether this writer holds the new dataset's ``_claim``, so
            its parts may carry exactly the Spec names.
        overwrite, run_id, metadata: as given to ``begin_write``.
    """

    key: str
    txn: str
    spec_names: bool
    overwrite: bool
    run_id: str | None
    metadata: dict[str, str] | None
    current: DatasetManifest | None = field(repr=False)
    token: str | None = field(repr=False)

    def part_name(self, index: int) -> str:
        """Name of part ``index`` relative to the dataset key: ``part-NNNNN.parquet``, or with :attr:`txn`."""
        return f"part-{index:05d}.parquet" if self.spec_names else f"part-{index:05d}-{self.txn}.parquet"

    def single_name(self) -> str:
        """Name of a single-file dataset's only part: ``data.parquet``, or with :attr:`txn`."""
        return SINGLE_FILE_NAME if self.spec_names else f"data-{self.txn}.parquet"


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
            ``data.parquet``.
        max_workers: threads that encode parts (default: CPU count).

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
    ) -> None:
        if not isinstance(store, Store):
            raise TypeError(f"store must be a dagster_parquet_dataset Store, got {type(store).__name__}")
        if not isinstance(compression, str) or compression.lower() not in _COMPRESSIONS:
            raise ValueError(f"unknown compression {compression!r}; choose one of {', '.join(_COMPRESSIONS)}")
        _check_positive("row_group_size", row_group_size)
        _check_positive("max_rows_per_file", max_rows_per_file)
        _check_positive("max_workers", max_workers)
        self.store = store
        self.compression = compression.lower()
        self.row_group_size = row_group_size
        self.max_rows_per_file = max_rows_per_file
        self.max_workers = max_workers

    def __repr__(self) -> str:
        return (
            f"ParquetDatasetStore({self.store!r}, compression={self.compression!r}, "
            f"row_group_size={self.row_group_size}, max_rows_per_file={self.max_rows_per_file})"
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
        """The live manifest (``None`` if corrupt) and its token (``None`` if absent)."""
        try:
            raw, token = self.store.read_versioned(f"{key}/{MANIFEST_NAME}")
        except NotFound:
            return None, None
        try:
            return DatasetManifest.from_json(raw), token
        except ManifestCorrupted:
            return None, token

    def _delete_quietly(self, paths: Iterable[str]) -> None:
        for path in paths:
            try:
                self.store.delete(path, missing_ok=True)
            except Exception as exc:  # cleanup must not hide the real outcome
                log.warning("could not delete %r: %s", path, exc)

    # -------------------------------------------------------------------- write

    def write_dataset(
        self,
        table: pa.Table | pa.RecordBatchReader,
        key: str,
        *,
        overwrite: bool = False,
        run_id: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> DatasetManifest:
        """Write ``table`` as the dataset ``key`` and commit it atomically (PDS-002).

        ``table`` may be a :class:`pyarrow.RecordBatchReader`, which is streamed
        part by part and never held whole.

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
        if not isinstance(table, (pa.Table, pa.RecordBatchReader)):
            hint = " (convert with pyarrow.Table.from_pandas)" if type(table).__name__ == "DataFrame" else ""
            raise TypeError(
                f"write_dataset takes a pyarrow.Table or pyarrow.RecordBatchReader, "
                f"got {type(table).__module__}.{type(table).__name__}{hint}"
            )
        pending = self.begin_write(key, overwrite=overwrite, run_id=run_id, metadata=metadata)
        attempted: list[str] = []
        try:
            entries = self._write_parts(table, pending, attempted)
        except BaseException:
            self._delete_quietly(attempted)
            raise
        return self._finish(pending, entries, table.schema, attempted)

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
        if run_id is not None and not isinstance(run_id, str):
            raise TypeError(f"run_id must be a str or None, got {type(run_id).__name__}")
        metadata = _check_metadata(metadata)
        needed = [Capability.ATOMIC_WRITE, Capability.CONDITIONAL_WRITE]
        if overwrite:
            needed.append(Capability.DELETE)
        self._require(*needed, action="write datasets" + (" with overwrite=True" if overwrite else ""))

        current, token = self._read_current(key)
        if token is not None and not overwrite:
            raise AlreadyExists(f"dataset {key!r} already exists; pass overwrite=True to replace it")

        txn = uuid.uuid4().hex[:16]
        spec_names = token is None and self._claim(key, txn)
        return PendingWrite(key, txn, spec_names, overwrite, run_id, metadata, current, token)

    def commit_write(self, pending: PendingWrite, entries: Sequence[FileEntry], schema: pa.Schema) -> DatasetManifest:
        """Commit parts already written under ``pending.key`` as the dataset's new version.

        ``entries`` are the parts in order, with paths relative to the dataset
        key and their row counts and sizes (from the writers' metadata). The
        commit is the same as :meth:`write_dataset`'s: compare-and-swap of the
        manifest, then ``_SUCCESS``, then deleting the files of the replaced
        version. If the commit fails, the given parts are deleted.

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
        entries = list(entries)
        for entry in entries:
            if not isinstance(entry, FileEntry):
                raise TypeError(f"entries must be FileEntry objects, got {type(entry).__name__}")
            validate_key(entry.path, what="part path")
            if entry.path in (MANIFEST_NAME, SUCCESS_NAME, CLAIM_NAME):
                raise ValueError(f"part path {entry.path!r} is reserved for the dataset's own files")
            if entry.row_count is None:
                raise ValueError(f"part {entry.path!r} has no row count; read it from the file's footer")
        if len({e.path for e in entries}) != len(entries):
            raise ValueError("entries list the same part path more than once")
        return self._finish(pending, entries, schema, [f"{pending.key}/{e.path}" for e in entries])

    def _finish(
        self, pending: PendingWrite, entries: list[FileEntry], schema: pa.Schema, attempted: list[str]
    ) -> DatasetManifest:
        """Build the manifest for ``entries``, commit it, write ``_SUCCESS``, delete obsolete files."""
        key = pending.key
        base = DatasetManifest(
            dataset_key=key,
            parts=[e.path for e in entries],
            row_count=sum(e.row_count or 0 for e in entries),
            schema_hash=schema_hash(schema),
            compression=self.compression,
            created_at_utc=_now_utc(),
            run_id=pending.run_id,
            metadata=pending.metadata,
            format_version=FORMAT_VERSION,
            version=1,
            files=tuple(entries),
            arrow_schema=encode_schema(schema),
        )
        try:
            committed = self._commit(key, base, pending.current, pending.token, pending.overwrite)
        except BaseException:
            self._delete_quietly(attempted)
            raise

        self.store.write_bytes(f"{key}/{SUCCESS_NAME}", b"")
        self._delete_quietly(f"{key}/{p}" for p in committed.obsolete)
        return committed

    def _claim(self, key: str, txn: str) -> bool:
        """Win the right to write Spec-named parts for a new dataset.

        Only one writer ever holds a key's claim, so two writers creating the
        same dataset can never write over each other's ``data.parquet``. The
        claim stays until the dataset is deleted; a writer that finds it taken
        uses unique names instead.
        """
        try:
            self.store.write_if(f"{key}/{CLAIM_NAME}", txn.encode(), expected=None)
            return True
        except CommitConflict:
            return False

    def _write_parts(
        self,
        data: pa.Table | pa.RecordBatchReader,
        pending: PendingWrite,
        attempted: list[str],
    ) -> list[FileEntry]:
        options = PartOptions(self.compression, self.row_group_size)
        key = pending.key
        if self.max_rows_per_file is None:
            name = pending.single_name()
            return [stream_single(self.store, f"{key}/{name}", name, data, options, attempted)]

        def name_for(i: int) -> tuple[str, str]:
            name = pending.part_name(i)
            return f"{key}/{name}", name

        if isinstance(data, pa.Table):
            chunks = table_chunks(data, self.max_rows_per_file)
        else:
            chunks = chunk_batches(data, data.schema, self.max_rows_per_file)
        return encode_parts(self.store, chunks, data.schema, name_for, options, attempted, self.max_workers)

    def _commit(
        self,
        key: str,
        new: DatasetManifest,
        current: DatasetManifest | None,
        token: str | None,
        overwrite: bool,
    ) -> DatasetManifest:
        """Compare-and-swap ``manifest.json`` on top of the latest version; returns what was committed."""
        path = f"{key}/{MANIFEST_NAME}"
        for _ in range(_COMMIT_ATTEMPTS):
            version = (current.version + 1) if current is not None else (2 if token is not None else 1)
            keep = set(new.parts)
            obsolete: list[str] = []
            if current is not None:
                # The replaced version's files, plus any its writer crashed before deleting.
                obsolete = [p for p in dict.fromkeys([*current.obsolete, *current.parts]) if p not in keep]
            candidate = replace(new, version=version, obsolete=tuple(obsolete))
            try:
                self.store.write_if(path, candidate.to_json().encode("utf-8"), expected=token)
                return candidate
            except CommitConflict:
                if not overwrite:
                    raise AlreadyExists(f"dataset {key!r} was created by another writer meanwhile") from None
                current, token = self._read_current(key)
        raise CommitConflict(
            f"dataset {key!r}: gave up committing after {_COMMIT_ATTEMPTS} attempts; "
            "other writers keep committing to it"
        )

    # --------------------------------------------------------------------- read

    def read_manifest(self, key: str) -> DatasetManifest:
        """Read and parse ``{key}/manifest.json`` (PDS-012).

        Raises:
            NotFound: no manifest.
            ManifestCorrupted: the manifest cannot be parsed or is invalid.
        """
        key = self._key(key)
        try:
            raw = self.store.read_bytes(f"{key}/{MANIFEST_NAME}")
        except NotFound:
            raise NotFound(f"dataset {key!r} has no {MANIFEST_NAME}") from None
        try:
            return DatasetManifest.from_json(raw)
        except ManifestCorrupted as exc:
            raise ManifestCorrupted(f"dataset {key!r}: {exc}", reason=exc.reason) from None

    def _committed_manifest(self, key: str) -> DatasetManifest:
        if not self.store.exists(f"{key}/{SUCCESS_NAME}"):
            if self.store.exists(f"{key}/{MANIFEST_NAME}"):
                raise DatasetIncomplete(
                    f"dataset {key!r} has a manifest but no {SUCCESS_NAME}: its first write did not finish"
                )
            if self.store.supports(Capability.LIST) and next(iter(self.store.list_files(key)), None) is not None:
                raise DatasetIncomplete(f"dataset {key!r} has files but no {SUCCESS_NAME}: a write did not finish")
            raise DatasetNotFound(f"dataset {key!r} does not exist")
        try:
            return self.read_manifest(key)
        except NotFound:
            raise DatasetIncomplete(f"dataset {key!r} has {SUCCESS_NAME} but no {MANIFEST_NAME}") from None

    def read_dataset(self, key: str, *, columns: Sequence[str] | None = None) -> pa.Table:
        """Read the committed dataset ``key`` as one table (PDS-003, PDS-006).

        Every listed part is checked to exist before any is read; each part's
        row count and schema are checked against the manifest. If parts vanish
        because an overwrite committed meanwhile, the read starts again on the
        new manifest.

        Raises:
            DatasetNotFound: nothing is stored under ``key`` (a ``NotFound`` and
                a ``DatasetIncomplete``).
            DatasetIncomplete: ``_SUCCESS`` or a part is missing, or a part is
                truncated or disagrees with the manifest.
            ManifestCorrupted: the manifest cannot be parsed.
            ValueError: a requested column does not exist (the message names it).
        """
        key = self._key(key)
        manifest = self._committed_manifest(key)
        for attempt in range(_READ_ATTEMPTS):
            if attempt:
                time.sleep(random.uniform(0, 0.01 * attempt))  # let a burst of commits pass
            try:
                return read_parts(self.store, key, manifest, columns)
            except PartsVanished as exc:
                latest, _token = self._read_current(key)
                if latest is None or (latest.version, latest.parts) == (manifest.version, manifest.parts):
                    raise DatasetIncomplete(
                        f"dataset {key!r}: parts listed in the manifest are missing or unreadable: {exc}"
                    ) from None
                manifest = latest
        raise DatasetIncomplete(f"dataset {key!r} kept changing while it was read; try again")

    def dataset_exists(self, key: str) -> bool:
        """Whether ``{key}/_SUCCESS`` exists (PDS-007)."""
        return self.store.exists(f"{self._key(key)}/{SUCCESS_NAME}")

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
        files = [f.path for f in self.store.list_files(key)]
        if not files:
            raise NotFound(f"dataset {key!r} does not exist")
        prefix = key + "/"
        nested = {
            p[: -len(MANIFEST_NAME)] for p in files if p.endswith("/" + MANIFEST_NAME) and p != f"{key}/{MANIFEST_NAME}"
        }
        if not nested:
            for marker in (SUCCESS_NAME, MANIFEST_NAME):
                self.store.delete(f"{key}/{marker}", missing_ok=True)
            try:
                self.store.delete_folder(key)
            except NotFound:
                pass  # the markers were all there was
            return
        own = [p for p in files if p.startswith(prefix) and not any(p.startswith(n) for n in nested)]
        first = [f"{key}/{SUCCESS_NAME}", f"{key}/{MANIFEST_NAME}"]
        for path in first + [p for p in own if p not in first]:
            self.store.delete(path, missing_ok=True)
