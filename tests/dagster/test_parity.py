"""Parity with the IO managers users come from (issue 19 item 1), through ``materialize`` on a local
store and on moto S3:

* a ``None`` output records that the partition holds no data; ``Optional`` inputs get ``None``,
  never an older version's rows; other inputs get an error naming the asset and partition;
* an ``Optional`` input over an upstream that never stored anything gets ``None``;
* a partition mapping that yields no upstream partition gives an empty value with the upstream's schema
  (``None`` to an unannotated input);
* a column type Parquet cannot hold (polars ``Int128``) is a ``TypeError`` naming it, before any write;
* ``write_mode`` append/merge on an op output is refused before any write.

Every check reads the store back with its own ``ParquetDatasetStore``.
"""

import os
from pathlib import Path
from typing import Any, Optional

import dagster as dg
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import (
    LocalStoreResource,
    NoDataStored,
    RemoteStoreIOManager,
    S3StoreResource,
    StoreResource,
)

from ..conftest import make_bucket


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[RemoteStoreIOManager, ParquetDatasetStore]:
    """The IO manager, and a reader of the same store with its own ``Store`` object."""
    resource: StoreResource
    if request.param == "local":
        resource = LocalStoreResource(root=os.path.join(tmp_path, "store"))
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        resource = S3StoreResource(bucket=make_bucket(endpoint), prefix="lake", endpoint_url=endpoint)
    return RemoteStoreIOManager(store=resource, retain_versions=1), ParquetDatasetStore(
        resource.get_store(), retain_versions=1
    )


def _run(assets: list[Any], io_manager: Any, instance: dg.DagsterInstance, **kwargs: Any) -> Any:
    return dg.materialize(assets, resources={"io_manager": io_manager}, instance=instance, **kwargs)


def _failure(result: Any) -> str:
    assert not result.success
    failures = result.get_step_failure_events()
    assert failures, "expected a step failure"
    return str(failures[0].step_failure_data.error)


def _files(datasets: ParquetDatasetStore, key: str) -> list[str]:
    return sorted(f.path for f in datasets.store.list_files(key))


def _what(value: Any) -> pa.Table:
    """What an input received, as a one-row table a test reads back."""
    if value is None:
        return pa.table({"kind": ["None"], "columns": [""], "rows": [-1]})
    columns = value.schema.names if isinstance(value, pa.Table) else list(value.columns)
    return pa.table({"kind": [type(value).__name__], "columns": [",".join(map(str, columns))], "rows": [len(value)]})


# ----------------------------------------------------------------- None outputs


class Emit(dg.Config):
    none: bool = False


@dg.asset
def maybe(config: Emit) -> Optional[pa.Table]:  # noqa: UP045 - the spelling users write
    return None if config.none else pa.table({"n": [1, 2, 3]})


@dg.asset
def reads_optional(maybe: Optional[pa.Table]) -> pa.Table:  # noqa: UP045
    return _what(maybe)


@dg.asset
def reads_table(maybe: pa.Table) -> pa.Table:
    return _what(maybe)


@dg.asset
def reads_unannotated(maybe) -> pa.Table:  # type: ignore[no-untyped-def]  # noqa: ANN001
    return _what(maybe)


def _config(none: bool) -> dg.RunConfig:
    return dg.RunConfig(ops={"maybe": Emit(none=none)})


