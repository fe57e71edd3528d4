"""``RemoteStoreIOManager``: every asset and op output as a committed Parquet dataset.

The IO manager only maps Dagster context to dataset keys (:mod:`.keys`) and
picks a type handler (:mod:`.handlers`); the dataset layer does the I/O and
gives the guarantees (atomic commits, verified reads).
"""

from __future__ import annotations

import collections.abc
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from dagster import (
    AssetKey,
    ConfigurableIOManager,
    ExecutorRequirement,
    InitResourceContext,
    InputContext,
    MetadataValue,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    OutputContext,
    PartitionsDefinition,
)
from dagster._core.errors import DagsterInvariantViolationError
from pydantic import Field, PrivateAttr

from ..dataset import DatasetManifest, ParquetDatasetStore
from ..errors import (
    DatasetIncomplete,
    DatasetNotFound,
    ManifestCorrupted,
    NotFound,
    RemoteStoreError,
    VersionNotRetained,
)
from . import _backfill as _bf
from . import _context as _ctx
from . import _ownership as _own
from . import _presentation as _present
from . import keys as keys_mod
from .handlers import (
    ASSET_KEY_KEY,
    OUTPUT_NAME_KEY,
    PARTITION_DIMENSION_PREFIX,
    PARTITION_KEY_KEY,
    PYTHON_TYPE_KEY,
    STEP_KEY_KEY,
    HandlerRegistry,
    TypeHandler,
    default_registry,
)
from .options import ReadOptions, WriteOptions
from .resources import StoreResource

#: Threads reading partitions at once when an input spans several.
_PARTITION_READ_THREADS = 8

#: Handler used for an unannotated input whose manifest records no Python type.
_FALLBACK_TYPE_NAME = "pyarrow.Table"


class UnsupportedTypeError(RemoteStoreError, TypeError):
    """No type handler writes or reads the given Python type; the message lists the supported ones."""


class ProcessLocalStoreError(RemoteStoreError, RuntimeError):
    """A store that lives in one process's memory is used by an executor that runs steps in other processes."""


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    """``Optional[X]`` -> ``(X, True)``; anything else -> ``(tp, False)``."""
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(args) < len(typing.get_args(tp)):
            return args[0], True
    return tp, False


def _is_any(tp: Any) -> bool:
    return tp is Any or tp is object or tp is None


_DICT_ORIGINS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


def _type_label(tp: Any) -> str:
    if isinstance(tp, type):
        return f"{tp.__module__}.{tp.__qualname__}"
    return repr(tp)


@dataclass(frozen=True)
class _Written:
    """What one output's write committed, for its output metadata.

    Attributes:
        manifest: the committed manifest (the live one if a merge changed nothing).
        rows: rows this output wrote (see ``RemoteStoreIOManager``'s docstring).
        bytes: bytes of the files this output wrote, when known exactly (``None`` for appends).
        extra: mode-specific output metadata.
    """

    manifest: DatasetManifest
    rows: int
    bytes: int | None
    extra: dict[str, Any] = field(default_factory=dict)


def _total_bytes(manifest: DatasetManifest) -> int:
    return sum(e.size_bytes or 0 for e in manifest.file_entries())


def _counted(
    data: pa.Table | pa.RecordBatchReader,
) -> tuple[pa.Table | pa.RecordBatchReader, Callable[[], int]]:
    """``data`` and a function returning how many rows were taken from it (a reader is counted as it streams)."""
    if isinstance(data, pa.Table):
        return data, lambda: data.num_rows
    seen = [0]

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in data:
            seen[0] += batch.num_rows
            yield batch

    return pa.RecordBatchReader.from_batches(data.schema, batches()), lambda: seen[0]


def _failed_target(exc: Exception, targets: Sequence[tuple[str | None, str]]) -> tuple[str | None, str] | None:
    """The ``(partition_key, dataset_key)`` a read error is about: its ``dataset_key`` attribute, else the
    longest key whose ``repr`` its message contains; ``None`` when neither tells."""
    key = getattr(exc, "dataset_key", None)
    for target in targets:
        if target[1] == key:
            return target
    message = str(exc)
    named = [t for t in targets if repr(t[1]) in message]
    return max(named, key=lambda t: len(t[1])) if named else None


