"""What the Dagster UI shows of an output: a small table preview and column descriptions.

* **Preview**: the first ``preview_rows`` rows of what an output wrote, taken
  as the data goes by (a table is sliced, a stream keeps its first rows while
  it is written, a Spark DataFrame is collected with ``limit(n)``), never read
  back from the store. Shown as a Markdown table (output metadata ``preview``).
* **Column descriptions**: an asset's ``dagster/column_schema`` definition
  metadata (a ``TableSchema`` whose columns have descriptions) is written into
  the Parquet files as Arrow field metadata (key :data:`DESCRIPTION_KEY`), so
  it travels with the data, and comes back in the materialization's
  ``dagster/column_schema``.

:class:`Presentation` does both for one output; the IO manager creates one
per output.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from dagster import MetadataValue, TableColumn, TableSchema

#: Arrow field metadata key holding a column's description.
DESCRIPTION_KEY = b"description"
#: Dagster's definition/materialization metadata key for a table schema.
COLUMN_SCHEMA_KEY = "dagster/column_schema"
#: Longest cell shown in a preview; longer values are cut with an ellipsis.
_MAX_CELL = 80


def declared_column_schema(metadata: Mapping[str, Any] | None) -> TableSchema | None:
    """The ``dagster/column_schema`` an asset declares in its definition metadata, if any.

    Accepts a ``TableSchema`` or a ``MetadataValue.table_schema(...)``; anything else is ignored.
    """
    value = (metadata or {}).get(COLUMN_SCHEMA_KEY)
    value = getattr(value, "schema", value)  # TableSchemaMetadataValue -> TableSchema
    return value if isinstance(value, TableSchema) else None


def declared_descriptions(metadata: Mapping[str, Any] | None) -> dict[str, str]:
    """Column name -> description from the declared ``dagster/column_schema`` (columns without one left out)."""
    declared = declared_column_schema(metadata)
    if declared is None:
        return {}
    return {c.name: c.description for c in declared.columns if c.description}


def describe_schema(schema: pa.Schema, descriptions: Mapping[str, str]) -> pa.Schema:
    """``schema`` with each described top-level field's metadata holding its description.

    Columns the descriptions do not name are left as they are; descriptions of
    columns the schema lacks are ignored.
    """
    if not descriptions or not any(name in descriptions for name in schema.names):
        return schema
    fields = []
    for f in schema:
        text = descriptions.get(f.name)
        if text is not None:
            f = f.with_metadata({**(f.metadata or {}), DESCRIPTION_KEY: text.encode("utf-8")})
        fields.append(f)
    return pa.schema(fields, metadata=schema.metadata)


def _with_schema(data: pa.Table | pa.RecordBatchReader, schema: pa.Schema) -> pa.Table | pa.RecordBatchReader:
    """``data`` relabelled with ``schema`` (same columns and types, other field metadata)."""
    if schema is data.schema:
        return data
    if isinstance(data, pa.Table):
        return pa.Table.from_arrays(data.columns, schema=schema)
    reader = data
    return pa.RecordBatchReader.from_batches(
        schema, (pa.RecordBatch.from_arrays(b.columns, schema=schema) for b in reader)
    )


def column_schema(schema: pa.Schema, descriptions: Mapping[str, str] = {}) -> TableSchema:  # noqa: B006
    """A ``TableSchema`` of ``schema``: Arrow type names, descriptions from the field metadata.

    A column without a description in its field metadata takes the one in
    ``descriptions`` (the declared ones), if any.
    """
    columns = []
    for f in schema:
        stored = (f.metadata or {}).get(DESCRIPTION_KEY)
        text = stored.decode("utf-8", "replace") if stored is not None else descriptions.get(f.name)
        columns.append(TableColumn(name=f.name, type=str(f.type), description=text))
    return TableSchema(columns=columns)


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    if len(text) > _MAX_CELL:
        text = text[: _MAX_CELL - 1] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("\r", " ")


def preview_markdown(table: pa.Table) -> str:
    """A Markdown table of ``table`` (header, then one line per row)."""
    names = table.schema.names
    lines = ["| " + " | ".join(_cell(n) for n in names) + " |", "|" + "---|" * len(names)]
    for row in table.to_pylist():
        lines.append("| " + " | ".join(_cell(row[n]) for n in names) + " |")
    return "\n".join(lines)


def preview_metadata(preview: pa.Table | None, total_rows: int) -> dict[str, Any]:
    """The ``preview`` output metadata entry (empty when there is no preview)."""
    if preview is None or preview.num_columns == 0:
        return {}
    text = preview_markdown(preview)
    if total_rows > preview.num_rows:
        text += f"\n\n(first {preview.num_rows} of {total_rows} rows written)"
    return {"preview": MetadataValue.md(text)}


class Presentation:
    """What one output shows: column descriptions put into its Arrow schema, and a preview kept as it is written.

    The IO manager creates one per output. Data converted in this process goes
    through :meth:`present` (descriptions in the schema, so the Parquet files and
    the manifest carry them; the first rows kept); a handler that writes without
    Arrow in this process (Spark) writes as before: its files get no
    descriptions, and its preview is ``obj.limit(n)`` collected
    (:meth:`preview_by_limit`).

    Attributes:
        preview: the first rows written (``None`` until something was written,
            or when ``preview_rows`` is 0).
    """

    def __init__(self, descriptions: Mapping[str, str], preview_rows: int) -> None:
        self.descriptions = dict(descriptions)
        self.preview_rows = preview_rows
        self.preview: pa.Table | None = None

    def present(self, data: pa.Table | pa.RecordBatchReader) -> pa.Table | pa.RecordBatchReader:
        """``data`` with the descriptions in its schema, remembering its first rows as they go by."""
        data = _with_schema(data, describe_schema(data.schema, self.descriptions))
        if self.preview_rows <= 0:
            return data
        if isinstance(data, pa.Table):
            self.preview = data.slice(0, self.preview_rows)
            return data
        return self._tee(data)

    def _tee(self, reader: pa.RecordBatchReader) -> pa.RecordBatchReader:
        """``reader`` unchanged, keeping its first ``preview_rows`` rows as they stream by."""
        kept: list[pa.RecordBatch] = []
        self.preview = reader.schema.empty_table()

        def batches() -> Iterator[pa.RecordBatch]:
            have = 0
            for batch in reader:
                if have < self.preview_rows:
                    kept.append(batch.slice(0, self.preview_rows - have))
                    have += kept[-1].num_rows
                    self.preview = pa.Table.from_batches(kept, schema=reader.schema)
                yield batch

        return pa.RecordBatchReader.from_batches(reader.schema, batches())

    def preview_by_limit(self, obj: Any) -> None:
        """For a DataFrame written without Arrow (Spark): ``obj.limit(n)`` collected (n rows only)."""
        if self.preview_rows <= 0 or not hasattr(obj, "limit") or not hasattr(obj, "toArrow"):
            return
        self.preview = obj.limit(self.preview_rows).toArrow()
