"""Type handlers: one class per Python type the IO manager writes and reads.

The IO manager maps Dagster context to dataset keys and nothing else; how a
value becomes a dataset (and back) is a :class:`TypeHandler`'s job. Built in:

* :class:`ArrowTableHandler`           ``pyarrow.Table``
* :class:`RecordBatchReaderHandler`    ``pyarrow.RecordBatchReader`` (streamed on write, loaded lazily)
* :class:`PandasDataFrameHandler`      ``pandas.DataFrame`` (the index round-trips)
* :class:`PolarsDataFrameHandler`      ``polars.DataFrame`` (when polars is installed)
* :class:`PolarsLazyFrameHandler`      ``polars.LazyFrame`` (when polars is installed; loaded lazily)
* :class:`ArrowDatasetHandler`         ``pyarrow.dataset.Dataset`` (loaded lazily)

Handlers for libraries that are slow to import or optional (Spark) are listed
in :data:`OPTIONAL_HANDLERS` and imported only when no built-in handler fits.
"""

from __future__ import annotations

import abc
import importlib
import json
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

from ..dataset import DatasetManifest, MergeResult, ParquetDatasetStore
from ..errors import DatasetIncomplete, ManifestCorrupted, NotFound

if TYPE_CHECKING:
    from dagster import InputContext, OutputContext

    from ._backfill import Backfill
    from .options import WriteOptions

#: Manifest metadata keys the IO manager writes (all values are strings).
PYTHON_TYPE_KEY = "dagster.python_type"
ASSET_KEY_KEY = "dagster.asset_key"
PARTITION_KEY_KEY = "dagster.partition_key"
PARTITION_DIMENSION_PREFIX = "dagster.partition."
STEP_KEY_KEY = "dagster.step_key"
OUTPUT_NAME_KEY = "dagster.output_name"


@dataclass(frozen=True)
class OptionsWrite:
    """What :meth:`TypeHandler.write_with_options` committed.

    Attributes:
        manifest: the committed manifest (``write_mode`` ``"overwrite"`` or ``"append"``).
        rows: rows written or appended (``"overwrite"``/``"append"``).
        merge: the merge's result (``write_mode`` ``"merge"``).
    """

    manifest: DatasetManifest | None = None
    rows: int | None = None
    merge: MergeResult | None = None


