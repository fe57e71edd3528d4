"""The handler registry: picks the type handler for a Python type or a recorded type name."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence

from ._arrow_handlers import ArrowDatasetHandler, ArrowTableHandler, RecordBatchReaderHandler
from ._handler_base import TypeHandler
from ._pandas_handler import PandasDataFrameHandler
from ._polars_handlers import PolarsDataFrameHandler, PolarsLazyFrameHandler

#: Handlers imported on first need: ``(type_name, module, class_name)``.
OPTIONAL_HANDLERS: tuple[tuple[str, str, str], ...] = (
    ("pyspark.sql.DataFrame", "dagster_parquet_dataset.dagster_io._spark_handler", "SparkDataFrameHandler"),
)


def builtin_handlers() -> list[TypeHandler]:
    """The handlers that need nothing beyond pyarrow (pandas and polars are imported on use)."""
    return [
        ArrowTableHandler(),
        RecordBatchReaderHandler(),
        PandasDataFrameHandler(),
        PolarsDataFrameHandler(),
        PolarsLazyFrameHandler(),
        ArrowDatasetHandler(),
    ]


def _is_missing_dependency(exc: ModuleNotFoundError, module: str) -> bool:
    """Whether ``exc`` means "``module`` or a third-party dependency of it is not installed".

    A missing module inside this package (other than ``module`` itself or its
    parent packages) is a bug, not an absent extra, and is not swallowed.
    """
    missing = exc.name or ""
    if missing == module or module.startswith(missing + "."):
        return True
    return missing.split(".")[0] != "dagster_parquet_dataset"


class HandlerRegistry:
    """Picks the handler for a Python type or for a recorded ``type_name``.

    Built-in handlers are tried first, in order; :data:`OPTIONAL_HANDLERS`
    are imported only when none fits, once per registry.
    """

    def __init__(
        self,
        handlers: Sequence[TypeHandler] | None = None,
        optional: Sequence[tuple[str, str, str]] = OPTIONAL_HANDLERS,
    ) -> None:
        self._handlers: list[TypeHandler] = list(handlers) if handlers is not None else builtin_handlers()
        self._optional = list(optional)
        self._optional_loaded = not self._optional
        self._unavailable: dict[str, str] = {}
        self._lock = threading.Lock()

    def _load_optional(self) -> None:
        with self._lock:
            if self._optional_loaded:
                return
            for type_name, module, class_name in self._optional:
                try:
                    mod = importlib.import_module(module)
                except ModuleNotFoundError as exc:
                    if not _is_missing_dependency(exc, module):
                        raise
                    missing = exc.name or module
                    ours = missing.split(".")[0] == "dagster_parquet_dataset"
                    self._unavailable[type_name] = (
                        f"{module} is not available" if ours else f"needs {missing}, which is not installed"
                    )
                    continue
                cls = getattr(mod, class_name, None)
                if cls is None:
                    self._unavailable[type_name] = f"{module} has no {class_name}"
                    continue
                self._handlers.append(cls())
            self._optional_loaded = True

    def handlers(self) -> list[TypeHandler]:
        """Every available handler, importing the optional ones."""
        self._load_optional()
        return list(self._handlers)

    def for_type(self, python_type: type) -> TypeHandler | None:
        """The first handler that handles ``python_type``, or ``None``."""
        for handler in self._handlers:
            if handler.handles(python_type):
                return handler
        if not self._optional_loaded:
            self._load_optional()
            for handler in self._handlers:
                if handler.handles(python_type):
                    return handler
        return None

    def for_name(self, type_name: str) -> TypeHandler | None:
        """The handler whose :attr:`TypeHandler.type_name` is ``type_name``, or ``None``."""
        for handler in self._handlers:
            if handler.type_name == type_name:
                return handler
        if any(name == type_name for name, _m, _c in self._optional):
            self._load_optional()
            for handler in self._handlers:
                if handler.type_name == type_name:
                    return handler
        return None

    def describe_supported(self) -> str:
        """Human-readable list of supported types, for error messages."""
        names = [h.type_name for h in self._handlers]
        for type_name, _module, _cls in self._optional:
            if type_name in names:
                continue
            reason = self._unavailable.get(type_name)
            names.append(f"{type_name} ({reason})" if reason else f"{type_name} (if installed)")
        return ", ".join(names)

    def unavailable_reason(self, type_name: str) -> str | None:
        """Why an optional handler could not be loaded, if it was tried."""
        return self._unavailable.get(type_name)


_DEFAULT: HandlerRegistry | None = None
_DEFAULT_LOCK = threading.Lock()


def default_registry() -> HandlerRegistry:
    """The process-wide registry of the built-in and optional handlers."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = HandlerRegistry()
        return _DEFAULT


def default_handlers() -> list[TypeHandler]:
    """Every handler available in this process (built-in plus importable optional ones)."""
    return default_registry().handlers()
