"""The stores the command-line tests point the CLI at: a local folder and a moto S3 bucket."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagster_parquet_dataset import LocalStore, S3Store

from ..conftest import make_bucket
from ._cli import Target


@pytest.fixture(params=["local", "s3"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    if request.param == "local":
        root = tmp_path / "data"
        root.mkdir()
        return Target(["--store", str(root)], LocalStore(root))
    endpoint = request.getfixturevalue("moto_endpoint")
    bucket = make_bucket(endpoint)
    return Target(
        ["--store", f"s3://{bucket}/warehouse", "--endpoint-url", endpoint],
        S3Store(bucket, "warehouse", endpoint_url=endpoint),
    )


@pytest.fixture
def local(tmp_path: Path) -> Target:
    root = tmp_path / "data"
    root.mkdir()
    return Target(["--store", str(root)], LocalStore(root))
