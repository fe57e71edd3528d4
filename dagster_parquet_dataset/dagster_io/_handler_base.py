"""The one base type handler: how a Python type is written as a dataset and read back.

:class:`TypeHandler` holds the whole read and write path once, in terms of
two conversions a handler supplies (:meth:`~TypeHandler.to_arrow` and
:meth:`~TypeHandler.from_arrow`, or :meth:`~TypeHandler.from_scan` for a type
loaded lazily). The built-in handlers (one module per type family:
:mod:`._arrow_handlers`, :mod:`._pandas_handler`, :mod:`._polars_handlers`)
implement only those; a handler that writes and reads elsewhere (Spark)
overrides :meth:`~TypeHandler.write`, :meth:`~TypeHandler.read` and friends.
"""

from __future__ import annotations

import abc
import io
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from ..dataset import DatasetManifest, MergeResult, ParquetDatasetStore
from ..errors import DatasetIncomplete

if TYPE_CHECKING:
    from dagster import InputContext, OutputContext

    from ._backfill_split import Backfill
    from .options import WriteOptions

#: Manifest metadata keys the IO manager writes (all values are strings).
PYTHON_TYPE_KEY = "dagster.python_type"
ASSET_KEY_KEY = "dagster.asset_key"
PARTITION_KEY_KEY = "dagster.partition_key"
PARTITION_DIMENSION_PREFIX = "dagster.partition."
STEP_KEY_KEY = "dagster.step_key"
OUTPUT_NAME_KEY = "dagster.output_name"
#: ``"true"`` in a version committed for an output that was ``None``: the dataset holds no data.
NO_DATA_KEY = "dagster.no_data"

