"""Segments (``format_version`` 2): immutable Parquet files holding a version's file entries.

The root ``manifest.json`` lists the version's parts (Spec 042) and the
segments that hold their entries; a part's entry is the *last* row with its
path over the segments in the order the root lists them. Rows whose path the
root does not list are dead (a later version removed or replaced the file).

A segment is written once by the commit that makes it, never modified, and
shared by every later version that lists it: an append writes one small
segment for its own files, so its metadata work is proportional to the change.
Trailing segments of similar size are merged into one (like the levels of a
log-structured merge tree), and all segments are consolidated into one when
dead rows outnumber live ones, so a version never has more than about
log2(files) segments. See ``docs/format.md`` for the byte-level format.
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...errors import ManifestCorrupted, NotFound
from ...storage.base import Store, validate_key
from ..expressions.segment_pruning import pruning_columns
from .layout import MANIFEST_NAME, SEGMENTS_DIR
from .manifest_json import fast_dumps

#: Trailing segments are merged while the one before the last holds at most this many times the last's rows.
_MERGE_RATIO = 2
MIN_DEAD = 64
#: Most entries in one segment: trailing segments merge only up to it, and a larger table is written in
#: several. A filter whose bounds select one segment then reads at most this many entries, whatever the
#: table's size (a million-file version lists about 61 full segments and a logarithmic tail).
SEGMENT_ROWS = 16_384
#: Bytes of entry JSON a root manifest holds itself (its ``files``) before they move into a segment:
#: a small dataset (about 150 files with statistics on 5 columns) stays one ``manifest.json``, so a read
#: needs no segment. Every commit renders, hashes and writes the inline entries again, so this budget
#: bounds what an append costs beyond its own files, whatever the dataset's size (issue 28: with
#: 256 KiB, the 1,000th successive one-file append took 1.9x as long as the first ones).
INLINE_BYTES = 64 * 1024
#: At most this many entries inline, however small (each becomes an object when the root is parsed).
INLINE_ENTRIES = 256

_ENTRY_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("row_count", pa.int64()),
        pa.field("size_bytes", pa.int64()),
        pa.field("partition_values", pa.string()),
        pa.field("stats", pa.string()),
        pa.field("missing_columns", pa.list_(pa.string())),
        pa.field("content_hash", pa.string()),
    ]
)
ENTRY_COLUMNS = tuple(_ENTRY_SCHEMA.names)


class SegmentGone(ManifestCorrupted):
    """A segment the manifest read earlier lists is missing because a later commit (or a delete) replaced
    that version and its files went: a lost race, so re-read the manifest (a reader) or build again on
    the new version (a writer). A segment missing while the live manifest still lists it is damage, a
    plain :class:`ManifestCorrupted`."""


@dataclass(frozen=True)
class SegmentRef:
    """One segment a root manifest lists.

    Attributes:
        path: relative to the dataset key (``_segments/<token>.parquet``).
        files: rows (file entries) in the segment, live or dead.
        rows: sum of the entries' ``row_count``.
        size_bytes: the segment file's size.
        sha256: hex SHA-256 of the segment file's bytes.
    """

    path: str
    files: int
    rows: int
    size_bytes: int
    sha256: str
    bounds: tuple[tuple[str, Any, Any], ...] = ()
    """``(column, min, max)`` over every entry of the segment, for its integer (and timestamp) and string
    pruning columns without an unknown bound: a filter opens only the segments whose range it may hit."""

    def to_dict(self) -> dict[str, Any]:
        out = {
            "path": self.path,
            "files": self.files,
            "rows": self.rows,
            "size_bytes": self.size_bytes,
            "sha256": self.sha256,
        }
        if self.bounds:
            out["min"] = {c: lo for c, lo, _hi in self.bounds}
            out["max"] = {c: hi for c, _lo, hi in self.bounds}
        return out

    @classmethod
    def from_dict(cls, raw: Any) -> SegmentRef:
        """Raises: ManifestCorrupted: not an object with the fields and types above."""
        ok = isinstance(raw, dict) and isinstance(raw.get("path"), str) and isinstance(raw.get("sha256"), str)
        ints = [raw.get(n) for n in ("files", "rows", "size_bytes")] if ok else []
        if not ok or not all(type(v) is int and v >= 0 for v in ints):
            raise ManifestCorrupted(f"manifest segment {raw!r} is malformed", reason="bad segments")
        check_segment_path(raw["path"])
        lows, highs = raw.get("min") or {}, raw.get("max") or {}
        if not (isinstance(lows, dict) and isinstance(highs, dict) and lows.keys() == highs.keys()) or not all(
            type(v) in (int, str) for v in (*lows.values(), *highs.values())
        ):
            raise ManifestCorrupted(f"manifest segment {raw['path']!r} has malformed bounds", reason="bad segments")
        bounds = tuple((c, lows[c], highs[c]) for c in lows)
        return cls(raw["path"], ints[0], ints[1], ints[2], raw["sha256"], bounds)


#: Pruning column types whose bounds a segment reference records (as JSON ints and strings).
_BOUND_TYPES = (pa.int64(), pa.string())


def segment_bounds(table: pa.Table) -> tuple[tuple[str, Any, Any], ...]:
    """``(column, min, max)`` of ``table``'s (a segment table's) integer and string pruning columns
    whose bounds are known for every row."""
    out = []
    for name in table.column_names:
        if not name.startswith("min:") or f"max:{name[4:]}" not in table.column_names:
            continue
        lows, highs = table.column(name), table.column(f"max:{name[4:]}")
        if lows.type not in _BOUND_TYPES or lows.type != highs.type or lows.null_count or highs.null_count:
            continue
        if table.num_rows:
            out.append((name[4:], pc.min(lows).as_py(), pc.max(highs).as_py()))
    return tuple(out)


def refs_might_match(refs: Sequence[SegmentRef], dnf: Any) -> list[bool]:
    """Per segment of ``refs``, whether it may hold an entry of a file matching ``dnf`` (by its
    ``bounds``; conservative: a segment without a column's bounds may)."""
    from ..expressions.segment_pruning import might_match_mask

    if not refs:
        return []
    columns: dict[str, tuple[pa.DataType, list[Any], list[Any]]] = {}
    for i, ref in enumerate(refs):
        for name, lo, hi in ref.bounds:
            typ = pa.int64() if type(lo) is int and type(hi) is int else pa.string()
            slot = columns.setdefault(name, (typ, [None] * len(refs), [None] * len(refs)))
            if slot[0] == typ:
                slot[1][i], slot[2][i] = lo, hi
    arrays: dict[str, pa.Array] = {"path": pa.array([r.path for r in refs])}
    for name, (typ, lows, highs) in columns.items():
        try:
            arrays[f"min:{name}"], arrays[f"max:{name}"] = pa.array(lows, typ), pa.array(highs, typ)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            continue
    mask = might_match_mask(pa.table(arrays), dnf)
    return [True] * len(refs) if mask is None else [bool(v) for v in mask.to_pylist()]


def segment_refs(listed: Any, parts: int, inline: int) -> tuple[SegmentRef, ...]:
    """The references of a root's ``segments`` (``listed``) for ``parts`` parts, ``inline`` entries in the root.

    Raises:
        ManifestCorrupted: malformed, or too few entries for the parts.
    """
    listed = listed or []
    if not isinstance(listed, list):
        raise ManifestCorrupted("manifest 'segments' should be a list", reason="bad segments")
    refs = tuple(SegmentRef.from_dict(s) for s in listed)
    if sum(r.files for r in refs) + inline < parts:
        raise ManifestCorrupted(
            f"manifest lists {parts} parts but its segments hold fewer entries", reason="missing entry"
        )
    return refs


def check_segment_path(path: str) -> None:
    """Raises ManifestCorrupted: ``path`` is not a safe key directly under ``_segments/`` (checked like a
    part's path: no empty, ``.`` or ``..`` name, no ``//``, trailing ``/`` or backslash)."""
    try:
        validate_key(path, what="manifest segment path")
    except ValueError as exc:
        raise ManifestCorrupted(f"manifest lists an unsafe segment path: {exc}", reason="bad segments") from None
    head, _sep, name = path.partition("/")
    if head != SEGMENTS_DIR or not name or "/" in name:
        raise ManifestCorrupted(
            f"manifest segment path {path!r} is not a file in {SEGMENTS_DIR}/", reason="bad segments"
        )


# ---------------------------------------------------------------------- tables <-> entries


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=True)


