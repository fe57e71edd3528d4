"""Which files a commit deletes: those of replaced versions that are no longer retained.

A replaced version stays *retained* (its manifest copy in ``_versions/`` and every file it lists stay, so
``as_of`` reads it and a reader or writer that read it a moment ago still finds its files) while both
limits allow it:

- ``retain_versions``: it is among the newest ``retain_versions`` versions (the live one included);
  ``None``: no count limit. ``1`` keeps nothing: a commit deletes what it replaces at once.
- ``retain_for``: it was replaced (the next version committed) less than ``retain_for`` ago;
  ``None``: no time limit. The default is 7 days, like Delta Lake's ``deletedFileRetentionDuration``.

Both ``None`` keeps every version (until ``vacuum``). Each commit drops the version the count limit
pushes out, and at most :data:`EXPIRE_PER_COMMIT` versions whose time ran out (oldest first, one
listing of ``_versions/``), so storage stays bounded without a ``vacuum`` schedule and a commit's
clean-up work stays bounded; a process that saw when the oldest retained version expires skips the
listing until then (most commits send no extra request for retention but the manifest copy), and a
fresh process (each Dagster step) reads no copy while the listing shows the oldest copy written less
than ``retain_for`` ago (one listing, no ``GET``).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

from ...errors import ManifestCorrupted, NotFound
from ...storage.base import Capability, Store
from .._dataset_options import DatasetOptions
from ..format.layout import VERSIONS_DIR, version_of, version_path
from ..manifest import DatasetManifest
from .nested import deletable
from .referenced import dropped_files, not_referenced

#: The default ``retain_for``: how long a replaced version stays readable.
DEFAULT_RETAIN_FOR = timedelta(days=7)
#: Expired versions one commit deletes at most (oldest first); the rest go with the next commits.
EXPIRE_PER_COMMIT = 2


#: Per (store object, dataset key): a time before which no retained version expires, as this process last saw
#: it (versions only age, and copies added later are replaced later), so commits skip the listing until then.
#: Skipping is always safe: it only delays a deletion.
_not_before: dict[tuple[int, str], float] = {}
_NOT_BEFORE_SIZE = 4096


def _remember_not_before(slot: tuple[int, str], when: float) -> None:
    if len(_not_before) >= _NOT_BEFORE_SIZE:
        _not_before.clear()
    _not_before[slot] = when


#: (store object, dataset key, version, write token) of the manifest copies this process wrote: a version's copy
#: never changes, so racing writers that build on one version write its copy once, not once per attempt (a
#: deleted dataset's new versions carry new write tokens; ``vacuum`` keeps the live version's copy).
_copied: set[tuple[int, str, int, str]] = set()
_COPIED_SIZE = 4096


def keep_version_copy(store: Store, key: str, manifest: DatasetManifest) -> None:
    """Write ``manifest``'s copy into ``_versions/`` (before a commit replaces it), unless this process
    already wrote this very version's copy (same version number and write token). The copy is the bytes
    ``manifest`` was read as when known (the live read at begin or on a rebase), not a re-rendering.

    Raises:
        Whatever the store's ``write_bytes`` raises.
    """
    slot = None if manifest.txn is None else (id(store), key, manifest.version, manifest.txn)
    if slot is not None and slot in _copied:
        return
    # Written before the slot is remembered: a writer that skips it knows the copy is there (racing writers of one
    # process may each write it once, the same bytes).
    _write_copy(store, key, manifest)
    if slot is not None:
        if len(_copied) >= _COPIED_SIZE:
            _copied.clear()
        _copied.add(slot)


def _write_copy(store: Store, key: str, manifest: DatasetManifest) -> None:
    """The bytes ``manifest`` was read as (they are its version's manifest to the byte), else its rendering."""
    data = manifest.read_as()
    if data is None:
        data = manifest.to_json().encode("utf-8")
    store.write_bytes(f"{key}/{version_path(manifest.version)}", data)


def read_version_copy(store: Store, key: str, version: int) -> DatasetManifest | None:
    """A retained past version's manifest copy, or ``None`` if it is gone or unreadable."""
    try:
        return DatasetManifest.from_json(store.read_bytes(f"{key}/{version_path(version)}"), store, key)
    except (NotFound, ManifestCorrupted):
        return None


def version_copies(store: Store, key: str) -> list[int]:
    """The version numbers of ``key``'s manifest copies in ``_versions/`` (none if the store cannot list)."""
    return [number for number, _written in _copies_written(store, key)]


def _copies_written(store: Store, key: str) -> list[tuple[int, float | None]]:
    """``key``'s manifest copies in ``_versions/``, oldest version first, each with when the store says it was
    written (``None`` if it does not say); none if the store cannot list."""
    if not store.supports(Capability.LIST):
        return []
    found = ((version_of(f.path[len(key) + 1 :]), f.modified) for f in store.list_files(f"{key}/{VERSIONS_DIR}"))
    return sorted((n, written) for n, written in found if n is not None)


def created_at(manifest: DatasetManifest) -> float | None:
    """When ``manifest`` was committed (seconds since the epoch), ``None`` if it does not say."""
    try:
        made = datetime.fromisoformat(manifest.created_at_utc)
    except (TypeError, ValueError):
        return None
    return (made if made.tzinfo is not None else made.replace(tzinfo=timezone.utc)).timestamp()


def obsolete_files(
    options: DatasetOptions, key: str, new: DatasetManifest, current: DatasetManifest | None
) -> tuple[str, ...]:
    """Files no retained version needs once ``new`` replaces ``current`` (the commit deletes them).

    What ``current`` inherited as obsolete is filtered: a reserved name or a
    path outside the dataset is never deletable, whatever storage says.
    """
    if current is None:
        return ()
    store = options.store
    inherited = [p for p in current.obsolete if deletable(p)]
    retain, retain_for = options.retain_versions, options.retain_seconds
    if retain == 1:  # no set of every part: one pass over them (an append that only adds files needs none)
        doomed = list(dict.fromkeys([*inherited, *dropped_files(current, new)]))
        return tuple(p for p in not_referenced(doomed, new) if deletable(p))
    # The versions that stay: current is retained (its copy is written with this commit). Their files are
    # kept; checked only against the few doomed paths, never gathered into a set of every part.
    kept = [new, current]
    doomed = list(inherited)
    if retain is not None:
        # Versions current.version - retain + 2 .. current.version stay; one drops out.
        dropped_version = current.version + 1 - retain
        for v in range(max(dropped_version + 1, 1), current.version):
            old = read_version_copy(store, key, v)
            if old is not None:
                kept.append(old)
        if dropped_version >= 1:
            dropped = read_version_copy(store, key, dropped_version)
            if dropped is not None:
                doomed += [p for p in _left_behind(dropped, store, key, current) if deletable(p)]
            doomed.append(version_path(dropped_version))  # the one reserved name a commit itself drops
    if retain_for is not None:
        doomed += _expired(store, key, current, retain_for, set())
    doomed = list(dict.fromkeys(doomed))
    for manifest in kept:
        doomed = not_referenced(doomed, manifest)
    return tuple(doomed)


def _left_behind(
    old: DatasetManifest,
    store: Store,
    key: str,
    current: DatasetManifest,
    successor: DatasetManifest | None = None,
) -> list[str]:
    """The files of ``old`` that may have gone out of use when the version after it (``successor``, read if
    not given) replaced it: all it references, or, when ``old`` is a format-3 version (its parts in its
    segments) and the next version only added files to it (an append), just its segments the next one no
    longer lists: no set of a million parts for an append's retention. Files still used later are filtered
    by the caller."""
    if old.parts_listed():
        return old.referenced()
    if successor is None:
        following = old.version + 1
        successor = current if following == current.version else read_version_copy(store, key, following)
    if successor is None or successor.operation != "append" or successor.partition_by != old.partition_by:
        return old.referenced()
    listed = {s.path for s in successor.segments}
    return [s.path for s in old.segments if s.path not in listed]


def _expired(store: Store, key: str, current: DatasetManifest, retain_for: float, keep: set[str]) -> list[str]:
    """Files of the oldest (at most :data:`EXPIRE_PER_COMMIT`) retained versions replaced more than
    ``retain_for`` seconds ago: each one's manifest copy and the files it lists that the version after it
    does not (those went out of use when it was replaced; the others are still used after it)."""
    now = time.time()
    slot = (id(store), key)
    if _not_before.get(slot, 0.0) > now:
        return []  # this process saw the oldest retained version: none expires before then (no request)
    listed = [(v, written) for v, written in _copies_written(store, key) if v < current.version]
    copies = [v for v, _written in listed]
    if not copies:
        _remember_not_before(slot, now + retain_for)  # the oldest version kept is replaced now or later
    elif listed[0][1] is not None and listed[0][1] + retain_for > now:
        # The oldest copy was written less than retain_for ago, and a version's copy is written only once the
        # commit that replaces it has built its manifest (whose time counts): the oldest version has not
        # expired, nor has any newer one. No read of its successor's copy (a fresh process, such as each
        # Dagster step, would pay one GET per commit for it). A copy written again later only delays the
        # deletion, never brings it forward.
        _remember_not_before(slot, listed[0][1] + retain_for)
        return []
    doomed: list[str] = []
    loaded: dict[int, DatasetManifest | None] = {current.version: current}
    for i, number in enumerate(copies[:EXPIRE_PER_COMMIT]):
        following = copies[i + 1] if i + 1 < len(copies) else current.version
        if following not in loaded:
            loaded[following] = read_version_copy(store, key, following)
        successor = loaded[following]
        replaced = None if successor is None else created_at(successor)
        if successor is None or replaced is None or now - replaced <= retain_for:
            if replaced is not None:
                _remember_not_before(slot, replaced + retain_for)
            break  # not expired (or cannot tell): it and every newer version stay
        old = loaded.get(number) or read_version_copy(store, key, number)
        doomed.append(version_path(number))
        if old is not None:
            left = not_referenced(_left_behind(old, store, key, current, successor), successor)
            doomed += [p for p in left if p not in keep and deletable(p)]
    return doomed
