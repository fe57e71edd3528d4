"""A Spark job whose Python workers cannot import the package fails with an error that says what to set.

The shared test session's workers run the test's Python, so this test starts
its own ``local[1]`` Spark in a subprocess, with ``PYSPARK_PYTHON`` pointing
at a fresh venv that has neither the package nor its dependencies.
"""

import json
import os
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore

REPO = Path(__file__).resolve().parents[2]

_DRIVER = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])  # not PYTHONPATH: the workers would inherit it and find the package
    from pyspark.sql import SparkSession
    from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, SparkWorkerEnvironmentError
    from dagster_parquet_dataset.spark import append_spark_dataset

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id long, name string")
    try:
        append_spark_dataset(df, ParquetDatasetStore(LocalStore(sys.argv[2])), "events/day", mode="arrow")
        outcome = {"type": None}
    except SparkWorkerEnvironmentError as exc:
        outcome = {"type": type(exc).__name__, "module": exc.module, "message": str(exc),
                   "runtime_error": isinstance(exc, RuntimeError)}
    spark.stop()
    print("OUTCOME " + json.dumps(outcome))
    """
)


@pytest.mark.timeout(300)
def test_workers_without_the_package_get_an_error_naming_pyspark_python(tmp_path: Path) -> None:
    bare = tmp_path / "bare-venv"
    venv.create(bare, with_pip=False)  # the base Python, no site-packages of the test's venv
    worker_python = str(bare / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_DRIVER_PYTHON")}
    env["PYSPARK_PYTHON"] = worker_python
    root = tmp_path / "store"
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(REPO), str(root)],
        env=env,
        cwd=tmp_path,  # the workers start in the driver's directory and would import the package from there
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("OUTCOME ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    outcome = json.loads(lines[-1].removeprefix("OUTCOME "))
    assert outcome["type"] == "SparkWorkerEnvironmentError", outcome
    assert outcome["module"] == "dagster_parquet_dataset"
    assert outcome["runtime_error"] is True
    message = outcome["message"]
    assert f"{worker_python!r} (from $PYSPARK_PYTHON)" in message
    assert f"the driver runs {sys.executable!r}" in message
    assert f"export PYSPARK_PYTHON={sys.executable}" in message
    assert "install the package on every executor" in message
    assert "Traceback" not in message and "at org.apache.spark" not in message
    assert not ParquetDatasetStore(LocalStore(str(root)), retain_versions=1).store.exists("events/day/manifest.json")
