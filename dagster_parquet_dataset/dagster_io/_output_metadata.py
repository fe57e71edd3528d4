"""What an output records: the manifest metadata written with its dataset, and its Dagster output metadata."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from dagster import MetadataValue, OutputContext

from . import _context as _ctx
from . import _presentation as _present
from ._asset_data_version import data_version_of
from ._handler_base import (
    ASSET_KEY_KEY,
    OUTPUT_NAME_KEY,
    PARTITION_DIMENSION_PREFIX,
    PARTITION_KEY_KEY,
    PYTHON_TYPE_KEY,
    STEP_KEY_KEY,
)
from ._wording import human_bytes, version_metadata
from ._write_modes import Written
from .options import WriteOptions


def manifest_metadata(context: OutputContext, type_name: str, partition_key: str | None = None) -> dict[str, str]:
    """The manifest metadata of an output: its Python type and owner (asset and partition, or step and output).

    ``partition_key`` picks one partition of a multi-partition output (a backfill); by default the
    output's own partition.

    Raises:
        ValueError: a multi-dimension partition key its definition cannot parse.
    """
    metadata = {PYTHON_TYPE_KEY: type_name}
    if context.has_asset_key:
        metadata[ASSET_KEY_KEY] = context.asset_key.to_user_string()
        if context.has_asset_partitions:
            partition_key = context.asset_partition_keys[0] if partition_key is None else partition_key
            metadata[PARTITION_KEY_KEY] = str(partition_key)
            _values, by_dim = _ctx.partition_values(_ctx.partitions_def_of(context), partition_key)
            for dim, value in (by_dim or {}).items():
                metadata[PARTITION_DIMENSION_PREFIX + dim] = value
    else:
        step_key, name = _ctx.step_key_of(context), _ctx.name_of(context)
        if step_key is not None:
            metadata[STEP_KEY_KEY] = step_key
        if name is not None:
            metadata[OUTPUT_NAME_KEY] = name
    return metadata


def output_metadata(
    context: OutputContext,
    *,
    key: str,
    uri: str,
    written: Written,
    type_name: str,
    options: WriteOptions,
    preview: pa.Table | None = None,
) -> dict[str, Any]:
    """The output metadata of one committed write: row counts, column schema, location, version, sizes, preview."""
    manifest = written.manifest
    schema = manifest.schema
    declared = _present.declared_descriptions(context.definition_metadata)
    partitioned = context.has_asset_key and context.has_asset_partitions
    row_count_key = "dagster/partition_row_count" if partitioned else "dagster/row_count"
    out: dict[str, Any] = {row_count_key: MetadataValue.int(manifest.row_count)}
    if schema is not None:
        out[_present.COLUMN_SCHEMA_KEY] = MetadataValue.table_schema(_present.column_schema(schema, declared))
    entries = manifest.file_entries()
    out.update(
        {
            "dagster/uri": MetadataValue.url(uri),
            "dataset_key": MetadataValue.text(key),
            "manifest_version": version_metadata(manifest.version),
            "data_version": MetadataValue.text(data_version_of(manifest).value),
            "write_mode": MetadataValue.text(options.write_mode),
            "rows_written": MetadataValue.int(written.rows),
            "part_count": MetadataValue.int(len(entries)),
        }
    )
    if written.bytes is not None:
        out["bytes_written"] = MetadataValue.int(written.bytes)  # for machines (and the UI's plot)
        out["size_written"] = MetadataValue.text(human_bytes(written.bytes))  # as the CLI shows it: 11.7 KiB
    partition_by = list(getattr(manifest, "partition_by", ()) or ())
    if partition_by:
        out["partition_by"] = MetadataValue.json(partition_by)
    out.update(written.extra)
    out["python_type"] = MetadataValue.text(type_name)
    out.update(_present.preview_metadata(preview, written.rows))
    return out
