"""The one check of a part's file against its manifest entry (reads, scans, verify and Spark use it).

A part is what the manifest says it is when the file exists, has the recorded
size, and its footer (never a data page) records the manifest's row count, a
schema the manifest's schema reads, its own path (parts our writer tagged) and
the statistics the manifest recorded. :meth:`PartCheck.problems` lists every
way a part differs; readers raise the first (:meth:`PartCheck.raise_for`),
``verify_dataset`` reports them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import DatasetIncomplete, NotFound
from ...storage.base import Store
from ..format.schema import file_schema_matches
from ..format.stats import FooterStats
from ..manifest import DatasetManifest, FileEntry, schema_hash
from .encode import PART_PATH_KEY

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
    "partition": "a part's col=value folders disagree with the partition values its entry records",
}

_TAG = PART_PATH_KEY.encode("utf-8")
#: Distinct Parquet schemas whose answers one check remembers.
_MEMO = 16


class PartsVanished(Exception):
    """Parts listed in the manifest are missing or unreadable; the manifest may have moved on.

    The message is ``detail`` (which names each part once), else the parts' names.
    """

    def __init__(self, missing: list[str], detail: str = "") -> None:
        super().__init__(detail or ", ".join(missing))
        self.missing = missing


@dataclass(frozen=True)
class VerifyProblem:
    """One thing wrong with a dataset.

    Attributes:
        path: the part's path relative to the dataset key (``manifest.json``
            for a problem with the manifest itself).
        kind: one of :data:`PROBLEM_KINDS`: ``"manifest"``, ``"missing"``,
            ``"size"``, ``"footer"``, ``"rows"``, ``"schema"``,
            ``"statistics"``, ``"path"``, ``"partition"``.
        message: one line that says what is wrong, with the expected and found values.
    """

    path: str
    kind: str
    message: str


def expected_file_schema(schema: pa.Schema, partition_by: Sequence[str], entry: FileEntry) -> pa.Schema:
    """The columns ``entry``'s file itself holds: not the partition columns, not columns added after it."""
    skip = set(partition_by) | set(entry.missing_columns)
    return pa.schema([f for f in schema if f.name not in skip], metadata=schema.metadata)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