#: Threads :meth:`TypeHandler.read_many`'s default uses to read datasets at once.
READ_MANY_THREADS = 8


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

    Every method has a default built on :meth:`to_arrow` and :meth:`from_arrow`
    (or, for a type loaded lazily, :attr:`lazy` and :meth:`from_scan`): a type
    that converts to and from Arrow in this process implements :meth:`handles`,
    :meth:`to_arrow`, :meth:`from_arrow` and :meth:`combine`, and nothing else.
    A handler that writes elsewhere (Spark, on its executors) overrides
    :meth:`write`, :meth:`write_with_options`, :meth:`read`, :meth:`read_many`
    and :meth:`write_partitions`, and keeps the default :meth:`to_arrow`, which
    refuses with a clear error.

    :meth:`write` serves the default ``write_mode`` (a plain overwrite). For
    ``"append"``, ``"merge"`` and ``partition_by`` (see :mod:`.options`) the IO
    manager calls :meth:`write_with_options`, and when that returns ``None``
    converts the output with :meth:`to_arrow` and calls the dataset layer itself.
    :meth:`read` receives ``filters`` and ``version`` only when an input sets
    them, so a handler that does not support them need not accept them.

    **Adding a type** (this is the hook the Spark layer uses): subclass
    ``TypeHandler``, set :attr:`type_name`, implement :meth:`handles` and
    :meth:`combine` plus the conversions (or the methods they serve), then either

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

    #: Loaded lazily: :meth:`read` and :meth:`read_many` hand a scan (``scan_dataset`` /
    #: ``scan_datasets``) to :meth:`from_scan` instead of reading a table.
    lazy: ClassVar[bool] = False

    @abc.abstractmethod
    def handles(self, python_type: type) -> bool:
        """Whether this handler writes and reads ``python_type`` (a class, never ``Any``)."""

    @abc.abstractmethod
    def combine(self, objs: Sequence[Any]) -> Any:
        """Concatenate several partitions (in order) into one object of this type.

        Raises:
            ValueError: the partitions' schemas cannot be concatenated.
        """

    # ------------------------------------------------------------ conversions

    def to_arrow(self, obj: Any) -> pa.Table | pa.RecordBatchReader:
        """Convert an output for the dataset layer.

        The default refuses: override it in handlers whose type converts to Arrow.

        Raises:
            TypeError: this handler's type cannot be converted (the default), or
                ``obj`` cannot be represented in Arrow or Parquet (the message names the column).
        """
        raise TypeError(
            f"{self.type_name} outputs can only be written with the default write_mode 'overwrite' and no "
            f"partition_by: {type(self).__name__} does not convert them to Arrow"
        )

    def from_arrow(self, table: pa.Table) -> Any:
        """Convert a table read from the store to this handler's type.

        Raises:
            TypeError: this handler's type is not built from Arrow in this process (the default).
        """
        raise TypeError(f"{type(self).__name__} does not build a {self.type_name} from an Arrow table")

    def from_scan(self, dataset: Any, columns: Sequence[str] | None) -> Any:
        """For a :attr:`lazy` handler: this handler's value over ``dataset`` (a ``pyarrow.dataset.Dataset``
        already restricted to ``columns`` and ``filters``), read when consumed. The default reads it whole."""
        return self.from_arrow(dataset.to_table())

    def converts_in_process(self) -> bool:
        """Whether outputs are written through :meth:`to_arrow` here (the defaults of :meth:`write` and
        :meth:`write_with_options` are kept), so the IO manager may present and check the Arrow data."""
        cls = type(self)
        return (
            cls.to_arrow is not TypeHandler.to_arrow
            and cls.write is TypeHandler.write
            and cls.write_with_options is TypeHandler.write_with_options
        )

    def empty(self, schema: pa.Schema) -> Any:
        """An empty value of this type with ``schema`` (an input whose partition mapping yields no partition).

        ``None`` when this handler does not build values from Arrow in this process.
        """
        if type(self).from_arrow is TypeHandler.from_arrow:
            return None
        return self.from_arrow(schema.empty_table())

    def columns_to_read(
        self, datasets: ParquetDatasetStore, key: str, columns: Sequence[str] | None, version: int | None
    ) -> Sequence[str] | None:
        """The columns to read for a requested projection (pandas adds its index columns)."""
        return columns

    def _scan_fits(self, schema: pa.Schema) -> bool:
        """Whether a table scanned with ``schema`` converts exactly as :meth:`combine` of per-key reads would."""
        return True

    # ----------------------------------------------------------------- writes

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

        The default lets :meth:`write_with_options` write it with the default options
        (a handler that writes elsewhere need not override both), else converts it
        with :meth:`to_arrow` for ``write_dataset``.

        Raises:
            TypeError: ``obj`` cannot be converted to Arrow; the message names why.
            RemoteStoreError: the dataset layer failed (see ``write_dataset``).
        """
        from .options import WriteOptions

        own = self.write_with_options(context, datasets, key, obj, WriteOptions(), run_id=run_id, metadata=metadata)
        if own is not None and own.manifest is not None:
            return own.manifest
        data = self.to_arrow(obj)
        return datasets.write_dataset(data, key, overwrite=True, run_id=run_id, metadata=metadata)

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

    def write_partitions(
        self,
        context: OutputContext | None,
        datasets: ParquetDatasetStore,
        obj: Any,
        backfill: Backfill,
    ) -> list[Any]:
        """Write ``obj``, which holds the rows of several partitions, to each partition's dataset.

        Serves single-run backfills (output metadata ``partition_expr``; see
        :mod:`._backfill_split`). The default converts ``obj`` with :meth:`to_arrow`,
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
        from ._backfill_split import write_arrow_partitions

        return write_arrow_partitions(self.to_arrow(obj), backfill)

    # ------------------------------------------------------------------ reads

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
        if self.lazy:
            return self.from_scan(
                datasets.scan_dataset(key, columns=columns, filters=filters, version=version), columns
            )
        projection = self.columns_to_read(datasets, key, columns, version)
        return self.from_arrow(datasets.read_dataset(key, columns=projection, filters=filters, version=version))

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
        A :attr:`lazy` handler gets one scan over the union (``scan_datasets``).
        A handler that converts from Arrow gets one scan materialized once, when
        it can be planned and fits (:meth:`_scan_fits`); otherwise each key is
        read with :meth:`read` (on up to :data:`READ_MANY_THREADS` threads) and
        joined with :meth:`combine`, so errors and retries on concurrent commits
        are those of ``read_dataset``.

        Raises:
            DatasetNotFound / DatasetIncomplete: a dataset is absent, incomplete or
                damaged; the message names its key, and the exception's
                ``dataset_key`` attribute is that key.
            ValueError / TypeError: a requested column does not exist, malformed
                filters, or schemas that cannot be combined.
        """
        keys = list(keys)
        if self.lazy:
            return self.from_scan(scan_many(datasets, keys, columns, filters), columns)
        if len(keys) > 1 and type(self).from_arrow is not TypeHandler.from_arrow:
            projection = self.columns_to_read(datasets, keys[0], columns, None)
            table = _scan_table(datasets, keys, projection, filters, self._scan_fits)
            if table is not None:
                return self.from_arrow(table)

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


class ArrowConvertingHandler(TypeHandler):
    """A handler whose type converts to and from Arrow in this process.

    Subclasses implement :meth:`to_arrow` and :meth:`from_arrow`; writing and
    reading go through ``write_dataset`` / ``read_dataset`` (the defaults of
    :class:`TypeHandler`).
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


