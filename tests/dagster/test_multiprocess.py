"""Runs under Dagster's multiprocess executor with a real instance in a temp dir.

Each step runs in its own subprocess, so outputs must travel through the store.
These are the slow tests; there are only a few.
"""

import os

import dagster as dg

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore

from .. import _multiprocess
from . import mp_defs

mp_root = _multiprocess.mp_root  # fixtures shared with the other multiprocess tests
instance = _multiprocess.instance
_execute = _multiprocess.execute


def test_partitioned_assets_across_processes(mp_root: str, instance: dg.DagsterInstance) -> None:
    job = dg.reconstructable(mp_defs.get_asset_job)
    ok, run_red, errors = _execute(job, instance, tags={"dagster/partition": "red"})
    assert ok, errors
    ok, run_blue, errors = _execute(job, instance, tags={"dagster/partition": "blue"})
    assert ok, errors
    datasets = ParquetDatasetStore(LocalStore(mp_root), retain_versions=1)
    for color, run_id in (("red", run_red), ("blue", run_blue)):
        assert datasets.read_dataset(f"mp_totals/{color}").to_pydict() == {"color": [color], "total": [60]}
        m = datasets.read_manifest(f"mp_events/{color}")
        assert m.run_id == run_id
        assert m.metadata is not None and m.metadata["dagster.partition_key"] == color
    events = datasets.read_dataset("mp_events/red").to_pandas()
    assert list(events.index) == ["a", "b", "c"] and list(events["color"]) == ["red"] * 3
    # the steps really ran in other processes
    pids = {
        e.event_specific_data.metadata["pid"].value  # type: ignore[union-attr]
        for e in instance.all_logs(run_red, of_type=dg.DagsterEventType.STEP_WORKER_STARTED)
        if e.dagster_event is not None
        for e in [e.dagster_event]
    }
    assert len(pids) == 2 and str(os.getpid()) not in pids


def test_op_job_across_processes(mp_root: str, instance: dg.DagsterInstance) -> None:
    ok, run_id, errors = _execute(dg.reconstructable(mp_defs.mp_op_job), instance)
    assert ok, errors
    datasets = ParquetDatasetStore(LocalStore(mp_root), retain_versions=1)
    assert datasets.read_dataset(f"{run_id}/mp_source/result").to_pydict() == {"x": [1, 2, 3]}
    assert datasets.read_dataset(f"{run_id}/mp_double/result").to_pydict() == {"x": [2, 4, 6]}
    assert datasets.read_manifest(f"{run_id}/mp_double/result").run_id == run_id


def test_in_memory_store_under_multiprocess_executor_is_refused(instance: dg.DagsterInstance) -> None:
    ok, _run_id, errors = _execute(dg.reconstructable(mp_defs.mp_memory_job), instance)
    assert not ok
    assert "ProcessLocalStoreError" in errors
    assert "LocalStoreResource" in errors and "in-process executor" in errors
