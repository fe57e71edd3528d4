"""Shared fixtures: real backends (moto S3 server on 127.0.0.1) and one Spark session."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator

import pytest

from dagster_parquet_dataset import LocalStore, MemoryStore, S3Store, Store

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Spark's Python workers must run this interpreter (the venv with pyarrow), not whatever "python3" is on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Never let a test reach a real AWS account.
for _var in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
    os.environ.pop(_var, None)
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """A real S3 protocol server (moto) on 127.0.0.1, for the whole session."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def make_bucket(endpoint: str) -> str:
    import boto3

    bucket = f"test-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    return bucket


@pytest.fixture
def s3_store(moto_endpoint: str) -> S3Store:
    """An ``S3Store`` on a fresh bucket of the moto server, under a prefix."""
    return S3Store(make_bucket(moto_endpoint), prefix="root/dir", endpoint_url=moto_endpoint)


@pytest.fixture(params=["memory", "local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> Store:
    """Each backend in turn."""
    if request.param == "memory":
        return MemoryStore()
    if request.param == "local":
        return LocalStore(os.path.join(tmp_path, "store"))
    return request.getfixturevalue("s3_store")


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local[2] SparkSession for the whole test session (UI off, loopback only).

    ``local[2,2]``: two threads, and a task may fail once and be retried (plain
    ``local[2]`` never retries), so the Spark tests exercise real task retries.
    """
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("dagster-parquet-dataset-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    yield session
    session.stop()
