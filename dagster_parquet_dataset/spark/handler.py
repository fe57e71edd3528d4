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

The datasets are ordinary datasets: an input annotated ``pandas.DataFrame`` or
``pyarrow.Table`` loads a Spark-written one, and a Spark input loads one
written from pandas or pyarrow.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession

from ..dagster_io.handlers import TypeHandler
from ..dataset import DatasetManifest, ParquetDatasetStore
from ._read import read_spark_dataset
from ._write import write_spark_dataset

if TYPE_CHECKING:
    from dagster import InputContext, OutputContext


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

    def read(
        self,
        context: InputContext | None,
        datasets: ParquetDatasetStore,
        key: str,
        *,
        columns: Sequence[str] | None,
    ) -> DataFrame:
        """Read dataset ``key`` with :func:`read_spark_dataset` on the active session.

        Raises:
            NoSparkSessionError: no SparkSession exists.
            DatasetNotFound / DatasetIncomplete / ValueError: as ``read_spark_dataset``.
        """
        return read_spark_dataset(active_session(), datasets, key, columns=columns)

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
