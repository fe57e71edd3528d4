"""The Dagster instance `make run` creates: no telemetry, no first-visit "Join the community" dialog."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dagster import DagsterInstance

REPO = Path(__file__).resolve().parents[2]


def test_make_run_writes_an_instance_without_telemetry_or_nux(tmp_path: Path) -> None:
    home = tmp_path / "home"
    subprocess.run(
        ["make", "--no-print-directory", f"DAGSTER_HOME_DIR={home}", f"{home}/dagster.yaml"],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    instance = DagsterInstance.from_config(str(home))
    try:
        assert instance.nux_enabled is False
        assert instance.get_settings("telemetry") == {"enabled": False}
    finally:
        instance.dispose()
