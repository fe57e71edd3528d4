"""Which segments a commit's manifest lists, and writing the missing ones (format 2, see ``format.segments``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..format import segments
from ..format.segments import SegmentRef, entries_table, live_rows, plan_segments, segments_table
from ..manifest import DatasetManifest, table_entries


def commit_segments(
    store: Any,
    key: str,
    new: DatasetManifest,
    current: DatasetManifest | None,
    *,
    name: Callable[[], str],
    record: Callable[[str], None],
) -> tuple[tuple[SegmentRef, ...], tuple[Any, ...]]:
    """The segments and inline entries of ``new`` (a ``DatasetManifest`` about to replace ``current``),
    writing the segment files that are missing.

    ``new`` built on ``segments`` + ``added`` (an operation that only adds files) inherits those
    segments; ``new`` built from a full ``files`` list inherits ``current``'s segments when most of
    its entries are unchanged there, and keeps only the new or changed entries. Those go inline
    while they fit the root's budget (``fits_inline``), else into a new segment. Older formats: ``((), ())``.

    Raises:
        ManifestCorrupted: a segment to inherit or merge is missing or damaged (:class:`SegmentGone` when a
            later commit replaced ``current`` and its segments went: build again on the new version).
    """
    if new.format_version < 2:
        return (), ()
    if (new.segments or new.added) and not new.__dict__.get("_files"):  # built on segments, files not given
        base, changed = tuple(new.segments), list(new.added)
        for ref in base:  # never commit on top of a damaged segment (checked once per store: they never change)
            segments.load_segment(store, key, ref)
    else:
        base, changed = (), list(new.files)
        if current is not None and current.segments:
            rows = segments_table(store, key, current.segments)
            before = {e.path: e for e in table_entries(rows)}
            fresh = [e for e in changed if before.get(e.path) != e]
            if 2 * len(fresh) <= len(changed):
                base, changed = tuple(current.segments), fresh
    live = len(new.parts)
    dead = sum(s.files for s in base) + len(changed) - live
    if base and dead > max(live, segments.MIN_DEAD):  # consolidate: one segment (or none) of the live entries
        whole = live_rows(segments_table(store, key, base, entries_table(changed, new.schema)), new.parts, key)
        base, changed = (), table_entries(whole)
    if segments.fits_inline(changed):
        return base, tuple(changed)
    return plan_segments(store, key, base, entries_table(changed, new.schema), new.parts, name=name, record=record), ()