class TypeHandler(abc.ABC):
    """How one Python type is written as a dataset and read back.

    A handler gets the :class:`ParquetDatasetStore` and the dataset key the IO
    manager chose; it must write with ``overwrite=True`` (a re-materialization
    replaces the previous version) and pass ``run_id`` and ``metadata`` through
    to the manifest unchanged.

    :meth:`write` serves the default ``write_mode`` (a plain overwrite). For
    ``"append"``, ``"merge"`` and ``partition_by`` (see :mod:`.options`) the IO
    manager converts the output with :meth:`to_arrow` and calls the dataset
    layer itself; a handler whose type cannot be converted in this process
    keeps the default :meth:`to_arrow`, which refuses with a clear error.
    :meth:`read` receives ``filters`` and ``version`` only when an input sets
    them, so a handler that does not support them need not accept them.
    :meth:`write_partitions` serves single-run backfills (an output over
    several partition keys, split by ``partition_expr``); its default splits
    :meth:`to_arrow`'s table in memory.

    **Adding a type** (this is the hook the Spark layer uses): subclass
    ``TypeHandler``, set :attr:`type_name`, implement :meth:`handles`,
    :meth:`write`, :meth:`read` and :meth:`combine`, then either

    * pass an instance to :class:`HandlerRegistry` (``RemoteStoreIOManager``
      uses :func:`default_registry`), or
    * for an optional dependency, add ``(type_name, module, class_name)`` to
      :data:`OPTIONAL_HANDLERS`. The registry imports ``module`` only when no
      built-in handler fits the type at hand (or a manifest names
      ``type_name``), and treats a ``ModuleNotFoundError`` for the module or
      its third-party dependency as "not installed".

    The Spark handler is expected at
    ``dagster_parquet_dataset.spark.handler.SparkDataFrameHandler`` with a
    no-argument constructor; it obtains its ``SparkSession`` itself (for
    example ``SparkSession.getActiveSession()``).
    """

    #: Recorded in the manifest (``dagster.python_type``) and used to load an
    #: unannotated input as the type that was written, e.g. ``"pandas.DataFrame"``.
    type_name: ClassVar[str]

    @abc.abstractmethod
    def handles(self, python_type: type) -> bool:
        """Whether this handler writes and reads ``python_type`` (a class, never ``Any``)."""

    @abc.abstractmethod
    def write(
        self,
        context: OutputContext | None,
        datasets: ParquetDatasetStore,
        key: str,
        obj: Any,
        *,
        run_id: str | None,
        metadata: dict[str, str],
    ) -> DatasetManifest:
        """Write ``obj`` as dataset ``key`` (overwriting) and return the committed manifest.

        Raises:
            TypeError: ``obj`` cannot be converted to Arrow; the message names why.
            RemoteStoreError: the dataset layer failed (see ``write_dataset``).
        """

    @abc.abstractmethod
    def read(
        self,
        context: InputContext | None,
        datasets: ParquetDatasetStore,
        key: str,
        *,
        columns: Sequence[str] | None,
        filters: Any = None,
        version: int | None = None,
    ) -> Any:
        """Read dataset ``key`` (only ``columns`` when given) as this handler's type.

        Args:
            filters: DNF filters (see ``ParquetDatasetStore.read_dataset``): only
                matching rows are loaded. Passed only when the input sets them.
            version: a retained past version to load. Passed only when the input sets it.

        Raises:
            DatasetNotFound: nothing is stored under ``key``.
            DatasetIncomplete: the dataset is incomplete or damaged.
            VersionNotRetained: ``version`` is older than the latest and no longer kept.
            NotFound: ``version`` is newer than the latest.
            ValueError / TypeError: a requested column does not exist, or malformed filters.
        """

    def write_with_options(
        self,
        context: OutputContext | None,
        datasets: ParquetDatasetStore,
        key: str,
        obj: Any,
        options: WriteOptions,
        *,
        run_id: str | None,
        metadata: dict[str, str],
    ) -> OptionsWrite | None:
        """Apply a non-default write (``append``, ``merge``, ``partition_by``) in the handler's own way.

        The default returns ``None``: the IO manager converts ``obj`` with
        :meth:`to_arrow` and calls the dataset layer. A handler that writes
        elsewhere (Spark, on its executors) commits itself and says what it did.

        Raises:
            Whatever the handler's write raises (``ValueError`` for bad data, ``RemoteStoreError``).
        """
        return None

    def to_arrow(self, obj: Any) -> pa.Table | pa.RecordBatchReader:
        """Convert an output for the dataset layer (used for append, merge and ``partition_by``).

        The default refuses: override it in handlers whose type converts to Arrow.

        Raises:
            TypeError: this handler's type cannot be converted (the default), or
                ``obj`` cannot be represented in Arrow.
        """
        raise TypeError(
            f"{self.type_name} outputs can only be written with the default write_mode 'overwrite' and no "
            f"partition_by: {type(self).__name__} does not convert them to Arrow"
        )

    def write_partitions(
        self,
        context: OutputContext | None,
        datasets: ParquetDatasetStore,
        obj: Any,
        backfill: Backfill,
    ) -> list[Any]:
        """Write ``obj``, which holds the rows of several partitions, to each partition's dataset.

        Serves single-run backfills (output metadata ``partition_expr``; see
        :mod:`._backfill`). The default converts ``obj`` with :meth:`to_arrow`,
        splits it in memory and writes each partition with
        ``backfill.write_table`` (every ``write_mode``); a handler that writes
        elsewhere (Spark, on its executors) overrides it.

        Returns:
            Per target of ``backfill``, in order: the committed :class:`DatasetManifest`
            (an overwrite), or what ``backfill.write_table`` returned.

        Raises:
            ValueError: a row's partition value is null or in no partition of the run
                (nothing is written).
            TypeError: ``obj`` cannot be converted to Arrow.
            BackfillIncomplete: some partitions committed and others failed.
        """
        from ._backfill import write_arrow_partitions

        return write_arrow_partitions(self.to_arrow(obj), backfill)

    @abc.abstractmethod
    def combine(self, objs: Sequence[Any]) -> Any:
        """Concatenate several partitions (in order) into one object of this type.

        Raises:
            ValueError: the partitions' schemas cannot be concatenated.
        """

    def read_many(
        self,
        context: InputContext | None,
        datasets: ParquetDatasetStore,
        keys: Sequence[str],
        *,
        columns: Sequence[str] | None,
        filters: Any = None,
    ) -> Any:
        """Read several datasets as one value over the union of their rows, in ``keys`` order.

        The IO manager calls this for an input over several partitions (not
        annotated as a ``dict``), with the keys of the partitions that exist.
        The default reads each key with :meth:`read` (on up to
        :data:`READ_MANY_THREADS` threads) and joins them with :meth:`combine`;
        a handler that can scan many datasets at once overrides it.

        Raises:
            DatasetNotFound / DatasetIncomplete: a dataset is absent, incomplete or
                damaged; the message names its key, and the exception's
                ``dataset_key`` attribute is that key.
            ValueError / TypeError: a requested column does not exist, malformed
                filters, or schemas that cannot be combined.
        """
        keys = list(keys)

        def one(key: str) -> Any:
            try:
                return self.read(context, datasets, key, columns=columns, **_filter_kwargs(filters))
            except DatasetIncomplete as exc:  # DatasetNotFound included
                _with_key(exc, key)
                raise

        if len(keys) == 1:
            return one(keys[0])
        with ThreadPoolExecutor(
            max_workers=min(READ_MANY_THREADS, max(len(keys), 1)), thread_name_prefix="pds-read-many"
        ) as pool:
            return self.combine(list(pool.map(one, keys)))