def entries_table(entries: Sequence[Any], schema: pa.Schema | None = None) -> pa.Table:
    """The segment table of ``entries`` (``FileEntry`` objects), with pruning columns for ``schema``."""
    columns = {
        "path": [e.path for e in entries],
        "row_count": [e.row_count for e in entries],
        "size_bytes": [e.size_bytes for e in entries],
        "partition_values": [_dumps(e.partition_values) for e in entries],
        "stats": [_dumps(e.stats) for e in entries],
        "missing_columns": [list(e.missing_columns) for e in entries],
        "content_hash": [e.content_hash for e in entries],
    }
    table = pa.table(columns, schema=_ENTRY_SCHEMA)
    if schema is not None:
        for name, array in pruning_columns(entries, schema).items():
            table = table.append_column(name, array)
    return table


def fits_inline(entries: Sequence[Any]) -> bool:
    """Whether ``entries`` (``FileEntry`` objects) may stay in the root's ``files``: at most
    ``INLINE_ENTRIES`` of them, whose compact JSON totals at most ``INLINE_BYTES``."""
    if len(entries) > INLINE_ENTRIES:
        return False
    if fast_dumps is not None:  # one C-speed pass (json.dumps per entry cost an append 20 ms at 500 entries)
        try:
            return len(fast_dumps([e.to_dict() for e in entries])) <= INLINE_BYTES
        except TypeError:  # orjson.JSONEncodeError: e.g. an integer beyond 64 bits
            pass
    total = 0
    for entry in entries:
        total += len(json.dumps(entry.to_dict(), ensure_ascii=False, allow_nan=True)) + 2
        if total > INLINE_BYTES:
            return False
    return True


