"""Spark layer: PySpark DataFrames written and read as datasets, in parallel on the executors.

Needs the ``spark`` extra (``pip install 'dagster-parquet-dataset[spark]'``).
No Hadoop S3 jar is needed: with an ``S3Store`` the executors write and read
the parts through the store itself (``mapInArrow``). No function here brings
data rows into the driver's Python process: only per-part descriptors and
small aggregates.

* :func:`write_spark_dataset` -- executors write the parts (optionally into
  ``partition_by`` folders), the driver commits once.
* :func:`append_spark_dataset` -- executors write new parts, the driver commits an append.
* :func:`merge_spark_dataset` -- upsert/insert/update by key columns; Spark joins the
  changes with the candidate files, only files holding matched keys are rewritten.
* :func:`write_spark_parts` -- the building block: tasks write parts grouped by
  destination and partition values, nothing committed.
* :func:`read_spark_dataset` -- exactly the manifest's parts, verified, as a DataFrame.
* :func:`read_spark_datasets` -- many datasets (e.g. partitions) as one DataFrame, one scan.
* :func:`spark_schema_to_arrow` / :func:`arrow_schema_to_spark` -- the schema mapping both use.
* :class:`~dagster_parquet_dataset.spark.handler.SparkDataFrameHandler` -- the
  ``RemoteStoreIOManager`` type handler (imported on demand).
"""

from __future__ import annotations

from ._parts import Destination, WrittenParts, delete_attempt_leftovers, write_spark_parts
from ._spark_append import append_spark_dataset
from ._spark_merge import merge_spark_dataset
from ._spark_read import read_spark_dataset, read_spark_datasets
from ._spark_schema import arrow_schema_to_spark, spark_schema_to_arrow
from ._spark_write import write_spark_dataset

__all__ = [
    "Destination",
    "WrittenParts",
    "append_spark_dataset",
    "arrow_schema_to_spark",
    "delete_attempt_leftovers",
    "merge_spark_dataset",
    "read_spark_dataset",
    "read_spark_datasets",
    "spark_schema_to_arrow",
    "write_spark_dataset",
    "write_spark_parts",
]
