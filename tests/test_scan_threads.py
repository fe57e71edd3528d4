"""Issue 18 #7: scans consumed from several threads at once never hang.

Each test runs ``tests/_scan_stress.py`` in a child process: 12 daily datasets, one
``scan_datasets`` per round handed to 4 threads that consume it as a ``RecordBatchReader``,
with ``to_table``, ``count_rows``, ``to_batches``, DuckDB and polars, checking every answer.
Before the fix a Python filesystem handler ran on Arrow's I/O threads and this deadlocked
within a few rounds. The child's watchdog (``faulthandler.dump_traceback_later(exit=True)``)
turns a hang into a failure that shows every thread's stack; ``subprocess.run``'s timeout is a
second guard.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_bucket

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = {"memory": 60, "local": 60, "s3": 15}


def _run_stress(kind: str, where: str) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, "-m", "tests._scan_stress", kind, where, str(ROUNDS[kind])],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=240,
    )
    assert (out.returncode, out.stdout.strip()) == (0, "ok"), out.stderr[-4000:]


@pytest.mark.parametrize("kind", ["memory", "local"])
def test_scans_consumed_from_threads_never_hang(kind: str, tmp_path: Path) -> None:
    _run_stress(kind, str(tmp_path / "store"))


def test_s3_scans_consumed_from_threads_never_hang(moto_endpoint: str) -> None:
    _run_stress("s3", f"{make_bucket(moto_endpoint)}@{moto_endpoint}")
