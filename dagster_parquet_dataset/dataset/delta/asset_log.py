"""One Delta table over a partitioned asset: ``<asset>/_delta_log/`` lists every partition dataset's live files.

A partitioned asset is one dataset per partition, ``<asset>/<p>`` (``<asset>/<v1>/<v2>`` for several
dimensions). Its asset table lives in the asset's folder; its ``add`` paths are relative to that folder
(``<p>/part-...parquet``, RFC 2396-escaped) and its partition columns are the asset's partition dimensions,
``columns`` (one name per folder level), followed by the partition datasets' own ``partition_by`` columns.
A dimension value is its folder name percent-decoded (a lone ``%`` is the empty string: the inverse of the
Dagster layer's key escaping). A dimension whose name the data already holds as a column (a single-run
backfill's ``partition_expr`` column) is no partition column: its rows keep their own values from the files.

This module is pure: it rebuilds the table's state from the log's bytes and derives, from partition
manifests, the one commit that brings those partitions' files up to date. The I/O (listing, reading,
put-if-absent with a retry on conflict) is ``ops/delta_sync.py``'s. Unlike a dataset's own log, the asset
log's versions are its own counter: each commit is one update of one or more partitions.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from ..manifest import DatasetManifest
from .actions import (
    ENGINE,
    add_action,
    delta_path,
    metadata_action,
    partition_strings,
    protocol_action,
    remove_action,
)
from .checkpoint import read_checkpoint
from .delta_schema import check_delta_schema

#: Table property holding the asset's data schema (Arrow IPC, base64): the next update unifies with it.
SCHEMA_PROPERTY = "dagster-parquet-dataset.arrowSchema"
#: Table property holding the dimension column names (a JSON list), so a repair needs no Dagster context.
COLUMNS_PROPERTY = "dagster-parquet-dataset.dimensionColumns"
#: An asset table gets a checkpoint every this many versions (each update replays the commits after the last).
ASSET_CHECKPOINT_INTERVAL = 10
#: The dimension column name when the IO manager has no ``partition_expr`` for a one-dimension asset.
DEFAULT_COLUMN = "partition"
#: The ``metaData`` fields whose change makes a commit carry a new ``metaData``.
_COMPARED = ("id", "schemaString", "partitionColumns", "configuration")


@dataclass
class AssetTableState:
    """The asset table as of ``version`` (``-1``: no table yet): its live ``add`` bodies by
    (decoded, asset-relative) path, its protocol, metadata and last In-Commit Timestamp."""

    version: int = -1
    ict: int = 0
    adds: dict[str, dict[str, Any]] = field(default_factory=dict)
    protocol: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def data_schema(self) -> pa.Schema | None:
        """The asset's data schema recorded by the last schema change (``None``: no table yet)."""
        raw = (self.metadata.get("configuration") or {}).get(SCHEMA_PROPERTY)
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(raw))) if raw else None

    @property
    def columns(self) -> list[str] | None:
        """The dimension column names the table was made with (``None``: no table yet)."""
        raw = (self.metadata.get("configuration") or {}).get(COLUMNS_PROPERTY)
        return list(json.loads(raw)) if raw else None

    def folders(self, depth: int) -> set[str]:
        """The partition folders (``depth`` levels) some live file of the table lies in."""
        return {"/".join(p.split("/")[:depth]) for p in self.adds}


@dataclass(frozen=True)
class PartitionSource:
    """One partition dataset as the caller read it: its folder relative to the asset's, and its live
    manifest (``None``: no dataset there any more, so its files leave the table)."""

    folder: str
    manifest: DatasetManifest | None


def apply_actions(state: AssetTableState, version: int, actions: Sequence[Mapping[str, Any]]) -> AssetTableState:
    """The state after the commit ``version`` of ``actions`` (``state`` is left as it was)."""
    out = AssetTableState(version, state.ict, dict(state.adds), dict(state.protocol), dict(state.metadata))
    for action in actions:
        if "add" in action:
            out.adds[unquote(action["add"]["path"])] = dict(action["add"])
        elif "remove" in action:
            out.adds.pop(unquote(action["remove"]["path"]), None)
        elif "protocol" in action:
            out.protocol = dict(action["protocol"])
        elif "metaData" in action:
            out.metadata = dict(action["metaData"])
        elif "commitInfo" in action:
            out.ict = int(action["commitInfo"].get("inCommitTimestamp") or out.ict)
    return out


def state_from_log(checkpoint: tuple[int, bytes] | None, commits: Sequence[tuple[int, bytes]]) -> AssetTableState:
    """The state at the last of ``commits`` (``(version, bytes)``, in order, every one after the checkpoint),
    starting from ``checkpoint`` (``(version, bytes)``) when there is one.

    Raises:
        ValueError: a commit is not JSON lines; pyarrow.ArrowInvalid: the checkpoint is not Parquet.
    """
    state = AssetTableState()
    if checkpoint is not None:
        protocol, metadata, adds = read_checkpoint(checkpoint[1])
        state = AssetTableState(checkpoint[0], 0, {unquote(a["path"]): a for a in adds}, protocol, metadata)
    for version, data in commits:
        state = apply_actions(state, version, [json.loads(line) for line in data.splitlines() if line.strip()])
    return state


