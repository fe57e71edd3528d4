"""Spark layer: PySpark DataFrames written and read as datasets, in parallel on the executors.

Needs the ``spark`` extra (``pip install 'dagster-parquet-dataset[spark]'``).
No Hadoop S3 jar is needed: with an ``S3Store`` the executors write and read
the parts through the store itself (``mapInArrow``).

* :func:`write_spark_dataset` -- executors write the parts, the driver commits once.
* :func:`read_spark_dataset` -- exactly the manifest's parts, verified, as a DataFrame.
* :func:`read_spark_datasets` -- many datasets (e.g. partitions) as one DataFrame, one scan.
* :func:`spark_schema_to_arrow` / :func:`arrow_schema_to_spark` -- the schema mapping both use.
* :class:`~dagster_parquet_dataset.spark.handler.SparkDataFrameHandler` -- the
  ``RemoteStoreIOManager`` type handler (imported on demand).
"""

from __future__ import annotations

from ._read import read_spark_dataset, read_spark_datasets
from ._schema import arrow_schema_to_spark, spark_schema_to_arrow
from ._write import write_spark_dataset

__all__ = [
    "arrow_schema_to_spark",
    "read_spark_dataset",
    "read_spark_datasets",
    "spark_schema_to_arrow",
    "write_spark_dataset",
]
