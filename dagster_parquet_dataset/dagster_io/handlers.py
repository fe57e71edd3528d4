"""Type handlers: one class per Python type the IO manager writes and reads.

The IO manager maps Dagster context to dataset keys and nothing else; how a
value becomes a dataset (and back) is a :class:`TypeHandler`'s job. The one
base class (:mod:`._handler_base`) holds the read and write path; each
built-in handler only converts its type to and from Arrow:

* :class:`ArrowTableHandler`           ``pyarrow.Table``
* :class:`RecordBatchReaderHandler`    ``pyarrow.RecordBatchReader`` (streamed on write, loaded lazily)
* :class:`ArrowDatasetHandler`         ``pyarrow.dataset.Dataset`` (loaded lazily)
* :class:`PandasDataFrameHandler`      ``pandas.DataFrame`` (the index round-trips)
* :class:`PolarsDataFrameHandler`      ``polars.DataFrame`` (when polars is installed)
* :class:`PolarsLazyFrameHandler`      ``polars.LazyFrame`` (when polars is installed; loaded lazily)

Handlers for libraries that are slow to import or optional (Spark) are listed
in :data:`OPTIONAL_HANDLERS` and imported only when no built-in handler fits
(:mod:`._registry`). This module gathers the public names.
"""

from ._arrow_handlers import ArrowDatasetHandler, ArrowTableHandler, RecordBatchReaderHandler
from ._handler_base import (
    ASSET_KEY_KEY,
    NO_DATA_KEY,
    OUTPUT_NAME_KEY,
    PARTITION_DIMENSION_PREFIX,
    PARTITION_KEY_KEY,
    PYTHON_TYPE_KEY,
    READ_MANY_THREADS,
    STEP_KEY_KEY,
    ArrowConvertingHandler,
    OptionsWrite,
    TypeHandler,
)
from ._pandas_handler import PandasDataFrameHandler
from ._polars_handlers import PolarsDataFrameHandler, PolarsLazyFrameHandler
from ._registry import OPTIONAL_HANDLERS, HandlerRegistry, builtin_handlers, default_handlers, default_registry
from ._retries import idempotency_key as step_idempotency_key

__all__ = [
    "step_idempotency_key",
    "ASSET_KEY_KEY",
    "NO_DATA_KEY",
    "OPTIONAL_HANDLERS",
    "OUTPUT_NAME_KEY",
    "PARTITION_DIMENSION_PREFIX",
    "PARTITION_KEY_KEY",
    "PYTHON_TYPE_KEY",
    "READ_MANY_THREADS",
    "STEP_KEY_KEY",
    "ArrowConvertingHandler",
    "ArrowDatasetHandler",
    "ArrowTableHandler",
    "HandlerRegistry",
    "OptionsWrite",
    "PandasDataFrameHandler",
    "PolarsDataFrameHandler",
    "PolarsLazyFrameHandler",
    "RecordBatchReaderHandler",
    "TypeHandler",
    "builtin_handlers",
    "default_handlers",
    "default_registry",
]
