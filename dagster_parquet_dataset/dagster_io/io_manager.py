"""``RemoteStoreIOManager``: every asset and op output as a committed Parquet dataset.

The IO manager only maps Dagster context to dataset keys (:mod:`.keys`) and
one target per step (:mod:`._target`), and delegates: a type handler's one
write hook (:mod:`.handlers`) writes the value, telling the write modes apart
in one place (:mod:`._write_modes`), :mod:`._output_metadata` says
what was written, and :mod:`._load` loads inputs. The dataset layer does the
I/O and gives the guarantees (atomic commits, verified reads).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from dagster import (
    AssetKey,
    ConfigurableIOManager,
    ExecutorRequirement,
    InitResourceContext,
    InputContext,
    OutputContext,
    PartitionsDefinition,
)
from dagster._core.errors import DagsterInvariantViolationError
from pydantic import Field, PrivateAttr, field_validator, model_validator

from ..dataset import ParquetDatasetStore, read_live
from ..errors import RemoteStoreError
from . import _backfill_split as _bf
from . import _context as _ctx
from . import _ownership as _own
from . import _presentation as _present
from . import keys as keys_mod
from ._asset_data_version import set_output_data_version
from ._asset_delta import update_asset_table
from ._handler_base import TypeHandler
from ._load import NoDataStored, UnsupportedTypeError, input_target, load_input, type_label
from ._output_metadata import manifest_metadata, output_metadata
from ._registry import HandlerRegistry, default_registry
from ._special_outputs import output_target, write_backfill, write_none, write_output
from .options import AS_OF_KEY, ReadOptions, WriteOptions, run_as_of
from .resources import StoreResource, store_resource_for

__all__ = ["NoDataStored", "ProcessLocalStoreError", "RemoteStoreIOManager", "UnsupportedTypeError"]


class ProcessLocalStoreError(RemoteStoreError, RuntimeError):
    """A store that lives in one process's memory is used by an executor that runs steps in other processes."""