# ---------------------------------------------------------------------- reading


_cache: weakref.WeakKeyDictionary[Any, dict[str, pa.Table]] = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()
#: Per store: the segments :func:`verify_segment` checked without decoding them.
_checked: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_CACHE_PER_STORE = 256


def _remember(store: Store, path: str, table: pa.Table) -> None:
    with _cache_lock:
        try:
            tables = _cache.setdefault(store, {})
        except TypeError:  # a store that cannot be weakly referenced: no cache
            return
        if len(tables) >= _CACHE_PER_STORE:
            tables.pop(next(iter(tables)))
        tables[path] = table


def load_segment(store: Store, key: str, ref: SegmentRef, *, cached: bool = True) -> pa.Table:
    """The verified table of segment ``ref`` (cached: segments never change).

    Raises:
        ManifestCorrupted: the segment is missing, its size or SHA-256 differ from the root's, or it is not
            a segment table; the message names the segment.
    """
    path = f"{key}/{ref.path}"
    if cached:
        with _cache_lock:
            hit = _cache.get(store, {}).get(path) if _weakable(store) else None
        if hit is not None:
            return hit
    data = _verified_bytes(store, key, ref)
    try:
        table = pq.read_table(pa.BufferReader(data), use_threads=False)
    except Exception as exc:
        raise ManifestCorrupted(
            f"dataset {key!r}: segment {ref.path!r} is not a readable Parquet file: {exc}", reason="corrupt segment"
        ) from None
    if not set(ENTRY_COLUMNS[:-1]) <= set(table.column_names) or table.num_rows != ref.files:
        raise ManifestCorrupted(
            f"dataset {key!r}: segment {ref.path!r} lacks the entry columns or holds {table.num_rows} rows, "
            f"not {ref.files}",
            reason="corrupt segment",
        )
    _remember(store, path, table)
    return table


