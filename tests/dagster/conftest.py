"""Fixtures for the Dagster layer: a real LocalStore under a temp dir, read back directly."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from dagster_parquet_dataset import DatasetManifest, LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager


@pytest.fixture
def root(tmp_path: Path) -> str:
    """Folder of the LocalStore the IO manager writes to."""
    return os.path.join(tmp_path, "store")


@pytest.fixture
def io_manager(root: str) -> RemoteStoreIOManager:
    """Keeps only the live version (``retain_versions=1``): these tests assert a replaced version's files go
    at once; the default retention (replaced versions kept 7 days) has its own tests (tests/test_retention.py)."""
    return RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)


@pytest.fixture
def datasets(root: str) -> ParquetDatasetStore:
    """An independent reader on the same folder (not the IO manager's own objects), keeping only the live
    version like :func:`io_manager`."""
    return ParquetDatasetStore(LocalStore(root), retain_versions=1)


def read(datasets: ParquetDatasetStore, key: str) -> pa.Table:
    return datasets.read_dataset(key)


def manifest(datasets: ParquetDatasetStore, key: str) -> DatasetManifest:
    return datasets.read_manifest(key)


def parquet_files(datasets: ParquetDatasetStore, key: str) -> list[str]:
    """Every Parquet object actually stored under ``key`` (not just what the manifest lists)."""
    return sorted(f.path for f in datasets.store.list_files(key) if f.path.endswith(".parquet"))


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    """An ephemeral Dagster instance (test files may define their own)."""
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst
