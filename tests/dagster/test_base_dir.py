"""``RemoteStoreIOManager(base_dir=...)``: a local folder or an ``s3://`` URL, refused together with ``store``;
a wrong-type ``store`` says what to pass (issue 30 point 5)."""

import os
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, S3Store
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager

from ..conftest import make_bucket


@dg.asset
def orders() -> pa.Table:
    return pa.table({"id": [1, 2]})


def test_base_dir_a_local_folder(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    folder = os.path.join(tmp_path, "lake")
    result = dg.materialize(
        [orders], resources={"io_manager": RemoteStoreIOManager(base_dir=folder, retain_versions=1)}, instance=instance
    )
    assert result.success
    assert ParquetDatasetStore(LocalStore(folder), retain_versions=1).read_dataset("orders").to_pylist() == [
        {"id": 1},
        {"id": 2},
    ]


def test_base_dir_an_s3_url(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, instance: dg.DagsterInstance) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    bucket = make_bucket(moto_endpoint)
    io_manager = RemoteStoreIOManager(base_dir=f"s3://{bucket}/lake/prod", retain_versions=1)
    assert dg.materialize([orders], resources={"io_manager": io_manager}, instance=instance).success
    reader = ParquetDatasetStore(S3Store(bucket, prefix="lake/prod", endpoint_url=moto_endpoint), retain_versions=1)
    assert reader.read_dataset("orders").num_rows == 2


def test_base_dir_and_store_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="not both") as caught:
        RemoteStoreIOManager(base_dir=str(tmp_path), store=LocalStoreResource(root=str(tmp_path)), retain_versions=1)
    assert "base_dir" in str(caught.value) and "store" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_neither_says_what_to_give() -> None:
    with pytest.raises(Exception, match=r"base_dir='data'.*store=LocalStoreResource"):
        RemoteStoreIOManager()


@pytest.mark.parametrize("value", ["/srv/lake", 42])
def test_a_wrong_type_store_says_what_to_pass(value: object) -> None:
    with pytest.raises(Exception) as caught:
        RemoteStoreIOManager(store=value, retain_versions=1)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "LocalStoreResource(root=...)" in message and "S3StoreResource(bucket=..., prefix=...)" in message
    assert "Input should be a valid dictionary or instance of StoreResource" not in message
    if isinstance(value, str):
        assert "RemoteStoreIOManager(base_dir='/srv/lake')" in message


def test_an_unsupported_url_fails_the_run_at_its_start(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    io_manager = RemoteStoreIOManager(base_dir="gs://bucket/lake", retain_versions=1)
    result = dg.materialize([orders], resources={"io_manager": io_manager}, instance=instance, raise_on_error=False)
    assert not result.success
    assert not result.get_step_success_events()
    failures = [e for e in result.all_events if e.is_failure]
    assert any("gs:// is not a supported store" in str(e.event_specific_data) for e in failures)


@pytest.mark.parametrize(
    ("setting", "meant"),
    [
        ({"mode": "append"}, "output metadata write_mode"),  # dagster-polars' PolarsDeltaIOManager(mode=...)
        ({"root_uri": "lake"}, "use base_dir"),  # dagster-deltalake's
        ({"overwrite_schema": True}, "allow_new_columns"),
        ({"version": 3}, "input metadata version"),
        ({"retain_version": 3}, "did you mean 'retain_versions'"),
        ({"owner": "team-a"}, "would be ignored"),
    ],
)
def test_a_setting_the_io_manager_does_not_have_fails_when_the_definitions_load(
    tmp_path: Path, setting: dict[str, object], meant: str
) -> None:
    # Before: RemoteStoreIOManager(base_dir=..., mode="append") was accepted and every run overwrote.
    folder = os.path.join(tmp_path, "lake")
    with pytest.raises(Exception) as caught:
        dg.Definitions(assets=[orders], resources={"io_manager": RemoteStoreIOManager(base_dir=folder, **setting)})
    message = str(caught.value)
    assert f"RemoteStoreIOManager has no setting {next(iter(setting))!r}" in message and meant in message, message
    assert "retain_versions" in message  # the settings it has are listed
    assert not os.path.exists(folder)
