"""Reliable Parquet datasets on any object store, for Dagster and Spark.

The Dagster layer (``RemoteStoreIOManager`` and the store resources) needs the
``dagster`` extra and is imported on first use, so the core works with only
pyarrow installed.
"""

from __future__ import annotations

from .dataset import (
    CompactResult,
    DatasetListing,
    DatasetManifest,
    FileEntry,
    ParquetDatasetStore,
    ReadPlan,
    VacuumResult,
    VerifyProblem,
    VerifyReport,
)
from .errors import (
    AlreadyExists,
    CapabilityNotSupported,
    CommitConflict,
    CommitOutcomeUnknown,
    DatasetIncomplete,
    DatasetNotFound,
    ManifestCorrupted,
    NotFound,
    OwnerMismatch,
    PartitionsNotCombinable,
    RemoteStoreError,
    SparkWorkerEnvironmentError,
    StoreAccessError,
    VersionNotRetained,
)
from .storage import Capability, FileInfo, LocalStore, MemoryStore, S3Store, Store

__version__ = "0.1.0"

_DAGSTER_NAMES: tuple[str, ...] = (
    "RemoteStoreIOManager",
    "LocalStoreResource",
    "S3StoreResource",
    "InMemoryStoreResource",
)
_DAGSTER_NAMES += ("build_dataset_checks", "observable_dataset", "build_maintenance_jobs")
_DAGSTER_NAMES += ("CompactOptions", "VacuumOptions")


def __getattr__(name: str) -> object:
    # The Dagster layer imports dagster (slow, and an optional extra): load it on first use.
    if name in _DAGSTER_NAMES:
        from . import dagster_io

        return getattr(dagster_io, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AlreadyExists",
    "Capability",
    "CapabilityNotSupported",
    "CommitConflict",
    "CommitOutcomeUnknown",
    "CompactOptions",
    "CompactResult",
    "DatasetIncomplete",
    "DatasetListing",
    "DatasetManifest",
    "DatasetNotFound",
    "FileEntry",
    "FileInfo",
    "InMemoryStoreResource",
    "LocalStore",
    "LocalStoreResource",
    "ManifestCorrupted",
    "MemoryStore",
    "NotFound",
    "OwnerMismatch",
    "ParquetDatasetStore",
    "PartitionsNotCombinable",
    "ReadPlan",
    "RemoteStoreError",
    "RemoteStoreIOManager",
    "S3Store",
    "S3StoreResource",
    "SparkWorkerEnvironmentError",
    "Store",
    "StoreAccessError",
    "VacuumResult",
    "VacuumOptions",
    "VerifyProblem",
    "VerifyReport",
    "VersionNotRetained",
    "build_dataset_checks",
    "build_maintenance_jobs",
    "observable_dataset",
]
