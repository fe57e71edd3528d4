"""The Delta log of a dataset: ``<key>/_delta_log/``, written after the dataset's commits.

Delta version ``N`` is dataset version ``N``; version 0 only creates the table. The log is derived
from the manifests (the dataset's truth) and is written with put-if-absent only
(``commit.conditional.put_if_absent``), version after version from the first one missing, so:

- a log that lags (a failed or interrupted log write) heals at the next commit, or with
  :func:`sync_log`, with no gap;
- writers racing on one version derive the same bytes from the same manifests; the first lands, the
  others find it there and go on from it;
- a version whose manifest this writer cannot find is left to the writer that committed it: a
  commit's own hook saves its manifest under ``_delta_manifests/`` *before* it looks at the log
  again, and every writer looks there after it wrote a version, so one of the two always writes it.
  Only :func:`sync_log` with ``fill=True`` writes a version whose manifest is gone for good (after a
  crash with ``retain_versions=1``): a commit with no file changes, saying so in its ``commitInfo``.

Every :data:`CHECKPOINT_INTERVAL` versions (and after :data:`CHECKPOINT_ACTIONS` actions written at once) a
checkpoint and ``_last_checkpoint`` follow; :func:`expire_log`
drops the commits and checkpoints before the newest checkpoint at or below the oldest retained version.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from ...errors import CommitConflict, ManifestCorrupted, NotFound
from ...storage.base import Capability, Store
from ..commit.conditional import put_if_absent
from ..format.layout import MANIFEST_NAME, version_path
from ..manifest import DatasetManifest, FileEntry
from .actions import (
    add_action,
    commit_info,
    delta_path,
    dumps,
    metadata_action,
    millis,
    partition_strings,
    protocol_action,
    remove_action,
    table_id,
)
from .checkpoint import checkpoint_bytes, read_checkpoint

log = logging.getLogger(__name__)

LOG_DIR = "_delta_log"
#: Manifests a commit's hook saved because the log was behind (see the module docstring).
PENDING_DIR = "_delta_manifests"
#: A checkpoint at every version that is a multiple of this (as delta-rs does).
CHECKPOINT_INTERVAL = 100
#: Also a checkpoint after one call wrote this many actions (a first write of many files, a sync of a large
#: dataset): readers then load one Parquet file instead of parsing that many JSON lines.
CHECKPOINT_ACTIONS = 1_000
_LAST_CHECKPOINT = "_last_checkpoint"


def commit_path(key: str, version: int) -> str:
    return f"{key}/{LOG_DIR}/{version:020d}.json"


def checkpoint_path(key: str, version: int) -> str:
    return f"{key}/{LOG_DIR}/{version:020d}.checkpoint.parquet"


def last_checkpoint_path(key: str) -> str:
    return f"{key}/{LOG_DIR}/{_LAST_CHECKPOINT}"


def _pending_path(key: str, version: int) -> str:
    return f"{key}/{PENDING_DIR}/{version:020d}.json"


@dataclass
class _Listing:
    commits: list[int] = field(default_factory=list)
    checkpoints: list[int] = field(default_factory=list)

    @property
    def last(self) -> int:
        return self.commits[-1] if self.commits else -1


def list_log(store: Store, key: str) -> _Listing:
    out = _Listing()
    prefix = f"{key}/{LOG_DIR}/"
    for info in store.list_files(f"{key}/{LOG_DIR}"):
        name = info.path[len(prefix) :]
        stem = name.split(".", 1)[0]
        if "/" in name or len(stem) != 20 or not stem.isdigit():
            continue
        if name.endswith(".checkpoint.parquet"):
            out.checkpoints.append(int(stem))
        elif name == f"{stem}.json":
            out.commits.append(int(stem))
    out.commits.sort()
    out.checkpoints.sort()
    return out


# ------------------------------------------------------------------ state


@dataclass
class _State:
    """The table as of Delta ``version``: its files (from a manifest, or replayed from the log),
    the timestamp of its last commit and the table's id, protocol and metadata."""

    version: int
    ict: int
    table_id: str
    source: DatasetManifest | None = None
    files: dict[str, tuple[dict[str, str | None], int | None]] | None = None
    protocol: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None

    def paths(self) -> list[str]:
        if self.files is not None:
            return list(self.files)
        return list(self.source.parts) if self.source is not None else []