#: Threads :meth:`TypeHandler.read_many`'s default uses to read datasets at once.
READ_MANY_THREADS = 8


def _filter_kwargs(filters: Any) -> dict[str, Any]:
    """``{"filters": filters}`` when set: :meth:`TypeHandler.read` gets ``filters`` only when an input sets them."""
    return {} if filters is None else {"filters": filters}


def _with_key(exc: BaseException, key: str) -> None:
    """Set ``exc``'s ``dataset_key`` attribute to ``key`` (the dataset it is about), unless already set."""
    if getattr(exc, "dataset_key", None) is None:
        exc.dataset_key = key  # type: ignore[attr-defined]


def _is_subclass(python_type: type, module: str, attr: str) -> bool:
    """Whether ``python_type`` subclasses ``module.attr``, without importing ``module``.

    A subclass of a class of ``module`` can only exist once ``module`` is
    imported, so a module that is not loaded means "no".
    """
    mod = sys.modules.get(module)
    cls = getattr(mod, attr, None) if mod is not None else None
    return isinstance(python_type, type) and isinstance(cls, type) and issubclass(python_type, cls)


def _concat_arrow(tables: Sequence[pa.Table]) -> pa.Table:
    try:
        return pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ValueError(f"the partitions' schemas cannot be concatenated: {exc}") from None


class ArrowConvertingHandler(TypeHandler):
    """A handler whose type converts to and from Arrow in this process.

    Subclasses implement :meth:`to_arrow` and :meth:`from_arrow`; writing and
    reading go through ``write_dataset`` / ``read_dataset``.
    """

    @abc.abstractmethod
    def to_arrow(self, obj: Any) -> pa.Table | pa.RecordBatchReader:
        """Convert ``obj`` for ``write_dataset``.

        Raises:
            TypeError: ``obj`` cannot be represented in Arrow.
        """

    @abc.abstractmethod
    def from_arrow(self, table: pa.Table) -> Any:
        """Convert a table read from the store to this handler's type."""

    def write(
        self,
        context: OutputContext | None,
        datasets: ParquetDatasetStore,
        key: str,
        obj: Any,
        *,
        run_id: str | None,
        metadata: dict[str, str],
    ) -> DatasetManifest:
        return datasets.write_dataset(self.to_arrow(obj), key, overwrite=True, run_id=run_id, metadata=metadata)

    def read(
        self,
        context: InputContext | None,
        datasets: ParquetDatasetStore,
        key: str,
        *,
        columns: Sequence[str] | None,
        filters: Any = None,
        version: int | None = None,
    ) -> Any:
        return self.from_arrow(datasets.read_dataset(key, columns=columns, filters=filters, version=version))

    def read_many(
        self,
        context: InputContext | None,
        datasets: ParquetDatasetStore,
        keys: Sequence[str],
        *,
        columns: Sequence[str] | None,
        filters: Any = None,
    ) -> Any:
        """One scan over the union of the datasets (``scan_datasets``), materialized once, then :meth:`from_arrow`.

        Falls back to the default (a verified ``read_dataset`` per key, then
        :meth:`combine`) when the scan cannot be planned or a part fails while
        scanned, so errors and retries on concurrent commits are those of
        ``read_dataset``.
        """
        keys = list(keys)
        table = _scan_table(datasets, keys, columns, filters, self._scan_fits) if len(keys) > 1 else None
        if table is None:
            return super().read_many(context, datasets, keys, columns=columns, filters=filters)
        return self.from_arrow(table)

    def _scan_fits(self, schema: pa.Schema) -> bool:
        """Whether a table scanned with ``schema`` converts exactly as :meth:`combine` of per-key reads would."""
        return True


