"""Dataset layer: Spec 042 Parquet datasets on any Store."""

from ._commit import PendingWrite
from ._external import MergePlan, MergeReplanNeeded, PendingAppend
from ._merge import MergeResult
from .manifest import DatasetManifest, FileEntry
from .store import ParquetDatasetStore

__all__ = [
    "DatasetManifest",
    "FileEntry",
    "MergePlan",
    "MergeReplanNeeded",
    "MergeResult",
    "ParquetDatasetStore",
    "PendingAppend",
    "PendingWrite",
]