def verify_segment(store: Store, key: str, ref: SegmentRef) -> None:
    """Check that segment ``ref`` is there with the size and SHA-256 the root records, once per store (segments
    never change; one decoded by :func:`load_segment` counts as checked). The bytes are not decoded: equal to
    the SHA-256 the committing writer recorded, they are the segment it wrote (a commit that only adds files
    checks the segments it inherits so, 10x cheaper than decoding them).

    Raises:
        ManifestCorrupted: the segment is missing (:class:`SegmentGone` when a later commit replaced the
            version that listed it), truncated or corrupt; the message names it.
    """
    path = f"{key}/{ref.path}"
    weakable = _weakable(store)
    if weakable:
        with _cache_lock:
            if path in _cache.get(store, {}) or path in _checked.get(store, ()):
                return
    _verified_bytes(store, key, ref)
    if weakable:
        with _cache_lock:
            checked = _checked.setdefault(store, set())
            if len(checked) >= _CACHE_PER_STORE:
                checked.clear()
            checked.add(path)


def _verified_bytes(store: Store, key: str, ref: SegmentRef) -> bytes:
    """Segment ``ref``'s bytes, checked against the size and SHA-256 the root records.

    Raises:
        SegmentGone: it is missing and the live root no longer lists it (a later commit replaced it).
        ManifestCorrupted: it is missing while listed, or truncated or corrupt.
    """
    try:
        data = store.read_bytes(f"{key}/{ref.path}")
    except NotFound:
        if not _live_lists(store, key, ref.path):
            raise SegmentGone(
                f"dataset {key!r}: segment {ref.path!r} went with the version that listed it (a later commit "
                "replaced it); read the manifest again",
                reason="segment gone",
            ) from None
        raise ManifestCorrupted(
            f"dataset {key!r}: segment {ref.path!r} that the manifest lists is missing", reason="missing segment"
        ) from None
    if len(data) != ref.size_bytes or hashlib.sha256(data).hexdigest() != ref.sha256:
        why = "truncated" if len(data) < ref.size_bytes else "corrupt"
        raise ManifestCorrupted(
            f"dataset {key!r}: segment {ref.path!r} is {why} ({len(data)} bytes, the manifest records "
            f"{ref.size_bytes} bytes and its SHA-256)",
            reason=f"{why} segment",
        )
    return data


def _live_lists(store: Store, key: str, relative: str) -> bool:
    """Whether the live root manifest of ``key`` lists the segment ``relative`` (an unreadable one counts as
    listing it: the damage is reported, not a race)."""
    try:
        raw = json.loads(store.read_bytes(f"{key}/{MANIFEST_NAME}"))
    except NotFound:
        return False  # deleted meanwhile
    except ValueError:
        return True
    if not isinstance(raw, dict):
        return True
    if raw.get("operation") == "delete":
        return False  # a delete's tombstone
    listed = raw.get("segments")
    return not isinstance(listed, list) or any(isinstance(s, dict) and s.get("path") == relative for s in listed)


def check_segments(store: Store, key: str, refs: Sequence[SegmentRef]) -> None:
    """Read every segment of ``refs`` from the store itself (not the cache) and check it.

    Raises:
        ManifestCorrupted: a segment is missing, truncated or corrupt (the message names it).
    """
    for ref in refs:
        load_segment(store, key, ref, cached=False)


def _weakable(store: Store) -> bool:
    try:
        weakref.ref(store)
    except TypeError:
        return False
    return True


def segments_table(store: Store, key: str, refs: Sequence[SegmentRef], extra: pa.Table | None = None) -> pa.Table:
    """All rows of ``refs`` (then ``extra``) in order, entry columns first; pruning columns whose
    types disagree between segments are left out."""
    tables = [load_segment(store, key, r) for r in refs]
    if extra is not None:
        tables.append(extra)
    if not tables:
        return _ENTRY_SCHEMA.empty_table()
    return _concat(tables)


def _concat(tables: Sequence[pa.Table]) -> pa.Table:
    """``tables`` one after the other; pruning columns whose types disagree are left out."""
    if len(tables) == 1:
        return tables[0]
    try:
        return pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        entry_only = [t.select([n for n in ENTRY_COLUMNS if n in t.column_names]) for t in tables]
        return pa.concat_tables(entry_only, promote_options="default")


