"""Which segments a commit's manifest lists, and writing the missing ones (format 2, see ``format.segments``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..format import segments
from ..format.segments import SegmentRef, entries_table, live_rows, plan_segments, segments_table
from ..io.parallel import parallel_map, store_threads
from ..manifest import PARTS_IN_ROOT, ROOTLESS_FORMAT, SEGMENTED_FORMAT, DatasetManifest, table_entries


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
    listed = new.parts_listed()  # not listed: built on a format-3 version (every row of its segments is live)
    if (new.segments or new.added) and not new.__dict__.get("_files"):  # built on segments, files not given
        base, changed = tuple(new.segments), list(new.added)
        if listed:  # never commit on top of a damaged segment (checked once per store; on S3 the GETs overlap)
            parallel_map(lambda ref: segments.verify_segment(store, key, ref), base, store_threads(store))
    else:
        base, changed = (), list(new.files)
        if current is not None and current.segments:
            rows = segments_table(store, key, current.segments)
            before = {e.path: e for e in table_entries(rows)}
            fresh = [e for e in changed if before.get(e.path) != e]
            if 2 * len(fresh) <= len(changed):
                base, changed = tuple(current.segments), fresh
    live = new.part_count()
    dead = sum(s.files for s in base) + len(changed) - live
    # A format-3 root (more than PARTS_IN_ROOT parts) does not list its parts: its segments hold no dead row.
    if base and (dead > max(live, segments.MIN_DEAD) or (dead and live > PARTS_IN_ROOT)):
        whole = live_rows(segments_table(store, key, base, entries_table(changed, new.schema)), new.parts, key)
        base, changed, dead = (), table_entries(whole), 0
    if segments.fits_inline(changed):
        return base, tuple(changed)
    fresh_table = entries_table(changed, new.schema)
    parts = new.parts if dead > 0 else None
    return plan_segments(store, key, base, fresh_table, parts, name=name, record=record), ()


def root_format(new: DatasetManifest) -> int:
    """The ``format_version`` of ``new`` (format 2 or later, its segments planned by :func:`commit_segments`):
    :data:`ROOTLESS_FORMAT` above :data:`PARTS_IN_ROOT` parts, else :data:`SEGMENTED_FORMAT`."""
    return ROOTLESS_FORMAT if new.part_count() > PARTS_IN_ROOT else SEGMENTED_FORMAT
