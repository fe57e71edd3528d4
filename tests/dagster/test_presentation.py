"""What the Dagster UI shows of an output: the ``preview`` table and column descriptions.

Run through ``dagster.materialize``; files and manifests are read back with an
independent ``ParquetDatasetStore`` and pyarrow on the same folder.
"""

import os

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dagster_parquet_dataset import LocalStore, MemoryStore, ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager

DECLARED = dg.TableSchema(
    columns=[
        dg.TableColumn("id", "int64", description="Customer id, unique"),
        dg.TableColumn("name", "string", description="Name | as typed"),
        dg.TableColumn("not_there", "string", description="declared but never written"),
    ]
)


def _metadata(result: dg.ExecuteInProcessResult) -> dict:
    [event] = result.get_asset_materialization_events()
    return dict(event.materialization.metadata)


def _preview_rows(md: str) -> list[str]:
    """The data lines of the Markdown preview (after the header and the separator)."""
    lines = [line for line in md.splitlines() if line.startswith("|")]
    return lines[2:]


def test_descriptions_reach_files_manifest_and_materialization(root: str) -> None:
    @dg.asset(metadata={"dagster/column_schema": DECLARED})
    def customers() -> pa.Table:
        return pa.table({"id": list(range(100)), "name": [f"n{i}" for i in range(100)], "extra": [1.5] * 100})

    result = dg.materialize(
        [customers],
        resources={"io_manager": RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)},
    )
    assert result.success
    datasets = ParquetDatasetStore(LocalStore(root), retain_versions=1)
    manifest = datasets.read_manifest("customers")
    [part] = manifest.parts
    file_schema = pq.read_schema(os.path.join(root, "customers", part))
    assert file_schema.field("id").metadata[b"description"] == b"Customer id, unique"
    assert file_schema.field("name").metadata[b"description"] == b"Name | as typed"
    assert not (file_schema.field("extra").metadata or {}).get(b"description")
    assert manifest.schema.field("id").metadata[b"description"] == b"Customer id, unique"
    assert datasets.read_dataset("customers").schema.field("name").metadata[b"description"] == b"Name | as typed"

    schema = _metadata(result)["dagster/column_schema"].schema
    by_name = {c.name: c for c in schema.columns}
    assert [c.name for c in schema.columns] == ["id", "name", "extra"]  # what was written, not what was declared
    assert by_name["id"].description == "Customer id, unique"
    assert by_name["id"].type == "int64"
    assert by_name["extra"].description is None


def test_preview_holds_only_the_first_rows_and_escapes_cells(root: str) -> None:
    @dg.asset
    def notes() -> pd.DataFrame:
        return pd.DataFrame({"id": range(50), "text": ["a|b\nc"] + [f"t{i}" for i in range(1, 50)]})

    io = RemoteStoreIOManager(store=LocalStoreResource(root=root), preview_rows=3, retain_versions=1)
    result = dg.materialize([notes], resources={"io_manager": io})
    md = _metadata(result)["preview"].md_str
    rows = _preview_rows(md)
    assert len(rows) == 3
    assert rows[0].startswith("| 0 | a\\|b c |")  # the pipe is escaped, the newline gone: still one table row
    assert "t2" in rows[2] and "t3" not in md
    assert "first 3 of 50 rows" in md


def test_preview_rows_zero_turns_it_off(root: str) -> None:
    @dg.asset
    def small() -> pa.Table:
        return pa.table({"x": [1, 2]})

    io = RemoteStoreIOManager(store=LocalStoreResource(root=root), preview_rows=0, retain_versions=1)
    metadata = _metadata(dg.materialize([small], resources={"io_manager": io}))
    assert "preview" not in metadata
    assert metadata["dagster/row_count"].value == 2


class Start(dg.Config):
    start: int = 0


def test_streamed_append_previews_the_appended_rows_without_rereading(root: str) -> None:
    """A RecordBatchReader is consumed once by the write; the preview is kept as it streams by."""

    @dg.asset(metadata={"write_mode": "append"})
    def events(config: Start) -> pa.RecordBatchReader:
        batches = [pa.record_batch({"n": [config.start + i, config.start + i + 1]}) for i in range(0, 10, 2)]
        return pa.RecordBatchReader.from_batches(batches[0].schema, iter(batches))

    io = RemoteStoreIOManager(store=LocalStoreResource(root=root), preview_rows=3, retain_versions=1)
    dg.materialize([events], resources={"io_manager": io})
    result = dg.materialize(
        [events], resources={"io_manager": io}, run_config={"ops": {"events": {"config": {"start": 100}}}}
    )
    metadata = _metadata(result)
    rows = _preview_rows(metadata["preview"].md_str)
    assert rows == ["| 100 |", "| 101 |", "| 102 |"]
    assert metadata["dagster/row_count"].value == 20
    assert ParquetDatasetStore(LocalStore(root), retain_versions=1).read_dataset("events").num_rows == 20


def test_descriptions_with_partition_by_and_merge(root: str) -> None:
    schema = dg.TableSchema(columns=[dg.TableColumn("k", "int64", description="the key")])

    @dg.asset(metadata={"dagster/column_schema": schema, "write_mode": "merge", "key_columns": ["k"]})
    def merged() -> pa.Table:
        return pa.table({"k": [1, 2], "v": ["a", "b"]})

    io = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)
    result = dg.materialize([merged], resources={"io_manager": io})
    cols = {c.name: c.description for c in _metadata(result)["dagster/column_schema"].schema.columns}
    assert cols == {"k": "the key", "v": None}
    assert ParquetDatasetStore(LocalStore(root), retain_versions=1).read_manifest("merged").schema.field(
        "k"
    ).metadata == {b"description": b"the key"}


def test_an_overwrite_without_descriptions_drops_them() -> None:
    """The dataset layer records each write's own field metadata (no stale metadata from an earlier schema)."""
    datasets = ParquetDatasetStore(MemoryStore(), retain_versions=1)
    described = pa.schema([pa.field("a", pa.int64(), metadata={b"description": b"old"})])
    datasets.write_dataset(pa.table({"a": [1]}, schema=described), "k")
    manifest = datasets.write_dataset(pa.table({"a": [2]}), "k", overwrite=True)
    assert not manifest.schema.field("a").metadata
    assert not datasets.read_dataset("k").schema.field("a").metadata


def test_preview_of_awkward_values(root: str) -> None:
    """Nulls, bytes, nested values, long strings and an empty output all give a well-formed table."""

    @dg.asset
    def awkward() -> pa.Table:
        return pa.table(
            {
                "b": pa.array([b"\x00\xff", None], pa.binary()),
                "nested": pa.array([{"x": [1, 2]}, None]),
                "long": ["y" * 500, ""],
            }
        )

    @dg.asset
    def empty() -> pa.Table:
        return pa.table({"x": pa.array([], pa.int64())})

    io = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)
    result = dg.materialize([awkward, empty], resources={"io_manager": io})
    md = result.asset_materializations_for_node("awkward")[0].metadata["preview"].md_str
    rows = _preview_rows(md)
    assert len(rows) == 2
    assert all(row.count(" | ") == 2 for row in rows)  # three cells per row, nothing leaked a separator
    assert max(len(cell) for row in rows for cell in row.split(" | ")) <= 82  # cut at 80 characters (+ "| ")
    assert "…" in rows[0]
    empty_md = result.asset_materializations_for_node("empty")[0].metadata["preview"].md_str
    assert empty_md.splitlines() == ["| x |", "|---|"]
