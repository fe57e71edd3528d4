"""Module-level jobs for the multiprocess tests (``reconstructable`` needs importable definitions).

The store root comes from the ``PDS_MP_ROOT`` environment variable (an
``EnvVar``), which each step subprocess inherits from the test.
"""

import dagster as dg
import pandas as pd
import pyarrow as pa

from dagster_parquet_dataset import InMemoryStoreResource, LocalStoreResource, RemoteStoreIOManager

COLORS = dg.StaticPartitionsDefinition(["red", "blue"])


@dg.asset(partitions_def=COLORS)
def mp_events(context: dg.AssetExecutionContext) -> pd.DataFrame:
    color = context.partition_key
    return pd.DataFrame({"color": [color] * 3, "n": [1, 2, 3]}, index=pd.Index(["a", "b", "c"], name="id"))


@dg.asset(partitions_def=COLORS)
def mp_totals(context: dg.AssetExecutionContext, mp_events: pd.DataFrame) -> pa.Table:
    assert list(mp_events.index) == ["a", "b", "c"], "the index did not survive the process boundary"
    return pa.table({"color": [context.partition_key], "total": [int(mp_events["n"].sum()) * 10]})


local_io = RemoteStoreIOManager(store=LocalStoreResource(root=dg.EnvVar("PDS_MP_ROOT")), retain_versions=1)

asset_job = dg.define_asset_job("mp_asset_job", selection=[mp_events, mp_totals])  # partitioned like its assets


@dg.op
def mp_source() -> pa.Table:
    return pa.table({"x": [1, 2, 3]})


@dg.op
def mp_double(t: pa.Table) -> pa.Table:
    return pa.table({"x": [v * 2 for v in t.column("x").to_pylist()]})


@dg.job(resource_defs={"io_manager": local_io}, executor_def=dg.multiprocess_executor)
def mp_op_job() -> None:
    mp_double(mp_source())


@dg.job(
    resource_defs={"io_manager": RemoteStoreIOManager(store=InMemoryStoreResource(namespace="mp"), retain_versions=1)},
    executor_def=dg.multiprocess_executor,
)
def mp_memory_job() -> None:
    mp_double(mp_source())


defs = dg.Definitions(
    assets=[mp_events, mp_totals],
    jobs=[asset_job],
    resources={"io_manager": local_io},
    executor=dg.multiprocess_executor,
)


def get_asset_job() -> dg.JobDefinition:
    return defs.resolve_job_def("mp_asset_job")
