"""``SparkDataFrameHandler``: ``pyspark.sql.DataFrame`` outputs and inputs of ``RemoteStoreIOManager``.

The IO manager imports this module on demand (see
``dagster_parquet_dataset.dagster_io.handlers.OPTIONAL_HANDLERS``) when an
output is a Spark DataFrame, an input is annotated ``pyspark.sql.DataFrame``,
or a manifest says the dataset was written from one.

* Output: :func:`~dagster_parquet_dataset.spark.write_spark_dataset`, so the
  executors write the parts and the driver commits once.
* Input: :func:`~dagster_parquet_dataset.spark.read_spark_dataset` on the
  active session (the one dagster-pyspark's ``PySparkResource`` created, or
  any session this process made); several partitions become one DataFrame.
  Input ``filters`` go to ``read_spark_dataset``, which prunes files from the
  manifest and applies them as a Spark filter with ``read_dataset``'s
  semantics (nulls, NaN, exact literals); input ``version`` reads that
  retained version.
* Single-run backfill (an output over several partition keys, split by
  ``partition_expr``): :meth:`SparkDataFrameHandler.write_partitions`, one
  Spark job whose tasks write each partition's parts, then one commit per
  partition on the driver (``spark/_backfill.py``).
* ``write_mode`` ``"append"``/``"merge"`` and ``partition_by``: the IO manager
  converts the DataFrame with :meth:`SparkDataFrameHandler.to_arrow`, which
  collects it to the driver (the dataset layer appends and merges Arrow tables).

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

from ..dagster_io.handlers import TypeHandler
from ..dataset import DatasetManifest, ParquetDatasetStore
from ._read import read_spark_dataset
from ._schema import spark_schema_to_arrow
from ._write import write_spark_dataset

if TYPE_CHECKING:
    from dagster import InputContext, OutputContext

    from ..dagster_io._backfill import Backfill


class NoSparkSessionError(RuntimeError):
    """A Spark DataFrame input was requested, but this process has no SparkSession."""


def active_session() -> SparkSession:
    """The session for the current thread, else the process's default one.

    Raises:
        NoSparkSessionError: no SparkSession exists in this process.
    """
    session = SparkSession.getActiveSession() or SparkSession._instantiatedSession
    if session is None:
        raise NoSparkSessionError(
            "loading an input as a pyspark.sql.DataFrame needs a SparkSession, and this process has none. "
            "Give the asset or op a dagster_pyspark.PySparkResource (e.g. resources={'pyspark': "
            "PySparkResource(spark_config={...})} and a 'pyspark: PySparkResource' parameter), or create one "
            "with SparkSession.builder.getOrCreate() before the run."
        )
    return session


class SparkDataFrameHandler(TypeHandler):
    """Writes and reads ``pyspark.sql.DataFrame`` through the Spark layer."""

    type_name = "pyspark.sql.DataFrame"

    def handles(self, python_type: type) -> bool:
        return isinstance(python_type, type) and issubclass(python_type, DataFrame)

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
        """Write ``obj`` with :func:`write_spark_dataset` (``overwrite=True``, ``mode="auto"``).

        Raises:
            TypeError: ``obj`` is not a Spark DataFrame or has a column that cannot be stored.
            RemoteStoreError: the dataset layer failed.
        """
        return write_spark_dataset(obj, datasets, key, overwrite=True, run_id=run_id, metadata=metadata)

    def write_partitions(
        self,
        context: OutputContext | None,
        datasets: ParquetDatasetStore,
        obj: Any,
        backfill: Backfill,
    ) -> list[Any]:
        """A single-run backfill: with the default ``write_mode`` (overwrite, no ``partition_by``)
        the executors split and write every partition in one Spark job and the driver commits
        each partition (:func:`~dagster_parquet_dataset.spark._backfill.write_spark_partitions`);
        other write modes go through :meth:`to_arrow`, as for one partition.

        Raises:
            ValueError: a row's partition value is null or in no partition of the run; nothing is committed.
            BackfillIncomplete: some partitions committed and others failed.
        """
        if not backfill.options.is_default:
            return super().write_partitions(context, datasets, obj, backfill)
        from ._backfill import write_spark_partitions

        return list(write_spark_partitions(obj, datasets, backfill))

    def to_arrow(self, obj: Any) -> pa.Table:
        """Collect ``obj`` to the driver as a ``pyarrow.Table`` with the Spark layer's Arrow schema.

        Used for ``write_mode`` ``"append"``/``"merge"`` and ``partition_by``, which the
        dataset layer applies to Arrow tables; the whole DataFrame must fit on the driver.

        Raises:
            TypeError: a column's type cannot be stored (the message names it).
        """
        target = spark_schema_to_arrow(obj.schema)
        table = obj.toArrow()
        if table.schema.equals(target):
            return table
        try:
            return table.cast(target)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise TypeError(f"cannot convert the Spark DataFrame to Arrow as {target}: {exc}") from None

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
            NoSparkSessionError: no SparkSession exists.
            DatasetNotFound / DatasetIncomplete / ValueError: as ``read_spark_dataset``.
            NotFound: ``version`` is not retained.
            ValueError / TypeError: malformed filters, or a filter on an unknown column (named).
        """
        spark = active_session()
        return read_spark_dataset(spark, datasets, key, columns=columns, filters=filters or None, version=version)

    def combine(self, objs: Sequence[Any]) -> DataFrame:
        """Union the partitions' DataFrames by column name, in order.

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
