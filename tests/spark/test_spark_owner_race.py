"""Spark outputs carry their owner into the commit (issue 18, #13), through ``materialize``.

Asset ``["sales", "eu"]`` (a Spark DataFrame) and partition ``"eu"`` of asset
``sales`` (a pyarrow table) both map to dataset ``sales/eu``. The Spark run
passes the IO manager's early owner check (the key is free, or holds a dataset
without an owner record); then, right before its driver swaps
``sales/eu/manifest.json``, the racing store runs the other asset. The Spark
write's commit must refuse with ``OwnerMismatch`` (as a ``DatasetKeyCollision``),
commit nothing, and leave none of its files: the other asset's data stays.
"""

import os
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, SparkSession

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, S3Store, Store
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager, S3StoreResource
from dagster_parquet_dataset.dagster_io.resources import StoreResource
from tests.dagster.test_key_safety import _BEFORE_SWAP, _error, sales_by_region
from tests.dagster.test_key_safety import _OtherAssetCommitsFirst as _KeySafetyRacing

from .._stores import PassThrough
from ..conftest import make_bucket

KEY = "sales/eu"


class _OtherAssetCommitsFirst(PassThrough, _KeySafetyRacing):
    """The Dagster test's racing store, also for Spark: its executors reach the inner store's methods."""


class RacingLocalStoreResource(StoreResource):
    root: str

    def get_store(self) -> Store:
        return _OtherAssetCommitsFirst(LocalStore(self.root))


class RacingS3StoreResource(StoreResource):
    bucket: str
    endpoint: str

    def get_store(self) -> Store:
        return _OtherAssetCommitsFirst(S3Store(self.bucket, "lake", endpoint_url=self.endpoint))


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


def _backend(kind: str, request: pytest.FixtureRequest, tmp_path: Any) -> tuple[Any, Any, ParquetDatasetStore]:
    """(plain IO manager, racing IO manager, an independent dataset store) on one local root or S3 bucket."""
    if kind == "local":
        root = os.path.join(tmp_path, "store")
        return (
            RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1),
            RemoteStoreIOManager(store=RacingLocalStoreResource(root=root), retain_versions=1),
            ParquetDatasetStore(LocalStore(root), retain_versions=1),
        )
    endpoint = request.getfixturevalue("moto_endpoint")
    bucket = make_bucket(endpoint)
    return (
        RemoteStoreIOManager(
            store=S3StoreResource(bucket=bucket, prefix="lake", endpoint_url=endpoint), retain_versions=1
        ),
        RemoteStoreIOManager(store=RacingS3StoreResource(bucket=bucket, endpoint=endpoint), retain_versions=1),
        ParquetDatasetStore(S3Store(bucket, "lake", endpoint_url=endpoint), retain_versions=1),
    )


def _run(assets: list[Any], io_manager: Any, instance: dg.DagsterInstance, **kwargs: Any) -> Any:
    resources = {"io_manager": io_manager, "pyspark": PySparkResource(spark_config={})}
    return dg.materialize(assets, resources=resources, instance=instance, raise_on_error=False, **kwargs)


MODES: dict[str, dict[str, Any]] = {
    "overwrite": {},
    "overwrite-partition-by": {"partition_by": ["region"]},
    "append": {"write_mode": "append"},
    "merge": {"write_mode": "merge", "key_columns": ["region"]},
}

CASES = [
    ("local", "overwrite", False),
    ("local", "overwrite", True),
    ("local", "overwrite-partition-by", False),
    ("local", "append", False),
    ("local", "append", True),
    ("local", "merge", False),
    ("local", "merge", True),
    ("s3", "overwrite", False),
    ("s3", "append", True),
]


@pytest.mark.parametrize(
    ("kind", "mode", "existing"),
    CASES,
    ids=[f"{k}-{m}-{'replace' if e else 'create'}" for k, m, e in CASES],
)
def test_a_spark_output_racing_another_asset_is_refused_by_its_commit(
    spark: SparkSession,
    instance: dg.DagsterInstance,
    request: pytest.FixtureRequest,
    tmp_path: Any,
    kind: str,
    mode: str,
    existing: bool,
) -> None:
    plain, racing, datasets = _backend(kind, request, tmp_path)

    @dg.asset(key=["sales", "eu"], metadata=MODES[mode])
    def sales_eu(pyspark: PySparkResource) -> DataFrame:
        return pyspark.spark_session.createDataFrame([("asset sales/eu", "eu")], "source string, region string")

    if existing:  # a dataset without an owner record: both writers' early checks accept it
        datasets.write_dataset(pa.table({"source": ["unowned"], "region": ["eu"]}), KEY)
    _BEFORE_SWAP[:] = [lambda: _run([sales_by_region], plain, instance, partition_key="eu")]
    try:
        result = _run([sales_eu], racing, instance)
    finally:
        left, _BEFORE_SWAP[:] = list(_BEFORE_SWAP), []
    assert not left, "the other asset must have run inside the race window"
    assert not result.success
    error = _error(result)
    assert "DatasetKeyCollision" in error and "OwnerMismatch" in error, error  # refused by the commit
    assert "asset sales, partition 'eu'" in error and "asset sales/eu" in error

    live = datasets.read_manifest(KEY)
    assert live.metadata is not None and live.metadata["dagster.asset_key"] == "sales"
    assert datasets.read_dataset(KEY).to_pydict() == {"source": ["sales partition"], "region": ["eu"]}
    files = {f.path[len(KEY) + 1 :] for f in datasets.store.list_files(KEY)}
    listed = {p for version in datasets.history(KEY) for p in version.parts}  # the live and retained versions
    # _claim: the first writer's claim to the Spec part names stays until the dataset is deleted.
    reserved = ("manifest.json", "_SUCCESS", "_claim")
    data = {p for p in files if not p.startswith("_versions/") and p not in reserved}
    assert data == listed, "the Spark write's files must be gone"
