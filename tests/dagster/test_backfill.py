"""Single-run backfills (``partition_expr``) through ``dagster.materialize`` with the range tags.

Each run covers several partition keys (``dagster/asset_partition_range_start``
/ ``_end`` with ``BackfillPolicy.single_run()``); the IO manager splits the one
output by the ``partition_expr`` column and commits each key's dataset on its
own. Everything is checked by reading the store back with an independent
``ParquetDatasetStore`` on the same folder.
"""

import datetime as dt
import os
from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, Store
from dagster_parquet_dataset.dagster_io import BackfillIncomplete, LocalStoreResource, RemoteStoreIOManager
from dagster_parquet_dataset.dagster_io.resources import StoreResource
from tests._stores import WrappingStore

from .conftest import parquet_files

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-01")
RANGE_TAGS = {"dagster/asset_partition_range_start": "2024-01-02", "dagster/asset_partition_range_end": "2024-01-05"}
RANGE = ["2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


def _range_tags(start: str, end: str) -> dict[str, str]:
    return {"dagster/asset_partition_range_start": start, "dagster/asset_partition_range_end": end}


def _asset(
    make: Callable[[list[str]], Any],
    partitions_def: dg.PartitionsDefinition = DAILY,
    metadata: dict[str, Any] | None = None,
    annotation: Any = pa.Table,
) -> dg.AssetsDefinition:
    """Asset ``sales`` whose output is ``make(partition keys of the run)``."""

    @dg.asset(
        partitions_def=partitions_def,
        backfill_policy=dg.BackfillPolicy.single_run(),
        metadata={"partition_expr": "day"} if metadata is None else metadata,
    )
    def sales(context: dg.AssetExecutionContext) -> annotation:  # type: ignore[valid-type]
        return make([str(k) for k in context.partition_keys])

    return sales


def _days(keys: list[str], per_day: int = 3, skip: tuple[str, ...] = ()) -> pa.Table:
    """``per_day`` rows per key (a ``date32`` column ``day``), interleaved so splitting has to gather."""
    days = [dt.date.fromisoformat(k) for k in keys if k not in skip]
    rows = [(d, i) for i in range(per_day) for d in days]
    return pa.table(
        {"day": pa.array([d for d, _ in rows], pa.date32()), "value": [f"{d}#{i}" for d, i in rows]},
    )


def _run(
    assets: list[Any], io_manager: RemoteStoreIOManager, instance: dg.DagsterInstance, **kwargs: Any
) -> dg.ExecuteInProcessResult:
    return dg.materialize(assets, resources={"io_manager": io_manager}, instance=instance, **kwargs)


def _values(datasets: ParquetDatasetStore, key: str) -> list[str]:
    return sorted(datasets.read_dataset(key).column("value").to_pylist())


def test_daily_range_writes_each_day_to_its_own_dataset(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    sales = _asset(_days)
    result = _run([sales], io_manager, instance, tags=RANGE_TAGS)
    assert result.success
    for day in RANGE:
        table = datasets.read_dataset(f"sales/{day}")
        assert sorted(table.column("value").to_pylist()) == [f"{day}#{i}" for i in range(3)]
        assert set(table.column("day").to_pylist()) == {dt.date.fromisoformat(day)}
        m = datasets.read_manifest(f"sales/{day}")
        assert m.run_id == result.run_id
        assert m.metadata["dagster.partition_key"] == day
        assert m.metadata["dagster.asset_key"] == "sales"
    # one materialization per partition key, each with its own row count and dataset
    mats = {m.partition: m.metadata for m in result.asset_materializations_for_node("sales")}
    assert sorted(mats) == RANGE
    for day, md in mats.items():
        assert md["dagster/partition_row_count"].value == 3
        assert md["dataset_key"].value == f"sales/{day}"
    # the instance records every partition as materialized
    assert instance.get_materialized_partitions(dg.AssetKey("sales")) == set(RANGE)
    # nothing outside the range was touched
    assert not datasets.dataset_exists("sales/2024-01-01")
    assert not datasets.dataset_exists("sales/2024-01-06")


def test_per_partition_row_counts_differ(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    def make(keys: list[str]) -> pa.Table:
        days = [d for i, k in enumerate(keys) for d in [dt.date.fromisoformat(k)] * (i + 1)]
        return pa.table({"day": pa.array(days, pa.date32()), "value": [str(d) for d in days]})

    result = _run([_asset(make)], io_manager, instance, tags=RANGE_TAGS)
    counts = {
        m.partition: m.metadata["dagster/partition_row_count"].value
        for m in result.asset_materializations_for_node("sales")
    }
    assert counts == {day: i + 1 for i, day in enumerate(RANGE)}
    assert [datasets.read_manifest(f"sales/{d}").row_count for d in RANGE] == [1, 2, 3, 4]


@pytest.mark.parametrize("bad", ["outside", "null"])
def test_a_row_outside_the_run_or_null_writes_nothing(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance, bad: str
) -> None:
    # Earlier versions of two partitions of the range, which must stay as they are.
    _run([_asset(_days)], io_manager, instance, tags=_range_tags("2024-01-02", "2024-01-03"))
    before = {d: datasets.read_manifest(f"sales/{d}").version for d in RANGE[:2]}

    def make(keys: list[str]) -> pa.Table:
        table = _days(keys)
        odd = dt.date(2024, 1, 6) if bad == "outside" else None  # 01-06 is a real partition, just not in this run
        extra = pa.table({"day": pa.array([odd], pa.date32()), "value": ["odd"]})
        return pa.concat_tables([table.slice(0, 5), extra, table.slice(5)])

    result = _run([_asset(make)], io_manager, instance, tags=RANGE_TAGS, raise_on_error=False)
    assert not result.success
    error = result.failure_data_for_node("sales").error  # type: ignore[union-attr]
    text = error.cause.message if error.cause else error.message
    assert "'day'" in text and "row 5" in text
    assert ("2024, 1, 6" in text or "2024-01-06" in text) if bad == "outside" else "null" in text
    assert {d: datasets.read_manifest(f"sales/{d}").version for d in RANGE[:2]} == before
    assert not datasets.dataset_exists("sales/2024-01-04") and not datasets.dataset_exists("sales/2024-01-06")
    assert not any(datasets.store.list_files("sales/2024-01-04"))


def test_a_key_without_rows_gets_an_empty_dataset(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    result = _run([_asset(lambda keys: _days(keys, skip=("2024-01-04",)))], io_manager, instance, tags=RANGE_TAGS)
    empty = datasets.read_dataset("sales/2024-01-04")
    assert empty.num_rows == 0
    assert empty.schema.names == ["day", "value"] and empty.schema.field("day").type == pa.date32()
    counts = {
        m.partition: m.metadata["dagster/partition_row_count"].value
        for m in result.asset_materializations_for_node("sales")
    }
    assert counts["2024-01-04"] == 0 and counts["2024-01-03"] == 3
    assert "2024-01-04" in instance.get_materialized_partitions(dg.AssetKey("sales"))


def test_rerun_is_idempotent(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    sales = _asset(_days)
    _run([sales], io_manager, instance, tags=RANGE_TAGS)
    first = {d: datasets.read_dataset(f"sales/{d}") for d in RANGE}
    _run([sales], io_manager, instance, tags=RANGE_TAGS)
    for d in RANGE:
        assert datasets.read_dataset(f"sales/{d}").equals(first[d])
        assert datasets.read_manifest(f"sales/{d}").version == 2
        # the replaced version's files are gone: exactly the manifest's parts are stored
        assert parquet_files(datasets, f"sales/{d}") == sorted(
            f"sales/{d}/{p}" for p in datasets.read_manifest(f"sales/{d}").parts
        )


class _FailOn(WrappingStore):
    """A real LocalStore on which one dataset's write fails: its part upload, or its manifest commit
    (a lost response: the dataset layer cannot tell whether the commit landed)."""

    def __init__(self, inner: Store, failing_key: str, where: str) -> None:
        super().__init__(inner)
        self.failing_key = failing_key
        self.where = where

    def open_output(self, path: str) -> Any:
        if self.where == "part" and path.startswith(self.failing_key + "/"):
            raise ConnectionError(f"injected: upload of {path} failed")
        return super().open_output(path)

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        if self.where == "commit" and path == f"{self.failing_key}/manifest.json":
            raise ConnectionError(f"injected: commit of {path} failed")
        return super().write_if(path, data, expected=expected)


class FailingLocalStoreResource(StoreResource):
    root: str
    failing_key: str
    where: str

    def get_store(self) -> Store:
        return _FailOn(LocalStore(self.root), self.failing_key, self.where)


@pytest.mark.parametrize("where", ["part", "commit"])
def test_failure_part_way_leaves_each_partition_old_or_new(
    root: str, datasets: ParquetDatasetStore, instance: dg.DagsterInstance, where: str
) -> None:
    old = _asset(lambda keys: _days(keys, per_day=2))
    # Only the live version is kept: the test asserts a replaced version's files are gone.
    _run([old], RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1), instance, tags=RANGE_TAGS)
    old_values = {d: _values(datasets, f"sales/{d}") for d in RANGE}

    new = _asset(lambda keys: _days(keys, per_day=5))
    failing = RemoteStoreIOManager(
        store=FailingLocalStoreResource(root=root, failing_key="sales/2024-01-03", where=where), retain_versions=1
    )
    result = _run([new], failing, instance, tags=RANGE_TAGS, raise_on_error=False)
    assert not result.success
    error = result.failure_data_for_node("sales").error  # type: ignore[union-attr]
    chain = []
    while error is not None:
        chain.append(error.message)
        error = error.cause
    assert any("BackfillIncomplete" in m and "2024-01-03" in m for m in chain), chain

    states = {}
    for d in RANGE:
        values = _values(datasets, f"sales/{d}")
        new_values = sorted(f"{d}#{i}" for i in range(5))
        assert values in (old_values[d], new_values), (d, values)  # never a mix
        states[d] = "new" if values == new_values else "old"
        if where == "part" or d != "2024-01-03":  # a lost commit response keeps its parts (outcome unknown)
            assert parquet_files(datasets, f"sales/{d}") == sorted(
                f"sales/{d}/{p}" for p in datasets.read_manifest(f"sales/{d}").parts
            )  # no orphaned parts
    assert states["2024-01-03"] == "old"

    # Re-running without the fault completes the backfill.
    _run([new], RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1), instance, tags=RANGE_TAGS)
    assert all(_values(datasets, f"sales/{d}") == sorted(f"{d}#{i}" for i in range(5)) for d in RANGE)


def test_several_keys_without_partition_expr_is_a_clear_error(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    result = _run([_asset(_days, metadata={})], io_manager, instance, tags=RANGE_TAGS, raise_on_error=False)
    assert not result.success
    error = result.failure_data_for_node("sales").error  # type: ignore[union-attr]
    text = (error.cause or error).message
    assert "partition_expr" in text and "4 partitions" in text
    assert not any(datasets.store.list_files("sales"))


def test_one_key_with_partition_expr_works_and_checks_rows(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    sales = _asset(_days)
    result = _run([sales], io_manager, instance, partition_key="2024-01-07")
    assert _values(datasets, "sales/2024-01-07") == [f"2024-01-07#{i}" for i in range(3)]
    (mat,) = result.asset_materializations_for_node("sales")
    assert mat.metadata["dagster/partition_row_count"].value == 3

    stray = _asset(lambda keys: _days([*keys, "2024-01-08"]))
    result = _run([stray], io_manager, instance, partition_key="2024-01-07", raise_on_error=False)
    assert not result.success
    assert datasets.read_manifest("sales/2024-01-07").version == 1
    assert not datasets.dataset_exists("sales/2024-01-08")


def test_one_key_without_partition_expr_is_unchanged(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    # Without partition_expr a one-partition run writes whatever it returns, as before.
    _run([_asset(lambda keys: _days(["2024-03-01"]), metadata={})], io_manager, instance, partition_key="2024-01-07")
    assert _values(datasets, "sales/2024-01-07") == [f"2024-03-01#{i}" for i in range(3)]


def test_static_partitions_compare_the_string_form(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    regions = dg.StaticPartitionsDefinition(["1", "2", "3", "eu"])

    def make(keys: list[str]) -> pa.Table:
        return pa.table({"region": [1, 2, 2, 1], "value": ["a", "b", "c", "d"]})

    sales = _asset(make, regions, {"partition_expr": "region"})
    _run([sales], io_manager, instance, tags=_range_tags("1", "3"))
    assert _values(datasets, "sales/1") == ["a", "d"]
    assert _values(datasets, "sales/2") == ["b", "c"]
    assert datasets.read_dataset("sales/3").num_rows == 0
    assert not datasets.dataset_exists("sales/eu")


def test_dynamic_partitions(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    customers = dg.DynamicPartitionsDefinition(name="customers")
    instance.add_dynamic_partitions("customers", ["acme", "globex", "ünïcode / x"])

    def make(keys: list[str]) -> pa.Table:
        return pa.table({"customer": ["globex", "ünïcode / x", "acme", "globex"], "value": ["g1", "u", "a", "g2"]})

    sales = _asset(make, customers, {"partition_expr": "customer"})
    result = _run([sales], io_manager, instance, tags=_range_tags("acme", "ünïcode / x"))
    assert result.success
    mats = {m.partition: m.metadata["dataset_key"].value for m in result.asset_materializations_for_node("sales")}
    assert set(mats) == {"acme", "globex", "ünïcode / x"}
    assert _values(datasets, mats["globex"]) == ["g1", "g2"]
    assert _values(datasets, mats["ünïcode / x"]) == ["u"]
    assert datasets.read_manifest(mats["ünïcode / x"]).metadata["dagster.partition_key"] == "ünïcode / x"


MULTI = dg.MultiPartitionsDefinition(
    {"region": dg.StaticPartitionsDefinition(["eu", "us"]), "date": dg.DailyPartitionsDefinition("2024-01-01")}
)


def test_multi_partitions_map_each_dimension_to_its_column(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    def make(keys: list[str]) -> pa.Table:
        return pa.table(
            {
                "ts": pa.array(
                    [dt.datetime(2024, 1, 1, 5), dt.datetime(2024, 1, 2, 23, 59), dt.datetime(2024, 1, 1, 0)],
                    pa.timestamp("us", tz="UTC"),
                ),
                "region": ["eu", "eu", "us"],
                "value": ["eu1", "eu2", "us1"],
            }
        )

    sales = _asset(make, MULTI, {"partition_expr": {"date": "ts", "region": "region"}})
    keys = MULTI.get_partition_keys()
    wanted = [k for k in keys if k.keys_by_dimension["date"] in ("2024-01-01", "2024-01-02")]
    result = _run(
        [sales], io_manager, instance, tags=_range_tags("2024-01-01|eu", "2024-01-02|us"), raise_on_error=True
    )
    mats = sorted(m.partition for m in result.asset_materializations_for_node("sales"))
    assert mats == sorted(str(k) for k in wanted)
    assert _values(datasets, "sales/2024-01-01/eu") == ["eu1"]
    assert _values(datasets, "sales/2024-01-02/eu") == ["eu2"]
    assert _values(datasets, "sales/2024-01-01/us") == ["us1"]
    assert datasets.read_dataset("sales/2024-01-02/us").num_rows == 0
    m = datasets.read_manifest("sales/2024-01-02/eu")
    assert m.metadata["dagster.partition.region"] == "eu" and m.metadata["dagster.partition.date"] == "2024-01-02"


def test_multi_partitions_need_a_column_per_dimension(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    sales = _asset(lambda keys: pa.table({"day": [1]}), MULTI, {"partition_expr": "day"})
    result = _run(
        [sales], io_manager, instance, tags=_range_tags("2024-01-01|eu", "2024-01-02|us"), raise_on_error=False
    )
    error = result.failure_data_for_node("sales").error  # type: ignore[union-attr]
    text = (error.cause or error).message
    assert "partition_expr" in text and "date" in text and "region" in text
    assert not any(datasets.store.list_files("sales"))


def test_time_zones_map_instants_and_wall_clock_times(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    ny = dg.DailyPartitionsDefinition(start_date="2024-01-01", timezone="America/New_York")

    def make(keys: list[str]) -> pa.Table:
        # 03:00 UTC on Jan 3 is 22:00 on Jan 2 in New York; a naive 23:30 is New York wall time.
        return pa.table(
            {
                "at": pa.array(
                    [dt.datetime(2024, 1, 3, 3, 0), dt.datetime(2024, 1, 3, 5, 0)], pa.timestamp("ns", tz="UTC")
                ),
                "value": ["late-evening", "midnight-ny"],
            }
        )

    _run(
        [_asset(make, ny, {"partition_expr": "at"})], io_manager, instance, tags=_range_tags("2024-01-02", "2024-01-03")
    )
    assert _values(datasets, "sales/2024-01-02") == ["late-evening"]
    assert _values(datasets, "sales/2024-01-03") == ["midnight-ny"]

    def naive(keys: list[str]) -> pa.Table:
        return pa.table(
            {"at": pa.array([dt.datetime(2024, 1, 2, 23, 30)], pa.timestamp("us")), "value": ["wall"]},
        )

    _run(
        [_asset(naive, ny, {"partition_expr": "at"})],
        io_manager,
        instance,
        tags=_range_tags("2024-01-02", "2024-01-03"),
    )
    assert _values(datasets, "sales/2024-01-02") == ["wall"]
    assert datasets.read_dataset("sales/2024-01-03").num_rows == 0


def test_unmappable_column_type_is_a_clear_error(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    sales = _asset(lambda keys: pa.table({"day": [1.5], "value": ["x"]}))
    result = _run([sales], io_manager, instance, tags=RANGE_TAGS, raise_on_error=False)
    error = result.failure_data_for_node("sales").error  # type: ignore[union-attr]
    assert "'day'" in (error.cause or error).message and "double" in (error.cause or error).message
    assert not any(datasets.store.list_files("sales"))


def test_missing_partition_expr_column_is_named(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    sales = _asset(_days, metadata={"partition_expr": "date"})
    result = _run([sales], io_manager, instance, tags=RANGE_TAGS, raise_on_error=False)
    error = result.failure_data_for_node("sales").error  # type: ignore[union-attr]
    assert "'date'" in (error.cause or error).message and "['day', 'value']" in (error.cause or error).message


@pytest.mark.parametrize("kind", ["pandas", "polars", "reader"])
def test_pandas_polars_and_reader_outputs(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance, kind: str
) -> None:
    convert: dict[str, tuple[Any, Callable[[pa.Table], Any]]] = {
        "pandas": (pd.DataFrame, lambda t: t.to_pandas()),
        "polars": (pl.DataFrame, pl.from_arrow),
        "reader": (pa.RecordBatchReader, lambda t: t.to_reader(max_chunksize=2)),
    }
    annotation, to = convert[kind]
    sales = _asset(lambda keys: to(_days(keys)), annotation=annotation)
    _run([sales], io_manager, instance, tags=RANGE_TAGS)
    for d in RANGE:
        assert _values(datasets, f"sales/{d}") == [f"{d}#{i}" for i in range(3)]
        assert (
            datasets.read_manifest(f"sales/{d}")
            .metadata["dagster.python_type"]
            .startswith({"pandas": "pandas", "polars": "polars", "reader": "pyarrow.RecordBatchReader"}[kind])
        )

    @dg.asset(partitions_def=DAILY, backfill_policy=dg.BackfillPolicy.single_run())
    def downstream(context: dg.AssetExecutionContext, sales: annotation) -> None:  # type: ignore[valid-type]
        frame = sales.read_all() if kind == "reader" else sales
        assert len(frame) == 12

    assert _run([sales, downstream], io_manager, instance, tags=RANGE_TAGS).success


def test_append_merge_and_partition_by_apply_per_key(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    appended = _asset(_days, metadata={"partition_expr": "day", "write_mode": "append"})
    _run([appended], io_manager, instance, tags=RANGE_TAGS)
    _run([appended], io_manager, instance, tags=_range_tags("2024-01-04", "2024-01-06"))
    assert len(_values(datasets, "sales/2024-01-03")) == 3
    assert len(_values(datasets, "sales/2024-01-04")) == 6  # appended twice
    assert len(_values(datasets, "sales/2024-01-06")) == 3

    # Merge by "value": row #0 of each day is an update where the day exists, an insert where it does not.
    merged = _asset(
        lambda keys: _days(keys, per_day=1),
        metadata={"partition_expr": "day", "write_mode": "merge", "key_columns": ["value"]},
    )
    result = _run([merged], io_manager, instance, tags=_range_tags("2024-01-06", "2024-01-07"))
    mats = {m.partition: m.metadata for m in result.asset_materializations_for_node("sales")}
    assert {k: md["dagster/partition_row_count"].value for k, md in mats.items()} == {"2024-01-06": 3, "2024-01-07": 1}
    assert mats["2024-01-06"]["rows_updated"].value == 1 and mats["2024-01-06"]["rows_inserted"].value == 0
    assert mats["2024-01-07"]["rows_inserted"].value == 1

    split = _asset(
        lambda keys: _days(keys).append_column("shop", pa.array(["a", "b", "a"] * len(keys))),
        metadata={"partition_expr": "day", "partition_by": ["shop"]},
    )
    _run([split], io_manager, instance, tags=RANGE_TAGS)
    m = datasets.read_manifest("sales/2024-01-03")
    assert m.partition_by == ("shop",)
    assert {p.split("/")[0] for p in m.parts} == {"shop=a", "shop=b"}
    assert datasets.read_dataset("sales/2024-01-03").num_rows == 3


def test_downstream_reads_the_range(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    sales = _asset(_days)
    seen: dict[str, Any] = {}

    @dg.asset(partitions_def=DAILY, backfill_policy=dg.BackfillPolicy.single_run())
    def combined(sales: pa.Table) -> None:
        seen["combined"] = sales

    @dg.asset(partitions_def=DAILY, backfill_policy=dg.BackfillPolicy.single_run())
    def by_key(sales: dict[str, pa.Table]) -> None:
        seen["by_key"] = sales

    assert _run([sales, combined, by_key], io_manager, instance, tags=RANGE_TAGS).success
    assert seen["combined"].num_rows == 12
    # concatenated in partition order
    assert [str(d) for d in seen["combined"].column("day").to_pylist()[::3]] == RANGE
    assert sorted(seen["by_key"]) == RANGE
    assert seen["by_key"]["2024-01-03"].column("value").to_pylist() == [f"2024-01-03#{i}" for i in range(3)]


def test_bad_partition_expr_metadata(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    for bad, expected in [({"day": "day"}, "one dimension"), (5, "column name"), ("", "name a column")]:
        sales = _asset(_days, metadata={"partition_expr": bad})
        result = _run([sales], io_manager, instance, tags=RANGE_TAGS, raise_on_error=False)
        error = result.failure_data_for_node("sales").error  # type: ignore[union-attr]
        assert expected in (error.cause or error).message, (bad, (error.cause or error).message)
    assert not any(datasets.store.list_files("sales"))


def _range_context(start: str, end: str) -> dg.OutputContext:
    return dg.build_output_context(
        asset_key=["sales"],
        asset_partitions_def=DAILY,
        asset_partition_key_range=dg.PartitionKeyRange(start, end),
        definition_metadata={"partition_expr": "day"},
    )


def test_hand_built_range_context(io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore) -> None:
    context = _range_context(RANGE[0], RANGE[-1])
    io_manager.handle_output(context, _days(RANGE, skip=("2024-01-05",)))
    assert [datasets.read_manifest(f"sales/{d}").row_count for d in RANGE] == [3, 3, 3, 0]
    metadata = context.get_logged_metadata()
    assert metadata["partitions_written"].value == 4 and metadata["rows_written"].value == 9


def test_backfill_incomplete_lists_committed_and_failed_keys(root: str, datasets: ParquetDatasetStore) -> None:
    store = FailingLocalStoreResource(root=root, failing_key="sales/2024-01-04", where="part")
    io_manager = RemoteStoreIOManager(store=store, retain_versions=1)
    with pytest.raises(BackfillIncomplete) as info:
        io_manager.handle_output(_range_context(RANGE[0], RANGE[-1]), _days(RANGE))
    assert info.value.failed == ["2024-01-04"]
    assert info.value.committed == ["2024-01-02", "2024-01-03", "2024-01-05"]
    assert isinstance(info.value.__cause__, ConnectionError)
    assert [datasets.dataset_exists(f"sales/{d}") for d in RANGE] == [True, True, False, True]
    assert not any(f.path.endswith(".parquet") for f in datasets.store.list_files("sales/2024-01-04"))


def test_a_failure_when_nothing_committed_is_raised_as_is(root: str, datasets: ParquetDatasetStore) -> None:
    store = FailingLocalStoreResource(root=root, failing_key="sales/2024-01-02", where="part")
    with pytest.raises(ConnectionError, match="injected"):
        RemoteStoreIOManager(store=store, retain_versions=1).handle_output(
            _range_context(RANGE[0], RANGE[0]), _days(RANGE[:1])
        )
    assert not datasets.dataset_exists("sales/2024-01-02")


def test_owner_check_runs_before_any_write(
    root: str, io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    # Asset ["sales", "2024-01-04"] owns the dataset key of partition 2024-01-04 of asset "sales".
    @dg.asset(key=["sales", "2024-01-04"])
    def squatter() -> pa.Table:
        return pa.table({"x": [1]})

    _run([squatter], io_manager, instance)
    result = _run([_asset(_days)], io_manager, instance, tags=RANGE_TAGS, raise_on_error=False)
    assert not result.success
    assert "DatasetKeyCollision" in str(result.failure_data_for_node("sales").error)  # type: ignore[union-attr]
    assert not datasets.dataset_exists("sales/2024-01-02")  # checked for every key before writing any
    assert datasets.read_dataset("sales/2024-01-04").column("x").to_pylist() == [1]
    assert os.path.isdir(root)


@pytest.mark.parametrize(
    "codes", [[1, 1, 0, 0, 0, 3], [0, 1, 0, 3, 1, 0], [3, 3, 3, 3, 3, 3], [0, 1, 3, 1, 0, 3]], ids=str
)
def test_group_rows_matches_a_filter_per_target(codes: list[int]) -> None:
    import numpy as np

    from dagster_parquet_dataset.dagster_io._backfill_split import group_rows

    table = pa.table({"i": list(range(len(codes))), "s": [f"r{i}" for i in range(len(codes))]})
    groups = group_rows(table, np.array(codes, dtype=np.int64), 4)
    assert len(groups) == 4
    for target, group in enumerate(groups):
        expected = [i for i, c in enumerate(codes) if c == target]
        assert group.column("i").to_pylist() == expected  # original order kept within a target
        assert group.schema == table.schema
