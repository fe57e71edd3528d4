"""Dataset layer: Spec 042 Parquet datasets on any Store."""

from ._commit import PendingWrite
from ._compact import CompactResult
from ._external import MergePlan, MergeReplanNeeded, PendingAppend
from ._list import DatasetListing
from ._merge import MergeResult
from ._verify import VerifyProblem, VerifyReport
from .manifest import DatasetManifest, FileEntry
from .store import ParquetDatasetStore

__all__ = [
    "CompactResult",
    "DatasetListing",
    "DatasetManifest",
    "FileEntry",
    "MergePlan",
    "MergeReplanNeeded",
    "MergeResult",
    "ParquetDatasetStore",
    "PendingAppend",
    "PendingWrite",
    "VerifyProblem",
    "VerifyReport",
]
