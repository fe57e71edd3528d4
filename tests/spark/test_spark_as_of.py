"""``read_spark_dataset(as_of=...)`` on the shared real Spark session: the version live at an instant."""

import os
from datetime import datetime, timedelta
from typing import Any

import dagster as dg
import pytest
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, SparkSession

from dagster_parquet_dataset import LocalStore, NotFound, ParquetDatasetStore, VersionNotRetained
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager
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


def test_spark_inputs_pin_as_of_and_version_through_materialize(spark: SparkSession, tmp_path: Any) -> None:
    """Issue 27, item 5: a ``pyspark.sql.DataFrame`` input with ``as_of`` or ``version`` metadata loads that
    version of a Spark-written upstream, as an Arrow input does (a real instance, ``materialize``)."""
    root = os.path.join(tmp_path, "store")
    io = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=None)
    resources = {"io_manager": io, "pyspark": PySparkResource(spark_config={})}
    start = {"n": 0}

    @dg.asset
    def events(pyspark: PySparkResource) -> DataFrame:
        return pyspark.spark_session.range(start["n"], start["n"] + 3)

    seen: dict[str, list[int]] = {}
    with dg.instance_for_test() as instance:
        for first in (0, 10, 20):
            start["n"] = first
            assert dg.materialize([events], resources=resources, instance=instance).success
        datasets = ParquetDatasetStore(LocalStore(root), retain_versions=1)
        times = [datetime.fromisoformat(m.created_at_utc) for m in reversed(datasets.history("events"))]
        between = times[0] + (times[1] - times[0]) / 2

        @dg.asset(ins={"events": dg.AssetIn(metadata={"as_of": dg.MetadataValue.timestamp(between)})})
        def at_instant(events: DataFrame) -> None:
            seen["as_of"] = sorted(r.id for r in events.collect())

        @dg.asset(ins={"events": dg.AssetIn(metadata={"version": 2})})
        def at_version(events: DataFrame) -> None:
            seen["version"] = sorted(r.id for r in events.collect())

        @dg.asset(ins={"events": dg.AssetIn()})
        def live(events: DataFrame) -> None:
            seen["live"] = sorted(r.id for r in events.collect())

        selection = [at_instant, at_version, live]
        assets = [events.to_source_asset(), *selection]
        assert dg.materialize(assets, resources=resources, instance=instance, selection=selection).success
    assert seen == {"as_of": [0, 1, 2], "version": [10, 11, 12], "live": [20, 21, 22]}
