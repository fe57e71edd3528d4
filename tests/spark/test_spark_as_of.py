"""``read_spark_dataset(as_of=...)`` on the shared real Spark session: the version live at an instant."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any

import pytest
from pyspark.sql import SparkSession

from dagster_parquet_dataset import LocalStore, NotFound, ParquetDatasetStore, VersionNotRetained
from dagster_parquet_dataset.spark import read_spark_dataset, write_spark_dataset


def test_reads_the_version_live_at_an_instant(spark: SparkSession, tmp_path: Any) -> None:
    datasets = ParquetDatasetStore(LocalStore(os.path.join(tmp_path, "v")), retain_versions=2)
    write_spark_dataset(spark.range(3), datasets, "ver")
    write_spark_dataset(spark.range(10, 12), datasets, "ver", overwrite=True)
    t1, t2 = (datetime.fromisoformat(m.created_at_utc) for m in reversed(datasets.history("ver")))
    assert t1 < t2
    for mode in ("native", "arrow"):
        old = read_spark_dataset(spark, datasets, "ver", as_of=t1 + (t2 - t1) / 2, mode=mode)
        assert sorted(r.id for r in old.collect()) == [0, 1, 2]
        new = read_spark_dataset(spark, datasets, "ver", as_of=t2, mode=mode)
        assert sorted(r.id for r in new.collect()) == [10, 11]
    with pytest.raises(NotFound, match="did not exist as of"):
        read_spark_dataset(spark, datasets, "ver", as_of=t1 - timedelta(microseconds=1))
    write_spark_dataset(spark.range(20, 21), datasets, "ver", overwrite=True)  # version 1 drops out
    with pytest.raises(VersionNotRetained):
        read_spark_dataset(spark, datasets, "ver", as_of=t1)
    with pytest.raises(ValueError, match="not both"):
        read_spark_dataset(spark, datasets, "ver", as_of=t2, version=2)
