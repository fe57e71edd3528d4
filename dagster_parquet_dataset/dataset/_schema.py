"""Schema rules for appends and merges: what may differ, and the errors that say how."""

from __future__ import annotations

import pyarrow as pa


def evolve_schema(dataset: pa.Schema, incoming: pa.Schema, *, allow_new_columns: bool, key: str) -> pa.Schema:
    """The dataset schema after appending data of schema ``incoming``.

    Column order may differ; types must match exactly. New columns are added
    at the end only with ``allow_new_columns`` and only if nullable.

    Raises:
        ValueError: columns are missing, have other types, or are new without
            the opt-in; the message names every differing column.
    """
    problems: list[str] = []
    missing = [f.name for f in dataset if incoming.get_field_index(f.name) < 0]
    if missing:
        problems.append(f"missing columns {missing}")
    for field in incoming:
        idx = dataset.get_field_index(field.name)
        if idx >= 0 and not dataset.field(idx).type.equals(field.type):
            problems.append(f"column {field.name!r} is {field.type} but the dataset has {dataset.field(idx).type}")
    new = [f for f in incoming if dataset.get_field_index(f.name) < 0]
    if new and not allow_new_columns:
        problems.append(f"new columns {[f.name for f in new]} (pass allow_new_columns=True to add them)")
    not_nullable = [f.name for f in new if not f.nullable]
    if new and allow_new_columns and not_nullable:
        problems.append(f"new columns {not_nullable} are not nullable; older files cannot hold them")
    if problems:
        raise ValueError(f"dataset {key!r}: the data's schema differs: " + "; ".join(problems))
    return pa.schema(list(dataset) + new, metadata=dataset.metadata)


def conform_table(table: pa.Table, schema: pa.Schema, *, key: str) -> pa.Table:
    """``table`` with ``schema``'s column order and types (safe casts only).

    Raises:
        ValueError: a column is missing or extra, or a type cannot be cast safely.
    """
    missing = [n for n in schema.names if n not in table.column_names]
    extra = [n for n in table.column_names if schema.get_field_index(n) < 0]
    if missing or extra:
        raise ValueError(f"dataset {key!r}: the source's columns differ: missing {missing}, unknown {extra}")
    table = table.select(schema.names)
    if table.schema.equals(schema, check_metadata=False):
        return table
    try:
        return table.cast(pa.schema(list(schema), metadata=table.schema.metadata))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        diffs = [
            f"{f.name!r} is {table.schema.field(f.name).type}, dataset has {f.type}"
            for f in schema
            if not table.schema.field(f.name).type.equals(f.type)
        ]
        raise ValueError(
            f"dataset {key!r}: the source cannot be cast to the dataset's types: {diffs} ({exc})"
        ) from None
