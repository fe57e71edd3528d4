"""Store resources: local roots that would land in the wrong place, and config descriptions for the UI."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import (
    InMemoryStoreResource,
    LocalStoreResource,
    RemoteStoreIOManager,
    S3StoreResource,
)

# ------------------------------------------------------------------ local roots


@pytest.mark.parametrize(
    ("root", "needle"),
    [
        ("s3://bucket/lake", "S3StoreResource(bucket='bucket', prefix='lake')"),
        ("s3a://bucket/lake/", "S3StoreResource(bucket='bucket', prefix='lake')"),
        ("gs://bucket/lake", "S3StoreResource"),
        ("file:///data/lake", "'/data/lake'"),
    ],
)
def test_url_roots_are_refused_with_a_hint(
    root: str, needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="is a URL") as info:
        LocalStore(root)
    assert needle in str(info.value)

    @dg.asset
    def numbers() -> pa.Table:
        raise AssertionError("must not run: the resource is refused at start")

    resource = LocalStoreResource(root=root)
    with pytest.raises(Exception) as failed:
        dg.materialize([numbers], resources={"io_manager": RemoteStoreIOManager(store=resource, retain_versions=1)})
    errors = []
    exc: BaseException | None = failed.value
    while exc is not None:
        errors.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    assert any("LocalStoreResource.root" in e and needle in e for e in errors), errors
    assert os.listdir(tmp_path) == []  # no folder named "s3:" (or anything else)


def test_home_folder_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)

    @dg.asset
    def numbers() -> pa.Table:
        return pa.table({"n": [1, 2]})

    io_manager = RemoteStoreIOManager(store=LocalStoreResource(root="~/lake"), retain_versions=1)
    assert dg.materialize([numbers], resources={"io_manager": io_manager}).success
    assert ParquetDatasetStore(LocalStore(str(home / "lake")), retain_versions=1).read_dataset("numbers").num_rows == 2
    assert os.listdir(work) == []  # no literal "~" folder
    assert LocalStore("~/x").root == str(home / "x")


# ---------------------------------------------------------------- descriptions


@pytest.mark.parametrize("cls", [RemoteStoreIOManager, LocalStoreResource, S3StoreResource, InMemoryStoreResource])
def test_every_config_field_has_a_description(cls: type) -> None:
    fields = cls.model_fields  # type: ignore[attr-defined]
    assert fields
    missing = [name for name, info in fields.items() if not (info.description or "").strip()]
    assert missing == []
    # What the Dagster UI shows: the description in the resource's config schema.
    config_fields = cls.to_config_schema().as_field().config_type.fields  # type: ignore[attr-defined]
    assert config_fields
    assert [name for name, f in config_fields.items() if not (f.description or "").strip()] == []
