"""Exactly-once step retries (issue 19, item 3): a step that dies after its commit landed and before
Dagster recorded the materialization is retried (``RetryPolicy``, re-execution from failure), and
its append or merge is not applied twice. On a local store and moto S3, through ``materialize``."""

from __future__ import annotations

import faulthandler
import os
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager, S3StoreResource

from .. import _multiprocess
from ..conftest import make_bucket
from . import retry_defs
from .retry_defs import DyingLocal, DyingS3


@pytest.fixture(params=["local", "s3"])
def dying(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[RemoteStoreIOManager, ParquetDatasetStore, str]:
    """An IO manager whose store dies once after an append/merge commit, a reader, and the marker file."""
    marker = os.path.join(tmp_path, "died")
    if request.param == "local":
        resource: Any = DyingLocal(root=os.path.join(tmp_path, "store"), marker=marker)
        reader = ParquetDatasetStore(LocalStoreResource(root=resource.root).get_store(), retain_versions=1)
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        bucket = make_bucket(endpoint)
        resource = DyingS3(bucket=bucket, prefix="lake", endpoint_url=endpoint, marker=marker)
        reader = ParquetDatasetStore(
            S3StoreResource(bucket=bucket, prefix="lake", endpoint_url=endpoint).get_store(), retain_versions=1
        )
    return RemoteStoreIOManager(store=resource, retain_versions=1), reader, marker


def _attempts(result: Any) -> int:
    return sum(1 for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY) + 1


@pytest.mark.parametrize("mode", ["append", "merge"])
def test_a_retry_after_the_commit_does_not_apply_the_rows_twice(dying: Any, mode: str) -> None:
    io, reader, marker = dying
    reader.write_dataset(pa.table({"id": [0], "v": ["seed"]}), "events")
    metadata: dict[str, Any] = {"write_mode": mode}
    if mode == "merge":
        metadata["key_columns"] = ["id"]

    @dg.asset(metadata=metadata, retry_policy=dg.RetryPolicy(max_retries=2))
    def events() -> pa.Table:
        return pa.table({"id": [1, 2], "v": ["a", "b"]})

    with dg.instance_for_test() as instance:
        result = dg.materialize([events], resources={"io_manager": io}, instance=instance)
        assert result.success and os.path.exists(marker)  # it died once after committing
        assert _attempts(result) == 2
        [record] = instance.fetch_materializations(dg.AssetKey("events"), limit=1).records
        metadata_out = record.asset_materialization.metadata
    assert sorted(reader.read_dataset("events").column("id").to_pylist()) == [0, 1, 2]
    assert reader.read_manifest("events").version == 2  # the seed, then one commit: the retry added none
    assert "recognized retry" in metadata_out["exactly_once"].value
    assert metadata_out["data_version"].value == dg_data_version(reader)


def dg_data_version(reader: ParquetDatasetStore) -> str:
    from dagster_parquet_dataset.dataset import data_version

    version = data_version(reader.read_manifest("events"))
    assert version is not None
    return version


@pytest.mark.parametrize("others", [False, True], ids=["alone", "another-writer-meanwhile"])
def test_a_retry_of_the_append_that_created_the_dataset(dying: Any, others: bool) -> None:
    """Issue 26, #8: the first attempt created the dataset and died before its ``_SUCCESS``; the retry
    writes it (a Spec 042 reader raises ``DatasetIncomplete`` without it) and names the version the
    first attempt committed, also when another writer committed on top before the retry."""
    io, reader, marker = dying

    @dg.asset(metadata={"write_mode": "append"}, retry_policy=dg.RetryPolicy(max_retries=2))
    def events() -> pa.Table:
        if others and os.path.exists(marker):  # the retry: another writer appended meanwhile
            reader.append_dataset(pa.table({"id": [9]}), "events")
        return pa.table({"id": [1, 2]})

    with dg.instance_for_test() as instance:
        result = dg.materialize([events], resources={"io_manager": io}, instance=instance)
        assert result.success and os.path.exists(marker) and _attempts(result) == 2
        [record] = instance.fetch_materializations(dg.AssetKey("events"), limit=1).records
        metadata_out = record.asset_materialization.metadata
    assert reader.store.exists("events/_SUCCESS")
    live = reader.read_manifest("events")
    assert live.version == (2 if others else 1)
    assert sorted(reader.read_dataset("events").column("id").to_pylist()) == ([1, 2, 9] if others else [1, 2])
    text = metadata_out["exactly_once"].value
    assert "committed the same data as version 1 " in text, text


def test_a_non_deterministic_asset_commits_again(dying: Any) -> None:
    io, reader, marker = dying
    calls: list[int] = []

    @dg.asset(metadata={"write_mode": "append"}, retry_policy=dg.RetryPolicy(max_retries=2))
    def events() -> pa.Table:
        calls.append(1)
        return pa.table({"id": [len(calls)]})  # other data on every attempt

    with dg.instance_for_test() as instance:
        result = dg.materialize([events], resources={"io_manager": io}, instance=instance)
        assert result.success and _attempts(result) == 2
    assert sorted(reader.read_dataset("events").column("id").to_pylist()) == [1, 2]  # both attempts' rows


def test_another_run_appends_again(dying: Any) -> None:
    io, reader, marker = dying
    Path(marker).touch()  # no deaths: two ordinary runs

    @dg.asset(metadata={"write_mode": "append"})
    def events() -> pa.Table:
        return pa.table({"id": [1]})

    with dg.instance_for_test() as instance:
        for _ in range(2):
            assert dg.materialize([events], resources={"io_manager": io}, instance=instance).success
    assert reader.read_dataset("events").column("id").to_pylist() == [1, 1]  # a new run is a new write


@pytest.mark.parametrize("backend_kind", ["local", "s3"])
@pytest.mark.parametrize("mode", ["append", "merge"])
def test_a_re_execution_from_failure_after_the_step_process_died(
    backend_kind: str, mode: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faulthandler.dump_traceback_later(600, exit=True)  # a run that hangs on a dead step process fails the test
    monkeypatch.setenv("PDS_RETRY_MARKER", os.path.join(tmp_path, "died"))
    if backend_kind == "local":
        monkeypatch.setenv("PDS_RETRY_ROOT", os.path.join(tmp_path, "store"))
        reader = ParquetDatasetStore(
            LocalStoreResource(root=os.path.join(tmp_path, "store")).get_store(), retain_versions=1
        )
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        bucket = make_bucket(endpoint)
        monkeypatch.setenv("PDS_RETRY_BUCKET", bucket)
        monkeypatch.setenv("PDS_RETRY_ENDPOINT", endpoint)
        reader = ParquetDatasetStore(
            S3StoreResource(bucket=bucket, prefix="lake", endpoint_url=endpoint).get_store(), retain_versions=1
        )
    key = "retry_events" if mode == "append" else "retry_merged"
    reader.write_dataset(pa.table({"id": [0], "v": ["seed"]}) if mode == "merge" else pa.table({"id": [0]}), key)
    job = dg.reconstructable(getattr(retry_defs, f"get_{mode}_job" + ("_s3" if backend_kind == "s3" else "")))
    home = tmp_path / "dagster_home"
    home.mkdir()
    try:
        with dg.instance_for_test(temp_dir=str(home)) as instance:
            ok, failed_run, _errors = _multiprocess.execute(job, instance)
            assert not ok and os.path.exists(os.path.join(tmp_path, "died"))
            assert sorted(reader.read_dataset(key).column("id").to_pylist()) == [0, 1, 2]  # the commit landed
            assert not instance.fetch_materializations(dg.AssetKey(key), limit=1).records  # Dagster never knew

            again = dg.ReexecutionOptions.from_failure(failed_run, instance)
            ok, _run, errors = _multiprocess.execute(job, instance, reexecution_options=again)
            assert ok, errors
            [record] = instance.fetch_materializations(dg.AssetKey(key), limit=1).records
            assert "recognized retry" in record.asset_materialization.metadata["exactly_once"].value
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert sorted(reader.read_dataset(key).column("id").to_pylist()) == [0, 1, 2]
    assert reader.read_manifest(key).version == 2
