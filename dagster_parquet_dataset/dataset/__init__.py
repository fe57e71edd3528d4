"""Dataset layer: Spec 042 Parquet datasets on any Store."""

from ._compact import CompactResult
from ._list import DatasetListing
from ._verify import VerifyProblem, VerifyReport
from .manifest import DatasetManifest, FileEntry
from .store import ParquetDatasetStore

__all__ = [
    "CompactResult",
    "DatasetListing",
    "DatasetManifest",
    "FileEntry",
    "ParquetDatasetStore",
    "VerifyProblem",
    "VerifyReport",
]