def _scan_table(
    datasets: ParquetDatasetStore,
    keys: Sequence[str],
    columns: Sequence[str] | None,
    filters: Any,
    fits: Any = None,
) -> pa.Table | None:
    """``scan_datasets(keys, ...)`` read into one table with exactly ``columns``; ``None`` when the scan cannot
    be planned (absent, incomplete or clashing datasets: the caller's per-key reads report it), ``fits`` refuses
    its schema, or a part fails while it is read."""
    try:
        dataset = datasets.scan_datasets(keys, columns=columns, filters=filters)
        if fits is not None and not fits(dataset.schema):
            return None
        table = dataset.to_table()
    except (DatasetIncomplete, ValueError, OSError, pa.ArrowException):
        return None
    return table.select(list(columns)) if columns is not None else table


def _scanner_columns(columns: Sequence[str] | None) -> list[str] | None:
    return list(columns) if columns is not None else None


class ArrowTableHandler(ArrowConvertingHandler):
    """``pyarrow.Table``, written and read as is."""

    type_name = "pyarrow.Table"

    def handles(self, python_type: type) -> bool:
        return isinstance(python_type, type) and issubclass(python_type, pa.Table)

    def to_arrow(self, obj: Any) -> pa.Table:
        return obj  # type: ignore[no-any-return]

    def from_arrow(self, table: pa.Table) -> pa.Table:
        return table

    def combine(self, objs: Sequence[Any]) -> pa.Table:
        return _concat_arrow(objs)


class RecordBatchReaderHandler(ArrowConvertingHandler):
    """``pyarrow.RecordBatchReader``: an output is streamed part by part, never held whole.

    Loading is lazy: the reader streams a scan (``scan_dataset`` / ``scan_datasets``
    over every partition the input asks for) with ``columns`` and ``filters``
    pushed down; nothing is read until it is consumed.
    """

    type_name = "pyarrow.RecordBatchReader"

    def handles(self, python_type: type) -> bool:
        return isinstance(python_type, type) and issubclass(python_type, pa.RecordBatchReader)

    def to_arrow(self, obj: Any) -> pa.RecordBatchReader:
        return obj  # type: ignore[no-any-return]

    def from_arrow(self, table: pa.Table) -> pa.RecordBatchReader:
        return table.to_reader()

    def combine(self, objs: Sequence[Any]) -> pa.RecordBatchReader:
        return _concat_arrow([r.read_all() for r in objs]).to_reader()

    def read(
        self,
        context: InputContext | None,
        datasets: ParquetDatasetStore,
        key: str,
        *,
        columns: Sequence[str] | None,
        filters: Any = None,
        version: int | None = None,
    ) -> pa.RecordBatchReader:
        dataset = datasets.scan_dataset(key, columns=columns, filters=filters, version=version)
        return dataset.scanner(columns=_scanner_columns(columns)).to_reader()

    def read_many(
        self,
        context: InputContext | None,
        datasets: ParquetDatasetStore,
        keys: Sequence[str],
        *,
        columns: Sequence[str] | None,
        filters: Any = None,
    ) -> pa.RecordBatchReader:
        dataset = _scan_many(datasets, keys, columns, filters)
        return dataset.scanner(columns=_scanner_columns(columns)).to_reader()