def _first_line(store: Store, path: str) -> dict[str, Any]:
    with store.open_input(path) as f:
        head = f.read(65536)
    return json.loads(head.split(b"\n", 1)[0])


def _fast_state(store: Store, key: str, last: int, manifest: DatasetManifest | None) -> _State | None:
    """The state at ``last`` from its own manifest and the first line of its commit (its
    ``commitInfo``), when the commit was made from that very manifest; else ``None``."""
    if manifest is None:
        return None
    info = _first_line(store, commit_path(key, last)).get("commitInfo") or {}
    if info.get("txn") != manifest.txn or info.get("datasetVersion") != last or not info.get("tableId"):
        return None
    return _State(version=last, ict=int(info["inCommitTimestamp"]), table_id=info["tableId"], source=manifest)


def _replay(store: Store, key: str, listing: _Listing, upto: int) -> _State:
    """The state at ``upto`` replayed from the newest checkpoint at or below it and the commits after it."""
    base = max((c for c in listing.checkpoints if c <= upto), default=-1)
    files: dict[str, tuple[dict[str, str | None], int | None]] = {}
    protocol: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    ict = 0
    if base >= 0:
        protocol, metadata, adds = read_checkpoint(store.read_bytes(checkpoint_path(key, base)))
        files = {unquote(a["path"]): (a.get("partitionValues") or {}, a.get("size")) for a in adds}
    for version in range(base + 1, upto + 1):
        for line in store.read_bytes(commit_path(key, version)).splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "add" in action:
                a = action["add"]
                files[unquote(a["path"])] = (a.get("partitionValues") or {}, a.get("size"))
            elif "remove" in action:
                files.pop(unquote(action["remove"]["path"]), None)
            elif "protocol" in action:
                protocol = action["protocol"]
            elif "metaData" in action:
                metadata = action["metaData"]
            elif "commitInfo" in action:
                ict = int(action["commitInfo"].get("inCommitTimestamp") or action["commitInfo"].get("timestamp") or 0)
    if base == upto:
        ict = int(_first_line(store, commit_path(key, base)).get("commitInfo", {}).get("inCommitTimestamp") or 0)
    return _State(
        version=upto, ict=ict, table_id=metadata.get("id", ""), files=files, protocol=protocol, metadata=metadata
    )


# ------------------------------------------------------------------ manifests


def _read_manifest(store: Store, path: str, key: str) -> DatasetManifest | None:
    try:
        return DatasetManifest.from_json(store.read_bytes(path), store, key)
    except (NotFound, ManifestCorrupted):
        return None


class _Manifests:
    """Where the manifest of a version is found: given, live, a ``_versions/`` copy, a saved one."""

    def __init__(self, store: Store, key: str, known: Iterable[DatasetManifest | None]) -> None:
        self.store, self.key = store, key
        self.known = {m.version: m for m in known if m is not None and m.operation != "delete"}
        #: Versions whose manifest was found among the saved ones (deleted once their commit is written).
        self.saved: set[int] = set()

    def get(self, version: int, *, saved_only: bool = False) -> DatasetManifest | None:
        if version in self.known:
            return self.known[version]
        paths = [f"{self.key}/{version_path(version)}"] if not saved_only else []
        for path in (*paths, _pending_path(self.key, version)):
            found = _read_manifest(self.store, path, self.key)
            if found is not None and found.version == version:
                self.known[version] = found
                if path.startswith(f"{self.key}/{PENDING_DIR}/"):
                    self.saved.add(version)
                return found
        return None


