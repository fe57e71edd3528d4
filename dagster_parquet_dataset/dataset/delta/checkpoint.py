"""Delta checkpoints: the whole table state at one version as one Parquet file (pyarrow), and
reading one back (the log writer's fallback when it cannot rebuild a state from manifests)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

_STR_MAP = pa.map_(pa.string(), pa.string())
_ADD = pa.struct(
    [
        ("path", pa.string()),
        ("partitionValues", _STR_MAP),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("stats", pa.string()),
    ]
)
_METADATA = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", _STR_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", pa.list_(pa.string())),
        ("configuration", _STR_MAP),
        ("createdTime", pa.int64()),
    ]
)
_PROTOCOL = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", pa.list_(pa.string())),
        ("writerFeatures", pa.list_(pa.string())),
    ]
)
#: The columns of a checkpoint this package writes (one action per row, the others null).
CHECKPOINT_SCHEMA = pa.schema([("protocol", _PROTOCOL), ("metaData", _METADATA), ("add", _ADD)])


def _map(values: Mapping[str, Any] | None) -> list[tuple[str, Any]] | None:
    return None if values is None else list(values.items())


def checkpoint_bytes(
    protocol: Mapping[str, Any], metadata: Mapping[str, Any], adds: Iterable[Mapping[str, Any]]
) -> tuple[bytes, int]:
    """A checkpoint's Parquet bytes and its number of actions, from the ``protocol`` and ``metaData``
    actions' bodies and the bodies of every live file's ``add``."""
    meta = dict(metadata)
    meta["format"] = {"provider": meta["format"]["provider"], "options": _map(meta["format"].get("options", {}))}
    meta["configuration"] = _map(meta.get("configuration", {}))
    rows: list[dict[str, Any]] = [{"protocol": dict(protocol)}, {"metaData": meta}]
    for add in adds:
        rows.append({"add": {**add, "partitionValues": _map(add["partitionValues"]), "dataChange": False}})
    table = pa.Table.from_pylist(rows, schema=CHECKPOINT_SCHEMA)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().to_pybytes(), len(rows)


def read_checkpoint(data: bytes) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """The ``protocol`` and ``metaData`` bodies and the ``add`` bodies of a checkpoint (any writer's).

    Raises:
        pyarrow.ArrowInvalid / KeyError: not a checkpoint.
    """
    table = pq.read_table(pa.BufferReader(data), columns=["protocol", "metaData", "add"])
    protocol: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    adds: list[dict[str, Any]] = []
    for row in table.to_pylist():
        if row.get("protocol"):
            protocol = {k: v for k, v in row["protocol"].items() if v is not None}
        if row.get("metaData"):
            metadata = _plain(row["metaData"])
        if row.get("add"):
            adds.append(_plain(row["add"]))
    return protocol, metadata, adds


_MAPS = frozenset({"partitionValues", "options", "configuration"})


def _plain(body: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint row's struct with its maps (lists of pairs) back as dicts, JSON-like."""
    out: dict[str, Any] = {}
    for k, v in body.items():
        if k in _MAPS:
            out[k] = dict(v or [])
        elif isinstance(v, dict):
            out[k] = _plain(v)
        else:
            out[k] = v
    return json.loads(json.dumps(out))
