"""Vacuum: delete the files of a dataset no retained version needs. Which ones is a pure
function (:func:`plan_vacuum`) of its versions and its listed files (:func:`own_files`:
the files that belong to it, not to a dataset nested in its folder)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from ...storage.base import Capability, FileInfo, Store
from .._dataset_options import UNSET, DatasetOptions, check_positive, check_retain_for
from ..commit.retention import created_at
from ..delta import expire_log
from ..format.layout import CLAIM_NAME, DELTA_DIRS, MANIFEST_NAME, SUCCESS_NAME, version_path
from ..io.key_checks import check_key_fits
from ..manifest import DatasetManifest
from .history import history


@dataclass(frozen=True)
class VacuumResult:
    """What :meth:`ParquetDatasetStore.vacuum` removed (or would remove, with ``dry_run``)."""

    deleted: tuple[str, ...]
    retained_versions: tuple[int, ...]
    dry_run: bool


def own_files(store: Store, key: str) -> list[FileInfo]:
    """Files under ``key``'s folder that belong to it, not to a dataset nested below it."""
    files = list(store.list_files(key))
    nested = {
        f.path[: -len(MANIFEST_NAME)]
        for f in files
        if f.path.endswith("/" + MANIFEST_NAME) and f.path != f"{key}/{MANIFEST_NAME}"
    }
    return [f for f in files if not any(f.path.startswith(n) for n in nested)]


def vacuum(
    options: DatasetOptions,
    key: str,
    retain_versions: int | None,
    older_than: timedelta | float | None,
    grace_period: timedelta | float,
    *,
    progress: Callable[[int, int], None] | None,
    dry_run: bool,
) -> VacuumResult:
    """See :meth:`ParquetDatasetStore.vacuum` (``key`` already validated; :data:`UNSET` limits are the store's)."""
    retain_versions = options.retain_versions if retain_versions is UNSET else retain_versions
    older_than = options.retain_for if older_than is UNSET else older_than
    store = options.store
    check_key_fits(store, key)
    options.require(Capability.LIST, Capability.DELETE, action="vacuum datasets")
    check_positive("retain_versions", retain_versions)
    max_age = check_retain_for(older_than, "older_than")
    grace = grace_period.total_seconds() if isinstance(grace_period, timedelta) else float(grace_period)
    versions = history(store, key)  # the live manifest first, then older complete copies
    files = own_files(store, key)
    doomed, retained = plan_vacuum(key, versions, files, retain_versions, max_age, grace=grace, now=time.time())
    has_log = any(f.path.startswith(f"{key}/{DELTA_DIRS[0]}/") for f in files)
    if not dry_run:
        for done, path in enumerate(doomed, 1):
            store.delete(path, missing_ok=True)
            if progress is not None:
                progress(done, len(doomed))
        if retained and has_log:
            # The Delta log's entries expire with the versions (its own files are never in ``doomed``).
            doomed += expire_log(store, key, min(m.version for m in retained))
    return VacuumResult(tuple(doomed), tuple(m.version for m in retained), dry_run)


def plan_vacuum(
    key: str,
    versions: Sequence[DatasetManifest],
    files: Sequence[FileInfo],
    keep_count: int | None,
    max_age: float | None,
    *,
    grace: float,
    now: float,
) -> tuple[list[str], list[DatasetManifest]]:
    """The store paths to delete and the versions retained.

    ``versions`` is :meth:`ParquetDatasetStore.history`'s answer: the live
    manifest first (always retained), then older complete copies, newest
    first. A version is older than ``max_age`` when the version after it was
    committed more than ``max_age`` seconds ago (it was replaced that long ago).
    Files of dropped versions go at once; files no version ever listed
    only once older than ``grace`` seconds, so a write in progress keeps its parts.
    """
    live = versions[0]
    retained = list(versions) if keep_count is None else list(versions[:keep_count])
    if max_age is not None:
        replaced = {id(m): created_at(after) for after, m in zip(versions, versions[1:], strict=False)}
        retained = [m for m in retained if m is live or now - (replaced[id(m)] or now) <= max_age]
    dropped = [m for m in versions if all(m is not r for r in retained)]
    # The live version's own copy too: a writer builds on it and writes it ahead of its swap (once per process).
    referenced = {MANIFEST_NAME, SUCCESS_NAME, CLAIM_NAME, version_path(live.version)}
    for m in retained:
        referenced.update(m.referenced())
        if m is not live:
            referenced.add(version_path(m.version))
    once_referenced = {p for m in dropped for p in m.referenced()} | {version_path(m.version) for m in dropped}
    once_referenced |= set(live.obsolete)
    doomed: list[str] = []
    for info in files:
        rel = info.path[len(key) + 1 :]
        if rel in referenced or rel.split("/", 1)[0] in DELTA_DIRS:
            continue  # the Delta log expires by its own rule (delta.expire_log)
        if rel in once_referenced or (info.modified is not None and now - info.modified > grace):
            doomed.append(info.path)
    return doomed, retained