def require_parquet_types(schema: pa.Schema, what: str = "this output") -> None:
    """Check that Parquet can hold every column of ``schema`` (a Parquet writer for it is opened in memory:
    the schema conversion alone, about 0.5 ms for 50 columns).

    Raises:
        TypeError: a column's type cannot be stored as Parquet; the message names the column and the type.
    """
    try:
        pq.ParquetWriter(io.BytesIO(), schema).close()
        return
    except (pa.ArrowException, ValueError, TypeError):
        pass
    for field in schema:
        try:
            pq.ParquetWriter(io.BytesIO(), pa.schema([field])).close()
        except (pa.ArrowException, ValueError, TypeError) as exc:
            raise TypeError(
                f"cannot store {what} as Parquet: column {field.name!r} has type {field.type}, which Parquet "
                f"cannot hold ({exc}); cast it to a supported type first"
            ) from None
    raise TypeError(f"cannot store {what} as Parquet: its schema cannot be encoded ({schema})")


def _filter_kwargs(filters: Any) -> dict[str, Any]:
    """``{"filters": filters}`` when set: :meth:`TypeHandler.read` gets ``filters`` only when an input sets them."""
    return {} if filters is None else {"filters": filters}


def _with_key(exc: BaseException, key: str) -> None:
    """Set ``exc``'s ``dataset_key`` attribute to ``key`` (the dataset it is about), unless already set."""
    if getattr(exc, "dataset_key", None) is None:
        exc.dataset_key = key  # type: ignore[attr-defined]


def is_subclass(python_type: type, module: str, attr: str) -> bool:
    """Whether ``python_type`` subclasses ``module.attr``, without importing ``module``.

    A subclass of a class of ``module`` can only exist once ``module`` is
    imported, so a module that is not loaded means "no".
    """
    mod = sys.modules.get(module)
    cls = getattr(mod, attr, None) if mod is not None else None
    return isinstance(python_type, type) and isinstance(cls, type) and issubclass(python_type, cls)


def concat_arrow(tables: Sequence[pa.Table]) -> pa.Table:
    """Concatenate tables, promoting types where pyarrow can.

    Raises:
        ValueError: the schemas cannot be concatenated.
    """
    try:
        return pa.concat_tables(tables, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ValueError(f"the partitions' schemas cannot be concatenated: {exc}") from None


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


def scan_many(datasets: ParquetDatasetStore, keys: Sequence[str], columns: Sequence[str] | None, filters: Any) -> Any:
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


def scanner_columns(columns: Sequence[str] | None) -> list[str] | None:
    """``columns`` as the list ``Dataset.scanner`` takes (``None``: every column)."""
    return list(columns) if columns is not None else None
