"""Verify a dataset version against its manifest: every part, every problem, footers only.

For each part the manifest lists, :func:`verify_dataset` checks that the file
exists, has the recorded size, and that its footer (never a data page) records
the manifest's row count, a schema the manifest's schema reads, the statistics
the manifest recorded and, for parts our writer tagged, its own path. Unlike a
read, which stops at the first bad part, it reports every problem it finds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from threading import Lock
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DatasetNotFound, NotFound
from ..storage.base import Capability, Store
from ._keys import missing_dataset_error
from ._layout import MANIFEST_NAME, SUCCESS_NAME
from ._read import _expected_file_schema
from ._schema import file_schema_matches
from ._stats import file_column_stats
from ._write import PART_PATH_KEY
from .manifest import DatasetManifest, FileEntry, schema_hash

#: Every ``VerifyProblem.kind``, with what it means.
PROBLEM_KINDS: dict[str, str] = {
    "manifest": "the manifest is missing (while other files of the dataset exist), unreadable or invalid",
    "missing": "a part the manifest lists does not exist",
    "size": "a part's size differs from the size the manifest records",
    "footer": "a part's Parquet footer cannot be read (truncated, or not a Parquet file)",
    "rows": "a part's footer holds another row count than the manifest records",
    "schema": "a part's schema is not one the manifest's schema reads",
    "statistics": "a part's column statistics differ from those the manifest records",
    "path": "a part's footer says it was written as another part (moved or swapped on storage)",
}

#: Threads that read footers at once.
_VERIFY_THREADS = 16


@dataclass(frozen=True)
class VerifyProblem:
    """One thing wrong with a dataset.

    Attributes:
        path: the part's path relative to the dataset key (``manifest.json``
            for a problem with the manifest itself).
        kind: one of :data:`PROBLEM_KINDS`: ``"manifest"``, ``"missing"``,
            ``"size"``, ``"footer"``, ``"rows"``, ``"schema"``,
            ``"statistics"``, ``"path"``.
        message: one line that says what is wrong, with the expected and found values.
    """

    path: str
    kind: str
    message: str


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


def _check_part(
    store: Store,
    key: str,
    manifest: DatasetManifest,
    schema: pa.Schema | None,
    entry: FileEntry,
    listed: dict[str, int] | None,
) -> list[VerifyProblem]:
    path = f"{key}/{entry.path}"
    if listed is not None:
        size = listed.get(entry.path)
    else:
        try:
            size = store.size(path)
        except NotFound:
            size = None
    if size is None:
        return [VerifyProblem(entry.path, "missing", f"part {entry.path!r} does not exist")]
    problems: list[VerifyProblem] = []
    if entry.size_bytes is not None and size != entry.size_bytes:
        problems.append(
            VerifyProblem(
                entry.path, "size", f"part {entry.path!r} is {size} bytes; the manifest records {entry.size_bytes}"
            )
        )
    try:
        with store.open_input(path, size=size) as source:
            footer = pq.ParquetFile(source)
            metadata = footer.metadata
            actual = footer.schema_arrow
    except NotFound:
        return [VerifyProblem(entry.path, "missing", f"part {entry.path!r} disappeared while it was checked")]
    except (pa.ArrowException, OSError) as exc:
        detail = " ".join(str(exc).split())
        problems.append(
            VerifyProblem(entry.path, "footer", f"part {entry.path!r} has no readable Parquet footer ({detail})")
        )
        return problems
    if entry.row_count is not None and metadata.num_rows != entry.row_count:
        problems.append(
            VerifyProblem(
                entry.path,
                "rows",
                f"part {entry.path!r} holds {metadata.num_rows} rows; the manifest records {entry.row_count}",
            )
        )
    expected: pa.Schema | None = None
    if schema is not None:
        expected = _expected_file_schema(schema, manifest, entry)
        if not file_schema_matches(actual, expected):
            problems.append(
                VerifyProblem(
                    entry.path,
                    "schema",
                    f"part {entry.path!r} has columns {_describe(actual)}; the manifest expects {_describe(expected)}",
                )
            )
            expected = None  # statistics of other columns cannot be compared
    elif schema_hash(actual) != manifest.schema_hash:
        problems.append(
            VerifyProblem(
                entry.path,
                "schema",
                f"part {entry.path!r} has schema hash {schema_hash(actual)}; the manifest records "
                f"{manifest.schema_hash}",
            )
        )
    tag = (metadata.metadata or {}).get(PART_PATH_KEY.encode("utf-8"))
    if tag is not None and tag.decode("utf-8", "replace") != entry.path:
        problems.append(
            VerifyProblem(
                entry.path,
                "path",
                f"the file at {entry.path!r} was written as part {tag.decode('utf-8', 'replace')!r} "
                "(moved or swapped on storage)",
            )
        )
    if expected is not None and entry.stats:
        differing = _differing_stats(metadata, expected, entry.stats)
        if differing:
            problems.append(
                VerifyProblem(
                    entry.path,
                    "statistics",
                    f"part {entry.path!r} has other statistics than the manifest records for " + ", ".join(differing),
                )
            )
    return problems


def _describe(schema: pa.Schema) -> str:
    return "(" + ", ".join(f"{f.name}: {f.type}" for f in schema) + ")"


def _differing_stats(metadata: pq.FileMetaData, schema: pa.Schema, recorded: dict[str, dict[str, Any]]) -> list[str]:
    wanted = {c: s for c, s in recorded.items() if schema.get_field_index(c) >= 0}
    if not wanted:
        return []
    found = file_column_stats(metadata, pa.schema([schema.field(c) for c in wanted]))
    out = []
    for column, stats in wanted.items():
        have = found.get(column, {})
        keys = [k for k in ("min", "max", "null_count") if k in stats and k in have and stats[k] != have[k]]
        if keys:
            shown = "; ".join(f"{k} {have[k]!r} (manifest {stats[k]!r})" for k in keys)
            out.append(f"column {column!r}: {shown}")
    return out


def verify_parts(
    store: Store,
    key: str,
    manifest: DatasetManifest,
    progress: Callable[[int, int], None] | None = None,
) -> VerifyReport:
    """Check every part of ``manifest`` (one listing, then footers on parallel threads).

    ``progress(done, total)`` is called after each part (from worker threads).
    Problems come back in manifest order, never raised; store errors other
    than a missing file (no access, a dead endpoint) are raised.
    """
    try:
        schema = manifest.schema
    except Exception as exc:  # noqa: BLE001 - a valid-looking but undecodable schema is a manifest problem
        return manifest_problem(key, f"dataset {key!r}: manifest schema does not decode: {exc}", manifest.version)
    entries: Sequence[FileEntry] = manifest.file_entries()
    listed = _actual_sizes(store, key)
    total = len(entries)
    done = 0
    lock = Lock()

    def check(entry: FileEntry) -> list[VerifyProblem]:
        nonlocal done
        found = _check_part(store, key, manifest, schema, entry, listed)
        if progress is not None:
            with lock:
                done += 1
                progress(done, total)
        return found

    if total <= 1:
        results = [check(e) for e in entries]
    else:
        with ThreadPoolExecutor(min(_VERIFY_THREADS, total), thread_name_prefix="pds-verify") as pool:
            results = list(pool.map(check, entries))
    problems = tuple(p for found in results for p in found)
    return VerifyReport(key, manifest.version, total, problems)
