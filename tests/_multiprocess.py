"""Fixtures and a runner for tests under Dagster's multiprocess executor with a real instance in a temp dir."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest


@pytest.fixture
def mp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The store root, passed to each step subprocess as ``PDS_MP_ROOT``."""
    root = str(tmp_path / "store")
    monkeypatch.setenv("PDS_MP_ROOT", root)
    return root


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as inst:
        yield inst


def execute(job: Any, instance: dg.DagsterInstance, **kwargs: object) -> tuple[bool, str, str]:
    """Run ``job``; (success, run id, the step failures' errors joined)."""
    with dg.execute_job(job, instance=instance, **kwargs) as result:  # type: ignore[arg-type]
        errors = " | ".join(str(e.step_failure_data.error) for e in result.get_step_failure_events())
        return result.success, result.run_id, errors