def _entries(manifest: DatasetManifest, paths: Sequence[str]) -> list[FileEntry]:
    """The entries of ``paths`` (parts of ``manifest``), without loading its segments when its
    inline entries hold them all."""
    inline = {e.path: e for e in (manifest.__dict__.get("_files") or manifest.added)}
    if all(p in inline for p in paths):
        return [inline[p] for p in paths]
    every = {e.path: e for e in manifest.files}
    return [every.get(p, FileEntry(p)) for p in paths]


# ------------------------------------------------------------------ writing


def _size(store: Store, key: str, entry: FileEntry) -> int:
    return entry.size_bytes if entry.size_bytes is not None else store.size(f"{key}/{entry.path}")


def _schema(manifest: DatasetManifest) -> pa.Schema:
    schema = manifest.schema
    if schema is None:
        raise ManifestCorrupted(f"dataset {manifest.dataset_key!r} records no arrow_schema", reason="no schema")
    return schema


def _version_actions(store: Store, key: str, state: _State, manifest: DatasetManifest) -> tuple[list[Any], _State]:
    """The actions of Delta version ``manifest.version`` on top of ``state``, and the state after it."""
    schema = _schema(manifest)
    ict = max(millis(manifest.created_at_utc), state.ict + 1)
    info = commit_info(manifest, version=manifest.version, timestamp=ict)
    info["commitInfo"]["tableId"] = state.table_id
    actions: list[Any] = [info]
    previous = state.source
    protocol = protocol_action(schema)["protocol"]
    old_protocol = state.protocol or (protocol_action(_schema(previous))["protocol"] if previous else None)
    if protocol != old_protocol:
        actions.append({"protocol": protocol})
    meta = metadata_action(schema, manifest.partition_by, id=state.table_id, created_time=ict)
    if previous is not None:
        changed = previous.schema_hash != manifest.schema_hash or previous.partition_by != manifest.partition_by
    else:
        old = state.metadata or {}
        changed = (old.get("schemaString"), old.get("partitionColumns")) != (
            meta["metaData"]["schemaString"],
            list(manifest.partition_by),
        )
    if changed:
        actions.append(meta)
    before = state.paths()
    after = set(manifest.parts)
    gone = [p for p in before if p not in after]
    had = set(before)
    new = [p for p in manifest.parts if p not in had]
    data_change = manifest.operation != "compact"
    if gone:
        if state.files is not None:
            removed = [(p, *state.files[p]) for p in gone]
        else:
            assert previous is not None
            old_schema = _schema(previous)
            removed = [
                (e.path, partition_strings(e, old_schema, previous.partition_by), e.size_bytes)
                for e in _entries(previous, gone)
            ]
        actions += [remove_action(p, v, s, deletion_timestamp=ict, data_change=data_change) for p, v, s in removed]
    for entry in _entries(manifest, new):
        size = _size(store, key, entry)
        actions.append(
            add_action(entry, schema, manifest.partition_by, size=size, modification_time=ict, data_change=data_change)
        )
    after_state = _State(version=manifest.version, ict=ict, table_id=state.table_id, source=manifest)
    after_state.protocol, after_state.metadata = protocol, meta["metaData"]
    return actions, after_state


def _create_actions(key: str, first: DatasetManifest | None, ict: int) -> tuple[list[Any], _State]:
    """Delta version 0: the table, over the schema of the first dataset version found."""
    ident = table_id(key, first.txn if first is not None else None)
    info = commit_info(None, version=0, timestamp=ict, note="creates the table")
    info["commitInfo"]["tableId"] = ident
    actions: list[Any] = [info]
    state = _State(version=0, ict=ict, table_id=ident, files={})
    if first is not None:
        schema = _schema(first)
        protocol = protocol_action(schema)
        meta = metadata_action(schema, first.partition_by, id=ident, created_time=ict)
        actions += [protocol, meta]
        state.protocol, state.metadata = protocol["protocol"], meta["metaData"]
    return actions, state


def _placeholder(state: _State, version: int) -> tuple[list[Any], _State]:
    ict = state.ict + 1
    note = "this dataset version's manifest was gone before its log entry was written: its file changes are in the next"
    info = commit_info(None, version=version, timestamp=ict, note=note)
    info["commitInfo"]["tableId"] = state.table_id
    after = _State(version, ict, state.table_id, None, dict(_files_of(state)), state.protocol, state.metadata)
    return [info], after