def _scan_many(datasets: ParquetDatasetStore, keys: Sequence[str], columns: Sequence[str] | None, filters: Any) -> Any:
    """``datasets.scan_datasets(keys, ...)``, with an absent or incomplete dataset's error naming its key.

    Raises:
        DatasetNotFound / DatasetIncomplete: a dataset cannot be scanned (``dataset_key`` names it).
        ValueError / TypeError: as ``scan_datasets``.
    """
    keys = list(keys)
    try:
        return datasets.scan_datasets(keys, columns=columns, filters=filters)
    except DatasetIncomplete as exc:
        named = [k for k in keys if repr(k) in str(exc)]
        if named:
            _with_key(exc, max(named, key=len))
        raise


class PandasDataFrameHandler(ArrowConvertingHandler):
    """``pandas.DataFrame``; the index (named, multi-level or a range) round-trips.

    The DataFrame goes through ``pyarrow.Table.from_pandas`` with
    ``preserve_index=None``: a non-default index is stored as columns and a
    ``RangeIndex`` as metadata only, and pyarrow's pandas metadata restores
    either on load. A column projection keeps the index columns.
    """

    type_name = "pandas.DataFrame"

    def handles(self, python_type: type) -> bool:
        return _is_subclass(python_type, "pandas", "DataFrame")

    def to_arrow(self, obj: Any) -> pa.Table:
        try:
            return pa.Table.from_pandas(obj, preserve_index=None)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise TypeError(f"cannot store this pandas.DataFrame as Parquet: {exc}") from None

    def from_arrow(self, table: pa.Table) -> Any:
        return table.to_pandas()

    def read(
        self,
        context: InputContext | None,
        datasets: ParquetDatasetStore,
        key: str,
        *,
        columns: Sequence[str] | None,
        filters: Any = None,
        version: int | None = None,
    ) -> Any:
        if columns is not None and not isinstance(columns, (str, bytes)):
            columns = self._with_index_columns(datasets, key, list(columns), version)
        return super().read(context, datasets, key, columns=columns, filters=filters, version=version)

    @staticmethod
    def _with_index_columns(
        datasets: ParquetDatasetStore, key: str, columns: list[str], version: int | None = None
    ) -> list[str]:
        try:
            schema = datasets.read_manifest(key, version=version).schema
        except (NotFound, ManifestCorrupted):
            # The read itself reports it precisely: absent, incomplete, or version not retained.
            return columns
        raw = (schema.metadata or {}).get(b"pandas") if schema is not None else None
        if raw is None:
            return columns
        try:
            index_columns = json.loads(raw).get("index_columns", [])
        except ValueError:
            return columns
        extra = [c for c in index_columns if isinstance(c, str) and c not in columns]
        return columns + extra

    def read_many(
        self,
        context: InputContext | None,
        datasets: ParquetDatasetStore,
        keys: Sequence[str],
        *,
        columns: Sequence[str] | None,
        filters: Any = None,
    ) -> Any:
        keys = list(keys)
        if len(keys) > 1:
            scan_columns = columns
            if columns is not None and not isinstance(columns, (str, bytes)):
                scan_columns = self._with_index_columns(datasets, keys[0], list(columns))
            table = _scan_table(datasets, keys, scan_columns, filters, self._scan_fits)
            if table is not None:
                return self.from_arrow(table)
        return TypeHandler.read_many(self, context, datasets, keys, columns=columns, filters=filters)

    def _scan_fits(self, schema: pa.Schema) -> bool:
        # Only an index stored as columns survives one scan unchanged. A RangeIndex (stored as
        # metadata), or no pandas metadata at all, gives each partition its own 0..n-1 index, which
        # the concatenation keeps and one scanned table cannot rebuild: those read per partition.
        raw = (schema.metadata or {}).get(b"pandas")
        if raw is None:
            return False
        try:
            index_columns = json.loads(raw).get("index_columns", [])
        except ValueError:
            return False
        return bool(index_columns) and all(isinstance(c, str) for c in index_columns)

    def combine(self, objs: Sequence[Any]) -> Any:
        import pandas as pd

        try:
            return pd.concat(list(objs))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the partitions cannot be concatenated: {exc}") from None


class PolarsDataFrameHandler(ArrowConvertingHandler):
    """``polars.DataFrame``."""

    type_name = "polars.DataFrame"

    def handles(self, python_type: type) -> bool:
        return _is_subclass(python_type, "polars", "DataFrame")

    def to_arrow(self, obj: Any) -> pa.Table:
        return obj.to_arrow()  # type: ignore[no-any-return]

    def from_arrow(self, table: pa.Table) -> Any:
        import polars as pl

        return pl.from_arrow(table)

    def combine(self, objs: Sequence[Any]) -> Any:
        import polars as pl

        try:
            return pl.concat(list(objs), how="vertical_relaxed")
        except (pl.exceptions.PolarsError, TypeError, ValueError) as exc:
            raise ValueError(f"the partitions cannot be concatenated: {exc}") from None


