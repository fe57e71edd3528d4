"""A Spark DataFrame input in a step of its own process (multiprocess executor, real instance in a temp dir).

No session exists in the test process's steps: the IO manager builds one from
the input's ``spark_config`` metadata, or fails with an error naming what to add.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore

from . import mp_spark_defs


@pytest.fixture
def mp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    root = str(tmp_path / "store")
    monkeypatch.setenv("PDS_MP_ROOT", root)
    return root


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as inst:
        yield inst


def _execute(job: Any, instance: dg.DagsterInstance) -> tuple[bool, str]:
    with dg.execute_job(job, instance=instance) as result:
        errors = " | ".join(str(e.step_failure_data.error) for e in result.get_step_failure_events())
        return result.success, errors


def test_spark_input_builds_its_session_from_spark_config(mp_root: str, instance: dg.DagsterInstance) -> None:
    ok, errors = _execute(dg.reconstructable(mp_spark_defs.get_spark_job), instance)
    assert ok, errors
    assert ParquetDatasetStore(LocalStore(mp_root)).read_dataset("mp_spark_sum").to_pydict() == {"total": [45]}


def test_spark_input_without_a_session_says_what_to_add(mp_root: str, instance: dg.DagsterInstance) -> None:
    ok, errors = _execute(dg.reconstructable(mp_spark_defs.get_no_session_job), instance)
    assert not ok
    assert "NoSparkSessionError" in errors
    assert "PySparkResource" in errors and "'spark_config'" in errors
    assert not ParquetDatasetStore(LocalStore(mp_root)).store.exists("mp_spark_no_session/manifest.json")
