"""``RemoteStoreIOManager(delta_log=True)``: every partition dataset an asset writes is a Delta table,
with the Dagster run id in its history."""

from pathlib import Path

import dagster as dg
import pyarrow as pa
from deltalake import DeltaTable

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager


def test_each_materialized_partition_is_a_delta_table_with_its_run_id(tmp_path: Path) -> None:
    @dg.asset(key_prefix=["sales"], partitions_def=dg.DailyPartitionsDefinition(start_date="2024-01-01"))
    def events(context: dg.AssetExecutionContext) -> pa.Table:
        return pa.table({"day": [context.partition_key] * 2, "n": [1, 2]})

    manager = RemoteStoreIOManager(store=LocalStoreResource(root=str(tmp_path)), delta_log=True, retain_versions=1)
    runs = {}
    for day in ("2024-01-01", "2024-01-02"):
        result = dg.materialize([events], partition_key=day, resources={"io_manager": manager})
        assert result.success
        runs[day] = result.run_id
    datasets = ParquetDatasetStore(LocalStore(str(tmp_path)), retain_versions=1)
    for day, run_id in runs.items():
        key = f"sales/events/{day}"
        table = DeltaTable(str(tmp_path / key))
        assert table.version() == datasets.read_manifest(key).version == 1
        assert table.to_pyarrow_table().column("day").to_pylist() == [day, day]
        assert table.history()[0]["runId"] == run_id
