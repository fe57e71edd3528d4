"""``SparkDataFrameHandler``, the ``RemoteStoreIOManager`` type handler for ``pyspark.sql.DataFrame``.

It lives in the Dagster layer
(``dagster_parquet_dataset.dagster_io.handlers.SparkDataFrameHandler``), which
uses this layer's public functions; this module re-exports it so that
``from dagster_parquet_dataset.spark.handler import SparkDataFrameHandler``
keeps working. Nothing else in the Spark layer imports the Dagster layer.
"""

from __future__ import annotations

from ..dagster_io.handlers import SparkDataFrameHandler

__all__ = ["SparkDataFrameHandler"]
