"""The manifest a commit makes (:func:`new_manifest`) and the token of a write (:func:`new_txn`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timezone

import pyarrow as pa

from .._dataset_options import DatasetOptions
from ..manifest import FORMAT_VERSION, DatasetManifest, FileEntry, encode_schema, schema_hash


def new_txn() -> str:
    """A write token, unique to one transaction."""
    return uuid.uuid4().hex[:16]


def new_manifest(
    options: DatasetOptions,
    key: str,
    entries: Sequence[FileEntry],
    schema: pa.Schema,
    *,
    run_id: str | None,
    metadata: dict[str, str] | None,
    partition_by: Sequence[str],
    operation: str,
) -> DatasetManifest:
    """A manifest listing ``entries`` (version, token and obsolete files are set by the commit)."""
    return DatasetManifest(
        dataset_key=key,
        parts=[e.path for e in entries],
        row_count=sum(e.row_count or 0 for e in entries),
        schema_hash=schema_hash(schema),
        compression=options.compression,
        created_at_utc=datetime.now(timezone.utc).isoformat(),
        run_id=run_id,
        metadata=metadata,
        format_version=FORMAT_VERSION,
        version=1,
        files=tuple(entries),
        arrow_schema=encode_schema(schema),
        partition_by=tuple(partition_by),
        operation=operation,
    )
