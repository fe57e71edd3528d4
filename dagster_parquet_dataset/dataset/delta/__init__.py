"""Every dataset is also a Delta table (``delta_log=True``): its ``_delta_log/`` is derived from
the manifests after each commit. See docs/delta.md."""

from .actions import delta_path, millis, partition_string
from .delta_schema import check_delta_schema, delta_ready, has_naive_timestamps, spark_schema
from .log_writer import CHECKPOINT_INTERVAL, LOG_DIR, after_commit, expire_log, sync_log

__all__ = [
    "CHECKPOINT_INTERVAL",
    "LOG_DIR",
    "after_commit",
    "check_delta_schema",
    "delta_path",
    "delta_ready",
    "expire_log",
    "has_naive_timestamps",
    "millis",
    "partition_string",
    "spark_schema",
    "sync_log",
]