class RemoteStoreIOManager(ConfigurableIOManager):
    """Stores every asset and op output as a Parquet dataset on a store.

    Usage::

        Definitions(
            assets=[...],
            resources={"io_manager": RemoteStoreIOManager(store=LocalStoreResource(root="data"))},
        )

    Dataset keys follow DESIGN.md "Dagster mapping": asset ``["a", "b"]`` ->
    ``a/b``; partition ``p`` -> ``a/b/p``; a multi-dimension partition ->
    ``a/b/<v1>/<v2>`` (values ordered by sorted dimension name); an op output
    -> ``<run_id>/<step_key>/<output_name>``; ``prefix`` goes in front. Every
    value is escaped so it stays inside its folder. Asset ``["a", "p"]`` and
    partition ``p`` of asset ``a`` share the key ``a/p``: one dataset never
    serves both, because the asset and partition key recorded in the manifest
    are checked before every write and read (``DatasetKeyCollision``; see
    :mod:`._ownership`). A ``None`` output writes nothing. Contexts built by
    ``build_input_context`` / ``build_output_context`` work too, with or
    without a name or a partitions definition.

    The Python type of an output picks its handler (``pyarrow.Table``,
    ``pyarrow.RecordBatchReader``, ``pandas.DataFrame``, ``polars.DataFrame``,
    ``polars.LazyFrame``, and ``pyspark.sql.DataFrame`` once the Spark layer is
    installed); an input's annotation picks how it is loaded, and an
    unannotated input is loaded as the type that was written. An input
    annotated ``dict[str, T]`` over several partitions gets one ``T`` per
    partition key; otherwise partitions are concatenated in order.

    Output definition metadata (``@asset(metadata=...)``, ``AssetOut`` / ``Out``;
    see :mod:`.options`): ``write_mode`` (``"overwrite"``, the default;
    ``"append"``; ``"merge"`` with ``key_columns`` and optionally
    ``merge_strategy``), ``partition_by`` (columns that split the dataset into
    ``col=value/`` folders) and ``allow_new_columns`` (append only). Each
    partition of a partitioned asset is its own dataset, so it is appended to
    or merged into independently. Output metadata: ``dagster/row_count`` (or
    ``dagster/partition_row_count``) is the number of rows in the dataset after
    the write, as Dagster defines it; ``rows_written`` is what this output
    wrote (every row for an overwrite, the appended rows for an append,
    inserted plus updated rows for a merge); appends add ``rows_appended`` and
    merges ``rows_inserted``, ``rows_updated``, ``files_rewritten``,
    ``files_preserved`` and ``files_added``.

    Input metadata (``AssetIn(metadata=...)`` / ``In(metadata=...)``):
    ``columns`` (list of column names to load), ``filters`` (DNF filters, as
    ``ParquetDatasetStore.read_dataset`` takes them: files are pruned from the
    manifest, then rows filtered), ``version`` (load a retained past version of
    one dataset; see ``retain_versions``) and ``allow_missing_partitions``
    (skip partitions that were never written instead of failing).

    Attributes:
        store: the store resource (``LocalStoreResource``, ``S3StoreResource``,
            ``InMemoryStoreResource``).
        prefix: folder in the store under which every dataset key goes.
        compression: Parquet codec (``zstd``, ``snappy``, ``gzip``, ``brotli``, ``lz4``, ``none``).
        row_group_size: rows per Parquet row group (pyarrow's default when unset).
        max_rows_per_file: split outputs into parts of at most this many rows.
        retain_versions: how many versions of each dataset stay readable after a
            commit (for the ``version`` input metadata); ``1`` (the default) keeps
            only the newest version's files, ``None`` keeps every version until
            ``ParquetDatasetStore.vacuum``.
        preview_rows: rows of each output shown in its ``preview`` output metadata
            (a Markdown table taken from the data as it is written); ``0`` turns it off.
            An asset's ``dagster/column_schema`` column descriptions are written into the
            Parquet field metadata and reported in the output's ``dagster/column_schema``
            (see :mod:`._presentation`).
    """

    store: StoreResource = Field(
        description="Where the datasets live: LocalStoreResource, S3StoreResource or InMemoryStoreResource."
    )
    prefix: str = Field(
        default="",
        description=(
            "Folder in the store in front of every dataset key (e.g. 'warehouse/prod'); also what keeps two "
            "IO managers (or two assets whose keys would map to the same dataset) apart."
        ),
    )
    compression: str = Field(default="zstd", description="Parquet codec: zstd, snappy, gzip, brotli, lz4 or none.")
    row_group_size: int | None = Field(
        default=None, description="Rows per Parquet row group; unset uses pyarrow's default."
    )
    max_rows_per_file: int | None = Field(
        default=None, description="Split each output into parts of at most this many rows; unset means no limit."
    )
    retain_versions: int | None = Field(
        default=1,
        description=(
            "How many versions of each dataset stay readable (for the 'version' input metadata): 1 keeps only "
            "the newest; unset (None) keeps every version until ParquetDatasetStore.vacuum."
        ),
    )

    preview_rows: int = Field(
        default=5,
        ge=0,
        description=(
            "Rows of each output shown as a table preview in its output metadata ('preview'), taken from "
            "the data as it is written; 0 turns the preview off."
        ),
    )

    _datasets: ParquetDatasetStore | None = PrivateAttr(default=None)
    _prefix: str | None = PrivateAttr(default=None)

    # ------------------------------------------------------------------ setup

    def setup_for_execution(self, context: InitResourceContext) -> None:
        """Check the configuration before any step runs (no I/O).

        Raises:
            ValueError / TypeError: a bad ``prefix``, ``compression``, ``row_group_size``,
                ``max_rows_per_file`` or ``retain_versions``; the message names it.
        """
        self._dataset_store()

    def _dataset_store(self) -> ParquetDatasetStore:
        if self._datasets is None:
            self._prefix = keys_mod.normalize_prefix(self.prefix)
            self._datasets = ParquetDatasetStore(
                self.store.get_store(),
                compression=self.compression,
                row_group_size=self.row_group_size,
                max_rows_per_file=self.max_rows_per_file,
                retain_versions=self.retain_versions,
            )
        return self._datasets

    @property
    def datasets(self) -> ParquetDatasetStore:
        """The :class:`ParquetDatasetStore` every output goes through."""
        return self._dataset_store()

    @property
    def registry(self) -> HandlerRegistry:
        """The type handlers in use (built-in plus optional, e.g. Spark)."""
        return default_registry()

    def _check_executor(self, context: InputContext | OutputContext) -> None:
        """Refuse a process-local store under an executor that runs steps in other processes.

        Raises:
            ProcessLocalStoreError: ``store`` is an ``InMemoryStoreResource`` and the run's
                executor may run steps in other processes (its definition requires persistent outputs).
        """
        if not type(self.store).process_local:
            return
        try:
            step = context.step_context
        except DagsterInvariantViolationError:
            return  # a context built by hand, outside a run: one process by definition
        executor_def = step.job_def.executor_def
        # The executor definition says whether steps may run in other processes (Dagster's own
        # check for mem_io_manager uses the same requirement). In a step subprocess the running
        # executor object is an in-process one, so it cannot tell.
        requirements = executor_def.get_requirements(step.resolved_run_config.execution.execution_engine_config)
        if ExecutorRequirement.PERSISTENT_OUTPUTS in requirements:
            raise ProcessLocalStoreError(
                f"{type(self.store).__name__} keeps datasets in one process's memory, but this run uses the "
                f"{executor_def.name!r} executor, which runs steps in their own processes, so a step cannot "
                "see another step's outputs. Use LocalStoreResource (or S3StoreResource) instead, or run with "
                "the in-process executor (materialize(), job.execute_in_process(), or "
                "executor_def=in_process_executor)."
            )

    # ------------------------------------------------------------------- keys

    @staticmethod
    def _partition_values(partitions_def: Any, partition_key: str) -> tuple[list[str], dict[str, str] | None]:
        """Folder values and, for a multi-dimension key, its value per dimension.

        ``partitions_def`` is ``None`` for a hand-built context that has a partition
        key but no definition: the key is then a single dimension unless it is a
        ``MultiPartitionKey`` object.
        """
        if isinstance(partitions_def, MultiPartitionsDefinition) or isinstance(partition_key, MultiPartitionKey):
            mpk = (
                partition_key
                if isinstance(partition_key, MultiPartitionKey)
                else partitions_def.get_partition_key_from_str(partition_key)
            )
            by_dim = dict(mpk.keys_by_dimension)
            return keys_mod.partition_values(str(partition_key), by_dim), by_dim
        return keys_mod.partition_values(partition_key), None

    def _asset_key_for_partition(self, asset_path: Sequence[str], partitions_def: Any, partition_key: str) -> str:
        values, _ = self._partition_values(partitions_def, partition_key)
        return keys_mod.asset_dataset_key(self._prefix or "", asset_path, values)

    def dataset_key_for(
        self,
        asset_key: AssetKey | Sequence[str] | str,
        partition_key: str | None = None,
        partitions_def: PartitionsDefinition | None = None,
    ) -> str:
        """The dataset key this IO manager stores an asset (or one partition of it) under.

        The same key :meth:`output_dataset_key` gives the asset's output, for code
        that has no output context (asset checks, observations, scripts).
        ``partitions_def`` is needed for a multi-dimension partition key given as
        a string (``"eu|2024-01-01"``); a ``MultiPartitionKey`` carries its dimensions.

        Raises:
            ValueError: an empty asset key, or a multi-dimension key that ``partitions_def`` cannot parse.
        """
        self._dataset_store()
        path = list(AssetKey.from_coercible(asset_key).path)
        if partition_key is None:
            return keys_mod.asset_dataset_key(self._prefix or "", path)
        return self._asset_key_for_partition(path, partitions_def, partition_key)

    def output_dataset_key(self, context: OutputContext) -> str:
        """The dataset key an output is written to.

        Raises:
            ValueError: the output spans several partitions (a single-run backfill of a
                range); each partition is its own dataset, so launch one run per partition.
                Or (a hand-built context) an op output without a step key or name.
        """
        self._dataset_store()
        prefix = self._prefix or ""
        if context.has_asset_key:
            path = list(context.asset_key.path)
            if context.has_asset_partitions:
                partition_keys = list(context.asset_partition_keys)
                if len(partition_keys) != 1:
                    raise ValueError(
                        f"asset {context.asset_key.to_user_string()}: this output covers {len(partition_keys)} "
                        "partitions, each its own dataset, so it has no single dataset key; handle_output "
                        f"splits such an output by the column its {_bf.PARTITION_EXPR_KEY!r} metadata names."
                    )
                return self._asset_key_for_partition(path, _ctx.partitions_def_of(context), partition_keys[0])
            return keys_mod.asset_dataset_key(prefix, path)
        return keys_mod.op_output_dataset_key(prefix, self._op_identifier(context))

    @staticmethod
    def _op_identifier(context: OutputContext) -> list[str]:
        """``OutputContext.get_identifier()``, or a ``ValueError`` saying what a hand-built context lacks."""
        try:
            return list(context.get_identifier())
        except DagsterInvariantViolationError as exc:
            raise ValueError(
                f"RemoteStoreIOManager cannot locate the dataset of {_ctx.label(context)}: it has no asset key, "
                f"and its op output identifier is incomplete ({exc}). When building the context by hand, pass "
                "asset_key=..., or step_key=... and name=..."
            ) from None

    def input_dataset_keys(self, context: InputContext) -> list[tuple[str | None, str]]:
        """``(partition_key, dataset_key)`` for each dataset an input reads, in order.

        ``partition_key`` is ``None`` for an unpartitioned upstream. The partitions
        are the ones the input asks for (``asset_partition_keys``, after partition
        mappings), never the run's own partition key.

        Raises:
            ValueError: an op input has no upstream output to locate, or (a hand-built
                context) an upstream output without a step key or name.
        """
        self._dataset_store()
        prefix = self._prefix or ""
        if context.has_asset_key:
            path = list(context.asset_key.path)
            if context.has_asset_partitions:
                partitions_def = _ctx.partitions_def_of(context)
                partition_keys = _ctx.ordered_partition_keys(context, list(context.asset_partition_keys))
                return [(pk, self._asset_key_for_partition(path, partitions_def, pk)) for pk in partition_keys]
            return [(None, keys_mod.asset_dataset_key(prefix, path))]
        upstream = context.upstream_output
        if upstream is None:
            raise ValueError(
                f"{_ctx.label(context)} has neither an asset key nor an upstream output, "
                "so RemoteStoreIOManager cannot tell which dataset to load"
            )
        return [(None, keys_mod.op_output_dataset_key(prefix, self._op_identifier(upstream)))]

    # ----------------------------------------------------------------- output

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        """Write ``obj`` to the output's dataset as its ``write_mode`` says (default: replace it).

        The write options come from the output's definition metadata (see
        :mod:`.options`) and are checked before anything is written. A ``None``
        output writes nothing and says so in the output metadata.

        Raises:
            ValueError / TypeError: bad write options in the definition metadata (an unknown
                ``write_mode``, ``"merge"`` without ``key_columns``, ...); nothing is written.
            UnsupportedTypeError: no handler for ``type(obj)``; the message lists the supported types.
            ProcessLocalStoreError: an ``InMemoryStoreResource`` under a multi-process executor.
            ValueError: the output spans several partitions without ``partition_expr`` metadata,
                a row's ``partition_expr`` value is null or in no partition of the run (nothing
                is written; see :mod:`._backfill`), or the dataset layer refused the
                data (a schema an append or merge cannot take, duplicate or null merge keys,
                an unknown ``partition_by`` column, a partitioning that differs from the dataset's).
            DatasetNotFound: ``merge_strategy="update"`` and the dataset does not exist yet.
            DatasetKeyCollision: the dataset key already holds another asset or partition
                (recorded in its manifest); nothing is written.
            RemoteStoreError: the dataset layer failed (e.g. ``CommitConflict``).
            BackfillIncomplete: a single-run backfill committed some partitions and not others.
        """
        self._check_executor(context)
        datasets = self._dataset_store()
        options = WriteOptions.from_metadata(context.definition_metadata, self._describe_output(context))
        if context.has_asset_key and context.has_asset_partitions:
            if len(context.asset_partition_keys) > 1 or _bf.PARTITION_EXPR_KEY in context.definition_metadata:
                self._write_backfill(context, obj, options)  # a single-run backfill (see _backfill)
                return
        key = self.output_dataset_key(context)
        if obj is None:
            context.add_output_metadata(
                {
                    "dataset_key": MetadataValue.text(key),
                    "write_mode": MetadataValue.text(options.write_mode),
                    "written": MetadataValue.bool(False),
                    "note": MetadataValue.text(
                        "the output was None, so no dataset was written; any earlier version is left as it was"
                    ),
                }
            )
            return
        handler = self.registry.for_type(type(obj))
        if handler is None:
            raise UnsupportedTypeError(
                f"RemoteStoreIOManager cannot store {_ctx.label(context)}"
                + (f" of asset {context.asset_key.to_user_string()}" if context.has_asset_key else "")
                + f": it is a {_type_label(type(obj))}. Supported types: {self.registry.describe_supported()}."
            )
        handler = _present.PresentingHandler(
            handler, _present.declared_descriptions(context.definition_metadata), self.preview_rows
        )
        metadata = self._manifest_metadata(context, handler)
        _own.check_owner(self._recorded_metadata(datasets, key), _own.owner(metadata), key=key, writing=True)
        run_id = self._run_id(context)
        written = self._write(context, datasets, handler, key, obj, options, run_id=run_id, metadata=metadata)
        context.add_output_metadata(self._output_metadata(context, key, written, handler, options))

    def _write_backfill(self, context: OutputContext, obj: Any, options: WriteOptions) -> None:
        """Split an output over the run's partition keys by ``partition_expr``; each key's dataset commits alone.

        The same dataset keys, manifest metadata and owner checks as one-partition
        runs; every check runs before anything is written. Each partition's
        materialization gets its own metadata (row count, version, ...).
        """
        datasets = self._dataset_store()
        what = self._describe_output(context)
        partitions_def = _ctx.partitions_def_of(context)
        partition_keys = [str(k) for k in context.asset_partition_keys]
        expr = _bf.parse_partition_expr(context.definition_metadata, partitions_def, what)
        if expr is None:
            raise _bf.missing_partition_expr(what, len(partition_keys), partitions_def)
        if obj is None:
            context.add_output_metadata(
                {
                    "written": MetadataValue.bool(False),
                    "note": MetadataValue.text("the output was None: nothing written"),
                }
            )
            return
        handler = self.registry.for_type(type(obj))
        if handler is None:
            raise UnsupportedTypeError(
                f"RemoteStoreIOManager cannot store {what}: it is a {_type_label(type(obj))}. "
                f"Supported types: {self.registry.describe_supported()}."
            )
        path = list(context.asset_key.path)
        targets = []
        for pk in partition_keys:
            key = self._asset_key_for_partition(path, partitions_def, pk)
            metadata = self._manifest_metadata(context, handler, pk)
            _own.check_owner(self._recorded_metadata(datasets, key), _own.owner(metadata), key=key, writing=True)
            targets.append(_bf.PartitionTarget(pk, key, metadata))
        arrow = self.registry.for_type(pa.Table)
        assert arrow is not None
        run_id = self._run_id(context)
        backfill = _bf.Backfill(
            what=what,
            targets=tuple(targets),
            locator=_bf.PartitionLocator.build(expr, partitions_def, partition_keys),
            options=options,
            run_id=run_id,
            write_table=lambda t, table: self._write(
                context, datasets, arrow, t.dataset_key, table, options, run_id=run_id, metadata=t.metadata
            ),
        )
        results = handler.write_partitions(context, datasets, obj, backfill)
        written = [_Written(r, r.row_count, _total_bytes(r)) if isinstance(r, DatasetManifest) else r for r in results]
        if len(targets) == 1:
            context.add_output_metadata(
                self._output_metadata(context, targets[0].dataset_key, written[0], handler, options)
            )
            return
        step = _ctx.step_context_of(context)
        for target, one in zip(targets, written, strict=True):
            if step is not None:
                step.add_asset_metadata(
                    self._output_metadata(context, target.dataset_key, one, handler, options),
                    asset_key=context.asset_key,
                    partition_key=target.partition_key,
                )
        context.add_output_metadata(
            {
                "partitions_written": MetadataValue.int(len(targets)),
                "rows_written": MetadataValue.int(sum(w.rows for w in written)),
                "partition_expr": MetadataValue.json(expr),
                "write_mode": MetadataValue.text(options.write_mode),
                "python_type": MetadataValue.text(handler.type_name),
            }
        )

    def _write(
        self,
        context: OutputContext,
        datasets: ParquetDatasetStore,
        handler: TypeHandler,
        key: str,
        obj: Any,
        options: WriteOptions,
        *,
        run_id: str | None,
        metadata: dict[str, str],
    ) -> _Written:
        """Route one output to the dataset layer by its write mode.

        A plain overwrite goes through the handler (so Spark writes on its
        executors); so does everything else when the handler's
        :meth:`TypeHandler.write_with_options` takes it (Spark appends and
        merges on its executors); otherwise the output is converted with
        :meth:`TypeHandler.to_arrow` and ``write_dataset``,
        ``append_dataset`` or ``merge_dataset`` is called.

        Raises:
            TypeError: the handler cannot convert the output to Arrow.
            RemoteStoreError / ValueError: as the dataset layer's call.
        """
        if options.is_default:
            manifest = handler.write(context, datasets, key, obj, run_id=run_id, metadata=metadata)
            return _Written(manifest, manifest.row_count, _total_bytes(manifest))
        own = handler.write_with_options(context, datasets, key, obj, options, run_id=run_id, metadata=metadata)
        if own is not None and own.merge is None and own.manifest is not None:
            rows = own.rows if own.rows is not None else own.manifest.row_count
            if options.write_mode == "append":
                return _Written(own.manifest, rows, None, {"rows_appended": MetadataValue.int(rows)})
            return _Written(own.manifest, rows, _total_bytes(own.manifest))
        data = handler.to_arrow(obj) if own is None else None
        if options.write_mode == "overwrite":
            manifest = datasets.write_dataset(
                data, key, overwrite=True, run_id=run_id, metadata=metadata, partition_by=options.partition_by
            )
            return _Written(manifest, manifest.row_count, _total_bytes(manifest))
        if options.write_mode == "append":
            data, rows = _counted(data)
            manifest = datasets.append_dataset(
                data,
                key,
                run_id=run_id,
                metadata=metadata,
                partition_by=options.partition_by,
                allow_new_columns=options.allow_new_columns,
            )
            appended = rows()
            return _Written(manifest, appended, None, {"rows_appended": MetadataValue.int(appended)})
        if own is not None and own.merge is not None:
            result = own.merge
        else:
            source = data.read_all() if isinstance(data, pa.RecordBatchReader) else data
            result = datasets.merge_dataset(
                source,
                key,
                key_columns=list(options.key_columns or ()),
                strategy=options.merge_strategy,
                partition_by=options.partition_by,
                run_id=run_id,
                metadata=metadata,
            )
        manifest = self._manifest_after(datasets, key, result.version)
        sizes = {e.path: e.size_bytes or 0 for e in manifest.file_entries()}
        extra: dict[str, Any] = {
            "merge_strategy": MetadataValue.text(options.merge_strategy),
            "key_columns": MetadataValue.json(list(options.key_columns or ())),
            "rows_inserted": MetadataValue.int(result.inserted),
            "rows_updated": MetadataValue.int(result.updated),
            "files_rewritten": MetadataValue.int(len(result.rewritten_files)),
            "files_preserved": MetadataValue.int(len(result.preserved_files)),
            "files_added": MetadataValue.int(len(result.new_files)),
        }
        if result.version is None:
            extra["note"] = MetadataValue.text("the merge changed nothing, so no new version was committed")
        return _Written(
            manifest,
            result.inserted + result.updated,
            sum(sizes.get(p, 0) for p in result.new_files),
            extra,
        )

    @staticmethod
    def _recorded_metadata(
        datasets: ParquetDatasetStore, key: str, version: int | None = None
    ) -> dict[str, str] | None:
        """The manifest ``metadata`` of ``key`` (``None`` if absent or unreadable: the write or read reports that)."""
        try:
            return datasets.read_manifest(key, version=version).metadata
        except (NotFound, ManifestCorrupted):
            return None

    @staticmethod
    def _manifest_after(datasets: ParquetDatasetStore, key: str, version: int | None) -> DatasetManifest:
        """The manifest a merge committed (the live one when it committed nothing)."""
        if version is not None:
            try:
                return datasets.read_manifest(key, version=version)
            except VersionNotRetained:
                pass  # a later commit replaced it already: report the live one
        return datasets.read_manifest(key)

    @staticmethod
    def _describe_output(context: OutputContext) -> str:
        if context.has_asset_key:
            return f"asset {context.asset_key.to_user_string()}"
        step_key = _ctx.step_key_of(context)
        return _ctx.label(context) + (f" of step {step_key!r}" if step_key is not None else "")

    @staticmethod
    def _run_id(context: OutputContext) -> str | None:
        try:
            return context.run_id
        except DagsterInvariantViolationError:
            return None

    def _manifest_metadata(
        self, context: OutputContext, handler: TypeHandler, partition_key: str | None = None
    ) -> dict[str, str]:
        metadata = {PYTHON_TYPE_KEY: handler.type_name}
        if context.has_asset_key:
            metadata[ASSET_KEY_KEY] = context.asset_key.to_user_string()
            if context.has_asset_partitions:
                partition_key = context.asset_partition_keys[0] if partition_key is None else partition_key
                metadata[PARTITION_KEY_KEY] = str(partition_key)
                _values, by_dim = self._partition_values(_ctx.partitions_def_of(context), partition_key)
                for dim, value in (by_dim or {}).items():
                    metadata[PARTITION_DIMENSION_PREFIX + dim] = value
        else:
            step_key, name = _ctx.step_key_of(context), _ctx.name_of(context)
            if step_key is not None:
                metadata[STEP_KEY_KEY] = step_key
            if name is not None:
                metadata[OUTPUT_NAME_KEY] = name
        return metadata

    def _output_metadata(
        self,
        context: OutputContext,
        key: str,
        written: _Written,
        handler: TypeHandler,
        options: WriteOptions,
    ) -> dict[str, Any]:
        manifest = written.manifest
        schema = manifest.schema
        column_schema = (
            _present.column_schema(schema, _present.declared_descriptions(context.definition_metadata))
            if schema is not None
            else None
        )
        partitioned = context.has_asset_key and context.has_asset_partitions
        row_count_key = "dagster/partition_row_count" if partitioned else "dagster/row_count"
        table_md: dict[str, Any] = {row_count_key: MetadataValue.int(manifest.row_count)}
        if column_schema is not None:
            table_md["dagster/column_schema"] = MetadataValue.table_schema(column_schema)
        entries = manifest.file_entries()
        out: dict[str, Any] = {
            **table_md,
            "dagster/uri": MetadataValue.url(self._dataset_store().store.uri(key)),
            "dataset_key": MetadataValue.text(key),
            "manifest_version": MetadataValue.int(manifest.version),
            "write_mode": MetadataValue.text(options.write_mode),
            "rows_written": MetadataValue.int(written.rows),
            "part_count": MetadataValue.int(len(entries)),
        }
        if written.bytes is not None:
            out["bytes_written"] = MetadataValue.int(written.bytes)
        partition_by = list(getattr(manifest, "partition_by", ()) or ())
        if partition_by:
            out["partition_by"] = MetadataValue.json(partition_by)
        out.update(written.extra)
        out["python_type"] = MetadataValue.text(handler.type_name)
        out.update(_present.preview_metadata(getattr(handler, "preview", None), written.rows))
        return out

    # ------------------------------------------------------------------ input

    def _requested_type(self, context: InputContext) -> tuple[bool, Any]:
        """``(as_dict, element_type)``; ``element_type`` is ``None`` for "as written"."""
        try:
            annotation = context.dagster_type.typing_type
        except DagsterInvariantViolationError:  # a context built without a type: load as written
            annotation = Any
        tp, _optional = _strip_optional(annotation)
        if tp is dict or tp is typing.Dict:  # noqa: UP006 - bare typing.Dict may appear
            return True, None
        if typing.get_origin(tp) in _DICT_ORIGINS:
            args = typing.get_args(tp)
            inner = _strip_optional(args[1])[0] if len(args) == 2 else Any
            return True, None if _is_any(inner) else inner
        return False, None if _is_any(tp) else tp

    def _handler_for_annotation(self, context: InputContext, tp: Any) -> TypeHandler:
        handler = self.registry.for_type(tp) if isinstance(tp, type) else None
        if handler is None:
            raise UnsupportedTypeError(
                f"RemoteStoreIOManager cannot load {_ctx.label(context)} as {_type_label(tp)}. "
                f"Annotate it with one of: {self.registry.describe_supported()} "
                "(or dict[str, <one of them>] to get one value per partition, or leave it unannotated "
                "to get the type that was written)."
            )
        return handler

    def _handler_as_written(self, context: InputContext, dataset_keys: Sequence[str]) -> TypeHandler:
        """The handler of the Python type recorded in the first existing manifest."""
        datasets = self._dataset_store()
        type_name = _FALLBACK_TYPE_NAME
        for key in dataset_keys:
            try:
                manifest = datasets.read_manifest(key)
            except NotFound:
                continue  # reported by the read itself (absent or incomplete)
            type_name = (manifest.metadata or {}).get(PYTHON_TYPE_KEY, _FALLBACK_TYPE_NAME)
            break
        handler = self.registry.for_name(type_name)
        if handler is None:
            reason = self.registry.unavailable_reason(type_name)
            raise UnsupportedTypeError(
                f"{_ctx.label(context)}: the dataset was written as {type_name}, which this process cannot "
                f"load{f' ({reason})' if reason else ''}. Annotate the input with one of: "
                f"{self.registry.describe_supported()}."
            )
        return handler

    def _describe(self, context: InputContext, partition_key: str | None) -> str:
        if context.has_asset_key:
            what = f"asset {context.asset_key.to_user_string()}"
            return what + (f" partition {partition_key!r}" if partition_key is not None else "")
        upstream = context.upstream_output
        return self._describe_output(upstream) if upstream is not None else "upstream"

    @staticmethod
    def _expected_owner(context: InputContext, partition_key: str | None) -> dict[str, str]:
        """What the manifest of an upstream dataset should record (see :mod:`._ownership`)."""
        if context.has_asset_key:
            return _own.asset_owner(context.asset_key.to_user_string(), partition_key)
        upstream = context.upstream_output
        if upstream is None:
            return {}
        found = {STEP_KEY_KEY: _ctx.step_key_of(upstream), OUTPUT_NAME_KEY: _ctx.name_of(upstream)}
        return {k: v for k, v in found.items() if v is not None}

    def load_input(self, context: InputContext) -> Any:
        """Load the input from the dataset(s) of its upstream output.

        Returns the value as the input's annotation asks (or as written when
        unannotated); for several partitions, their concatenation in partition
        order, or a ``dict`` keyed by partition key when annotated ``dict[str, T]``.
        When the partition mapping yields no partition at all, returns ``{}``
        for a ``dict`` annotation and ``None`` otherwise.

        Input metadata ``columns``, ``filters`` and ``version`` apply to every
        dataset read (each partition's); ``version`` needs exactly one dataset,
        since version numbers are per dataset.

        Raises:
            DatasetNotFound: an upstream dataset is absent (the message names its key);
                with ``allow_missing_partitions`` only when every partition is absent.
            DatasetIncomplete: an upstream dataset is incomplete or damaged, or the
                requested ``version``'s files were removed.
            VersionNotRetained: the requested ``version`` is no longer kept (the message lists
                those that are and names ``retain_versions``).
            NotFound: the requested ``version`` is newer than the latest.
            UnsupportedTypeError: the annotation is not a supported type.
            DatasetKeyCollision: an upstream dataset's manifest records another asset or
                partition than the one expected (two assets map to one key).
            ProcessLocalStoreError: an ``InMemoryStoreResource`` under a multi-process executor.
            ValueError / TypeError: bad ``columns`` / ``filters`` / ``version`` /
                ``allow_missing_partitions`` metadata (a filter on an unknown column names
                it), ``version`` with several partitions, or partitions whose schemas
                cannot be concatenated.
        """
        self._check_executor(context)
        datasets = self._dataset_store()
        as_dict, element_type = self._requested_type(context)
        options = ReadOptions.from_metadata(context.definition_metadata, _ctx.label(context))
        columns, allow_missing = options.columns, options.allow_missing_partitions
        read_kwargs = options.read_kwargs()
        targets = self.input_dataset_keys(context)
        partitioned = context.has_asset_key and context.has_asset_partitions
        if as_dict and not partitioned:
            raise TypeError(
                f"{_ctx.label(context)} is annotated as a dict (one value per partition), but "
                f"{self._describe(context, None)} is not partitioned; annotate it with the value type instead"
            )
        if not targets:
            return {} if as_dict else None
        if options.version is not None and len(targets) > 1:
            raise ValueError(
                f"{_ctx.label(context)}: metadata 'version' ({options.version}) names one version of one "
                f"dataset, but this input reads {len(targets)} partitions, each its own dataset with its own "
                "version numbers; load a single partition, or drop 'version'"
            )

        if element_type is None:
            handler = self._handler_as_written(context, [k for _pk, k in targets])
        else:
            handler = self._handler_for_annotation(context, element_type)

        def translated(exc: Exception, partition_key: str | None, key: str) -> Exception:
            """``exc`` (from reading ``key``) re-worded to name the partition, or ``exc`` itself."""
            if isinstance(exc, DatasetNotFound):
                return DatasetNotFound(
                    f"cannot load {self._describe(context, partition_key)}: dataset {key!r} is absent "
                    f"(nothing stored at {datasets.store.uri(key)}); materialize it first"
                    + ("" if partition_key is None else ", or set allow_missing_partitions on the input")
                )
            if isinstance(exc, DatasetIncomplete):
                new: Exception = DatasetIncomplete(
                    f"cannot load {self._describe(context, partition_key)}: dataset {key!r} is incomplete: {exc}"
                )
            elif isinstance(exc, VersionNotRetained):
                new = VersionNotRetained(
                    f"cannot load {self._describe(context, partition_key)} at version {options.version}: {exc}. "
                    "Set retain_versions on RemoteStoreIOManager to keep more versions readable."
                )
            elif isinstance(exc, NotFound):  # a version newer than the latest
                new = NotFound(
                    f"cannot load {self._describe(context, partition_key)} at version {options.version}: {exc}"
                )
            else:
                return exc
            new.__cause__ = exc
            return new

        def read_one(target: tuple[str | None, str]) -> tuple[bool, Any]:
            partition_key, key = target
            _own.check_owner(
                self._recorded_metadata(datasets, key, options.version),
                self._expected_owner(context, partition_key),
                key=key,
                writing=False,
            )
            try:
                return True, handler.read(context, datasets, key, columns=columns, **read_kwargs)
            except DatasetNotFound:
                if allow_missing and partition_key is not None:
                    return False, None
                raise translated(DatasetNotFound(key), partition_key, key) from None
            except NotFound as exc:  # VersionNotRetained, or a version newer than the latest
                raise translated(exc, partition_key, key) from exc
            except DatasetIncomplete as exc:
                raise translated(exc, partition_key, key) from exc

        def probe(target: tuple[str | None, str]) -> bool:
            """Check ``target``'s owner and whether it exists, from its manifest alone (one GET)."""
            partition_key, key = target
            try:
                recorded = datasets.read_manifest(key).metadata
            except ManifestCorrupted:
                return True  # the read reports it
            except NotFound:
                # No manifest: absent, or incomplete. Only here does the dataset layer look further.
                try:
                    datasets.plan_read(key)
                except DatasetNotFound:
                    if allow_missing and partition_key is not None:
                        return False
                    raise translated(DatasetNotFound(key), partition_key, key) from None
                except DatasetIncomplete as exc:
                    raise translated(exc, partition_key, key) from exc
                recorded = self._recorded_metadata(datasets, key)  # written meanwhile
            _own.check_owner(recorded, self._expected_owner(context, partition_key), key=key, writing=False)
            return True

        if as_dict or len(targets) == 1:
            if len(targets) == 1:
                results = [read_one(targets[0])]
            else:
                with ThreadPoolExecutor(
                    max_workers=min(_PARTITION_READ_THREADS, len(targets)), thread_name_prefix="pds-load"
                ) as pool:
                    results = list(pool.map(read_one, targets))
            found = [ok for ok, _obj in results]
        else:
            with ThreadPoolExecutor(
                max_workers=min(_PARTITION_READ_THREADS, len(targets)), thread_name_prefix="pds-load"
            ) as pool:
                found = list(pool.map(probe, targets))
            results = []

        missing = [pk for (pk, _key), ok in zip(targets, found, strict=True) if not ok]
        present = [(pk, key) for (pk, key), ok in zip(targets, found, strict=True) if ok]
        if missing:
            context.log.warning(
                f"{self._describe(context, None)}: skipped {len(missing)} missing partition(s) "
                f"(allow_missing_partitions): {', '.join(str(m) for m in missing[:10])}"
                + (" ..." if len(missing) > 10 else "")
            )
        if as_dict:
            return {str(pk): obj for (pk, _key), (ok, obj) in zip(targets, results, strict=True) if ok}
        if results and results[0][0]:  # a single target, found
            return results[0][1]
        if not present:
            raise DatasetNotFound(
                f"cannot load {self._describe(context, None)}: none of the {len(targets)} requested partitions "
                f"exists (first: {targets[0][1]!r}); allow_missing_partitions skips missing partitions, but "
                "at least one is needed"
            )
        return self._read_many(context, handler, present, columns, options.filters, allow_missing, translated)

    def _read_many(
        self,
        context: InputContext,
        handler: TypeHandler,
        present: list[tuple[str | None, str]],
        columns: Sequence[str] | None,
        filters: Any,
        allow_missing: bool,
        translated: Callable[[Exception, str | None, str], Exception],
    ) -> Any:
        """``handler.read_many`` over the partitions found present, with errors naming the partition.

        A partition deleted between the presence check and the read is skipped
        with ``allow_missing_partitions`` (the read starts again without it).
        """
        datasets = self._dataset_store()
        while True:
            try:
                return handler.read_many(
                    context, datasets, [key for _pk, key in present], columns=columns, filters=filters
                )
            except DatasetIncomplete as exc:  # DatasetNotFound included
                failed = _failed_target(exc, present)
                if failed is None:
                    raise
                if isinstance(exc, DatasetNotFound) and allow_missing and len(present) > 1:
                    context.log.warning(
                        f"{self._describe(context, None)}: skipped partition {failed[0]!r}, deleted while "
                        "loading (allow_missing_partitions)"
                    )
                    present = [t for t in present if t != failed]
                    continue
                raise translated(exc, failed[0], failed[1]) from exc
            except ValueError as exc:
                if "concatenat" not in str(exc):  # combine's errors say the partitions cannot be concatenated
                    raise
                raise ValueError(
                    f"cannot concatenate the partitions of {self._describe(context, None)}: {exc}"
                ) from exc
