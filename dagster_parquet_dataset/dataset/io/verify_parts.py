"""Verify a dataset version against its manifest: every part, every problem, footers only.

For each part the manifest lists, :func:`verify_dataset` checks that the file
exists, has the recorded size, and that its footer (never a data page) records
the manifest's row count, a schema the manifest's schema reads, the statistics
the manifest recorded and, for parts our writer tagged, its own path; and that
its ``col=value`` folders spell the partition values its entry records. Unlike a
read, which stops at the first bad part, it reports every problem it finds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from threading import Lock
from typing import Any

import pyarrow as pa

from ...errors import DatasetNotFound, ManifestCorrupted
from ...storage.base import Capability, Store
from ..format.layout import MANIFEST_NAME, SUCCESS_NAME
from ..format.partition import folder_mismatch
from ..format.segments import check_segments
from ..manifest import DatasetManifest, FileEntry
from .key_checks import missing_dataset_error
from .part_check import PROBLEM_KINDS, PartCheck, VerifyProblem

__all__ = [
    "PROBLEM_KINDS",
    "VerifyProblem",
    "VerifyReport",
    "manifest_problem",
    "missing_manifest",
    "verify_parts",
]

#: ``progress(done, total)``: called as parts are checked.
Progress = Callable[[int, int], None]
#: Threads that read one dataset's footers at once (by default).
VERIFY_THREADS = 16


@dataclass(frozen=True)
class VerifyReport:
    """What :meth:`ParquetDatasetStore.verify_dataset` found.

    Attributes:
        key: the dataset key.
        version: the manifest version checked (``None`` if the manifest could not be read).
        files_checked: parts whose existence, size and footer were checked.
        problems: every problem found, in manifest order (empty when all is well).
    """

    key: str
    version: int | None
    files_checked: int
    problems: tuple[VerifyProblem, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (``ok`` included)."""
        return {
            "key": self.key,
            "version": self.version,
            "files_checked": self.files_checked,
            "ok": self.ok,
            "problems": [{"path": p.path, "kind": p.kind, "message": p.message} for p in self.problems],
        }


def manifest_problem(key: str, message: str, version: int | None = None) -> VerifyReport:
    """The report for a dataset whose manifest cannot be used."""
    return VerifyReport(key, version, 0, (VerifyProblem(MANIFEST_NAME, "manifest", " ".join(message.split())),))


def missing_manifest(store: Store, key: str) -> VerifyReport:
    """The report for a dataset with no manifest, or raise if there is no dataset at ``key`` at all.

    Raises:
        DatasetNotFound: nothing is stored under ``key`` (or only datasets nested below it).
    """
    if store.supports(Capability.LIST):
        error = missing_dataset_error(key, (f.path for f in store.list_files(key)))
        if isinstance(error, DatasetNotFound):
            raise error
    elif not store.exists(f"{key}/{SUCCESS_NAME}"):
        raise DatasetNotFound(f"dataset {key!r} does not exist")
    return manifest_problem(key, f"dataset {key!r} has files but no {MANIFEST_NAME}")


def _actual_sizes(store: Store, key: str) -> dict[str, int] | None:
    """Sizes of every file under ``key`` from one listing (``None`` if the store cannot list)."""
    if not store.supports(Capability.LIST):
        return None
    start = len(key) + 1
    return {info.path[start:]: info.size for info in store.list_files(key)}


def _folder_problems(entry: FileEntry, partition_by: Sequence[str], schema: pa.Schema) -> list[VerifyProblem]:
    """A ``partition`` problem if ``entry``'s folders disagree with its partition values (no I/O)."""
    try:
        mismatch = folder_mismatch(entry.path, partition_by, entry.partition_values, schema)
    except (KeyError, TypeError, ValueError, pa.ArrowException) as exc:  # values the schema cannot hold
        mismatch = f"part {entry.path!r}: its partition values {entry.partition_values!r} do not decode ({exc})"
    if mismatch is None:
        return []
    return [VerifyProblem(entry.path, "partition", f"{mismatch}; a Hive reader reads the folder's values")]


def verify_parts(
    store: Store,
    key: str,
    manifest: DatasetManifest,
    progress: Callable[[int, int], None] | None = None,
    threads: int = VERIFY_THREADS,
) -> VerifyReport:
    """Check every part of ``manifest`` (one listing, then footers on up to ``threads`` threads).

    ``threads=1`` checks the parts in the calling thread (no pool: for a
    caller that already runs many datasets on threads of its own).
    ``progress(done, total)`` is called after each part (from worker threads).
    Problems come back in manifest order, never raised; store errors other
    than a missing file (no access, a dead endpoint) are raised.
    """
    try:
        schema = manifest.schema
    except Exception as exc:  # noqa: BLE001 - a valid-looking but undecodable schema is a manifest problem
        return manifest_problem(key, f"dataset {key!r}: manifest schema does not decode: {exc}", manifest.version)
    try:
        check_segments(store, key, manifest.segments)
        entries: Sequence[FileEntry] = manifest.file_entries()
    except ManifestCorrupted as exc:
        return manifest_problem(key, str(exc), manifest.version)
    listed = _actual_sizes(store, key)
    total = len(entries)
    part_check = PartCheck(key, schema=schema, schema_hash=manifest.schema_hash, partition_by=manifest.partition_by)
    done = 0
    lock = Lock()

    def check(entry: FileEntry) -> list[VerifyProblem]:
        nonlocal done
        found = (
            part_check.problems(store, entry)
            if listed is None
            else part_check.problems(store, entry, size=listed.get(entry.path))
        )
        if schema is not None:
            found.extend(_folder_problems(entry, manifest.partition_by, schema))
        if progress is not None:
            with lock:
                done += 1
                progress(done, total)
        return found

    if total <= 1 or threads <= 1:
        results = [check(e) for e in entries]
    else:
        with ThreadPoolExecutor(min(threads, total), thread_name_prefix="pds-verify") as pool:
            results = list(pool.map(check, entries))
    problems = tuple(p for found in results for p in found)
    return VerifyReport(key, manifest.version, total, problems)
