"""Dagster layer: ``RemoteStoreIOManager`` and the store resources.

Importing this package imports ``dagster``; the core package does not.
"""

from ._backfill_split import BackfillIncomplete
from ._checks import build_dataset_checks
from ._maintenance import SAFETY_FLOOR, CompactOptions, MaintenanceConfig, VacuumOptions, build_maintenance_jobs
from ._observe import observable_dataset
from ._ownership import DatasetKeyCollision
from .handlers import (
    OPTIONAL_HANDLERS,
    ArrowConvertingHandler,
    ArrowTableHandler,
    HandlerRegistry,
    PandasDataFrameHandler,
    PolarsDataFrameHandler,
    PolarsLazyFrameHandler,
    RecordBatchReaderHandler,
    TypeHandler,
    builtin_handlers,
    default_handlers,
    default_registry,
)
from .io_manager import NoDataStored, ProcessLocalStoreError, RemoteStoreIOManager, UnsupportedTypeError
from .keys import escape_segment, unescape_segment
from .resources import InMemoryStoreResource, LocalStoreResource, S3StoreResource, StoreResource

__all__ = [
    "OPTIONAL_HANDLERS",
    "ArrowConvertingHandler",
    "ArrowTableHandler",
    "SAFETY_FLOOR",
    "BackfillIncomplete",
    "CompactOptions",
    "DatasetKeyCollision",
    "HandlerRegistry",
    "InMemoryStoreResource",
    "NoDataStored",
    "LocalStoreResource",
    "MaintenanceConfig",
    "PandasDataFrameHandler",
    "PolarsDataFrameHandler",
    "PolarsLazyFrameHandler",
    "ProcessLocalStoreError",
    "RecordBatchReaderHandler",
    "RemoteStoreIOManager",
    "S3StoreResource",
    "StoreResource",
    "TypeHandler",
    "UnsupportedTypeError",
    "VacuumOptions",
    "build_dataset_checks",
    "build_maintenance_jobs",
    "builtin_handlers",
    "default_handlers",
    "default_registry",
    "escape_segment",
    "observable_dataset",
    "unescape_segment",
]
