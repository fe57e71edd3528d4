"""One manifest read per Dagster step: counted on ``manifest.json`` through a ``StoreResource`` subclass.

The counting resource is the documented extension point (docs/dagster.md, "Store resources"): it
wraps the real store (a ``LocalStore`` on disk, an ``S3Store`` on a moto server) and counts every
read of a ``manifest.json`` (``read_bytes``, ``read_versioned``, ``open_input``) and every
conditional write of one (``write_if``). Each asset is materialized twice and the second
materialization is counted: an overwrite, append or merge output reads the live manifest once and
commits once; an input (unannotated, ``pa.Table``, pandas, polars) reads it once.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, S3Store, Store
from dagster_parquet_dataset.dagster_io import RemoteStoreIOManager, StoreResource
from tests._stores import PassThrough, WrappingStore
from tests.conftest import make_bucket

pytestmark = pytest.mark.timeout(300)

_MANIFEST_READS = ("read_bytes", "read_versioned", "open_input")

#: Counts per resource ``name``: ``(op, path)`` of every call on a ``manifest.json``.
_COUNTS: dict[str, Counter[str]] = {}


class _CountingStore(PassThrough, WrappingStore):
    """A real store whose calls on ``manifest.json`` are counted into ``counts``."""

    def __init__(self, inner: Store, counts: Counter[str]) -> None:
        super().__init__(inner)
        self.counts = counts

    def _before(self, op: str, path: str) -> None:
        super()._before(op, path)
        if path.rsplit("/", 1)[-1] == "manifest.json":
            kind = "read" if op in _MANIFEST_READS else op
            with self._lock:
                self.counts[kind] += 1


class CountingStoreResource(StoreResource):
    """A ``LocalStore`` (``root``) or an ``S3Store`` (``bucket`` on ``endpoint_url``) whose manifest calls
    are counted in ``_COUNTS[name]``."""

    name: str
    root: str | None = None
    bucket: str | None = None
    endpoint_url: str | None = None

    def get_store(self) -> Store:
        if self.root is not None:
            inner: Store = LocalStore(self.root)
        else:
            assert self.bucket is not None
            inner = S3Store(self.bucket, prefix="warehouse", endpoint_url=self.endpoint_url)
        return _CountingStore(inner, _COUNTS.setdefault(self.name, Counter()))


@pytest.fixture(params=["local", "s3"])
def counting(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[tuple[CountingStoreResource, Counter[str]]]:
    name = uuid.uuid4().hex
    if request.param == "local":
        resource = CountingStoreResource(name=name, root=str(tmp_path / "store"))
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        resource = CountingStoreResource(name=name, bucket=make_bucket(endpoint), endpoint_url=endpoint)
    yield resource, _COUNTS.setdefault(name, Counter())
    _COUNTS.pop(name, None)


def _table(run: int) -> pa.Table:
    return pa.table({"id": [1, 2, 3 + run], "value": [float(run)] * 3})


_RUN = [0]


@dg.asset(metadata={"write_mode": "overwrite"})
def replaced() -> pa.Table:
    return _table(_RUN[0])


@dg.asset(metadata={"write_mode": "append"})
def appended() -> pa.Table:
    return _table(_RUN[0])


@dg.asset(metadata={"write_mode": "merge", "key_columns": ["id"]})
def merged() -> pa.Table:
    return _table(_RUN[0])


@dg.asset(deps=[])
def source() -> pa.Table:
    return _table(0)


_LOADED: dict[str, Any] = {}


@dg.asset(io_manager_key="sink")
def unannotated(source):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    _LOADED["unannotated"] = source
    return 1


@dg.asset(io_manager_key="sink")
def as_arrow(source: pa.Table) -> int:
    _LOADED["as_arrow"] = source
    return 1


@dg.asset(io_manager_key="sink")
def as_pandas(source: pd.DataFrame) -> int:
    _LOADED["as_pandas"] = source
    return 1


@dg.asset(io_manager_key="sink")
def as_polars(source: pl.DataFrame) -> int:
    _LOADED["as_polars"] = source
    return 1


ASSETS = [replaced, appended, merged, source, unannotated, as_arrow, as_pandas, as_polars]


def _materialize(
    resource: CountingStoreResource, tmp_path: Any, instance: dg.DagsterInstance, asset: dg.AssetsDefinition
) -> None:
    resources = {
        "io_manager": RemoteStoreIOManager(store=resource, retain_versions=1),
        "sink": dg.mem_io_manager,
    }
    assert dg.materialize(ASSETS, selection=[asset], resources=resources, instance=instance).success


@pytest.mark.parametrize("asset", [replaced, appended, merged], ids=lambda a: a.key.to_user_string())
def test_an_output_reads_the_manifest_once_and_commits_once(
    counting: tuple[CountingStoreResource, Counter[str]],
    tmp_path: Any,
    instance: dg.DagsterInstance,
    asset: dg.AssetsDefinition,
) -> None:
    resource, counts = counting
    _RUN[0] = 0
    _materialize(resource, tmp_path, instance, asset)
    _RUN[0] = 1
    counts.clear()
    _materialize(resource, tmp_path, instance, asset)
    assert dict(counts) == {"read": 1, "write_if": 1}


@pytest.mark.parametrize("asset", [unannotated, as_arrow, as_pandas, as_polars], ids=lambda a: a.key.to_user_string())
def test_an_input_reads_the_manifest_once(
    counting: tuple[CountingStoreResource, Counter[str]],
    tmp_path: Any,
    instance: dg.DagsterInstance,
    asset: dg.AssetsDefinition,
) -> None:
    resource, counts = counting
    _materialize(resource, tmp_path, instance, source)
    _materialize(resource, tmp_path, instance, source)  # a second version, as after a re-materialization
    counts.clear()
    _materialize(resource, tmp_path, instance, asset)
    assert dict(counts) == {"read": 1}
    assert len(_LOADED.pop(asset.key.to_user_string())) == 3
