"""Pure builders of Delta log actions from this package's manifests (no I/O).

Delta's protocol (``PROTOCOL.md`` of delta-io/delta) fixes the forms used here: ``add``/``remove``
paths are RFC 2396 URIs relative to the table root (so a Hive-escaped ``%`` becomes ``%25``),
partition values are strings (null as null), statistics carry only exact bounds, and with
In-Commit Timestamps ``commitInfo`` is the first action of every commit.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.types as pat

from ..manifest import DatasetManifest, FileEntry
from .delta_schema import has_naive_timestamps, spark_schema

#: ``engineInfo`` of every commit this package writes.
ENGINE = "dagster-parquet-dataset"
#: Table properties of every table: In-Commit Timestamps from version 0 on.
CONFIGURATION = {"delta.enableInCommitTimestamps": "true"}
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_OPERATIONS = {"write": "WRITE", "overwrite": "WRITE", "append": "WRITE", "merge": "MERGE", "compact": "OPTIMIZE"}


def delta_path(relative: str) -> str:
    """A dataset-relative file path as a Delta ``path``: an RFC 2396 relative URI (``%`` → ``%25``,
    space → ``%20``, non-ASCII → its UTF-8 bytes percent-encoded)."""
    return quote(relative, safe="/=")


def millis(created_at_utc: str) -> int:
    """``created_at_utc`` (ISO 8601; UTC when it has no offset) in whole milliseconds since the epoch, rounded down.

    Raises:
        ValueError: not an ISO 8601 timestamp.
    """
    created = datetime.fromisoformat(created_at_utc)
    if created.tzinfo is None:
        created = created.replace(tzinfo=timezone.utc)
    return (created - _EPOCH) // timedelta(milliseconds=1)


def table_id(key: str, txn: str | None) -> str:
    """A stable Delta table ``id`` for the dataset ``key`` whose log starts at the commit ``txn``
    (a dataset deleted and written again has a new first commit, so a new table)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"dagster-parquet-dataset:{key}:{txn}"))


def partition_string(raw: Any, typ: pa.DataType) -> str | None:
    """A manifest partition value (its canonical JSON form) as Delta's partition value string."""
    if raw is None:
        return None
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if pat.is_timestamp(typ):
        per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[typ.unit]
        seconds, fraction = divmod(int(raw), per_second)
        micros = fraction * 1_000_000 // per_second
        return (_EPOCH + timedelta(seconds=seconds, microseconds=micros)).strftime("%Y-%m-%d %H:%M:%S.%f")
    return str(raw)


def partition_strings(entry: FileEntry, schema: pa.Schema, partition_by: Sequence[str]) -> dict[str, str | None]:
    """Every partition column's Delta value for ``entry`` (an unpartitioned dataset: ``{}``)."""
    values = entry.partition_values or {}
    return {c: partition_string(values.get(c), schema.field(c).type) for c in partition_by}


def _exact_bounds(typ: pa.DataType) -> bool:
    """Types whose manifest min/max are exact Delta bounds (floats: NaN; timestamps: Delta's stats
    are milliseconds; decimals and booleans: not used for skipping)."""
    return bool(pat.is_integer(typ) or pat.is_string(typ) or pat.is_large_string(typ) or pat.is_date32(typ))


def stats_json(entry: FileEntry, schema: pa.Schema) -> str | None:
    """The ``stats`` of an ``add``: ``numRecords`` and, per column the manifest has statistics of,
    ``nullCount`` and (exact bounds only) ``minValues``/``maxValues``; ``None`` without a row count."""
    if entry.row_count is None:
        return None
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    names = set(schema.names)
    for column, stat in (entry.stats or {}).items():
        if column not in names or not isinstance(stat, Mapping):
            continue
        if isinstance(stat.get("null_count"), int):
            nulls[column] = stat["null_count"]
        if _exact_bounds(schema.field(column).type) and stat.get("min") is not None and stat.get("max") is not None:
            lows[column], highs[column] = stat["min"], stat["max"]
    for column in entry.missing_columns:
        if column in names:
            nulls[column] = entry.row_count
    out = {"numRecords": entry.row_count, "minValues": lows, "maxValues": highs, "nullCount": nulls}
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False)


