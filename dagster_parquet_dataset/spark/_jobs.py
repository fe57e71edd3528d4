"""Running a write job and, when it fails, waiting until its tasks have stopped before anything is cleaned up.

When a Spark job fails, ``collect`` raises as soon as the scheduler gives up,
while other tasks of the job may still be running (they are being killed). A
clean-up that ran then could delete a file that a straggler writes a moment
later. Spark's scheduler already kills the remaining tasks of a failed job;
the driver waits, on Spark's status tracker, until no task of the failed
job's stages is active any more (with a bound: if they do not stop
in time, what they write later is a leftover that the next write or vacuum
removes).

A job whose Python workers cannot import this package (or one of its
dependencies) fails with a long Java trace ending in ``ModuleNotFoundError``;
:func:`run_job` turns that into a :class:`SparkWorkerEnvironmentError` that
says which Python the workers ran and what to set.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import SparkWorkerEnvironmentError

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame

T = TypeVar("T")

log = logging.getLogger(__name__)

#: How long the driver waits for a failed job's tasks to stop, and how often it looks.
STOP_TIMEOUT = 120.0
_POLL = 0.05


def run_job(sc: SparkContext, action: Callable[[], T]) -> T:
    """``action()`` (which runs Spark jobs); if it fails, wait for the tasks of its jobs to stop, then re-raise.

    Raises:
        SparkWorkerEnvironmentError: a Python worker could not import a module (this package or a dependency).
        whatever else ``action`` raises (pyspark.errors.PySparkException for a failed job), once its tasks stopped.
    """
    tracker = sc.statusTracker()
    group = sc.getLocalProperty("spark.jobGroup.id")
    before = set(tracker.getJobIdsForGroup(group))
    try:
        return action()
    except Exception as exc:
        _wait_for_tasks(sc, sorted(set(tracker.getJobIdsForGroup(group)) - before))
        module = missing_worker_module(exc)
        if module is None:
            raise
        raise SparkWorkerEnvironmentError(_environment_message(sc, module), module) from None
    except BaseException:
        _wait_for_tasks(sc, sorted(set(tracker.getJobIdsForGroup(group)) - before))
        raise


def collect_rows(frame: DataFrame) -> list[dict[str, Any]]:
    """``frame.collect()`` as dicts, through :func:`run_job`.

    Raises:
        pyspark.errors.PySparkException: the job failed (re-raised once its tasks stopped).
    """
    return run_job(frame.sparkSession.sparkContext, lambda: [r.asDict() for r in frame.collect()])


#: The last line of a Python worker's traceback when an import failed (Spark copies it into the driver's error).
_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")


def missing_worker_module(exc: BaseException) -> str | None:
    """The module a Spark Python worker could not import, if ``exc`` is a failed job's error that says so."""
    from pyspark.errors import PySparkException

    if not isinstance(exc, PySparkException):
        return None
    found = _MISSING_MODULE.findall(str(exc))
    return found[-1] if found else None


def _environment_message(sc: SparkContext, module: str) -> str:
    """What went wrong, which Pythons are involved, and what to set."""
    configured = sc.getConf().get("spark.pyspark.python")
    worker = configured or getattr(sc, "pythonExec", None) or "python3"
    source = "spark.pyspark.python" if configured else "$PYSPARK_PYTHON" if "PYSPARK_PYTHON" in os.environ else None
    told = (
        f"{worker!r} (from {source})"
        if source
        else f"{worker!r} (neither PYSPARK_PYTHON nor spark.pyspark.python is set)"
    )
    return (
        f"Spark's Python workers could not import {module!r} (ModuleNotFoundError on the executors): they ran "
        f"{told}, while the driver runs {sys.executable!r}. Every Python worker must import dagster_parquet_dataset "
        "and its dependencies: locally, set PYSPARK_PYTHON (or spark.pyspark.python) to the driver's venv Python, "
        f"e.g. `export PYSPARK_PYTHON={sys.executable}` before the SparkSession starts; on a cluster, install the "
        "package on every executor (or ship a packed environment with spark.archives) and point "
        "spark.pyspark.python at its Python."
    )


def _wait_for_tasks(sc: SparkContext, jobs: list[int]) -> None:
    """Block until no stage of ``jobs`` has an active task (at most :data:`STOP_TIMEOUT` seconds). Never raises."""
    try:
        tracker = sc.statusTracker()
        deadline = time.monotonic() + STOP_TIMEOUT
        while True:
            active = 0
            for job in jobs:
                info = tracker.getJobInfo(job)
                for stage in info.stageIds if info else []:
                    stage_info = tracker.getStageInfo(stage)
                    active += stage_info.numActiveTasks if stage_info else 0
            if not active:
                return
            if time.monotonic() > deadline:
                log.warning("tasks of failed Spark job(s) %s are still running; their files may stay behind", jobs)
                return
            time.sleep(_POLL)
    except Exception as exc:  # the real error matters more
        log.warning("could not wait for the tasks of failed Spark job(s) %s: %s", jobs, exc)
