"""Run the real command line in a subprocess, and the stores the tests point it at."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagster_parquet_dataset import ParquetDatasetStore, Store

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict[str, str] | None = None, stderr: Any = subprocess.PIPE) -> subprocess.CompletedProcess:
    """``python -m dagster_parquet_dataset ARGS`` with this checkout first on the path."""
    environment = {k: v for k, v in os.environ.items() if k != "DAGSTER_PARQUET_DATASET_STORE"}
    environment["PYTHONPATH"] = str(REPO)
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "dagster_parquet_dataset", *args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=environment,
        timeout=180,
        check=False,
    )


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The single stderr line of a failed run (and nothing on stdout)."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("dagster-parquet-dataset: error: "), lines
    return lines[0]


@dataclass
class Target:
    """A store the CLI is pointed at, and the same store for the test to write and tamper with."""

    args: list[str]
    store: Store

    @property
    def ds(self) -> ParquetDatasetStore:
        return ParquetDatasetStore(self.store)

    def cli(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess:
        return run(*self.args, *args, **kwargs)
