"""Checks of part entries an external writer (Spark's executors) hands to a commit.

An external commit (``commit_write``, ``commit_append``, ``commit_merge``)
refuses the whole commit, changing nothing, unless every entry is a part that
exists with its size, row count and schema, is not already listed by the live
version, and carries exactly the dataset's partition values, which its
``col=value`` folders spell (a Hive reader reads those).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import DatasetIncomplete, NotFound
from ...storage.base import Store, validate_key
from ..format.layout import is_reserved
from ..format.partition import encode_partition_values, folder_mismatch, partition_scalar
from ..format.schema import file_schema_matches
from ..io.parallel import parallel_map
from ..manifest import FileEntry


def check_entries(key: str, entries: Sequence[FileEntry]) -> list[FileEntry]:
    """``entries`` as a list, checked in shape (no I/O).

    Raises:
        TypeError: an entry is not a ``FileEntry``.
        ValueError: an unsafe or reserved part path, a missing row count, or a path listed twice.
    """
    entries = list(entries)
    for entry in entries:
        if not isinstance(entry, FileEntry):
            raise TypeError(f"entries must be FileEntry objects, got {type(entry).__name__}")
        validate_key(entry.path, what="part path")
        if is_reserved(entry.path):
            raise ValueError(f"part path {entry.path!r} is reserved for the dataset's own files")
        if entry.row_count is None:
            raise ValueError(f"part {entry.path!r} has no row count; read it from the file's footer")
    if len({e.path for e in entries}) != len(entries):
        raise ValueError("entries list the same part path more than once")
    return entries


def check_external_entries(
    store: Store,
    key: str,
    entries: Sequence[FileEntry],
    schema: pa.Schema,
    partition_by: Sequence[str],
    *,
    listed: Collection[str],
) -> list[FileEntry]:
    """``entries`` checked as :func:`check_entries` does, then against ``schema`` and storage.

    ``schema`` is the dataset schema the parts' rows have (partition columns
    included); ``listed`` the parts the live version lists (an append or a
    merge must not list one again). One size request and one footer read per
    entry, on parallel threads.

    Raises:
        ValueError: a listed path, missing or wrong ``partition_values``, or a part whose
            ``col=value`` folders disagree with its ``partition_values``.
        DatasetIncomplete: a part is missing, or its size, row count or schema
            is not what the entry says.
    """
    entries = check_entries(key, entries)
    relisted = {e.path for e in entries}.intersection(listed)  # one pass over the live parts, no set of them
    for entry in entries:
        if entry.path in relisted:
            raise ValueError(f"part {entry.path!r} is already listed by the live version of dataset {key!r}")
        _check_partition_values(key, entry, schema, partition_by)
        mismatch = folder_mismatch(entry.path, partition_by, entry.partition_values, schema)
        if mismatch is not None:
            raise ValueError(
                f"dataset {key!r}: {mismatch}; a Hive reader (pyarrow, Spark, DuckDB) would read the values of "
                "its folder. Write the part into the folder of its partition values; nothing was committed"
            )

    def check(entry: FileEntry) -> None:
        _check_file(store, key, entry, schema, partition_by)

    parallel_map(check, entries)
    return entries


def _check_partition_values(key: str, entry: FileEntry, schema: pa.Schema, partition_by: Sequence[str]) -> None:
    values = entry.partition_values
    if not partition_by:
        if values:
            raise ValueError(
                f"part {entry.path!r} has partition_values {values!r} but dataset {key!r} is not partitioned"
            )
        return
    if not isinstance(values, dict) or sorted(values) != sorted(partition_by):
        raise ValueError(
            f"part {entry.path!r} of dataset {key!r} must carry partition_values for exactly the partition "
            f"columns {list(partition_by)}, got {values!r}"
        )
    for col in partition_by:
        raw = values[col]
        if raw is None:
            continue
        typ = schema.field(col).type
        try:
            canonical = encode_partition_values([col], [partition_scalar(raw, typ).as_py()], schema)[col]
        except (TypeError, ValueError, OverflowError, pa.ArrowException) as exc:
            raise ValueError(
                f"part {entry.path!r}: partition value {raw!r} of column {col!r} is not a {typ} ({exc})"
            ) from None
        if type(canonical) is not type(raw) or canonical != raw:
            raise ValueError(
                f"part {entry.path!r}: partition value {raw!r} of column {col!r} ({typ}) is not in the manifest's "
                f"encoding (expected {canonical!r}; build it with encode_partition_values)"
            )


def _check_file(store: Store, key: str, entry: FileEntry, schema: pa.Schema, partition_by: Sequence[str]) -> None:
    path = f"{key}/{entry.path}"
    try:
        size = store.size(path)
    except NotFound:
        raise DatasetIncomplete(
            f"part {entry.path!r} of dataset {key!r} does not exist; nothing was committed"
        ) from None
    if entry.size_bytes is not None and entry.size_bytes != size:
        raise DatasetIncomplete(
            f"part {entry.path!r} of dataset {key!r} is {size} bytes, its entry says {entry.size_bytes}; "
            "nothing was committed"
        )
    try:
        with store.open_input(path, size=size) as f:
            metadata = pq.read_metadata(f)
    except (OSError, pa.ArrowException, NotFound) as exc:
        raise DatasetIncomplete(
            f"part {entry.path!r} of dataset {key!r} is not a readable Parquet file ({exc}); nothing was committed"
        ) from None
    if metadata.num_rows != entry.row_count:
        raise DatasetIncomplete(
            f"part {entry.path!r} of dataset {key!r} holds {metadata.num_rows} rows, its entry says "
            f"{entry.row_count}; nothing was committed"
        )
    skip = set(partition_by) | set(entry.missing_columns)
    expected = pa.schema([f for f in schema if f.name not in skip])
    actual = metadata.schema.to_arrow_schema()
    if not file_schema_matches(actual, expected):
        raise DatasetIncomplete(
            f"part {entry.path!r} of dataset {key!r} has schema {actual.names} "
            f"({', '.join(str(t) for t in actual.types)}), not the dataset's {expected.names} "
            f"({', '.join(str(t) for t in expected.types)}); nothing was committed"
        )
