"""Dataset layer: Spec 042 Parquet datasets on any Store."""

from ._dataset_options import DatasetOptions
from ._pinned import CommittedManifests, PinnedDatasets, pin_manifests, read_committed_manifests
from .commit.transaction import PendingWrite
from .expressions.merge_keys import MergeResult
from .format.data_version import data_version
from .io.read_parts import ReadPlan
from .io.verify_parts import VerifyProblem, VerifyReport
from .manifest import DatasetManifest, FileEntry
from .ops.append import PendingAppend
from .ops.compact import CompactResult
from .ops.listing import DatasetListing
from .ops.merge_plan import MergePlan, MergeReplanNeeded
from .ops.vacuum import VacuumResult
from .store import ParquetDatasetStore

__all__ = [
    "CommittedManifests",
    "CompactResult",
    "DatasetListing",
    "DatasetManifest",
    "DatasetOptions",
    "FileEntry",
    "MergePlan",
    "MergeReplanNeeded",
    "MergeResult",
    "ParquetDatasetStore",
    "PendingAppend",
    "PendingWrite",
    "PinnedDatasets",
    "ReadPlan",
    "VacuumResult",
    "VerifyProblem",
    "VerifyReport",
    "data_version",
    "pin_manifests",
    "read_committed_manifests",
]