class PolarsLazyFrameHandler(ArrowConvertingHandler):
    """``polars.LazyFrame``: collected on write; loaded as ``polars.scan_pyarrow_dataset`` over a lazy scan
    of every partition the input asks for (``columns`` and ``filters`` pushed down, nothing read until
    the frame is collected)."""

    type_name = "polars.LazyFrame"

    def handles(self, python_type: type) -> bool:
        return _is_subclass(python_type, "polars", "LazyFrame")

    def to_arrow(self, obj: Any) -> pa.Table:
        return obj.collect().to_arrow()  # type: ignore[no-any-return]

    def from_arrow(self, table: pa.Table) -> Any:
        import polars as pl

        return pl.from_arrow(table).lazy()  # type: ignore[union-attr]

    def combine(self, objs: Sequence[Any]) -> Any:
        import polars as pl

        return pl.concat(list(objs), how="vertical_relaxed")

    @staticmethod
    def _lazy(dataset: Any, columns: Sequence[str] | None) -> Any:
        import polars as pl

        frame = pl.scan_pyarrow_dataset(dataset)
        return frame.select(list(columns)) if columns is not None else frame

    def read(
        self,
        context: InputContext | None,
        datasets: ParquetDatasetStore,
        key: str,
        *,
        columns: Sequence[str] | None,
        filters: Any = None,
        version: int | None = None,
    ) -> Any:
        return self._lazy(datasets.scan_dataset(key, columns=columns, filters=filters, version=version), columns)

    def read_many(
        self,
        context: InputContext | None,
        datasets: ParquetDatasetStore,
        keys: Sequence[str],
        *,
        columns: Sequence[str] | None,
        filters: Any = None,
    ) -> Any:
        return self._lazy(_scan_many(datasets, keys, columns, filters), columns)


class ArrowDatasetHandler(ArrowConvertingHandler):
    """``pyarrow.dataset.Dataset``: written by streaming its batches; loaded as a lazy scan.

    Loading returns ``ParquetDatasetStore.scan_dataset`` (one partition) or
    ``scan_datasets`` (the union of every partition the input asks for), with
    ``filters`` attached as the dataset's row filter (pushed down to the Parquet
    reader) and ``columns`` as its columns. Nothing is read until it is scanned.
    Where ``filters`` name columns outside ``columns``, the dataset carries
    those too, after ``columns``.
    """

    type_name = "pyarrow.dataset.Dataset"

    def handles(self, python_type: type) -> bool:
        return _is_subclass(python_type, "pyarrow.dataset", "Dataset")

    def to_arrow(self, obj: Any) -> pa.RecordBatchReader:
        return obj.scanner().to_reader()  # type: ignore[no-any-return]

    def from_arrow(self, table: pa.Table) -> Any:
        import pyarrow.dataset as pads

        return pads.dataset(table)

    def combine(self, objs: Sequence[Any]) -> Any:
        import pyarrow.dataset as pads

        try:
            return pads.dataset(list(objs))
        except ValueError:  # filtered datasets cannot form a UnionDataset
            return pads.dataset(_concat_arrow([d.to_table() for d in objs]))

    def read(
        self,
        context: InputContext | None,
        datasets: ParquetDatasetStore,
        key: str,
        *,
        columns: Sequence[str] | None,
        filters: Any = None,
        version: int | None = None,
    ) -> Any:
        return datasets.scan_dataset(key, columns=columns, filters=filters, version=version)

    def read_many(
        self,
        context: InputContext | None,
        datasets: ParquetDatasetStore,
        keys: Sequence[str],
        *,
        columns: Sequence[str] | None,
        filters: Any = None,
    ) -> Any:
        return _scan_many(datasets, keys, columns, filters)


#: Handlers imported on first need: ``(type_name, module, class_name)``.
OPTIONAL_HANDLERS: tuple[tuple[str, str, str], ...] = (
    ("pyspark.sql.DataFrame", "dagster_parquet_dataset.spark.handler", "SparkDataFrameHandler"),
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