def test_none_output_over_older_rows_records_no_data(
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    io_manager, datasets = backend
    assert _run([maybe], io_manager, instance, run_config=_config(False)).success
    assert datasets.read_dataset("maybe").num_rows == 3

    result = _run([maybe], io_manager, instance, run_config=_config(True))
    assert result.success
    md = result.get_asset_materialization_events()[0].materialization.metadata
    assert md["written"].value is False
    assert md["no_data"].value is True
    assert md["dagster/row_count"].value == 0
    assert "None" in md["note"].value
    # The live version holds no rows: nothing can serve the older version's rows.
    live = datasets.read_manifest("maybe")
    assert md["manifest_version"].value == str(live.version) == "2"
    assert datasets.read_dataset("maybe").num_rows == 0
    assert live.metadata["dagster.no_data"] == "true"

    optional = _run([maybe, reads_optional], io_manager, instance, selection=[reads_optional])
    assert optional.success
    assert datasets.read_dataset("reads_optional").to_pylist() == [{"kind": "None", "columns": "", "rows": -1}]

    for downstream in (reads_table, reads_unannotated):
        failed = _run([maybe, downstream], io_manager, instance, selection=[downstream], raise_on_error=False)
        message = _failure(failed)
        assert NoDataStored.__name__ in message
        assert "asset maybe holds no data" in message and "Optional" in message
        assert not datasets.store.exists(f"{downstream.key.path[-1]}/manifest.json")

    # Data again: the next version is read as usual.
    assert _run([maybe], io_manager, instance, run_config=_config(False)).success
    assert _run([maybe, reads_table], io_manager, instance, selection=[reads_table]).success
    assert datasets.read_dataset("reads_table").to_pylist() == [{"kind": "Table", "columns": "n", "rows": 3}]


def test_optional_input_over_nothing_stored_gets_none(
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    io_manager, datasets = backend
    # The first materialization returns None: nothing is stored at all.
    first = _run([maybe], io_manager, instance, run_config=_config(True))
    assert first.success
    assert _files(datasets, "maybe") == []
    assert first.get_asset_materialization_events()[0].materialization.metadata["no_data"].value is True

    assert _run([maybe, reads_optional], io_manager, instance, selection=[reads_optional]).success
    assert datasets.read_dataset("reads_optional").to_pylist() == [{"kind": "None", "columns": "", "rows": -1}]

    failed = _run([maybe, reads_table], io_manager, instance, selection=[reads_table], raise_on_error=False)
    message = _failure(failed)
    assert "asset maybe" in message and "absent" in message and "Optional" in message


DAYS = dg.StaticPartitionsDefinition(["d1", "d2", "d3"])


@dg.asset(partitions_def=DAYS)
def daily_maybe(context: dg.AssetExecutionContext) -> Optional[pa.Table]:  # noqa: UP045
    if context.partition_key == "d2":
        return None
    return pa.table({"day": [context.partition_key], "n": [int(context.partition_key[1:])]})


@dg.asset(partitions_def=DAYS)
def daily_reads(daily_maybe: pa.Table) -> pa.Table:
    return _what(daily_maybe)


@dg.asset(partitions_def=DAYS)
def daily_reads_optional(daily_maybe: Optional[pa.Table]) -> pa.Table:  # noqa: UP045
    return _what(daily_maybe)


@dg.asset
def all_days(daily_maybe: pa.Table) -> pa.Table:
    return daily_maybe


def test_none_partition_error_names_the_partition_and_multi_partition_inputs_skip_it(
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    io_manager, datasets = backend
    for day in ("d1", "d2", "d3"):
        assert _run([daily_maybe], io_manager, instance, partition_key=day).success
    # d2 was data once; its None output must hide those rows.
    datasets.write_dataset(pa.table({"day": ["old"], "n": [0]}), "daily_maybe/d2", overwrite=True)
    assert _run([daily_maybe], io_manager, instance, partition_key="d2").success
    assert datasets.read_dataset("daily_maybe/d2").num_rows == 0

    assets = [daily_maybe, daily_reads, daily_reads_optional, all_days]
    failed = _run(assets, io_manager, instance, selection=[daily_reads], partition_key="d2", raise_on_error=False)
    message = _failure(failed)
    assert NoDataStored.__name__ in message and "asset daily_maybe partition(s) 'd2'" in message

    assert _run(assets, io_manager, instance, selection=[daily_reads_optional], partition_key="d2").success
    assert datasets.read_dataset("daily_reads_optional/d2").column("kind").to_pylist() == ["None"]

    # An input over every partition gets the rows of those that hold data, never the old ones.
    assert _run(assets, io_manager, instance, selection=[all_days]).success
    assert datasets.read_dataset("all_days").to_pydict() == {"day": ["d1", "d3"], "n": [1, 3]}


@dg.asset
def by_day(daily_maybe: dict[str, pa.Table]) -> pa.Table:
    return pa.table({"day": sorted(daily_maybe), "rows": [daily_maybe[k].num_rows for k in sorted(daily_maybe)]})


@dg.asset
def all_days_optional(daily_maybe: Optional[pa.Table]) -> pa.Table:  # noqa: UP045
    return _what(daily_maybe)


def test_partitions_without_data_are_left_out_of_dict_inputs_and_optional_inputs_get_none(
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    io_manager, datasets = backend
    assets = [daily_maybe, by_day, all_days_optional, all_days]
    # Nothing stored yet: an Optional input over every partition gets None, a plain one fails.
    assert _run(assets, io_manager, instance, selection=[all_days_optional]).success
    assert datasets.read_dataset("all_days_optional").column("kind").to_pylist() == ["None"]
    message = _failure(_run(assets, io_manager, instance, selection=[all_days], raise_on_error=False))
    assert "absent" in message

    # Only d2 materialized, and it returned None after holding rows: no partition holds data.
    datasets.write_dataset(pa.table({"day": ["old"], "n": [0]}), "daily_maybe/d2", overwrite=True)
    assert _run([daily_maybe], io_manager, instance, partition_key="d2").success
    assert _run(assets, io_manager, instance, selection=[all_days_optional]).success
    assert datasets.read_dataset("all_days_optional").column("kind").to_pylist() == ["None"]

    # With d1 and d3 stored too, the dict input holds only the partitions with data.
    for day in ("d1", "d3"):
        assert _run([daily_maybe], io_manager, instance, partition_key=day).success
    assert _run(assets, io_manager, instance, selection=[by_day]).success
    assert datasets.read_dataset("by_day").to_pydict() == {"day": ["d1", "d3"], "rows": [1, 1]}


# ------------------------------------------------- mapping that yields no partition


DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-04")
PREVIOUS = dg.TimeWindowPartitionMapping(start_offset=-1, end_offset=-1, allow_nonexistent_upstream_partitions=True)


@dg.asset(partitions_def=DAILY)
def day_rows(context: dg.AssetExecutionContext) -> pa.Table:
    return pa.table({"day": [context.partition_key], "amount": [1.5]})


@dg.asset(partitions_def=DAILY, ins={"day_rows": dg.AssetIn(partition_mapping=PREVIOUS)})
def prev_arrow(day_rows: pa.Table) -> pa.Table:
    assert isinstance(day_rows, pa.Table)
    return _what(day_rows)


@dg.asset(partitions_def=DAILY, ins={"day_rows": dg.AssetIn(partition_mapping=PREVIOUS)})
def prev_pandas(day_rows: pd.DataFrame) -> pa.Table:
    assert isinstance(day_rows, pd.DataFrame)
    return _what(day_rows)


@dg.asset(partitions_def=DAILY, ins={"day_rows": dg.AssetIn(partition_mapping=PREVIOUS)})
def prev_polars(day_rows: pl.DataFrame) -> pa.Table:
    assert isinstance(day_rows, pl.DataFrame)
    return _what(day_rows)


@dg.asset(partitions_def=DAILY, ins={"day_rows": dg.AssetIn(partition_mapping=PREVIOUS)})
def prev_optional(day_rows: Optional[pa.Table]) -> pa.Table:  # noqa: UP045
    return _what(day_rows)


@dg.asset(partitions_def=DAILY, ins={"day_rows": dg.AssetIn(partition_mapping=PREVIOUS)})
def prev_unannotated(day_rows) -> pa.Table:  # type: ignore[no-untyped-def]  # noqa: ANN001
    return _what(day_rows)


PREV = [prev_arrow, prev_pandas, prev_polars, prev_optional, prev_unannotated]


def test_mapping_to_no_partition_gives_an_empty_value_with_the_upstream_schema(
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    io_manager, datasets = backend
    assert _run([day_rows], io_manager, instance, partition_key="2024-01-02").success
    result = _run([day_rows, *PREV], io_manager, instance, selection=PREV, partition_key="2024-01-01")
    assert result.success
    expected = {
        "prev_arrow": ("Table", "day,amount"),
        "prev_pandas": ("DataFrame", "day,amount"),
        "prev_polars": ("DataFrame", "day,amount"),
    }
    for name, (kind, columns) in expected.items():
        assert datasets.read_dataset(f"{name}/2024-01-01").to_pylist() == [
            {"kind": kind, "columns": columns, "rows": 0}
        ], name
    assert datasets.read_dataset("prev_optional/2024-01-01").column("kind").to_pylist() == ["None"]
    # Unannotated: None, as Dagster's UPath IO managers give (issue 30).
    assert datasets.read_dataset("prev_unannotated/2024-01-01").column("kind").to_pylist() == ["None"]


def test_mapping_to_no_partition_without_a_known_schema_gives_an_empty_value(
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    io_manager, datasets = backend
    selection = [prev_arrow, prev_pandas, prev_polars]
    assert _run([day_rows, *selection], io_manager, instance, selection=selection, partition_key="2024-01-01").success
    for name, kind in (("prev_arrow", "Table"), ("prev_pandas", "DataFrame"), ("prev_polars", "DataFrame")):
        assert datasets.read_dataset(f"{name}/2024-01-01").to_pylist() == [{"kind": kind, "columns": "", "rows": 0}]


# ------------------------------------------------------- types Parquet cannot hold


@dg.asset
def wide_ints() -> pl.DataFrame:
    return pl.DataFrame({"id": [1, 2], "big": pl.Series([1, 2], dtype=pl.Int128)})


@dg.asset
def wide_uints() -> pl.LazyFrame:
    return pl.DataFrame({"big_u": pl.Series([1, 2], dtype=pl.UInt128)}).lazy()


@dg.asset
def intervals() -> pa.Table:
    return pa.table({"id": [1], "span": pa.array([(1, 2, 3)], type=pa.month_day_nano_interval())})


@pytest.mark.parametrize(
    ("asset", "column", "type_name"),
    [(wide_ints, "big", "Int128"), (wide_uints, "big_u", "UInt128"), (intervals, "span", "month_day_nano_interval")],
)
def test_a_type_parquet_cannot_hold_is_a_type_error_naming_the_column(
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore],
    instance: dg.DagsterInstance,
    asset: Any,
    column: str,
    type_name: str,
) -> None:
    io_manager, datasets = backend
    message = _failure(_run([asset], io_manager, instance, raise_on_error=False))
    assert "TypeError" in message
    assert f"column {column!r}" in message and type_name in message
    assert _files(datasets, asset.key.path[-1]) == []


@dg.asset(metadata={"write_mode": "append"})
def appended_int128() -> pl.DataFrame:
    return pl.DataFrame({"big": pl.Series([1], dtype=pl.Int128)})


def test_a_type_parquet_cannot_hold_is_refused_by_appends_too(
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    io_manager, datasets = backend
    message = _failure(_run([appended_int128], io_manager, instance, raise_on_error=False))
    assert "column 'big'" in message and "Int128" in message
    assert _files(datasets, "appended_int128") == []


# ------------------------------------------------------ append/merge on op outputs


@dg.op(out=dg.Out(metadata={"write_mode": "append"}))
def append_op() -> pa.Table:
    return pa.table({"x": [1]})


@dg.op(out=dg.Out(metadata={"write_mode": "merge", "key_columns": ["x"]}))
def merge_op() -> pa.Table:
    return pa.table({"x": [1]})


@pytest.mark.parametrize(("op", "verb"), [(append_op, "appended"), (merge_op, "merged")])
def test_append_or_merge_on_an_op_output_is_refused(
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], op: Any, verb: str
) -> None:
    io_manager, datasets = backend

    @dg.job(resource_defs={"io_manager": io_manager})
    def job() -> None:
        op()

    result = job.execute_in_process(raise_on_error=False)
    message = _failure(result)
    assert "ValueError" in message and "needs an asset" in message and f"nothing is ever {verb}" in message
    assert "Nothing was written" in message
    assert _files(datasets, "") == []
