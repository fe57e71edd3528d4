"""``SparkDataFrameHandler``: ``pyspark.sql.DataFrame`` outputs and inputs of ``RemoteStoreIOManager``.

It belongs to the Dagster layer and uses the Spark layer's public functions
only (``dagster_parquet_dataset.spark.handler`` re-exports it for existing
imports). The IO manager imports this module on demand (see
``dagster_parquet_dataset.dagster_io.handlers.OPTIONAL_HANDLERS``) when an
output is a Spark DataFrame, an input is annotated ``pyspark.sql.DataFrame``,
or a manifest says the dataset was written from one.

* Output: :func:`~dagster_parquet_dataset.spark.write_spark_dataset`, so the
  executors write the parts and the driver commits once.
* Input: :func:`~dagster_parquet_dataset.spark.read_spark_dataset` on the
  active session (the one dagster-pyspark's ``PySparkResource`` created, or
  any session this process made). Several partitions become one DataFrame:
  :meth:`SparkDataFrameHandler.read_many` reads them with
  :func:`~dagster_parquet_dataset.spark.read_spark_datasets`, one scan over all
  their selected files (not a union of per-partition DataFrames).
  Input ``filters`` go to ``read_spark_dataset``, which prunes files from the
  manifest and applies them as a Spark filter with ``read_dataset``'s
  semantics (nulls, NaN, exact literals); input ``version`` reads that
  retained version.
* ``write_mode`` ``"append"``/``"merge"`` and ``partition_by``:
  :meth:`SparkDataFrameHandler.write` runs them on the executors
  (:func:`~dagster_parquet_dataset.spark.append_spark_dataset`,
  :func:`~dagster_parquet_dataset.spark.merge_spark_dataset`,
  :func:`~dagster_parquet_dataset.spark.write_spark_dataset` with
  ``partition_by``); output metadata ``spark_repartition: true`` first
  repartitions the rows by the partition columns. No data row is collected
  to the driver.
* Single-run backfill (an output over several partition keys, split by
  ``partition_expr``), with any ``write_mode`` and ``partition_by``:
  :meth:`SparkDataFrameHandler.write_partitions`, one Spark job whose tasks
  write each partition's parts, then one commit per partition on the driver
  (:func:`~dagster_parquet_dataset.spark.write_spark_partitions`; a merge merges each
  partition on the executors).

The datasets are ordinary datasets: an input annotated ``pandas.DataFrame`` or
``pyarrow.Table`` loads a Spark-written one, and a Spark input loads one
written from pandas or pyarrow.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from ..dataset import DatasetManifest, MergeResult, ParquetDatasetStore
from ..spark import (
    append_spark_dataset,
    merge_spark_dataset,
    read_spark_dataset,
    read_spark_datasets,
    write_spark_dataset,
    write_spark_partitions,
)
from ._handler_base import TypeHandler
from ._write_modes import Written, by_mode

if TYPE_CHECKING:
    from dagster import InputContext, OutputContext

    from ._backfill_split import Backfill
    from ._target import OutputTarget

#: Output metadata key: repartition a Spark DataFrame by its ``partition_by`` columns before writing.
SPARK_REPARTITION_KEY = "spark_repartition"


def _repartition_option(context: OutputContext | None) -> bool:
    """The output's ``spark_repartition`` metadata (``False`` when absent).

    Raises:
        TypeError: the value is not a bool.
    """
    raw = (getattr(context, "definition_metadata", None) or {}).get(SPARK_REPARTITION_KEY, False)
    value = getattr(raw, "value", raw)
    if not isinstance(value, bool):
        raise TypeError(f"output metadata {SPARK_REPARTITION_KEY!r} must be true or false, got {value!r}")
    return value


class NoSparkSessionError(RuntimeError):
    """A Spark DataFrame input was requested, but this process has no SparkSession."""


#: Input metadata key: the Spark config (``{"spark.master": "local[*]", ...}``) of a session the IO manager
#: builds when the step's process has none (a step of its own process whose only Spark use is this input).
SPARK_CONFIG_KEY = "spark_config"


def _spark_config_option(context: InputContext | None) -> dict[str, str] | None:
    """The input's ``spark_config`` metadata (``None`` when absent).

    Raises:
        TypeError: the value is not a mapping of config names to values.
    """
    raw = (getattr(context, "definition_metadata", None) or {}).get(SPARK_CONFIG_KEY)
    value = getattr(raw, "value", raw)
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"input metadata {SPARK_CONFIG_KEY!r} must map Spark config names to values, got {value!r}")
    return {k: str(v) for k, v in value.items()}


def active_session(context: InputContext | None = None) -> SparkSession:
    """The session for the current thread, else the process's default one, else one built from ``spark_config``.

    Under Dagster's multiprocess executor every step runs in its own process,
    and a ``PySparkResource`` is started only in the steps that declare it; a
    step whose only Spark use is a DataFrame input has no session unless the
    input's metadata carries ``spark_config`` (then one is built with it).

    Raises:
        NoSparkSessionError: no SparkSession exists in this process and the input has no ``spark_config``;
            the message says what to add.
        TypeError: ``spark_config`` is not a mapping.
    """
    session = SparkSession.getActiveSession() or SparkSession._instantiatedSession
    if session is not None:
        return session
    config = _spark_config_option(context)
    if config is not None:
        builder = SparkSession.builder
        for name, value in config.items():
            builder = builder.config(name, value)
        return builder.getOrCreate()
    raise NoSparkSessionError(
        "loading an input as a pyspark.sql.DataFrame needs a SparkSession, and this step's process has none "
        "(under the multiprocess executor, the default of `dagster dev`, each step runs in its own process, and "
        "a PySparkResource is started only in the steps that take it). Either give this asset or op the "
        "resource: a parameter 'pyspark: dagster_pyspark.PySparkResource' with resources={'pyspark': "
        "PySparkResource(spark_config={...})}; or give the input metadata "
        f"{{'{SPARK_CONFIG_KEY}': {{'spark.master': 'local[*]', ...}}}} (dg.AssetIn(metadata=...) or "
        "dg.In(metadata=...)) and the IO manager builds a session with that config."
    )


class SparkDataFrameHandler(TypeHandler):
    """Writes and reads ``pyspark.sql.DataFrame`` through the Spark layer."""

    type_name = "pyspark.sql.DataFrame"

    def handles(self, python_type: type) -> bool:
        return isinstance(python_type, type) and issubclass(python_type, DataFrame)

    def write(self, target: OutputTarget, datasets: ParquetDatasetStore, obj: Any) -> Written:
        """Write ``obj`` on the executors by ``target``'s write mode (told apart in :func:`by_mode`):
        :func:`write_spark_dataset` (an overwrite, with ``partition_by`` folders if asked),
        :func:`append_spark_dataset` or :func:`merge_spark_dataset`, each with the owner
        ``target.metadata`` records as ``expect_owner`` (the commit refuses a dataset another
        asset or partition wrote meanwhile). Output metadata ``spark_repartition`` repartitions
        the rows by the partition columns first (with ``partition_by``, an append or a merge).

        Raises:
            TypeError: ``obj`` is not a Spark DataFrame, has a column that cannot be stored, or a
                bad ``spark_repartition``.
            ValueError: as ``append_spark_dataset`` / ``merge_spark_dataset`` (schema, keys).
            OwnerMismatch: the dataset records another owner; nothing is committed.
            RemoteStoreError: the dataset layer failed.
        """
        key, options, idem = target.dataset_key, target.options, target.idempotency_key
        repartition = False if options.is_default else _repartition_option(target.context)
        commit = target.commit_kwargs()

        def overwrite() -> DatasetManifest:
            return write_spark_dataset(
                obj, datasets, key, overwrite=True, partition_by=options.partition_by, repartition=repartition, **commit
            )

        def append() -> tuple[DatasetManifest, int]:
            manifest = append_spark_dataset(
                obj, datasets, key, repartition=repartition, idempotency_key=idem, **commit, **options.append_kwargs()
            )
            return manifest, _appended(manifest)

        def merge() -> MergeResult:
            return merge_spark_dataset(
                obj, datasets, key, repartition=repartition, idempotency_key=idem, **commit, **options.merge_kwargs()
            )

        written = by_mode(target, datasets, overwrite=overwrite, append=append, merge=merge)
        if target.presentation is not None:
            target.presentation.preview_by_limit(obj)
        return written

    def write_partitions(
        self,
        context: OutputContext | None,
        datasets: ParquetDatasetStore,
        obj: Any,
        backfill: Backfill,
    ) -> list[Any]:
        """A single-run backfill: the executors split and write every partition in one Spark job
        with the output's write options (overwrite or append, with or without ``partition_by``;
        a merge checks the rows' partitions in one job, then merges each partition on the
        executors), and the driver commits each partition
        (:func:`~dagster_parquet_dataset.spark.write_spark_partitions`).

        Raises:
            ValueError: a row's partition value is null or in no partition of the run; nothing is committed.
            TypeError: a bad ``spark_repartition``, or a column that cannot be stored.
            BackfillIncomplete: some partitions committed and others failed.
        """
        return list(write_spark_partitions(obj, datasets, backfill, repartition=_repartition_option(context)))

    def to_arrow(self, obj: Any) -> pa.Table:
        """Refuse: Spark DataFrames are never collected to the driver.

        Every write goes through :meth:`write` (or :meth:`write_partitions`), which run on the executors.

        Raises:
            TypeError: always.
        """
        raise TypeError(
            "a Spark DataFrame is never collected to the driver's Python process; its writes (overwrite, append, "
            "merge, partition_by) run on the executors through SparkDataFrameHandler.write"
        )

    def read(
        self,
        context: InputContext | None,
        datasets: ParquetDatasetStore,
        key: str,
        *,
        columns: Sequence[str] | None,
        filters: Any = None,
        version: int | None = None,
    ) -> DataFrame:
        """Read dataset ``key`` with :func:`read_spark_dataset` on the active session.

        ``filters`` (DNF, as ``ParquetDatasetStore.read_dataset`` takes them) are
        checked against the dataset and applied as a Spark filter before the
        ``columns`` projection, so a filter may use a column that is not loaded.
        ``version`` reads that retained past version.

        Raises:
            NoSparkSessionError: no SparkSession exists and the input has no ``spark_config`` metadata.
            DatasetNotFound / DatasetIncomplete / ValueError: as ``read_spark_dataset``.
            NotFound: ``version`` is not retained.
            ValueError / TypeError: malformed filters, or a filter on an unknown column (named).
        """
        spark = active_session(context)
        return read_spark_dataset(spark, datasets, key, columns=columns, filters=filters or None, version=version)

    def read_many(
        self,
        context: InputContext | None,
        datasets: ParquetDatasetStore,
        keys: Sequence[str],
        *,
        columns: Sequence[str] | None,
        filters: Any = None,
    ) -> DataFrame:
        """Read datasets ``keys`` (an input's partitions) as ONE DataFrame with :func:`read_spark_datasets`.

        One scan over the union of the datasets' selected files, on the active
        session: ``filters`` prune each dataset's files from its manifest and
        then filter rows, as in :meth:`read`; datasets that differ by added
        columns read with those columns null where missing.

        Raises:
            NoSparkSessionError: no SparkSession exists and the input has no ``spark_config`` metadata.
            DatasetNotFound / DatasetIncomplete / ValueError / TypeError: as ``read_spark_datasets``.
        """
        spark = active_session(context)
        return read_spark_datasets(spark, datasets, keys, columns=columns, filters=filters or None)

    def combine(self, objs: Sequence[Any]) -> DataFrame:
        """Union DataFrames by column name, in order.

        Inputs over several partitions do not use this (:meth:`read_many` reads
        them as one scan); it remains for callers that hold DataFrames already.

        Raises:
            ValueError: the partitions' columns or types cannot be unioned.
        """
        from pyspark.errors import AnalysisException

        frames: list[DataFrame] = list(objs)
        try:
            combined = functools.reduce(lambda a, b: a.unionByName(b), frames)
            combined.schema  # noqa: B018 - resolve now, so a mismatch surfaces here
        except AnalysisException as exc:
            raise ValueError(f"the partitions' DataFrames cannot be unioned: {exc}") from None
        return combined


def _appended(manifest: DatasetManifest) -> int:
    """Rows the append that committed ``manifest`` added: its parts' names carry the commit's token."""
    token = manifest.txn or ""
    return sum(f.row_count or 0 for f in manifest.file_entries() if token and token in f.path)
