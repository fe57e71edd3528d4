"""Parts written the way an external writer (Spark's executors) writes them: through the store, by the test.

Only public names are used: :mod:`dagster_parquet_dataset.dataset.engine` encodes a part and reports its
:class:`FileEntry` (row count, size, statistics), exactly what an executor sends back to the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dagster_parquet_dataset import Store
from dagster_parquet_dataset.dataset.engine import PartOptions, encode_part, encode_partition_values, partition_folder
from dagster_parquet_dataset.dataset.manifest import FileEntry

_OPTIONS = PartOptions("zstd", None)


def file_schema(schema: pa.Schema, partition_by: Sequence[str]) -> pa.Schema:
    """``schema`` without the partition columns (the parts leave them out)."""
    return pa.schema([f for f in schema if f.name not in partition_by])


def write_part(
    store: Store,
    key: str,
    relative: str,
    table: pa.Table,
    schema: pa.Schema,
    partition_by: Sequence[str] = (),
    values: Sequence[Any] | None = None,
) -> FileEntry:
    """Encode ``table`` (columns of ``schema``, partition columns included) as ``{key}/{relative}``.

    With ``partition_by``, ``values`` are the part's partition values; the part leaves those columns out
    and its entry carries them in the manifest's form.
    """
    target = file_schema(schema, partition_by)
    data = table.select(target.names).cast(target)
    encoded = encode_partition_values(partition_by, list(values or ()), schema) if partition_by else None
    return encode_part(store, f"{key}/{relative}", relative, target, [data], options=_OPTIONS, partition_values=encoded)


def write_external_parts(
    store: Store,
    key: str,
    table: pa.Table,
    schema: pa.Schema,
    partition_by: Sequence[str],
    name: Callable[[int], str],
    written: list[str] | None = None,
) -> list[FileEntry]:
    """``table`` split by partition (one part per partition value), named ``name(index)`` in its folder.

    Each part's path (relative to ``key``) is added to ``written`` before the part is written, so a
    caller can abandon what it started after a failure.
    """
    written = [] if written is None else written
    if not partition_by:
        written.append(name(0))
        return [write_part(store, key, written[-1], table, schema)]
    entries = []
    values = sorted({tuple(r[c] for c in partition_by) for r in table.to_pylist()}, key=repr)
    for index, value in enumerate(values):
        mask = None
        for col, v in zip(partition_by, value, strict=True):
            cond = pc.equal(table.column(col), pa.scalar(v, table.schema.field(col).type))
            mask = cond if mask is None else pc.and_(mask, cond)
        written.append(f"{partition_folder(partition_by, list(value))}/{name(index)}")
        entries.append(write_part(store, key, written[-1], table.filter(mask), schema, partition_by, value))
    return entries
