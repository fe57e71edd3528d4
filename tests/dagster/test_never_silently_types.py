"""Types Parquet cannot hold are refused with an error naming the column and the fix, and the store is left
byte-identical (issue 30 point 1), through ``materialize``."""

import math
from typing import Any

import dagster as dg
import pandas as pd
import polars as pl

from dagster_parquet_dataset import ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import RemoteStoreIOManager

from ._snapshot import snapshot


class Bad(dg.Config):
    bad: bool = False


def _failure(result: Any) -> str:
    assert not result.success
    failures = result.get_step_failure_events()
    assert failures, "expected a step failure"
    return str(failures[0].step_failure_data.error)


def _twice(asset: Any, io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: Any) -> str:
    """Materialize ``asset`` fine, then with ``bad=True``: the failure's message, the store unchanged."""
    resources = {"io_manager": io_manager}
    assert dg.materialize([asset], resources=resources, instance=instance).success
    before = snapshot(datasets.store)
    assert before
    config = dg.RunConfig({asset.key.path[-1]: Bad(bad=True)})
    result = dg.materialize([asset], resources=resources, instance=instance, run_config=config, raise_on_error=False)
    message = _failure(result)
    assert snapshot(datasets.store) == before
    return message


@dg.asset
def polars_objects(config: Bad) -> pl.DataFrame:
    if not config.bad:
        return pl.DataFrame({"id": [1, 2], "payload": ["a", "b"]})
    return pl.DataFrame({"id": [1, 2], "payload": pl.Series([{"a": 1}, object()], dtype=pl.Object)})


def test_a_polars_object_column_is_a_type_error_naming_it(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    message = _twice(polars_objects, io_manager, datasets, instance)
    assert "TypeError" in message
    assert "column 'payload'" in message and "Object" in message
    assert datasets.read_dataset("polars_objects").column("payload").to_pylist() == ["a", "b"]


@dg.asset
def pandas_mixed(config: Bad) -> pd.DataFrame:
    return pd.DataFrame({"id": [1, 2], "code": ["a", 1] if config.bad else ["a", "b"]})


def test_a_pandas_object_column_of_mixed_types_names_the_column_and_the_cast(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    message = _twice(pandas_mixed, io_manager, datasets, instance)
    assert "TypeError" in message
    assert "column 'code'" in message and "int, str" in message
    assert "astype('string')" in message


@dg.asset(metadata={"write_mode": "append"})
def pandas_counts(config: Bad) -> pd.DataFrame:
    return pd.DataFrame({"id": [1, 2], "qty": [3, math.nan] if config.bad else [1, 2]})


def test_an_int_column_turned_float_by_nan_gets_the_nullable_int64_hint(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    message = _twice(pandas_counts, io_manager, datasets, instance)
    assert "column 'qty' is double but the dataset has int64" in message
    assert "'Int64'" in message and "astype('Int64')" in message
    assert datasets.read_dataset("pandas_counts").num_rows == 2