class RemoteStoreIOManager(ConfigurableIOManager):
    """Stores every asset and op output as a Parquet dataset on a store.

    Usage::

        Definitions(
            assets=[...],
            resources={"io_manager": RemoteStoreIOManager(store=LocalStoreResource(root="data"))},
        )

    or, as a shortcut for a local folder or an S3 prefix (AWS settings from the
    environment), ``RemoteStoreIOManager(base_dir="data")`` /
    ``RemoteStoreIOManager(base_dir="s3://bucket/prefix")``; ``store`` and
    ``base_dir`` are exclusive.

    Dataset keys follow the published mapping (docs/dagster.md, "Keys"): asset ``["a", "b"]`` ->
    ``a/b``; partition ``p`` -> ``a/b/p``; a multi-dimension partition ->
    ``a/b/<v1>/<v2>`` (values ordered by sorted dimension name); an op output
    -> ``<run_id>/<step_key>/<output_name>``; ``prefix`` goes in front. Every
    value is escaped so it stays inside its folder. Asset ``["a", "p"]`` and
    partition ``p`` of asset ``a`` share the key ``a/p``: one dataset never
    serves both, because the asset and partition key recorded in the manifest
    are checked before every write and read (``DatasetKeyCollision``; see
    :mod:`._ownership`). A ``None`` output writes no data (see ``docs/dagster.md``). Contexts built by
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
    one dataset; see ``retain_versions``), ``as_of`` (load the version live at
    an instant: ``MetadataValue.timestamp``, a POSIX timestamp or a zoned
    ISO-8601 string) and ``allow_missing_partitions`` (skip partitions that
    were never written instead of failing).

    Attributes:
        store: the store resource (``LocalStoreResource``, ``S3StoreResource``,
            ``InMemoryStoreResource``).
        base_dir: instead of ``store``: a local folder or an ``s3://bucket/prefix`` URL.
        prefix: folder in the store under which every dataset key goes.
        compression: Parquet codec (``zstd``, ``snappy``, ``gzip``, ``brotli``, ``lz4``, ``none``).
        row_group_size: rows per Parquet row group (pyarrow's default when unset).
        max_rows_per_file: split outputs into parts of at most this many rows.
        retain_versions: how many versions of each dataset stay readable (the live
            one included; for the ``version`` and ``as_of`` input metadata); ``None``
            (the default): no count limit; ``1`` deletes a replaced version's files
            with the commit that replaces it (racing readers re-read, ``as_of`` has
            nothing to travel to).
        retain_for_hours: how long a replaced version stays readable, from the
            commit that replaced it; 168 (7 days) by default, ``None``: no time limit.
            A version stays while both limits allow; see ``ParquetDatasetStore``.
        delta_log: also keep each dataset's Delta log, so every output is a Delta table too
            (``ParquetDatasetStore(delta_log=True)``), and each partitioned asset's one Delta table over
            its partitions (docs/delta.md); the store resource's ``delta_log`` turns it on too.
        preview_rows: rows of each output shown in its ``preview`` output metadata
            (a Markdown table taken from the data as it is written); ``0`` turns it off.
            An asset's ``dagster/column_schema`` column descriptions are written into the
            Parquet field metadata and reported in the output's ``dagster/column_schema``
            (see :mod:`._presentation`).
    """

    store: StoreResource | None = Field(
        default=None,
        description=(
            "Where the datasets live: LocalStoreResource, S3StoreResource or InMemoryStoreResource "
            "(or give base_dir instead)."
        ),
    )
    base_dir: str | None = Field(
        default=None,
        description=(
            "Instead of store: a local folder ('data', '/srv/lake') or an S3 URL ('s3://bucket/prefix', "
            "endpoint and credentials from the AWS environment)."
        ),
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
        default=None,
        description=(
            "How many versions of each dataset stay readable (for the 'version' and 'as_of' input metadata): "
            "1 deletes a replaced version's files at once; unset (None): no count limit."
        ),
    )
    retain_for_hours: float | None = Field(
        default=168.0,
        description=(
            "Hours a replaced version stays readable, from the commit that replaced it (default 7 days); "
            "unset (None): no time limit. Later commits delete expired versions' files."
        ),
    )
    delta_log: bool = Field(
        default=False,
        description=(
            "Also keep each dataset's Delta log (_delta_log/), so every output is a Delta table readable by "
            "deltalake, polars, DuckDB, Spark and Trino (docs/delta.md)."
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
    _base_dir_store: StoreResource | None = PrivateAttr(default=None)

    @field_validator("store", mode="before")
    @classmethod
    def _store_is_a_resource(cls, value: Any) -> Any:
        """Refuse a ``store`` that is not a store resource, saying what to pass.

        Raises:
            ValueError: e.g. ``store="/path"``; pydantic reports it as a ``ValidationError``.
        """
        if value is None or isinstance(value, (StoreResource, dict)):
            return value
        shortcut = (
            f"; for a folder or an S3 URL write RemoteStoreIOManager(base_dir={value!r})"
            if isinstance(value, str)
            else ""
        )
        raise ValueError(
            f"RemoteStoreIOManager(store=...) takes a store resource: LocalStoreResource(root=...), "
            f"S3StoreResource(bucket=..., prefix=...) or InMemoryStoreResource(), got {type(value).__name__} "
            f"{value!r}{shortcut}"
        )

    @model_validator(mode="after")
    def _one_location(self) -> RemoteStoreIOManager:
        """Exactly one of ``store`` and ``base_dir``.

        Raises:
            ValueError: both or neither (checked when the definitions load).
        """
        if self.store is not None and self.base_dir is not None:
            raise ValueError(
                f"RemoteStoreIOManager: give store=... or base_dir=..., not both (store={type(self.store).__name__}, "
                f"base_dir={self.base_dir!r})"
            )
        if self.store is None and self.base_dir is None:
            raise ValueError(
                "RemoteStoreIOManager needs where the datasets live: base_dir='data' (a local folder), "
                "base_dir='s3://bucket/prefix', or store=LocalStoreResource(...) / S3StoreResource(...)"
            )
        return self

    @property
    def store_resource(self) -> StoreResource:
        """The store resource in use: ``store``, or the one ``base_dir`` names.

        Raises:
            ValueError: a ``base_dir`` no store serves (see ``store_resource_for``).
        """
        if self.store is not None:
            return self.store
        if self._base_dir_store is None:
            self._base_dir_store = store_resource_for(self.base_dir or "")
        return self._base_dir_store

    # ------------------------------------------------------------------ setup

    def setup_for_execution(self, context: InitResourceContext) -> None:
        """Check the configuration before any step runs (no I/O).

        The run tag ``dagster_parquet_dataset/as_of`` and every input's ``as_of``
        metadata in the run's job are checked here, so a value without a time
        zone fails the run before any step computes. A store made from ``base_dir`` is set up here as Dagster sets up a nested
        ``store`` resource (``S3StoreResource`` checks access and conditional writes).

        Raises:
            ValueError / TypeError: a bad ``prefix``, ``compression``, ``row_group_size``,
                ``max_rows_per_file``, ``retain_versions``, ``retain_for_hours`` or ``base_dir``; the message names it.
            ValueError: the run tag ``dagster_parquet_dataset/as_of``, or an input's ``as_of``
                metadata, is not ISO-8601 with a time zone.
            StoreAccessError / CapabilityNotSupported: as ``S3StoreResource.setup_for_execution``.
        """
        _check_run_as_of(context)
        if self.store is None:
            self.store_resource.setup_for_execution(context)
        self._dataset_store()

    def _dataset_store(self) -> ParquetDatasetStore:
        if self._datasets is None:
            self._prefix = keys_mod.normalize_prefix(self.prefix)
            self._datasets = ParquetDatasetStore(
                self.store_resource.get_store(),
                compression=self.compression,
                row_group_size=self.row_group_size,
                max_rows_per_file=self.max_rows_per_file,
                retain_versions=self.retain_versions,
                retain_for=None if self.retain_for_hours is None else timedelta(hours=self.retain_for_hours),
                delta_log=self.keeps_delta_log,
            )
        return self._datasets

    @property
    def keeps_delta_log(self) -> bool:
        """Whether Delta logs are kept: ``delta_log`` here or on the store resource (either turns it on)."""
        return self.delta_log or self.store_resource.delta_log

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
        if not type(self.store_resource).process_local:
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
                f"{type(self.store_resource).__name__} keeps datasets in one process's memory, but this run uses the "
                f"{executor_def.name!r} executor, which runs steps in their own processes, so a step cannot "
                "see another step's outputs. Use LocalStoreResource (or S3StoreResource) instead, or run with "
                "the in-process executor (materialize(), job.execute_in_process(), or "
                "executor_def=in_process_executor)."
            )

    # ------------------------------------------------------------------- keys

    def _asset_key_for_partition(self, asset_path: Sequence[str], partitions_def: Any, partition_key: str) -> str:
        values, _ = _ctx.partition_values(partitions_def, partition_key)
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
        output writes no data (see :meth:`_write_none`).

        Raises:
            ValueError / TypeError: bad write options in the definition metadata (an unknown
                ``write_mode``, ``"merge"`` without ``key_columns``, ``"append"`` or ``"merge"`` on an
                op output, ...); nothing is written.
            UnsupportedTypeError: no handler for ``type(obj)``; the message lists the supported types.
            TypeError: a column whose type Parquet cannot hold (e.g. polars ``Int128``); the message
                names the column and the type; nothing is written.
            ProcessLocalStoreError: an ``InMemoryStoreResource`` under a multi-process executor.
            ValueError: the output spans several partitions without ``partition_expr`` metadata,
                a row's ``partition_expr`` value is null or in no partition of the run (nothing
                is written; see :mod:`._backfill_split`), or the dataset layer refused the
                data (a schema an append or merge cannot take, duplicate or null merge keys,
                an unknown ``partition_by`` column, a partitioning that differs from the dataset's).
            DatasetNotFound: ``merge_strategy="update"`` and the dataset does not exist yet.
            DatasetKeyCollision: the dataset key already holds another asset or partition
                (recorded in its manifest); nothing is written.
            RemoteStoreError: the dataset layer failed (e.g. ``CommitConflict``).
            BackfillIncomplete: a single-run backfill committed some partitions and not others.

        With ``delta_log``, a partitioned asset's one Delta table (``<asset>/_delta_log/``) then takes the
        partitions' new versions (see :mod:`._asset_delta`; a failure there is a warning, never the step's).
        """
        try:
            self._handle_output(context, obj)
        finally:
            if self.keeps_delta_log and context.has_asset_key and context.has_asset_partitions:
                update_asset_table(
                    context, self._dataset_store(), prefix=self._prefix or "", key_for=self._asset_key_for_partition
                )

    def _handle_output(self, context: OutputContext, obj: Any) -> None:
        self._check_executor(context)
        datasets = self._dataset_store()
        what = _ctx.describe_output(context)
        options = WriteOptions.from_metadata(context.definition_metadata, what)
        if not context.has_asset_key and options.write_mode != "overwrite":
            raise ValueError(
                f"{what}: write_mode {options.write_mode!r} needs an asset: an op output is stored under its "
                "run id (<run_id>/<step_key>/<output_name>), so every run writes a new dataset and nothing is "
                f"ever {'appended' if options.write_mode == 'append' else 'merged'} into. Make the output an "
                "asset (@asset, or AssetOut in a @multi_asset), or drop write_mode. Nothing was written."
            )
        if context.has_asset_key and context.has_asset_partitions:
            if len(context.asset_partition_keys) > 1 or _bf.PARTITION_EXPR_KEY in context.definition_metadata:
                write_backfill(
                    context,
                    obj,
                    options,
                    datasets=datasets,
                    handler_for=self._handler_for_output,
                    registry=self.registry,
                    key_for=self._asset_key_for_partition,
                    preview_rows=self.preview_rows,
                )  # a single-run backfill (see _backfill)
                return
        key = self.output_dataset_key(context)
        if obj is None:
            write_none(context, datasets, key, options)
            return
        handler = self._handler_for_output(
            obj,
            f"{_ctx.label(context)}"
            + (f" of asset {context.asset_key.to_user_string()}" if context.has_asset_key else ""),
        )
        presentation = _present.Presentation(
            _present.declared_descriptions(context.definition_metadata), self.preview_rows
        )
        metadata = manifest_metadata(context, handler.type_name)
        live = read_live(datasets, key)  # the step's one read of the manifest: owner, retries and the write use it
        recorded = live.manifest.metadata if live.manifest is not None else None
        _own.check_owner(recorded, _own.owner(metadata), key=key, writing=True)
        target = output_target(
            context,
            what=what,
            dataset_key=key,
            options=options,
            metadata=metadata,
            live=live,
            presentation=presentation,
        )
        written = write_output(target, datasets, handler, obj)
        uri, name, preview = datasets.store.uri(key), handler.type_name, presentation.preview
        md = output_metadata(
            context, key=key, uri=uri, written=written, type_name=name, options=options, preview=preview
        )
        context.add_output_metadata(md)
        set_output_data_version(context, written.manifest)

    def _handler_for_output(self, obj: Any, subject: str) -> TypeHandler:
        """The handler that stores ``obj``.

        Raises:
            UnsupportedTypeError: none does; the message lists the supported types.
        """
        handler = self.registry.for_type(type(obj))
        if handler is None:
            raise UnsupportedTypeError(
                f"RemoteStoreIOManager cannot store {subject}: it is a {type_label(type(obj))}. "
                f"Supported types: {self.registry.describe_supported()}."
            )
        return handler

    # ------------------------------------------------------------------ input

    def load_input(self, context: InputContext) -> Any:
        """Load the input from the dataset(s) of its upstream output (see :mod:`._load`).

        Returns the value as the input's annotation asks (or as written when
        unannotated); for several partitions, their concatenation in partition
        order, or a ``dict`` keyed by partition key when annotated ``dict[str, T]``.
        When the partition mapping yields no partition at all: ``{}`` for a
        ``dict`` annotation, ``None`` for an ``Optional`` one or an unannotated
        input, otherwise an empty value of the annotated type with the upstream's schema when another of its partitions records
        one (an empty value with no columns if none does; ``None`` for a type
        that is not built from Arrow in this process, such as Spark). An
        ``Optional`` input gets ``None`` when the upstream stored nothing, or
        its output was ``None``.

        Input metadata ``columns``, ``filters`` and ``version`` apply to every
        dataset read (each partition's); ``version`` needs exactly one dataset,
        since version numbers are per dataset.

        Raises:
            DatasetNotFound: an upstream dataset is absent (the message names its key);
                with ``allow_missing_partitions`` only when every partition is absent.
            NoDataStored: the upstream's output was ``None`` and the input is not ``Optional``
                (the message names the asset and partition).
            DatasetIncomplete: an upstream dataset is incomplete or damaged, or the
                requested ``version``'s files were removed.
            VersionNotRetained: the requested ``version`` (or the one live at ``as_of``) is no
                longer kept (the message says which are and names ``retain_versions``).
            NotFound: the requested ``version`` is newer than the latest, or ``as_of`` is before
                the upstream's first version (an ``Optional`` input gets ``None`` instead).
            UnsupportedTypeError: the annotation is not a supported type.
            DatasetKeyCollision: an upstream dataset's manifest records another asset or
                partition than the one expected (two assets map to one key).
            ProcessLocalStoreError: an ``InMemoryStoreResource`` under a multi-process executor.
            ValueError / TypeError: bad ``columns`` / ``filters`` / ``version`` / ``as_of`` /
                ``allow_missing_partitions`` metadata (a filter on an unknown column names
                it), ``version`` with several partitions, ``as_of`` with several partitions
                as one value, or partitions whose schemas cannot be concatenated.
        """
        self._check_executor(context)
        target = input_target(context, self.input_dataset_keys(context))  # the input's one target
        return load_input(target, self._dataset_store(), self.registry, lambda: self._sibling_keys(context))

    def _sibling_keys(self, context: InputContext) -> list[str]:
        """Dataset keys of some partitions of an input's upstream asset, to learn its schema from.

        The run's own partition key first (for a self-dependent asset, its earlier
        materialization), then the first and last partitions of the definition.
        """
        partitions_def = _ctx.partitions_def_of(context)
        if not context.has_asset_key or partitions_def is None:
            return []
        try:
            keys = list(partitions_def.get_partition_keys(dynamic_partitions_store=_ctx.instance_of(context)))
        except Exception:  # noqa: BLE001 - dynamic partitions without an instance, or a definition that cannot list
            keys = []
        own = _ctx.run_partition_key_of(context)
        candidates = ([own] if own is not None and own in keys else []) + keys[:2] + keys[-2:]
        path = list(context.asset_key.path)
        seen: list[str] = []
        for pk in candidates:
            key = self._asset_key_for_partition(path, partitions_def, pk)
            if key not in seen:
                seen.append(key)
        return seen


def _check_run_as_of(context: InitResourceContext) -> None:
    """Check the run tag ``dagster_parquet_dataset/as_of`` and the ``as_of`` metadata of every input of the
    run's job (from the job snapshot the run records), before any step runs.

    Raises:
        ValueError: a value that is not ISO-8601 with a time zone (the message names the tag, or the op and input).
    """
    run = context.dagster_run
    if run is None:
        return  # a resource built outside a run
    run_as_of(run.tags)
    instance = context.instance
    if instance is None or run.job_snapshot_id is None:
        return
    snapshot = instance.get_job_snapshot(run.job_snapshot_id)
    for op in snapshot.node_defs_snapshot.op_def_snaps:
        for input_def in op.input_def_snaps:
            if AS_OF_KEY in input_def.metadata:
                ReadOptions.from_metadata(
                    {AS_OF_KEY: input_def.metadata[AS_OF_KEY]}, f"op {op.name!r} input {input_def.name!r}"
                )