class PartCheck:
    """Checks parts of one dataset version against their manifest entries.

    Build it once per read or verification (:meth:`of`) and share it: what
    depends only on a footer's Parquet schema (whether it reads as the
    manifest's schema, where each column's statistics are) is worked out once
    per distinct schema. Safe to use from several threads and to pickle (the
    memo is not pickled).

    Attributes:
        dataset_key: the dataset, named in messages.
        schema: the manifest's schema, or ``None`` for a manifest that records
            only a schema hash (then the footer's schema must have that hash).
        schema_hash: the manifest's schema hash.
        partition_by: the partition columns (not stored in the files).
    """

    def __init__(
        self, dataset_key: str, *, schema: pa.Schema | None, schema_hash: str | None, partition_by: Sequence[str] = ()
    ) -> None:
        self.dataset_key = dataset_key
        self.schema = schema
        self.schema_hash = schema_hash
        self.partition_by = tuple(partition_by)
        self._reset()

    @classmethod
    def of(cls, dataset_key: str, manifest: DatasetManifest) -> PartCheck:
        """The check for the parts of ``manifest``.

        Raises:
            Whatever decoding the manifest's schema raises (a corrupt schema).
        """
        schema = manifest.schema if manifest.arrow_schema is not None else None
        return cls(dataset_key, schema=schema, schema_hash=manifest.schema_hash, partition_by=manifest.partition_by)

    def _reset(self) -> None:
        self._expected: dict[tuple[str, ...], pa.Schema] = {}
        self._matches: dict[tuple[str, ...], list[tuple[pq.ParquetSchema, bytes | None, bool]]] = {}
        self._stats = FooterStats(self.schema) if self.schema is not None else None

    def __getstate__(self) -> dict[str, Any]:
        keep = ("dataset_key", "schema", "schema_hash", "partition_by")
        return {name: self.__dict__[name] for name in keep}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset()

    def expected_schema(self, entry: FileEntry) -> pa.Schema | None:
        """The schema ``entry``'s file must have (``None`` when the manifest records only a hash)."""
        if self.schema is None:
            return None
        found = self._expected.get(entry.missing_columns)
        if found is None:
            found = expected_file_schema(self.schema, self.partition_by, entry)
            self._expected[entry.missing_columns] = found
        return found

    def _schema_matches(self, footer: pq.ParquetFile, key_values: dict[bytes, bytes], entry: FileEntry) -> bool:
        """``file_schema_matches(footer.schema_arrow, expected)``, remembered per distinct footer schema.

        The Arrow schema a footer reads as is a function of its Parquet schema and
        its stored ``ARROW:schema``, so files that share both share the answer.
        """
        stored = key_values.get(b"ARROW:schema")
        seen = self._matches.setdefault(entry.missing_columns, [])
        pschema = footer.metadata.schema
        for known, known_stored, answer in seen:
            if known_stored == stored and known.equals(pschema):
                return answer
        expected = self.expected_schema(entry)
        assert expected is not None
        answer = file_schema_matches(footer.schema_arrow, expected)
        if len(seen) < _MEMO:
            seen.append((pschema, stored, answer))
        return answer

    def footer_problems(self, entry: FileEntry, footer: pq.ParquetFile, size: int | None = None) -> list[VerifyProblem]:
        """What is wrong with the part whose (opened) footer is ``footer`` and whose size is ``size``.

        ``size`` ``None`` skips the size check (the store already checked it on open).
        """
        path = entry.path
        problems = [] if size is None else _size_problems(entry, size)
        metadata = footer.metadata
        key_values = metadata.metadata or {}
        if entry.row_count is not None and metadata.num_rows != entry.row_count:
            problems.append(
                VerifyProblem(
                    path,
                    "rows",
                    f"part {path!r} holds {metadata.num_rows} rows but the manifest records {entry.row_count}",
                )
            )
        expected = self.expected_schema(entry)
        if expected is not None:
            if not self._schema_matches(footer, key_values, entry):
                problems.append(
                    VerifyProblem(
                        path,
                        "schema",
                        f"part {path!r} has columns {_describe(footer.schema_arrow)}; the manifest's schema expects "
                        f"{_describe(expected)}",
                    )
                )
                expected = None  # statistics of other columns cannot be compared
        elif schema_hash(actual := footer.schema_arrow) != self.schema_hash:
            problems.append(
                VerifyProblem(
                    path,
                    "schema",
                    f"part {path!r} has a schema whose hash {schema_hash(actual)} differs from the manifest's "
                    f"{self.schema_hash}",
                )
            )
        tag = key_values.get(_TAG)
        if tag is not None and tag.decode("utf-8", "replace") != path:
            problems.append(
                VerifyProblem(
                    path,
                    "path",
                    f"the file at {path!r} was written as part {tag.decode('utf-8', 'replace')!r}: "
                    "parts were moved or swapped on storage",
                )
            )
        if expected is not None and entry.stats:
            differing = self._differing_stats(metadata, expected, entry.stats)
            if differing:
                problems.append(
                    VerifyProblem(
                        path,
                        "statistics",
                        f"part {path!r} has other statistics than the manifest records for " + ", ".join(differing),
                    )
                )
        return problems

    def _differing_stats(
        self, metadata: pq.FileMetaData, schema: pa.Schema, recorded: dict[str, dict[str, Any]]
    ) -> list[str]:
        wanted = [c for c in recorded if schema.get_field_index(c) >= 0]
        if not wanted:
            return []
        assert self._stats is not None
        found = self._stats(metadata, wanted)
        out = []
        for column in wanted:
            stats, have = recorded[column], found.get(column, {})
            keys = [k for k in ("min", "max", "null_count") if k in stats and k in have and stats[k] != have[k]]
            if keys:
                shown = "; ".join(f"{k} {have[k]!r} (manifest {stats[k]!r})" for k in keys)
                out.append(f"column {column!r}: {shown}")
        return out

    def problems(
        self, store: Store, entry: FileEntry, *, size: int | None = -1, footer: bool = True
    ) -> list[VerifyProblem]:
        """Everything wrong with ``entry``'s file on ``store``: existence, size and (with ``footer``) its footer.

        ``size`` is the file's size when the caller knows it (from a listing;
        ``None`` for a file the listing lacks); by default it is asked of the store.

        Raises:
            StoreError: the store fails other than by a missing file (no access, a dead endpoint).
        """
        path = f"{self.dataset_key}/{entry.path}"
        if size == -1:
            try:
                size = store.size(path)
            except NotFound:
                size = None
        if size is None:
            return [VerifyProblem(entry.path, "missing", f"part {entry.path!r} does not exist")]
        if not footer:
            return _size_problems(entry, size)
        try:
            with store.open_input(path, size=size) as source:
                parquet = pq.ParquetFile(source)
        except (NotFound, FileNotFoundError):
            return [VerifyProblem(entry.path, "missing", f"part {entry.path!r} disappeared while it was checked")]
        except (pa.ArrowException, OSError) as exc:
            return [*_size_problems(entry, size), _unreadable(entry, exc)]
        return self.footer_problems(entry, parquet, size)

    def raise_for(self, problems: Sequence[VerifyProblem]) -> None:
        """Raise for the first of ``problems`` (nothing when there are none).

        Raises:
            PartsVanished: parts are missing (every missing part named; the manifest may have moved on).
            DatasetIncomplete: otherwise; the message names the dataset and the part.
        """
        missing = [p for p in problems if p.kind == "missing"]
        if missing:
            raise PartsVanished([p.path for p in missing], "; ".join(p.message for p in missing))
        if problems:
            raise self._incomplete(problems[0])

    def _incomplete(self, problem: VerifyProblem) -> DatasetIncomplete:
        return DatasetIncomplete(f"dataset {self.dataset_key!r}: {problem.message}")

    def check(self, store: Store, entry: FileEntry) -> None:
        """Check ``entry``'s file: it exists with its size, and its footer agrees with the manifest.

        Raises:
            PartsVanished: the file is missing.
            DatasetIncomplete: it is truncated, unreadable, or disagrees with the manifest.
        """
        self.raise_for(self.problems(store, entry))

    def open(
        self, store: Store, entry: FileEntry, *, whole: bool = False, pre_buffer: bool = True
    ) -> tuple[pa.NativeFile, pq.ParquetFile]:
        """Open ``entry``'s file and check its footer (no data page read, unless ``whole`` fetches it all).

        The store checks the size the manifest records as it opens the file.
        ``pre_buffer=False`` for a reader that streams row group by row group.
        The caller closes the returned file.

        Raises:
            PartsVanished: the file is missing.
            DatasetIncomplete: it is truncated, unreadable, or disagrees with the manifest.
        """
        path = f"{self.dataset_key}/{entry.path}"
        try:
            if entry.size_bytes is None:
                store.size(path)  # the manifest records no size: check existence up front
            source = store.open_input(path, size=entry.size_bytes, whole=whole)
        except (NotFound, FileNotFoundError) as exc:
            raise PartsVanished([entry.path], str(exc)) from None
        except OSError as exc:
            raise self._incomplete(self._open_problem(store, entry, exc)) from None
        try:
            try:
                parquet = pq.ParquetFile(source, pre_buffer=pre_buffer)
            except FileNotFoundError as exc:
                raise PartsVanished([entry.path], str(exc)) from None
            except (pa.ArrowException, OSError) as exc:
                raise self._incomplete(_unreadable(entry, exc)) from None
            self.raise_for(self.footer_problems(entry, parquet))
        except BaseException:
            source.close()
            raise
        return source, parquet

    def _open_problem(self, store: Store, entry: FileEntry, exc: OSError) -> VerifyProblem:
        """What a store's refusal to open ``entry``'s file means: its size differs from the manifest's (the store's
        own message names the file again), or it cannot be read."""
        try:
            size = store.size(f"{self.dataset_key}/{entry.path}")
        except (NotFound, OSError):
            return _unreadable(entry, exc)
        problems = _size_problems(entry, size)
        return problems[0] if problems else _unreadable(entry, exc)


def _size_problems(entry: FileEntry, size: int) -> list[VerifyProblem]:
    if entry.size_bytes is None or size == entry.size_bytes:
        return []
    message = (
        f"part {entry.path!r} is {size} bytes; the manifest records {entry.size_bytes}: it is truncated or was replaced"
    )
    return [VerifyProblem(entry.path, "size", message)]


def _unreadable(entry: FileEntry, exc: BaseException) -> VerifyProblem:
    if isinstance(exc, OSError) and exc.filename and exc.strerror:
        exc = OSError(exc.strerror)  # the file's path is in the message already (as the part's name)
    return VerifyProblem(
        entry.path,
        "footer",
        f"part {entry.path!r} has no readable Parquet footer: it is truncated, was replaced, "
        f"or is not a Parquet file ({_one_line(exc)})",
    )


def _describe(schema: pa.Schema) -> str:
    return "(" + ", ".join(f"{f.name}: {f.type}" for f in schema) + ")"