def add_action(
    entry: FileEntry,
    schema: pa.Schema,
    partition_by: Sequence[str],
    *,
    size: int,
    modification_time: int,
    data_change: bool,
) -> dict[str, Any]:
    """The ``add`` of one part."""
    add: dict[str, Any] = {
        "path": delta_path(entry.path),
        "partitionValues": partition_strings(entry, schema, partition_by),
        "size": size,
        "modificationTime": modification_time,
        "dataChange": data_change,
    }
    stats = stats_json(entry, schema)
    if stats is not None:
        add["stats"] = stats
    return {"add": add}


def remove_action(
    path: str,
    partition_values: Mapping[str, str | None],
    size: int | None,
    *,
    deletion_timestamp: int,
    data_change: bool,
) -> dict[str, Any]:
    """The ``remove`` of one part (``path`` dataset-relative, as the manifest lists it)."""
    remove: dict[str, Any] = {
        "path": delta_path(path),
        "deletionTimestamp": deletion_timestamp,
        "dataChange": data_change,
        "extendedFileMetadata": True,
        "partitionValues": dict(partition_values),
    }
    if size is not None:
        remove["size"] = size
    return {"remove": remove}


def protocol_action(schema: pa.Schema) -> dict[str, Any]:
    """The ``protocol``: writer 7 with ``inCommitTimestamp``; reader 3 / ``timestampNtz`` when a
    column is a timestamp without time zone, else reader 1."""
    if has_naive_timestamps(schema):
        return {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["timestampNtz"],
                "writerFeatures": ["inCommitTimestamp", "timestampNtz"],
            }
        }
    return {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["inCommitTimestamp"]}}


def metadata_action(schema: pa.Schema, partition_by: Sequence[str], *, id: str, created_time: int) -> dict[str, Any]:
    """The ``metaData`` of a table over ``schema`` (which holds the partition columns too).

    Raises:
        ValueError: a column Delta cannot hold (:func:`.delta_schema.check_delta_schema`).
    """
    return {
        "metaData": {
            "id": id,
            "format": {"provider": "parquet", "options": {}},
            "schemaString": spark_schema(schema),
            "partitionColumns": list(partition_by),
            "configuration": dict(CONFIGURATION),
            "createdTime": created_time,
        }
    }


def commit_info(manifest: DatasetManifest | None, *, version: int, timestamp: int, note: str = "") -> dict[str, Any]:
    """The ``commitInfo`` (first action) of Delta version ``version`` made from ``manifest``: its
    In-Commit Timestamp, operation, run id and write token. ``manifest`` is ``None`` for a version
    that only creates the table or stands for a dataset version whose manifest is gone (``note`` says which)."""
    info: dict[str, Any] = {"inCommitTimestamp": timestamp, "timestamp": timestamp}
    if manifest is None:
        info.update(operation="CREATE TABLE" if version == 0 else "WRITE", operationParameters={"note": note})
    else:
        info.update(
            operation=_OPERATIONS.get(manifest.operation or "write", "WRITE"),
            operationParameters={"datasetOperation": manifest.operation or "write"},
            runId=manifest.run_id,
            txn=manifest.txn,
            datasetVersion=manifest.version,
        )
    info.update(engineInfo=ENGINE, isBlindAppend=manifest is not None and manifest.operation == "append")
    return {"commitInfo": info}


def dumps(actions: Sequence[Mapping[str, Any]]) -> bytes:
    """A commit file's bytes: one JSON action per line."""
    return "".join(json.dumps(a, separators=(",", ":"), ensure_ascii=False) + "\n" for a in actions).encode("utf-8")
