"""The data version of a dataset version: one hash of what its parts hold, in part order."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from ..manifest import DatasetManifest, FileEntry


def data_version(manifest: DatasetManifest) -> str | None:
    """A hash of ``manifest``'s content: its schema and, in part order, each part's content hash,
    row count and partition values.

    Equal data written with equal settings gives the same data version, whatever the run, the
    time, the version number or the part names (which carry each write's unique token). A change
    of schema, rows, row order, compression or row-group layout, or a compaction, changes it.

    Returns ``None`` when a part has no recorded content hash (a Spec-only manifest, or parts
    written by a writer that does not hash them).
    """
    return _combined(manifest.arrow_schema or manifest.schema_hash, manifest.file_entries())


def entries_hash(entries: Sequence[FileEntry]) -> str | None:
    """The content hash of the parts one write added (``None`` if one has none): what an
    idempotent commit records next to its key (see :meth:`Transaction.commit`)."""
    return _combined("", entries)


def _combined(schema: str, entries: Sequence[FileEntry]) -> str | None:
    if any(e.content_hash is None for e in entries):
        return None
    digest = hashlib.blake2b(digest_size=16)
    digest.update(schema.encode("utf-8"))
    for entry in entries:
        values = json.dumps(entry.partition_values, sort_keys=True, default=str)
        digest.update(f"\n{entry.content_hash}|{entry.row_count}|{values}".encode())
    return digest.hexdigest()
