"""``DatasetManifest``: the committed state of a dataset (Spec 042 PDS-004).

The JSON holds every Spec 042 field with its Spec type, so a Spec-only reader
reads our manifests, plus extension keys (``format_version``, ``version``,
``files``, ``arrow_schema``) that a Spec-only manifest may lack: they all have
defaults, and a manifest built from the Spec fields alone serializes to the
Spec fields alone.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ManifestCorrupted
from ..storage.base import Store, validate_key
from .format.manifest_json import known_finite, render_manifest, unsafe_paths
from .format.schema import decode_schema
from .format.segments import SegmentRef, all_live, entries_table, live_rows, segment_refs, segments_table

try:  # the ``fast`` extra: several times faster on large manifests
    import orjson

    _fast_loads: Callable[[str | bytes], Any] | None = orjson.loads
except ImportError:  # pragma: no cover - depends on install
    _fast_loads = None

_DICT_ONLY = frozenset([dict])
_STR_ONLY = frozenset([str])
_new = object.__new__

#: Version of this package's manifest extensions; 0 means "Spec 042 fields only", 1 per-file entries
#: in the manifest (``files``), 2 per-file entries in segment files (``segments``, see ``docs/format.md``).
FORMAT_VERSION = 2
SEGMENTED_FORMAT = 2
#: Format 3: a format-2 version with more than :data:`PARTS_IN_ROOT` parts. Its root leaves ``parts`` out
#: (``part_count`` says how many): every row of its segments, then its inline ``files``, is a live part,
#: in order. A Spec 042 reader refuses it (``parts`` is a required field) instead of reading a partial list.
ROOTLESS_FORMAT = 3
#: Most parts a root lists itself (``parts``, for Spec 042 readers). Past it the root's size, parsed by
#: every plan and rewritten by every commit, would grow with the table (27 MB at a million parts).
PARTS_IN_ROOT = 100_000
#: Cached derived values of a manifest, dropped by :meth:`DatasetManifest.evolve` when what they derive from changes.
_DERIVED = ("_resolved", "_table", "_parts_loaded")

_SPEC_FIELDS: dict[str, type | tuple[type, ...]] = {
    "dataset_key": str,
    "parts": list,
    "row_count": int,
    "schema_hash": str,
    "compression": str,
    "created_at_utc": str,
}


def schema_hash(schema: pa.Schema) -> str:
    """First 16 hex characters of SHA-256 of ``schema.to_string()`` (PDS-004)."""
    return hashlib.sha256(schema.to_string().encode("utf-8")).hexdigest()[:16]


def encode_schema(schema: pa.Schema) -> str:
    """The Arrow IPC serialization of ``schema``, base64-encoded."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


