"""Dataset layer: Spec 042 Parquet datasets on any Store."""

from ._compact import CompactResult
from .manifest import DatasetManifest, FileEntry
from .store import ParquetDatasetStore

__all__ = ["CompactResult", "DatasetManifest", "FileEntry", "ParquetDatasetStore"]