def _files_of(state: _State) -> Mapping[str, tuple[dict[str, str | None], int | None]]:
    if state.files is not None:
        return state.files
    source = state.source
    if source is None:
        return {}
    schema = _schema(source)
    return {e.path: (partition_strings(e, schema, source.partition_by), e.size_bytes) for e in source.files}


def _put(store: Store, path: str, data: bytes) -> bool:
    """Put-if-absent; ``True`` if this call wrote it, ``False`` if it was there with the same bytes.

    Raises:
        CommitConflict: it was there with other bytes (another writer derived it from other manifests).
    """
    try:
        put_if_absent(store, path, data)
        return True
    except CommitConflict:
        if store.read_bytes(path) == data:
            return False
        raise


def _checkpoint(store: Store, key: str, state: _State) -> None:
    """Write the checkpoint of ``state`` (put-if-absent) and move ``_last_checkpoint`` forward to it."""
    source = state.source
    if source is not None:
        schema = _schema(source)
        ict = state.ict
        adds = [
            add_action(
                e, schema, source.partition_by, size=_size(store, key, e), modification_time=ict, data_change=False
            )["add"]
            for e in source.files
        ]
        protocol = state.protocol or protocol_action(schema)["protocol"]
        metadata = (
            state.metadata
            or metadata_action(schema, source.partition_by, id=state.table_id, created_time=ict)["metaData"]
        )
    else:
        adds = [
            {"path": delta_path(p), "partitionValues": v, "size": s or 0, "modificationTime": state.ict}
            for p, (v, s) in (state.files or {}).items()
        ]
        protocol, metadata = state.protocol or {}, state.metadata or {}
    data, size = checkpoint_bytes(protocol, metadata, adds)
    try:
        put_if_absent(store, checkpoint_path(key, state.version), data)
    except CommitConflict:
        pass  # another writer wrote this version's checkpoint
    last_path = last_checkpoint_path(key)
    try:
        current = json.loads(store.read_bytes(last_path)).get("version", -1)
    except (NotFound, ValueError):
        current = -1
    if current < state.version:
        store.write_bytes(last_path, json.dumps({"version": state.version, "size": size}).encode())