def dimension_values(folder: str, depth: int) -> list[str]:
    """The dimension values of a partition folder: its ``depth`` segments percent-decoded (a lone ``%``: ``""``).

    Raises:
        ValueError: ``folder`` does not have ``depth`` segments.
    """
    segments = folder.split("/")
    if len(segments) != depth:
        raise ValueError(
            f"partition folder {folder!r} has {len(segments)} level(s), but the asset table has {depth} "
            "dimension column(s): give one column name per folder level below the asset's folder"
        )
    return ["" if s == "%" else unquote(s) for s in segments]


def _schema_bytes(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def _unify(asset: str, base: pa.Schema | None, sources: Sequence[PartitionSource]) -> pa.Schema:
    schemas = [base] if base is not None else []
    for source in sources:
        if source.manifest is not None and source.manifest.schema is not None:
            schemas.append(source.manifest.schema)
    if not schemas:
        return pa.schema([])
    try:
        return pa.unify_schemas([pa.schema(list(s)) for s in schemas])
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        folders = [s.folder for s in sources]
        raise ValueError(
            f"asset table {asset!r}: the schema of partition(s) {folders} cannot join the asset's ({exc}); one "
            "Delta table needs one type per column. Rewrite the partitions with matching column types"
        ) from None


def asset_actions(
    state: AssetTableState,
    sources: Sequence[PartitionSource],
    *,
    asset: str,
    columns: Sequence[str],
    size_of: Callable[[str, int | None], int],
    now_ms: int,
) -> list[dict[str, Any]] | None:
    """The commit that makes the table list exactly the live files of ``sources`` (the other partitions'
    files stay as they are), or ``None`` when it lists them already (or there is no table and no partition
    dataset to make it from).

    Args:
        state: the table as last read (``version`` ``-1``: the commit creates it).
        sources: the partitions to bring up to date, each with its live manifest.
        asset: the asset's folder (for messages and the table's id).
        columns: one dimension column name per folder level below the asset's folder.
        size_of: a file's size in bytes given its asset-relative path and what the manifest records.
        now_ms: the commit's time (its In-Commit Timestamp, kept above the last one).

    Raises:
        ValueError: partitions whose schemas cannot be unified, a column Delta cannot hold, or a
            folder that does not have one level per dimension column.
    """
    if state.version < 0 and all(s.manifest is None for s in sources):
        return None  # no partition dataset yet: no table either
    depth = len(columns)
    data_schema = _unify(asset, state.data_schema, sources)
    dims = [c for c in columns if c not in data_schema.names]
    inner: list[str] = [c for c in (state.metadata.get("partitionColumns") or []) if c not in columns]
    for source in sources:
        for column in source.manifest.partition_by if source.manifest is not None else ():
            if column not in inner:
                inner.append(column)
    full = pa.schema([*data_schema, *(pa.field(d, pa.string()) for d in dims)])
    check_delta_schema(full, key=asset)
    ict = max(now_ms, state.ict + 1)
    table_id = state.metadata.get("id") or str(uuid.uuid4())
    meta = metadata_action(full, [*dims, *inner], id=table_id, created_time=state.metadata.get("createdTime", ict))
    meta["metaData"]["configuration"].update(
        {SCHEMA_PROPERTY: _schema_bytes(data_schema), COLUMNS_PROPERTY: json.dumps(list(columns))}
    )
    protocol = protocol_action(full)["protocol"]
    changes: list[dict[str, Any]] = []
    versions: dict[str, int | None] = {}
    run_ids: list[str] = []
    for source in sources:
        values = dict(zip(columns, dimension_values(source.folder, depth), strict=True))
        dim_values = {d: values[d] for d in dims}
        manifest = source.manifest
        wanted: dict[str, dict[str, Any]] = {}
        if manifest is not None:
            schema = manifest.schema or data_schema
            for entry in manifest.files:
                path = f"{source.folder}/{entry.path}"
                size = size_of(path, entry.size_bytes)
                add = add_action(
                    entry, schema, manifest.partition_by, size=size, modification_time=ict, data_change=True
                )
                add["add"]["path"] = delta_path(path)
                add["add"]["partitionValues"] = {
                    **dim_values,
                    **partition_strings(entry, schema, manifest.partition_by),
                }
                wanted[path] = add
        inside = source.folder + "/"
        for path, body in state.adds.items():
            if path.startswith(inside) and path not in wanted:
                changes.append(
                    remove_action(
                        path,
                        body.get("partitionValues") or {},
                        body.get("size"),
                        deletion_timestamp=ict,
                        data_change=True,
                    )
                )
        changes += [add for path, add in wanted.items() if path not in state.adds]
        versions[source.folder] = manifest.version if manifest is not None else None
        if manifest is not None and manifest.run_id and manifest.run_id not in run_ids:
            run_ids.append(manifest.run_id)
    meta_changed = any(meta["metaData"][k] != state.metadata.get(k) for k in _COMPARED)
    if not changes and not meta_changed and protocol == state.protocol:
        return None
    info: dict[str, Any] = {
        "inCommitTimestamp": ict,
        "timestamp": ict,
        "operation": "CREATE TABLE" if state.version < 0 else "WRITE",
        "operationParameters": {"partitions": json.dumps(versions, ensure_ascii=False)},
        "engineInfo": ENGINE,
        "isBlindAppend": False,
        "tableId": table_id,
    }
    if len(run_ids) == 1:
        info["runId"] = run_ids[0]
    elif run_ids:
        info["runIds"] = run_ids
    actions: list[dict[str, Any]] = [{"commitInfo": info}]
    if protocol != state.protocol:
        actions.append({"protocol": protocol})
    if meta_changed:
        actions.append(meta)
    return actions + changes
