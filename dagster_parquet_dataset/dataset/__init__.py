"""Dataset layer: Spec 042 Parquet datasets on any Store."""

from ._data_version import data_version
from ._live import LiveVersion
from ._merge import MergeResult
from ._ops.append import PendingAppend
from ._ops.compact import CompactResult
from ._ops.listing import DatasetListing
from ._ops.merge_plan import MergePlan, MergeReplanNeeded
from ._options import DatasetOptions
from ._pinned import (
    CommittedManifests,
    LiveDatasets,
    PinnedDatasets,
    pin_manifests,
    read_committed_manifests,
    read_live,
    write_from_live,
)
from ._transaction import PendingWrite
from ._verify import VerifyProblem, VerifyReport
from .manifest import DatasetManifest, FileEntry
from .store import ParquetDatasetStore

__all__ = [
    "CommittedManifests",
    "CompactResult",
    "DatasetListing",
    "DatasetManifest",
    "DatasetOptions",
    "FileEntry",
    "LiveDatasets",
    "LiveVersion",
    "MergePlan",
    "MergeReplanNeeded",
    "MergeResult",
    "ParquetDatasetStore",
    "PendingAppend",
    "PendingWrite",
    "PinnedDatasets",
    "VerifyProblem",
    "VerifyReport",
    "data_version",
    "pin_manifests",
    "read_committed_manifests",
    "read_live",
    "write_from_live",
]
