"""Fixtures for the example project's tests: its package on ``sys.path`` and a temp data root.

The example is a code location loaded from ``example_project/`` (its working
directory), not an installed package, so the tests import it the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore

REPO_DIR = Path(__file__).resolve().parents[2]
PROJECT_DIR = REPO_DIR / "example_project"

if str(PROJECT_DIR) not in sys.path:
    sys.path.insert(0, str(PROJECT_DIR))


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    """The folder the example's local store writes to (``PDS_DATA_ROOT``)."""
    return tmp_path / "data"


@pytest.fixture
def example_resources(data_root: Path) -> dict[str, Any]:
    """The example's resources, chosen by the same environment variables ``dagster dev`` reads."""
    from example_project.resources import build_resources

    return build_resources({"PDS_STORE": "local", "PDS_DATA_ROOT": str(data_root)})


@pytest.fixture
def datasets(data_root: Path) -> ParquetDatasetStore:
    """An independent reader on the data root (not the IO manager's own objects)."""
    return ParquetDatasetStore(LocalStore(str(data_root)))
