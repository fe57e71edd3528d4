"""Smaller CLI frictions (issue 30 point 6): ``--columns amout`` says "did you mean 'amount'", ``show`` fills
``NULLS`` for nullable columns."""

from __future__ import annotations

import pyarrow as pa

from ._cli import Target, one_line_error


def test_an_unknown_column_suggests_the_close_one(local: Target) -> None:
    local.ds.write_dataset(pa.table({"order_id": [1], "amount": [2.0]}), "orders")
    message = one_line_error(local.cli("head", "orders", "--columns", "amout"))
    assert "has no column 'amout' (did you mean 'amount'?); its columns are order_id, amount" in message


def test_show_fills_nulls_for_every_column(local: Target) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("note", pa.string())])
    local.ds.write_dataset(pa.table({"id": [1], "note": ["x"]}, schema=schema), "notes")
    lines = local.cli("show", "notes").stdout.splitlines()
    start = lines.index("schema:")
    assert lines[start + 1].split() == ["COLUMN", "TYPE", "NULLS"]
    assert lines[start + 2].split() == ["id", "int64", "not", "null"]
    assert lines[start + 3].split() == ["note", "string", "nullable"]
