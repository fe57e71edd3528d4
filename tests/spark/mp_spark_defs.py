"""Module-level jobs for the Spark multiprocess tests (``reconstructable`` needs importable definitions).

A step whose only Spark use is a ``pyspark.sql.DataFrame`` input, in its own
process: with ``spark_config`` input metadata the IO manager builds the
session; without it the step fails with an error saying what to add.
"""

import dagster as dg
import pyarrow as pa
from pyspark.sql import DataFrame

from dagster_parquet_dataset import LocalStoreResource, RemoteStoreIOManager

LOCAL = {"spark.master": "local[1]", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}


@dg.asset
def mp_numbers() -> pa.Table:
    return pa.table({"n": list(range(10))})


@dg.asset(ins={"mp_numbers": dg.AssetIn(metadata={"spark_config": LOCAL})})
def mp_spark_sum(mp_numbers: DataFrame) -> pa.Table:
    total = mp_numbers.agg({"n": "sum"}).collect()[0][0]
    return pa.table({"total": [int(total)]})


@dg.asset(ins={"mp_numbers": dg.AssetIn()})
def mp_spark_no_session(mp_numbers: DataFrame) -> pa.Table:
    return pa.table({"rows": [mp_numbers.count()]})


defs = dg.Definitions(
    assets=[mp_numbers, mp_spark_sum, mp_spark_no_session],
    jobs=[
        dg.define_asset_job("mp_spark_job", selection=[mp_numbers, mp_spark_sum]),
        dg.define_asset_job("mp_spark_no_session_job", selection=[mp_numbers, mp_spark_no_session]),
    ],
    resources={
        "io_manager": RemoteStoreIOManager(store=LocalStoreResource(root=dg.EnvVar("PDS_MP_ROOT")), retain_versions=1)
    },
    executor=dg.multiprocess_executor,
)


def get_spark_job() -> dg.JobDefinition:
    return defs.resolve_job_def("mp_spark_job")


def get_no_session_job() -> dg.JobDefinition:
    return defs.resolve_job_def("mp_spark_no_session_job")