def live_rows(table: pa.Table, parts: Sequence[str], key: str) -> pa.Table:
    """The rows of ``table`` that are the entries of ``parts``, in the order of ``parts``
    (the last row with a path wins).

    Raises:
        ManifestCorrupted: a part has no row.
    """
    if not parts:
        return table.slice(0, 0)
    n = table.num_rows
    wanted = pa.array(parts, pa.string())
    if n == len(parts) and table.column("path").combine_chunks().equals(wanted):
        return table  # the usual case: no dead rows, segments in the order of the parts
    reversed_rows = table.take(pa.array(np.arange(n - 1, -1, -1, dtype=np.int64))) if n > 1 else table
    index = pc.index_in(wanted, value_set=reversed_rows.column("path"))
    if index.null_count:
        missing = parts[pc.index(pc.is_null(index), True).as_py()]
        raise ManifestCorrupted(
            f"dataset {key!r}: part {missing!r} has no entry in the manifest's segments", reason="missing entry"
        )
    return reversed_rows.take(index)


def all_live(table: pa.Table, count: int, key: str) -> pa.Table:
    """``table`` (every row of a format-3 version's segments and inline entries), checked to hold
    ``count`` distinct paths.

    Raises:
        ManifestCorrupted: it holds another number of rows, or a path twice.
    """
    if table.num_rows != count or pc.count_distinct(table.column("path")).as_py() != count:
        raise ManifestCorrupted(
            f"dataset {key!r}: the manifest records {count} parts, its segments hold {table.num_rows} entries "
            "(or a path twice)",
            reason="missing entry",
        )
    return table


# ---------------------------------------------------------------------- writing


def write_segment(store: Store, key: str, relative: str, table: pa.Table) -> SegmentRef:
    """Write ``table`` as the segment ``relative`` (a new name) and return its reference."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", write_statistics=False)
    data = sink.getvalue().to_pybytes()
    store.write_bytes(f"{key}/{relative}", data)
    _remember(store, f"{key}/{relative}", table)
    rows = pc.sum(table.column("row_count")).as_py() or 0
    digest = hashlib.sha256(data).hexdigest()
    return SegmentRef(relative, table.num_rows, rows, len(data), digest, segment_bounds(table))


def _compact_rows(table: pa.Table, live: set[str]) -> pa.Table:
    """``table``'s rows that are the last with a path in ``live``."""
    last: dict[str, int] = {}
    for i, path in enumerate(table.column("path").to_pylist()):
        if path in live:
            last[path] = i
    return table.take(pa.array(sorted(last.values()), pa.int64()))


def plan_segments(
    store: Store,
    key: str,
    base: Sequence[SegmentRef],
    fresh: pa.Table | None,
    parts: Sequence[str] | None,
    *,
    name: Callable[[], str],
    record: Callable[[str], None],
) -> tuple[SegmentRef, ...]:
    """The segments of a new version: ``base`` (inherited), plus one segment of ``fresh`` (rows for
    new or changed entries), then merged (up to ``SEGMENT_ROWS`` entries) so that their number stays
    about files / ``SEGMENT_ROWS`` plus a logarithmic tail. ``parts``: the new
    version's parts (rows of other paths are dropped when segments merge), ``None`` when every row is live.

    Every segment written gets a name from ``name`` and is passed to ``record`` before it is written.
    """
    segments = list(base)

    def write(table: pa.Table) -> None:
        for start in range(0, table.num_rows, SEGMENT_ROWS):  # at most SEGMENT_ROWS entries per segment
            relative = name()
            record(relative)
            segments.append(write_segment(store, key, relative, table.slice(start, SEGMENT_ROWS)))

    if fresh is not None and fresh.num_rows:
        tail: list[pa.Table] = [fresh]
        rows = fresh.num_rows
        while segments and segments[-1].files <= _MERGE_RATIO * rows and segments[-1].files + rows <= SEGMENT_ROWS:
            tail.insert(0, load_segment(store, key, segments.pop()))
            rows += tail[0].num_rows
        if len(tail) == 1:
            write(fresh)
        else:
            merged = _concat(tail)
            write(merged if parts is None else _compact_rows(merged, set(parts)))
    return tuple(segments)
