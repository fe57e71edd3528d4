"""Loading the example's definitions and resolving its jobs prints no ``UserWarning`` about mixed
``BackfillPolicy``s (issue 30 point 6): ``daily_events_job`` runs once per day on purpose."""

from __future__ import annotations

import os
import subprocess
import sys

from .conftest import PROJECT_DIR, REPO_DIR

SCRIPT = """
import example_project.definitions as d
for job in d.defs.resolve_all_job_defs():
    pass
print("resolved")
"""


def test_resolving_the_example_jobs_warns_of_no_mixed_backfill_policies() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_DIR), str(PROJECT_DIR)])}
    result = subprocess.run(
        [sys.executable, "-W", "always::UserWarning", "-c", SCRIPT],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "resolved" in result.stdout
    assert "BackfillPolic" not in result.stderr, result.stderr
