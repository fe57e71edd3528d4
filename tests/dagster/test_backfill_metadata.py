"""``partition_expr`` outputs get the metadata of any other output: preview, column schema with descriptions.

In one-partition runs and in single-run backfills over several partitions
(issue 19: the backfill path used to skip the presentation of its output).
"""

import datetime as dt
from collections.abc import Iterator

import dagster as dg
import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import RemoteStoreIOManager

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-01")
DECLARED = dg.TableSchema(
    columns=[
        dg.TableColumn("day", "date32", description="the day of the sale"),
        dg.TableColumn("value", "string", description="what was sold"),
    ]
)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


def _sales() -> dg.AssetsDefinition:
    @dg.asset(
        partitions_def=DAILY,
        backfill_policy=dg.BackfillPolicy.single_run(),
        metadata={"partition_expr": "day", "dagster/column_schema": DECLARED},
    )
    def sales(context: dg.AssetExecutionContext) -> pa.Table:
        days = [dt.date.fromisoformat(str(k)) for k in context.partition_keys]
        rows = [(d, i) for d in days for i in range(3)]
        return pa.table({"day": pa.array([d for d, _ in rows], pa.date32()), "value": [f"{d}#{i}" for d, i in rows]})

    return sales


def _preview_values(md: dg.MetadataValue) -> list[str]:
    lines = md.md_str.splitlines()  # type: ignore[attr-defined]
    return [line.split(" | ")[1].rstrip(" |") for line in lines[2:] if line.startswith("| ")]


def _check(md: dict[str, dg.MetadataValue], day: str, datasets: ParquetDatasetStore) -> None:
    assert _preview_values(md["preview"]) == [f"{day}#{i}" for i in range(3)]
    cols = {c.name: c.description for c in md["dagster/column_schema"].schema.columns}  # type: ignore[attr-defined]
    assert cols == {"day": "the day of the sale", "value": "what was sold"}
    stored = datasets.read_dataset(f"sales/{day}").schema
    assert stored.field("value").metadata[b"description"] == b"what was sold"


def test_one_partition_run_has_preview_and_descriptions(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    result = dg.materialize(
        [_sales()], resources={"io_manager": io_manager}, instance=instance, partition_key="2024-01-07"
    )
    (mat,) = result.asset_materializations_for_node("sales")
    _check(mat.metadata, "2024-01-07", datasets)


def test_each_partition_of_a_range_has_its_own_preview(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    tags = {"dagster/asset_partition_range_start": "2024-01-02", "dagster/asset_partition_range_end": "2024-01-04"}
    result = dg.materialize([_sales()], resources={"io_manager": io_manager}, instance=instance, tags=tags)
    mats = {m.partition: m.metadata for m in result.asset_materializations_for_node("sales")}
    assert sorted(mats) == ["2024-01-02", "2024-01-03", "2024-01-04"]
    for day, md in mats.items():
        _check(md, day, datasets)