def sync_log(
    store: Store,
    key: str,
    *,
    known: Sequence[DatasetManifest | None] = (),
    upto: int | None = None,
    fill: bool = False,
) -> int | None:
    """Write every Delta version missing from the log of ``key`` up to ``upto`` (default: the live
    dataset version), in order; return the last Delta version now in the log (``None``: no dataset).

    ``known`` are manifests the caller holds (a commit's own and the one it was built on); others
    are read from the live manifest, ``_versions/`` copies and saved ones. Without ``fill`` the
    writing stops before a version whose manifest cannot be found (a commit's hook saves its own
    manifest first, see the module docstring); with it, such a version is written as a commit
    without file changes (the next found version carries them).

    Raises:
        OSError / ManifestCorrupted: the store failed or a manifest is unreadable; what was written
            stays (the next call goes on from it).
    """
    manifests = _Manifests(store, key, known)
    if upto is None:
        live = _read_manifest(store, f"{key}/{MANIFEST_NAME}", key)
        if live is None or live.operation == "delete":
            return None
        manifests.known.setdefault(live.version, live)
        upto = live.version
    state = None if fill else _quick_start(store, key, manifests, upto)
    if state is None:
        listing = list_log(store, key)
        if listing.last >= upto:
            return listing.last
        if not fill and listing.last < 0 and upto > 1 and manifests.get(1) is None:
            # A dataset written before delta_log was on: its log comes from sync_delta_log (fill).
            log.info("dataset %r has no Delta log yet; sync_delta_log writes it", key)
            return None
        if not fill and any(manifests.get(v) is None for v in range(max(listing.last, 0) + 1, upto)):
            mine = manifests.get(upto)
            if mine is None:
                return listing.last
            # Save this version's manifest, then look again: whoever writes the versions before it finds it.
            store.write_bytes(_pending_path(key, upto), mine.to_json().encode("utf-8"))
            listing = list_log(store, key)
            if listing.last >= upto:
                return listing.last
        last = listing.last
        if last < 0:
            first = next((m for m in map(manifests.get, range(1, upto + 1)) if m is not None), None)
            ict = (millis(first.created_at_utc) if first is not None else 0) - 1
            actions, state = _create_actions(key, first, ict)
            if not _write_commit(store, key, 0, actions):
                state = _replay(store, key, list_log(store, key), 0)
            last = 0
        else:
            state = _fast_state(store, key, last, manifests.get(last)) or _replay(store, key, listing, last)
    version = state.version
    written = 0
    while version < upto or manifests.get(version + 1, saved_only=True) is not None:
        # Past upto: a version committed meanwhile whose own hook found the log behind and saved its manifest.
        version += 1
        manifest = manifests.get(version)
        if manifest is None:
            if not fill:
                return version - 1
            actions, after = _placeholder(state, version)
        else:
            actions, after = _version_actions(store, key, state, manifest)
        if not _write_commit(store, key, version, actions):
            after = _fast_state(store, key, version, manifest) or _replay(store, key, list_log(store, key), version)
        state = after
        written += len(actions)
        if version % CHECKPOINT_INTERVAL == 0 or written >= CHECKPOINT_ACTIONS:
            _checkpoint(store, key, state)
            written = 0
        if version in manifests.saved:
            store.delete(_pending_path(key, version), missing_ok=True)
    return version


def _quick_start(store: Store, key: str, manifests: _Manifests, upto: int) -> _State | None:
    """The state at ``upto - 1`` without listing the log, in the common case: a commit's hook, the log
    one version behind, and the version before it made from the manifest the commit was built on."""
    previous = manifests.known.get(upto - 1)
    if upto < 2 or previous is None:
        return None
    try:
        return _fast_state(store, key, upto - 1, previous)
    except NotFound:
        return None


def _write_commit(store: Store, key: str, version: int, actions: list[Any]) -> bool:
    """Put the commit; ``False`` if another writer's commit of this version was there (other bytes)."""
    try:
        _put(store, commit_path(key, version), dumps(actions))
        return True
    except CommitConflict:
        return False


def expire_log(store: Store, key: str, oldest_retained: int) -> list[str]:
    """Delete the commits, checkpoints and saved manifests before the newest checkpoint at or below
    ``oldest_retained`` (the log then starts at that checkpoint); return what was deleted."""
    listing = list_log(store, key)
    base = max((c for c in listing.checkpoints if c <= oldest_retained), default=None)
    if base is None:
        return []
    doomed = [commit_path(key, v) for v in listing.commits if v < base]
    doomed += [checkpoint_path(key, v) for v in listing.checkpoints if v < base]
    doomed += [
        info.path
        for info in store.list_files(f"{key}/{PENDING_DIR}")
        if info.path.rsplit("/", 1)[-1][:20].isdigit() and int(info.path.rsplit("/", 1)[-1][:20]) < base
    ]
    for path in doomed:
        store.delete(path, missing_ok=True)
    return doomed


def after_commit(store: Store, key: str, base: DatasetManifest | None, committed: DatasetManifest) -> None:
    """The hook a commit calls once it landed: write the log up to its version. Never raises an
    ``Exception`` (the commit stands; the log lags and heals at the next commit or ``sync_delta_log``)."""
    if not store.supports(Capability.CONDITIONAL_WRITE) or not store.supports(Capability.LIST):
        return
    try:
        sync_log(store, key, known=[base, committed], upto=committed.version)
    except Exception as exc:
        log.warning(
            "dataset %r: version %d is committed, but its Delta log could not be written (%s); it lags until the "
            "next commit or sync_delta_log",
            key,
            committed.version,
            exc,
        )
