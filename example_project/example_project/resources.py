"""Resources of the example, chosen by environment variables.

Store (read when the definitions load):

==========================  ==========================================================
``PDS_STORE``               ``local`` (default) or ``s3``
``PDS_DATA_ROOT``           local store folder (default: ``example_project/data``)
``PDS_S3_BUCKET``           bucket (required with ``PDS_STORE=s3``)
``PDS_S3_PREFIX``           key prefix in the bucket (default ``example_project``)
``PDS_S3_ENDPOINT_URL``     an S3-compatible endpoint, e.g. ``http://127.0.0.1:5000``
``PDS_S3_REGION``           the bucket's region (default: the AWS chain's, else us-east-1)
==========================  ==========================================================

S3 credentials come from the standard AWS chain (``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``, a profile, an instance role); nothing secret is
read or stored by the example itself.

Spark runs in each step's process as ``local[2]`` with the UI off and every
socket on 127.0.0.1 (:func:`pyspark_resource`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dagster_pyspark import PySparkResource

from dagster_parquet_dataset.dagster_io import (
    LocalStoreResource,
    RemoteStoreIOManager,
    S3StoreResource,
    StoreResource,
)

#: ``example_project/`` (the folder holding this package).
PROJECT_DIR = Path(__file__).resolve().parent.parent
#: Where the local store keeps the datasets unless ``PDS_DATA_ROOT`` says otherwise.
DEFAULT_DATA_ROOT = PROJECT_DIR / "data"
DEFAULT_S3_PREFIX = "example_project"
STORE_KINDS = ("local", "s3")

#: Spark settings for a laptop or CI: two local cores, no UI, nothing listening beyond loopback.
SPARK_CONFIG: dict[str, Any] = {
    "spark.master": "local[2]",
    "spark.app.name": "dagster-parquet-dataset-example",
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def _get(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name, "").strip()
    return value or None


def store_from_env(environ: Mapping[str, str] | None = None) -> StoreResource:
    """The store resource the environment asks for (see the module docstring).

    Raises:
        ValueError: ``PDS_STORE`` is neither ``local`` nor ``s3``, or ``PDS_STORE=s3``
            without ``PDS_S3_BUCKET``; the message names the variable.
    """
    env = os.environ if environ is None else environ
    kind = (_get(env, "PDS_STORE") or "local").lower()
    if kind == "local":
        return LocalStoreResource(root=_get(env, "PDS_DATA_ROOT") or str(DEFAULT_DATA_ROOT))
    if kind == "s3":
        bucket = _get(env, "PDS_S3_BUCKET")
        if bucket is None:
            raise ValueError("PDS_STORE=s3 needs PDS_S3_BUCKET (the bucket that holds the datasets)")
        return S3StoreResource(
            bucket=bucket,
            prefix=_get(env, "PDS_S3_PREFIX") or DEFAULT_S3_PREFIX,
            endpoint_url=_get(env, "PDS_S3_ENDPOINT_URL"),
            region=_get(env, "PDS_S3_REGION"),
        )
    raise ValueError(f"PDS_STORE must be one of {', '.join(STORE_KINDS)}; got {kind!r}")


def io_manager_from_env(environ: Mapping[str, str] | None = None) -> RemoteStoreIOManager:
    """``RemoteStoreIOManager`` on :func:`store_from_env`'s store.

    Raises:
        ValueError: as :func:`store_from_env`.
    """
    return RemoteStoreIOManager(store=store_from_env(environ))


def pyspark_resource() -> PySparkResource:
    """dagster-pyspark's resource with :data:`SPARK_CONFIG`.

    Also points Spark's Python workers at this interpreter (the one with
    pyarrow) and Spark's own address lookups at loopback, unless the
    environment already says otherwise; both must be set before the JVM starts,
    which happens when a step first uses the resource.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return PySparkResource(spark_config=dict(SPARK_CONFIG))


def build_resources(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every resource the example's assets and jobs use: ``io_manager`` and ``pyspark``.

    Raises:
        ValueError: as :func:`store_from_env`.
    """
    return {"io_manager": io_manager_from_env(environ), "pyspark": pyspark_resource()}
