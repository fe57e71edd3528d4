"""A Spark DataFrame input in a step of its own process (multiprocess executor, real instance in a temp dir).

No session exists in the test process's steps: the IO manager builds one from
the input's ``spark_config`` metadata, or fails with an error naming what to add.
"""

import dagster as dg

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore

from .. import _multiprocess
from . import mp_spark_defs

mp_root = _multiprocess.mp_root  # fixtures shared with the other multiprocess tests
instance = _multiprocess.instance


def test_spark_input_builds_its_session_from_spark_config(mp_root: str, instance: dg.DagsterInstance) -> None:
    ok, _run_id, errors = _multiprocess.execute(dg.reconstructable(mp_spark_defs.get_spark_job), instance)
    assert ok, errors
    assert ParquetDatasetStore(LocalStore(mp_root), retain_versions=1).read_dataset("mp_spark_sum").to_pydict() == {
        "total": [45]
    }


def test_spark_input_without_a_session_says_what_to_add(mp_root: str, instance: dg.DagsterInstance) -> None:
    ok, _run_id, errors = _multiprocess.execute(dg.reconstructable(mp_spark_defs.get_no_session_job), instance)
    assert not ok
    assert "NoSparkSessionError" in errors
    assert "PySparkResource" in errors and "'spark_config'" in errors
    assert not ParquetDatasetStore(LocalStore(mp_root), retain_versions=1).store.exists(
        "mp_spark_no_session/manifest.json"
    )
