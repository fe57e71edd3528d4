"""Dagster layer: ``RemoteStoreIOManager`` and the store resources.

Importing this package imports ``dagster``; the core package does not.
"""

from ._backfill import BackfillIncomplete
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
from .io_manager import ProcessLocalStoreError, RemoteStoreIOManager, UnsupportedTypeError
from .keys import escape_segment, unescape_segment
from .resources import InMemoryStoreResource, LocalStoreResource, S3StoreResource, StoreResource

__all__ = [
    "OPTIONAL_HANDLERS",
    "ArrowConvertingHandler",
    "ArrowTableHandler",
    "BackfillIncomplete",
    "DatasetKeyCollision",
    "HandlerRegistry",
    "InMemoryStoreResource",
    "LocalStoreResource",
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
    "builtin_handlers",
    "default_handlers",
    "default_registry",
    "escape_segment",
    "unescape_segment",
]
