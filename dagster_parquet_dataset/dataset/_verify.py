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
from ._stats import _KINDS, _STR, EXACT_STRING_STATS_WRITERS, _leaf_indices, _minmax_reader, encode_value
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

_TAG = PART_PATH_KEY.encode("utf-8")

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


class _Context:
    """What every part of one verification shares: the schema a part should have and the statistics reader."""

    def __init__(self, manifest: DatasetManifest, schema: pa.Schema | None) -> None:
        self.manifest = manifest
        self.schema = schema
        self.footer_stats = FooterStats(schema) if schema is not None else None
        self._expected: dict[tuple[str, ...], pa.Schema] = {}
        self._matches: dict[tuple[str, ...], list[tuple[pq.ParquetSchema, bytes | None, bool]]] = {}

    def schema_matches(
        self, footer: pq.ParquetFile, metadata: pq.FileMetaData, key_values: dict[bytes, bytes], entry: FileEntry
    ) -> bool:
        """``file_schema_matches(footer.schema_arrow, expected)``, remembered per distinct footer schema.

        The Arrow schema a footer reads as is a function of its Parquet schema and
        its stored ``ARROW:schema``, so files that share both share the answer.
        """
        stored = key_values.get(b"ARROW:schema")
        seen = self._matches.setdefault(entry.missing_columns, [])
        pschema = metadata.schema
        for known, known_stored, answer in seen:
            if known_stored == stored and known.equals(pschema):
                return answer
        answer = file_schema_matches(footer.schema_arrow, self.expected_schema(entry))
        if len(seen) < 16:
            seen.append((pschema, stored, answer))
        return answer

    def expected_schema(self, entry: FileEntry) -> pa.Schema:
        found = self._expected.get(entry.missing_columns)
        if found is None:
            assert self.schema is not None
            found = self._expected[entry.missing_columns] = _expected_file_schema(self.schema, self.manifest, entry)
        return found


def _check_part(
    store: Store,
    key: str,
    manifest: DatasetManifest,
    schema: pa.Schema | None,
    entry: FileEntry,
    listed: dict[str, int] | None,
    context: _Context,
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
            key_values = metadata.metadata or {}
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
        expected = context.expected_schema(entry)
        if not context.schema_matches(footer, metadata, key_values, entry):
            actual = footer.schema_arrow
            problems.append(
                VerifyProblem(
                    entry.path,
                    "schema",
                    f"part {entry.path!r} has columns {_describe(actual)}; the manifest expects {_describe(expected)}",
                )
            )
            expected = None  # statistics of other columns cannot be compared
    elif schema_hash(actual := footer.schema_arrow) != manifest.schema_hash:
        problems.append(
            VerifyProblem(
                entry.path,
                "schema",
                f"part {entry.path!r} has schema hash {schema_hash(actual)}; the manifest records "
                f"{manifest.schema_hash}",
            )
        )
    tag = key_values.get(_TAG)
    if tag is not None and tag.decode("utf-8", "replace") != entry.path:
        problems.append(
            VerifyProblem(
                entry.path,
                "path",
                f"the file at {entry.path!r} was written as part {tag.decode('utf-8', 'replace')!r} "
                "(moved or swapped on storage)",
            )
        )
    if expected is not None and entry.stats and context.footer_stats is not None:
        differing = _differing_stats(metadata, expected, entry.stats, context.footer_stats)
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


class FooterStats:
    """:func:`file_column_stats` for the many files of one dataset, which share a Parquet schema.

    The per-schema setup (leaf indices, min/max readers) is done once per
    distinct Parquet schema instead of once per file; the aggregation over row
    groups is the same, so the result equals ``file_column_stats(metadata,
    pa.schema([schema.field(c) for c in columns]))``.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        names = schema.names
        self._duplicated = {name for name in names if names.count(name) > 1}
        self._plans: list[tuple[pq.ParquetSchema, dict[str, tuple[int, pa.DataType, str, Any]]]] = []

    def _plan(self, metadata: pq.FileMetaData) -> dict[str, tuple[int, pa.DataType, str, Any]]:
        pschema = metadata.schema
        for known, plan in self._plans:
            if known.equals(pschema):
                return plan
        leaves = _leaf_indices(metadata)
        plan = {}
        for field in self.schema:
            kind = _KINDS.get(field.type.id)
            idx = leaves.get(field.name)
            if kind is None or field.name in self._duplicated or idx is None:
                continue
            plan[field.name] = (idx, field.type, kind, _minmax_reader(kind, field.type, pschema.column(idx)))
        if len(self._plans) < 16:
            self._plans.append((pschema, plan))
        return plan

    def __call__(self, metadata: pq.FileMetaData, columns: Sequence[str]) -> dict[str, dict[str, Any]]:
        trust_strings = (metadata.created_by or "").startswith(EXACT_STRING_STATS_WRITERS)
        plan = self._plan(metadata)
        groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
        out: dict[str, dict[str, Any]] = {}
        for name in columns:
            step = plan.get(name)
            if step is None:
                continue
            idx, typ, kind, reader = step
            use_minmax = reader is not None and (kind != _STR or trust_strings)
            nulls: int | None = 0
            lo: Any = None
            hi: Any = None
            for group in groups:
                rows = group.num_rows
                if rows == 0:
                    continue
                st = group.column(idx).statistics
                if st is None:
                    nulls, use_minmax = None, False
                    break
                group_nulls = st.null_count if st.has_null_count else None
                if nulls is not None:
                    nulls = None if group_nulls is None else nulls + group_nulls
                if not use_minmax:
                    continue
                if not st.has_min_max:
                    if group_nulls != rows:
                        use_minmax = False
                    continue
                try:
                    mn, mx = reader(st)
                except (ValueError, TypeError, OverflowError):
                    use_minmax = False
                    continue
                if lo is None or mn < lo:
                    lo = mn
                if hi is None or mx > hi:
                    hi = mx
            entry: dict[str, Any] = {}
            if nulls is not None:
                entry["null_count"] = nulls
            if use_minmax and lo is not None:
                try:
                    emin, emax = encode_value(lo, typ), encode_value(hi, typ)
                except (ValueError, TypeError):
                    pass
                else:
                    entry["min"], entry["max"] = emin, emax
            if entry:
                out[name] = entry
        return out


def _differing_stats(
    metadata: pq.FileMetaData, schema: pa.Schema, recorded: dict[str, dict[str, Any]], footer_stats: FooterStats
) -> list[str]:
    wanted = {c: s for c, s in recorded.items() if schema.get_field_index(c) >= 0}
    if not wanted:
        return []
    found = footer_stats(metadata, list(wanted))
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
    context = _Context(manifest, schema)
    done = 0
    lock = Lock()

    def check(entry: FileEntry) -> list[VerifyProblem]:
        nonlocal done
        found = _check_part(store, key, manifest, schema, entry, listed, context)
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
