"""``sync_delta_log``: bring a dataset's Delta log up to its live version (see ``delta/log_writer.py``);
``sync_asset_delta_log``: bring a partitioned asset's one Delta table up to its partitions (``delta/asset_log.py``)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence

from ...errors import CommitConflict, NotFound
from ...storage.base import Capability, Store
from .._dataset_options import DatasetOptions
from ..commit.conditional import put_if_absent
from ..commit.tombstone import TOMBSTONE_OPERATION
from ..delta import check_delta_schema, sync_log
from ..delta.actions import dumps
from ..delta.asset_log import (
    ASSET_CHECKPOINT_INTERVAL,
    AssetTableState,
    PartitionSource,
    apply_actions,
    asset_actions,
    dimension_values,
    state_from_log,
)
from ..delta.checkpoint import checkpoint_bytes
from ..delta.log_writer import PENDING_DIR, checkpoint_path, commit_path, last_checkpoint_path, list_log
from ..format.layout import MANIFEST_NAME
from ..io.key_checks import check_key_fits
from ..io.parallel import parallel_map, store_threads
from ..manifest import DatasetManifest
from .listing import list_datasets
from .read import committed_manifest


def sync_delta_log(options: DatasetOptions, key: str) -> int:
    """See :meth:`ParquetDatasetStore.sync_delta_log` (``key`` already validated).

    Raises:
        DatasetNotFound / DatasetIncomplete / ManifestCorrupted: as ``read_manifest``.
        CapabilityNotSupported: the store cannot put-if-absent or list.
        ValueError: a column Delta cannot hold without column mapping.
    """
    check_key_fits(options.store, key)
    options.require(Capability.CONDITIONAL_WRITE, Capability.LIST, action="keep a Delta log")
    live = committed_manifest(options.store, key)
    if live.schema is not None:
        check_delta_schema(live.schema, key=key)
    done = sync_log(options.store, key, known=[live], fill=True)
    return live.version if done is None else done


# ------------------------------------------------------------------ one Delta table per partitioned asset

#: Suffix of the markers naming partitions (a JSON list) whose update of the asset table may not have landed yet.
_PENDING = ".pending"

#: Attempts at the asset log's next version before giving up (each conflict re-reads the log and the manifests).
ASSET_LOG_ATTEMPTS = 64


def _live_or_none(store: Store, key: str) -> DatasetManifest | None:
    """The live manifest of ``key``; ``None`` when there is no dataset (never written, deleted, being deleted).

    Raises:
        ManifestCorrupted / OSError: the manifest is unreadable or the store failed (nothing is decided on it).
    """
    try:
        manifest = DatasetManifest.from_json(store.read_bytes(f"{key}/{MANIFEST_NAME}"), store, key)
    except NotFound:
        return None
    return None if manifest.operation == TOMBSTONE_OPERATION else manifest


def _pending_markers(store: Store, folder: str) -> dict[str, list[str]]:
    """The partitions handed over to the next update of the asset table: marker path -> partition folders.

    A marker that vanished meanwhile (another update took it) or does not parse is left out.
    """
    found: dict[str, list[str]] = {}
    prefix = f"{folder}/{PENDING_DIR}/"
    for info in store.list_files(f"{folder}/{PENDING_DIR}"):
        if "/" in info.path[len(prefix) :] or not info.path.endswith(_PENDING):
            continue
        try:
            folders = json.loads(store.read_bytes(info.path))
        except (NotFound, ValueError):
            continue
        if isinstance(folders, list) and all(isinstance(f, str) for f in folders):
            found[info.path] = folders
    return found


def _read_asset_state(store: Store, folder: str) -> AssetTableState:
    """The asset table as its log now says: the newest checkpoint, then the commits after it."""
    listing = list_log(store, folder)
    if not listing.commits:
        return AssetTableState()
    last = listing.commits[-1]
    base = max((c for c in listing.checkpoints if c <= last), default=None)
    checkpoint = None if base is None else (base, store.read_bytes(checkpoint_path(folder, base)))
    start = -1 if base is None else base
    commits = [(v, store.read_bytes(commit_path(folder, v))) for v in listing.commits if v > start]
    return state_from_log(checkpoint, commits)


def _write_asset_checkpoint(store: Store, folder: str, state: AssetTableState) -> None:
    data, size = checkpoint_bytes(state.protocol, state.metadata, state.adds.values())
    try:
        put_if_absent(store, checkpoint_path(folder, state.version), data)
    except CommitConflict:
        return  # another writer wrote this version's checkpoint
    store.write_bytes(last_checkpoint_path(folder), json.dumps({"version": state.version, "size": size}).encode())


def _asset_columns(state: AssetTableState, columns: Sequence[str] | None, folder: str) -> list[str]:
    recorded = state.columns
    if columns is None:
        if recorded is None:
            raise ValueError(
                f"asset folder {folder!r} has no asset Delta table yet: pass columns= (one partition column name per "
                "folder level of its partition datasets, e.g. ['partition'])"
            )
        return recorded
    wanted = list(columns)
    if not wanted or len(set(wanted)) != len(wanted) or not all(isinstance(c, str) and c for c in wanted):
        raise ValueError(f"asset table {folder!r}: columns must be distinct non-empty names, got {wanted!r}")
    if recorded is not None and recorded != wanted:
        raise ValueError(
            f"asset table {folder!r} was made with the partition columns {recorded}, not {wanted}; delete "
            f"{folder}/_delta_log/ to make it again with other columns"
        )
    return wanted


def sync_asset_delta_log(
    options: DatasetOptions,
    folder: str,
    *,
    columns: Sequence[str] | None,
    partitions: Sequence[str] | None,
) -> int:
    """See :meth:`ParquetDatasetStore.sync_asset_delta_log` (``folder`` already validated).

    Each attempt reads the asset log, *then* the partitions' live manifests (so what it writes is never
    older than what the log holds), and puts the next version if absent; a conflict (another partition's
    update landed first) re-reads both and tries again.

    Raises:
        CapabilityNotSupported: the store cannot put-if-absent or list.
        ValueError: bad ``columns`` or ``partitions``, schemas that cannot be one table, a column Delta cannot hold.
        CommitConflict: :data:`ASSET_LOG_ATTEMPTS` attempts all lost to other writers.
        OSError / ManifestCorrupted: the store failed or a manifest is unreadable; the table is as it was
            (a hand-over marker of ``partitions`` may stay, for the next update to take them).
    """
    store = options.store
    check_key_fits(store, folder)
    options.require(Capability.CONDITIONAL_WRITE, Capability.LIST, action="keep a Delta log")
    sizes: dict[str, int] = {}

    def size_of(path: str, recorded: int | None) -> int:
        if recorded is not None:
            return recorded
        if path not in sizes:
            sizes[path] = store.size(f"{folder}/{path}")
        return sizes[path]

    given = list(dict.fromkeys(partitions or ()))
    if given:
        for p in given:
            dimension_values(p, len(columns) if columns is not None else p.count("/") + 1)
        # Handed over first (one marker for them all): if this call fails, the next update of the table takes them.
        marker = f"{folder}/{PENDING_DIR}/{uuid.uuid4().hex}{_PENDING}"
        store.write_bytes(marker, json.dumps(given, ensure_ascii=False).encode("utf-8"))
    markers = _pending_markers(store, folder)
    for _ in range(ASSET_LOG_ATTEMPTS):
        state = _read_asset_state(store, folder)
        names = _asset_columns(state, columns, folder)
        if partitions is None:
            listed = {d.key[len(folder) + 1 :] for d in list_datasets(store, folder) if d.key.startswith(folder + "/")}
            chosen = sorted({p for p in listed if p.count("/") == len(names) - 1} | state.folders(len(names)))
        else:
            chosen = list(given)
        chosen += [p for p in dict.fromkeys(f for fs in markers.values() for f in fs) if p not in chosen]
        for p in chosen:
            dimension_values(p, len(names))
        found = parallel_map(lambda p: _live_or_none(store, f"{folder}/{p}"), chosen, store_threads(store))
        sources = [PartitionSource(p, m) for p, m in zip(chosen, found, strict=True)]
        now = int(time.time() * 1000)
        actions = asset_actions(state, sources, asset=folder, columns=names, size_of=size_of, now_ms=now)
        version = state.version
        if actions is not None:
            version += 1
            try:
                put_if_absent(store, commit_path(folder, version), dumps(actions))
            except CommitConflict:
                continue
            if version and version % ASSET_CHECKPOINT_INTERVAL == 0:
                _write_asset_checkpoint(store, folder, apply_actions(state, version, actions))
        for path in markers:  # only the markers this call read: one written meanwhile stays for its writer
            store.delete(path, missing_ok=True)
        return version
    raise CommitConflict(
        f"asset table {folder!r}: {ASSET_LOG_ATTEMPTS} attempts at its next version all lost to other writers"
    )