@dataclass(frozen=True)
class FileEntry:
    """One data file of a dataset version.

    Attributes:
        path: path relative to the dataset key.
        row_count: rows in the file (``None`` if unknown, Spec-only manifests).
        size_bytes: the file's size in bytes (``None`` if unknown).
        partition_values: for a partitioned dataset, the file's value of each
            partition column, in the column type's canonical JSON form
            (``None`` for a null value); the file itself does not hold them.
        stats: per-column ``{"min", "max", "null_count"}`` from the Parquet
            writer's metadata, canonical JSON form; absent keys mean unknown.
        missing_columns: dataset columns added after this file was written; a
            read fills them with nulls.
        content_hash: ``"<algorithm>:<hex>"`` hash of the file's bytes before its footer,
            computed while it was written (``None``: not recorded, e.g. Spec-only manifests).
    """

    path: str
    row_count: int | None = None
    size_bytes: int | None = None
    partition_values: dict[str, Any] | None = None
    stats: dict[str, dict[str, Any]] | None = None
    missing_columns: tuple[str, ...] = ()
    content_hash: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "row_count": self.row_count, "size_bytes": self.size_bytes}
        if self.partition_values is not None:
            out["partition_values"] = self.partition_values
        if self.stats is not None:
            out["stats"] = self.stats
        if self.missing_columns:
            out["missing_columns"] = list(self.missing_columns)
        if self.content_hash is not None:
            out["content_hash"] = self.content_hash
        return out

    @classmethod
    def from_dict(cls, raw: Any) -> FileEntry:
        if not isinstance(raw, dict) or not isinstance(raw.get("path"), str):
            raise ManifestCorrupted(
                f"manifest file entry {raw!r} is not an object with a 'path' string",
                reason="bad file entry",
            )
        rows, size = raw.get("row_count"), raw.get("size_bytes")
        for name, value in (("row_count", rows), ("size_bytes", size)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ManifestCorrupted(
                    f"manifest file entry {raw['path']!r} has a bad {name}: {value!r}",
                    reason=f"bad {name}",
                )
        partition_values = raw.get("partition_values")
        if partition_values is not None and not isinstance(partition_values, dict):
            raise ManifestCorrupted(
                f"file entry {raw['path']!r}: partition_values is not an object", reason="bad partition_values"
            )
        stats = raw.get("stats")
        if stats is not None and (not isinstance(stats, dict) or not all(isinstance(v, dict) for v in stats.values())):
            raise ManifestCorrupted(
                f"file entry {raw['path']!r}: stats is not an object of objects", reason="bad stats"
            )
        missing = raw.get("missing_columns") or []
        if not isinstance(missing, list) or not all(isinstance(c, str) for c in missing):
            raise ManifestCorrupted(
                f"file entry {raw['path']!r}: missing_columns is not a list of names", reason="bad missing_columns"
            )
        content_hash = raw.get("content_hash")
        if content_hash is not None and not isinstance(content_hash, str):
            raise ManifestCorrupted(
                f"file entry {raw['path']!r}: content_hash is not a string", reason="bad content_hash"
            )
        return cls(raw["path"], rows, size, partition_values, stats, tuple(missing), content_hash)


def _file_entries(raw_files: list[Any], *, finite: bool = False) -> tuple[FileEntry, ...]:
    """``FileEntry.from_dict`` of each entry, with the checks inlined for speed (10,000-file
    manifests): an entry that fails them goes through ``from_dict``, which names the problem.
    ``finite``: every float in them is finite (noted as ``_finite``: rendering them again skips the check)."""
    out: list[FileEntry] = []
    append = out.append
    for raw in raw_files:
        if type(raw) is not dict:
            append(FileEntry.from_dict(raw))
            continue
        get = raw.get
        path, rows, size = get("path"), get("row_count"), get("size_bytes")
        values, stats, missing = get("partition_values"), get("stats"), get("missing_columns")
        content_hash = get("content_hash")
        if (
            type(path) is not str
            or (rows is not None and (type(rows) is not int or rows < 0))
            or (size is not None and (type(size) is not int or size < 0))
            or (values is not None and type(values) is not dict)
            or (stats is not None and (type(stats) is not dict or not set(map(type, stats.values())) <= _DICT_ONLY))
            or (missing and (type(missing) is not list or not set(map(type, missing)) <= _STR_ONLY))
            or (content_hash is not None and type(content_hash) is not str)
        ):
            append(FileEntry.from_dict(raw))
            continue
        entry = _new(FileEntry)
        entry.__dict__.update(
            path=path,
            row_count=rows,
            size_bytes=size,
            partition_values=values,
            stats=stats,
            missing_columns=tuple(missing) if missing else (),
            content_hash=content_hash,
            _finite=finite,
        )
        append(entry)
    return tuple(out)


def _idempotency(raw: Any) -> tuple[tuple[str, str, str], ...]:
    """The ``idempotency`` window: a list of ``{"key", "content", "txn"}`` string objects.

    Raises:
        ManifestCorrupted: it is not.
    """
    fields = ("key", "content", "txn")
    if not isinstance(raw, list) or not all(
        isinstance(e, dict) and all(isinstance(e.get(f), str) for f in fields) for e in raw
    ):
        raise ManifestCorrupted(
            "manifest 'idempotency' should be a list of {key, content, txn} strings", reason="bad idempotency"
        )
    return tuple((e["key"], e["content"], e["txn"]) for e in raw)


def _loads(text: str | bytes) -> Any:
    """Parse JSON with orjson when installed, else (or where orjson refuses, e.g. ``NaN``
    literals or integers beyond 64 bits) with :mod:`json`.

    Raises:
        ValueError / UnicodeDecodeError: the text is not JSON (the :mod:`json` message).
    """
    return _parse(text)[0]


def _parse(text: str | bytes) -> tuple[Any, bool]:
    """:func:`_loads`, and whether orjson parsed it: then every float in it is finite (orjson refuses
    ``NaN``, infinities and numbers that overflow to one). Raises what :func:`_loads` raises."""
    if _fast_loads is not None:
        try:
            return _fast_loads(text), True
        except ValueError:
            pass  # json.loads decides, and gives its own message
    return json.loads(text), False


@dataclass(frozen=True)
class DatasetManifest:
    """Canonical manifest of one committed dataset version (Spec 042 PDS-004).

    The first eight fields are Spec 042's; the rest are this package's
    extensions and default to what a Spec-only manifest implies.
    """

    dataset_key: str
    parts: list[str]
    row_count: int
    schema_hash: str
    compression: str
    created_at_utc: str
    run_id: str | None = None
    metadata: dict[str, str] | None = None
    format_version: int = 0
    version: int = 1
    files: tuple[FileEntry, ...] = field(default_factory=tuple)
    arrow_schema: str | None = None
    obsolete: tuple[str, ...] = ()
    """Files no retained version uses any more. The commit that wrote this
    manifest deletes them right after committing; if it crashed first, the
    next commit deletes them, so no file is orphaned."""
    partition_by: tuple[str, ...] = ()
    """Columns the data is partitioned by (``col=value/`` folders)."""
    operation: str | None = None
    """What made this version: ``write``, ``overwrite``, ``append``, ``merge`` or ``compact``."""
    txn: str | None = None
    """The token of the write that committed this version (unique per write)."""
    txns: tuple[str, ...] = ()
    """Tokens of the writes that committed this version and the ones before it,
    newest first (a bounded window). A writer whose commit response was lost
    finds its token here and knows its commit landed, even if other writers
    committed on top meanwhile."""
    idempotency: tuple[tuple[str, str, str], ...] = ()
    """``(idempotency key, content hash, write token)`` of the recent commits made with an
    idempotency key, newest first (a bounded window carried by every commit): a retried
    write that finds its key with the same content hash here was already committed."""
    segments: tuple[SegmentRef, ...] = ()
    """Format 2: the segment files that hold the entries of ``parts`` (``files`` is loaded from them
    on first use)."""
    added: tuple[FileEntry, ...] = field(default=(), compare=False, repr=False)
    """Format 2: entries on top of ``segments`` held in the root itself (its ``files`` key, at most
    ``format.segments.fits_inline``'s budget). An operation that only adds files builds its manifest with the
    live ``segments`` and ``added`` = the live inline entries plus its own, without loading ``files``;
    the commit moves them into a new segment when there are too many."""

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the caches derived from the segments (a worker loads them again if it needs them)."""
        return {k: v for k, v in self.__dict__.items() if k not in _DERIVED and k not in ("_adds_to", "_read_as")}

    def bind(self, store: Store, key: str) -> DatasetManifest:
        """Note where this manifest was read from (its segments are loaded from there); returns ``self``."""
        self.__dict__["_source"] = (store, key)
        return self

    def remember_bytes(self, data: bytes) -> DatasetManifest:
        """Note that ``data`` are this manifest's stored bytes (its ``manifest.json`` as read, to the byte);
        returns ``self``. :meth:`read_as` gives them back; :meth:`evolve` forgets them."""
        self.__dict__["_read_as"] = data
        return self

    def read_as(self) -> bytes | None:
        """The stored bytes this manifest was parsed from (see :meth:`remember_bytes`), ``None`` if not known."""
        return self.__dict__.get("_read_as")

    def evolve(self, **changes: Any) -> DatasetManifest:
        """``dataclasses.replace`` that does not load ``files`` (and keeps the store binding)."""
        made = _new(type(self))
        made.__dict__.update(self.__dict__)
        made.__dict__.pop("_read_as", None)  # a changed manifest is not the bytes that were read
        if {"parts", "segments", "added", "files"} & changes.keys():
            for name in _DERIVED:
                made.__dict__.pop(name, None)
        if "arrow_schema" in changes:
            made.__dict__.pop("schema", None)
        if "files" in changes:
            made.__dict__["_files"] = tuple(changes.pop("files"))
        if "parts" in changes:
            parts = changes.pop("parts")
            made.__dict__["_parts"] = None if parts is None else list(parts)
        if "part_count" in changes:
            made.__dict__["_part_count"] = changes.pop("part_count")
        made.__dict__.update(changes)
        return made

    def part_count(self) -> int:
        """How many parts this version has, without loading them (format 3 records it in the root)."""
        parts = self.__dict__.get("_parts")
        return len(parts) if parts is not None else self.__dict__.get("_part_count", 0)

    def parts_listed(self) -> bool:
        """Whether ``parts`` is at hand (``False``: a format-3 version whose parts are in its segments,
        loaded on first use of ``parts``)."""
        return self.__dict__.get("_parts") is not None

    def version_of(self, txn: str) -> int | None:
        """The version the commit with write token ``txn`` made, if it is this one or one it was built on.

        Each commit's version is one above the version it replaced, and its ``txns`` window puts its
        own token before those of the versions below it; so the token at place ``i`` of ``txns`` made
        version ``version - i``. ``None`` when ``txn`` is not in the window (too old, or the lineage
        was broken by a delete or a repair). A recognised exactly-once retry returns the live manifest;
        this says which version the earlier attempt committed.
        """
        if not self.txns or self.txns[0] != self.txn or txn not in self.txns:
            return None
        version = self.version - self.txns.index(txn)
        return version if version >= 1 else None

    def referenced(self) -> list[str]:
        """Every file of the dataset folder this version needs: its parts and its segments."""
        return [*self.parts, *(s.path for s in self.segments)]

    def entry_table(self) -> pa.Table:
        """The entries of ``parts`` as a segment table (``format.segments.ENTRY_COLUMNS`` plus pruning
        columns), in the order of ``parts``; loaded once.

        Raises:
            ManifestCorrupted: a segment is missing, truncated or corrupt, or lacks a part's entry.
        """
        table = self.__dict__.get("_table")
        if table is not None:
            return table
        files = self.__dict__.get("_files", ())
        if files or not (self.segments or self.added):
            table = entries_table(self.file_entries(), self.schema)
        else:
            source = self.__dict__.get("_source")
            if source is None and self.segments:
                raise ManifestCorrupted(
                    f"the manifest of {self.dataset_key!r} was parsed without its store, so its segments "
                    "cannot be loaded; read it through ParquetDatasetStore",
                    reason="unbound manifest",
                )
            store, key = source if source is not None else (None, self.dataset_key)
            extra = entries_table(self.added, self.schema) if self.added else None
            table = segments_table(store, key, self.segments, extra)  # type: ignore[arg-type]
            if self.parts_listed():
                table = live_rows(table, self.parts, key)
            else:
                table = all_live(table, self.part_count(), key)
            counts = table.column("row_count")
            total = pc.sum(counts).as_py() or 0
            if counts.null_count == 0 and total != self.row_count:
                raise ManifestCorrupted(
                    f"manifest row_count {self.row_count} differs from the sum over its segments' entries {total}",
                    reason="row_count mismatch",
                )
        self.__dict__["_table"] = table
        return table

    @cached_property
    def schema(self) -> pa.Schema | None:
        """The Arrow schema that was written, or ``None`` if the manifest lacks it (decoded once)."""
        if self.arrow_schema is None:
            return None
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(self.arrow_schema)))

    def file_entries(self) -> tuple[FileEntry, ...]:
        """One entry per part, with ``None`` for whatever the manifest does not record."""
        return self.files if self.files else tuple(FileEntry(p) for p in self.parts)

    def to_dict(self) -> dict[str, Any]:
        rootless = self.format_version >= ROOTLESS_FORMAT
        out: dict[str, Any] = {
            "dataset_key": self.dataset_key,
            **({"part_count": self.part_count()} if rootless else {"parts": list(self.parts)}),
            "row_count": self.row_count,
            "schema_hash": self.schema_hash,
            "compression": self.compression,
            "created_at_utc": self.created_at_utc,
            "run_id": self.run_id,
            "metadata": dict(self.metadata) if self.metadata is not None else None,
        }
        if self.format_version >= 1:
            out["format_version"] = self.format_version
            out["version"] = self.version
            if self.format_version >= SEGMENTED_FORMAT:
                out["segments"] = [s.to_dict() for s in self.segments]
                inline = self.added if self.segments or self.added else self.files
                out["files"] = [f.to_dict() for f in inline]
            else:
                out["files"] = [f.to_dict() for f in self.files]
            out["arrow_schema"] = self.arrow_schema
            out["obsolete"] = list(self.obsolete)
            out["partition_by"] = list(self.partition_by)
            out["operation"] = self.operation
            if self.txn is not None:
                out["txn"] = self.txn
                out["txns"] = list(self.txns)
            if self.idempotency:
                out["idempotency"] = [{"key": k, "content": c, "txn": t} for k, c, t in self.idempotency]
        return out

    def to_json(self) -> str:
        """Canonical JSON: sorted keys, 2-space indent; byte for byte ``json.dumps(..., sort_keys=True,
        indent=2, ensure_ascii=False)``, with a long ``parts`` list rendered by orjson (``render_manifest``)."""
        if self.format_version < SEGMENTED_FORMAT or not (self.segments or self.added):
            inline = self.files if self.format_version >= 1 else ()
        else:
            inline = self.added
        return render_manifest(self.to_dict(), checked=("files",) if known_finite(inline) else ())

    @classmethod
    def from_json(cls, text: str | bytes, store: Store | None = None, key: str | None = None) -> DatasetManifest:
        """Parse and validate a manifest (read from ``store`` at dataset ``key``, where its segments are).

        Raises:
            ManifestCorrupted: not JSON, a Spec field is missing or of the wrong
                type, a part path is unsafe or listed twice, or the extensions
                contradict the Spec fields. ``reason`` names the failure.
        """
        try:
            raw, finite = _parse(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ManifestCorrupted(f"manifest is not valid JSON: {exc}", reason="invalid JSON") from None
        if not isinstance(raw, dict):
            raise ManifestCorrupted("manifest is not a JSON object", reason="not an object")
        made = cls.from_dict(raw, finite=finite)
        return made.bind(store, key) if store is not None and key is not None else made

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, finite: bool = False) -> DatasetManifest:
        """Build a manifest from parsed JSON (``finite``: every float in ``raw`` is known to be finite, so
        its entries need no check when rendered again); see :meth:`from_json` for errors."""
        rootless = _rootless(raw)
        for name, typ in _SPEC_FIELDS.items():
            if rootless and name == "parts":
                continue
            if name not in raw:
                raise ManifestCorrupted(f"manifest lacks the required field {name!r}", reason=f"missing {name}")
            value = raw[name]
            if not isinstance(value, typ) or isinstance(value, bool):
                raise ManifestCorrupted(
                    f"manifest field {name!r} should be {typ.__name__ if isinstance(typ, type) else typ}, "
                    f"got {type(value).__name__}",
                    reason=f"bad {name}",
                )
        parts = [] if rootless else raw["parts"]
        try:
            joined = "\n".join(parts)
            unique = set(parts)
            unsafe = unsafe_paths(joined, unique)
        except TypeError:  # a part that is not a string
            unsafe, unique = True, set()
        for part in parts if unsafe else ():
            if not isinstance(part, str):
                raise ManifestCorrupted(f"manifest part {part!r} is not a string", reason="bad parts")
            try:
                validate_key(part, what="part path")
            except ValueError as exc:
                raise ManifestCorrupted(f"manifest lists an unsafe part: {exc}", reason="unsafe part") from None
        if len(unique) != len(parts):  # every part is a string here, so ``unique`` holds them all
            repeated = sorted(p for p, n in Counter(parts).items() if n > 1)
            raise ManifestCorrupted(
                f"manifest lists the part(s) {repeated} more than once; their rows would be read twice",
                reason="duplicate part",
            )
        if raw["row_count"] < 0:
            raise ManifestCorrupted("manifest row_count is negative", reason="bad row_count")
        run_id = raw.get("run_id")
        if run_id is not None and not isinstance(run_id, str):
            raise ManifestCorrupted("manifest run_id should be a string or null", reason="bad run_id")
        metadata = raw.get("metadata")
        if metadata is not None and (
            not isinstance(metadata, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
        ):
            raise ManifestCorrupted("manifest metadata should map strings to strings", reason="bad metadata")

        format_version = raw.get("format_version", 0)
        version = raw.get("version", 1)
        for name, value in (("format_version", format_version), ("version", version)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ManifestCorrupted(f"manifest {name} should be a non-negative int", reason=f"bad {name}")
        raw_files = raw.get("files") or []
        if not isinstance(raw_files, list):
            raise ManifestCorrupted("manifest 'files' should be a list", reason="bad files")
        files = _file_entries(raw_files, finite=finite)
        count = raw["part_count"] if rootless else len(parts)
        segments = segment_refs(raw.get("segments"), count, len(files)) if format_version >= SEGMENTED_FORMAT else ()
        inline = files if format_version >= SEGMENTED_FORMAT else ()
        if inline:
            files = ()
        if files or (inline and not segments and not rootless):  # format 3 lists no parts to compare
            files = files or inline
            if [f.path for f in files] != parts:
                raise ManifestCorrupted(
                    "manifest 'files' and 'parts' list different paths", reason="files/parts mismatch"
                )
            counts = [f.row_count for f in files]
            if all(c is not None for c in counts) and sum(counts) != raw["row_count"]:  # type: ignore[arg-type]
                raise ManifestCorrupted(
                    f"manifest row_count {raw['row_count']} differs from the sum over its files {sum(counts)}",  # type: ignore[arg-type]
                    reason="row_count mismatch",
                )
        obsolete = raw.get("obsolete") or []
        if not isinstance(obsolete, list) or not all(isinstance(p, str) for p in obsolete):
            raise ManifestCorrupted("manifest 'obsolete' should be a list of paths", reason="bad obsolete")
        for path in obsolete:
            try:
                validate_key(path, what="obsolete path")
            except ValueError as exc:
                raise ManifestCorrupted(
                    f"manifest lists an unsafe obsolete file: {exc}", reason="unsafe part"
                ) from None
        partition_by = raw.get("partition_by") or []
        if not isinstance(partition_by, list) or not all(isinstance(c, str) for c in partition_by):
            raise ManifestCorrupted(
                "manifest 'partition_by' should be a list of column names", reason="bad partition_by"
            )
        operation = raw.get("operation")
        if operation is not None and not isinstance(operation, str):
            raise ManifestCorrupted("manifest 'operation' should be a string", reason="bad operation")
        txn = raw.get("txn")
        txns = raw.get("txns") or []
        if (txn is not None and not isinstance(txn, str)) or (
            not isinstance(txns, list) or not all(isinstance(t, str) for t in txns)
        ):
            raise ManifestCorrupted("manifest 'txn'/'txns' should be a string and a list of strings", reason="bad txns")
        idempotency = _idempotency(raw.get("idempotency") or [])
        arrow_schema = raw.get("arrow_schema")
        decoded: pa.Schema | None = None
        if arrow_schema is not None:
            if not isinstance(arrow_schema, str):
                raise ManifestCorrupted("manifest arrow_schema should be a base64 string", reason="bad arrow_schema")
            try:
                decoded = decode_schema(arrow_schema)
            except Exception as exc:
                raise ManifestCorrupted(
                    f"manifest arrow_schema does not decode: {exc}", reason="bad arrow_schema"
                ) from None
        manifest = cls(
            dataset_key=raw["dataset_key"],
            parts=list(parts),
            row_count=raw["row_count"],
            schema_hash=raw["schema_hash"],
            compression=raw["compression"],
            created_at_utc=raw["created_at_utc"],
            run_id=run_id,
            metadata=dict(metadata) if metadata is not None else None,
            format_version=format_version,
            version=version,
            files=files,
            arrow_schema=arrow_schema,
            obsolete=tuple(obsolete),
            partition_by=tuple(partition_by),
            operation=operation,
            txn=txn,
            txns=tuple(txns),
            idempotency=idempotency,
            segments=segments,
            added=inline,
        )
        if decoded is not None:
            manifest.__dict__["schema"] = decoded  # the cached_property's slot: decoded once, while validating
        if rootless:
            if len({f.path for f in inline}) != len(inline):
                raise ManifestCorrupted("manifest 'files' lists a path twice", reason="duplicate part")
            manifest.__dict__["_parts"] = None
            manifest.__dict__["_part_count"] = raw["part_count"]
        return manifest


def _rootless(raw: dict[str, Any]) -> bool:
    """Whether ``raw`` is a format-3 root (no ``parts``; ``part_count`` instead).

    Raises:
        ManifestCorrupted: a format-3 root without a ``part_count`` int, or that lists ``parts``.
    """
    version = raw.get("format_version")
    if type(version) is not int or version < ROOTLESS_FORMAT:
        return False
    count = raw.get("part_count")
    if type(count) is not int or count < 0 or "parts" in raw:
        raise ManifestCorrupted(
            "a format-3 manifest needs a non-negative 'part_count' and no 'parts'", reason="bad part_count"
        )
    return True


def table_entries(table: pa.Table) -> list[Any]:
    """The ``FileEntry`` objects of a segment table's rows, validated like a JSON manifest's.

    Raises:
        ManifestCorrupted: a row does not make a valid entry.
    """

    def decoded(name: str) -> list[Any]:
        texts = table.column(name).to_pylist()
        present = [t for t in texts if t is not None]
        if not present:
            return texts
        try:
            values = iter(_loads("[" + ",".join(present) + "]"))
        except ValueError as exc:
            raise ManifestCorrupted(
                f"segment column {name!r} holds invalid JSON: {exc}", reason="bad segment"
            ) from None
        return [None if t is None else next(values) for t in texts]

    hashes = table.column("content_hash").to_pylist() if "content_hash" in table.column_names else None
    raw = [
        {"path": p, "row_count": r, "size_bytes": s, "partition_values": v, "stats": st, "missing_columns": m}
        for p, r, s, v, st, m in zip(
            table.column("path").to_pylist(),
            table.column("row_count").to_pylist(),
            table.column("size_bytes").to_pylist(),
            decoded("partition_values"),
            decoded("stats"),
            table.column("missing_columns").to_pylist(),
            strict=True,
        )
    ]
    if hashes is not None:
        for entry, content_hash in zip(raw, hashes, strict=True):
            if content_hash is not None:
                entry["content_hash"] = content_hash
    return list(_file_entries(raw))


class _Files:
    """``DatasetManifest.files``: as given, or (format 2) loaded from the segments on first use."""

    def __get__(self, obj: DatasetManifest | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        d = obj.__dict__
        files = d.get("_files", ())
        if files or not (obj.segments or obj.added):
            return files
        resolved = d.get("_resolved")
        if resolved is None:
            if obj.segments:
                resolved = tuple(table_entries(obj.entry_table()))
            else:
                by_path = {e.path: e for e in obj.added}
                missing = [p for p in obj.parts if p not in by_path]
                if missing:
                    raise ManifestCorrupted(f"manifest part {missing[0]!r} has no entry", reason="missing entry")
                resolved = tuple(by_path[p] for p in obj.parts)
            d["_resolved"] = resolved
        return resolved

    def __set__(self, obj: DatasetManifest, value: tuple[FileEntry, ...]) -> None:
        obj.__dict__["_files"] = tuple(value)


class _Parts:
    """``DatasetManifest.parts``: as given, or (format 3) the paths of the segments' rows, loaded on first use."""

    def __get__(self, obj: DatasetManifest | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        d = obj.__dict__
        parts = d.get("_parts")
        if parts is not None:
            return parts
        loaded = d.get("_parts_loaded")
        if loaded is None:
            loaded = d["_parts_loaded"] = (
                obj.entry_table().column("path").to_pylist() if obj.segments else [e.path for e in obj.added]
            )
        return loaded

    def __set__(self, obj: DatasetManifest, value: list[str] | None) -> None:
        obj.__dict__["_parts"] = value


DatasetManifest.files = _Files()  # type: ignore[assignment]
DatasetManifest.parts = _Parts()  # type: ignore[assignment]
