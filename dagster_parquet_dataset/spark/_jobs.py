"""Running a write job and, when it fails, waiting until its tasks have stopped before anything is cleaned up.

When a Spark job fails, ``collect`` raises as soon as the scheduler gives up,
while other tasks of the job may still be running (they are being killed). A
clean-up that ran then could delete a file that a straggler writes a moment
later. Spark's scheduler already kills the remaining tasks of a failed job;
the driver waits, on Spark's status tracker, until no task of the failed
job's stages is active any more (with a bound: if they do not stop
in time, what they write later is a leftover that the next write or vacuum
removes).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

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
        whatever ``action`` raises (pyspark.errors.PySparkException for a failed job), once its tasks stopped.
    """
    tracker = sc.statusTracker()
    group = sc.getLocalProperty("spark.jobGroup.id")
    before = set(tracker.getJobIdsForGroup(group))
    try:
        return action()
    except BaseException:
        _wait_for_tasks(sc, sorted(set(tracker.getJobIdsForGroup(group)) - before))
        raise


def collect_rows(frame: DataFrame) -> list[dict[str, Any]]:
    """``frame.collect()`` as dicts, through :func:`run_job`.

    Raises:
        pyspark.errors.PySparkException: the job failed (re-raised once its tasks stopped).
    """
    return run_job(frame.sparkSession.sparkContext, lambda: [r.asDict() for r in frame.collect()])


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
