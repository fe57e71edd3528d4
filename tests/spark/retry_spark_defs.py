"""Module-level Spark jobs for the multiprocess re-execution tests of exactly-once Spark retries
(``reconstructable`` needs importable definitions; the store and marker come from ``PDS_RETRY_*``
environment variables, as in ``tests/dagster/retry_defs.py``, whose dying stores they use)."""

from __future__ import annotations

from typing import Any

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame

from dagster_parquet_dataset.dagster_io import RemoteStoreIOManager

from ..dagster.retry_defs import DyingLocal, DyingS3

LOCAL = {"spark.master": "local[1]", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}


@dg.asset(metadata={"write_mode": "append"})
def spark_retry_events(pyspark: PySparkResource) -> DataFrame:
    return pyspark.spark_session.createDataFrame([(1,), (2,)], "id long")


@dg.asset(metadata={"write_mode": "merge", "key_columns": ["id"]})
def spark_retry_merged(pyspark: PySparkResource) -> DataFrame:
    return pyspark.spark_session.createDataFrame([(1, "a"), (2, "b")], "id long, v string")


def _io(s3: bool) -> RemoteStoreIOManager:
    marker = dg.EnvVar("PDS_RETRY_MARKER")
    if s3:
        store: Any = DyingS3(
            bucket=dg.EnvVar("PDS_RETRY_BUCKET"),
            prefix="lake",
            endpoint_url=dg.EnvVar("PDS_RETRY_ENDPOINT"),
            marker=marker,
            how="exit",
        )
    else:
        store = DyingLocal(root=dg.EnvVar("PDS_RETRY_ROOT"), marker=marker, how="exit")
    return RemoteStoreIOManager(store=store, retain_versions=1)


def _job(asset: Any, s3: bool) -> dg.JobDefinition:
    defs = dg.Definitions(
        assets=[asset],
        jobs=[dg.define_asset_job("spark_retry_job", selection=[asset])],
        resources={"io_manager": _io(s3), "pyspark": PySparkResource(spark_config=LOCAL)},
        executor=dg.multiprocess_executor,
    )
    return defs.resolve_job_def("spark_retry_job")


# One function per job and store: Dagster caches a reconstructed job by the function it comes from.
def get_append_job() -> dg.JobDefinition:
    return _job(spark_retry_events, s3=False)


def get_merge_job() -> dg.JobDefinition:
    return _job(spark_retry_merged, s3=False)


def get_append_job_s3() -> dg.JobDefinition:
    return _job(spark_retry_events, s3=True)


def get_merge_job_s3() -> dg.JobDefinition:
    return _job(spark_retry_merged, s3=True)
