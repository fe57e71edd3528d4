"""Write modes (overwrite / append / merge), ``partition_by``, and input ``filters`` / ``version``.

Everything runs through ``dagster.materialize`` and is checked by reading the
store back with an independent ``ParquetDatasetStore`` on the same location.
"""

import os
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, NotFound, ParquetDatasetStore, S3Store
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager, S3StoreResource
from dagster_parquet_dataset.dagster_io.options import ReadOptions, WriteOptions

from ..conftest import make_bucket
from .conftest import manifest, parquet_files, read


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


def _materialize(assets: list[Any], io_manager: Any, instance: dg.DagsterInstance, **kwargs: Any) -> Any:
    return dg.materialize(assets, resources={"io_manager": io_manager}, instance=instance, **kwargs)


def _metadata(result: Any, asset: str) -> dict[str, Any]:
    for event in result.get_asset_materialization_events():
        if event.materialization.asset_key.to_user_string() == asset:
            return {k: v.value for k, v in event.materialization.metadata.items()}
    raise AssertionError(f"no materialization of {asset}")


def _error_of(result: Any) -> str:
    failures = result.get_step_failure_events()
    assert failures, "expected a step failure"
    return str(failures[0].step_failure_data.error)


def _rows(table: pa.Table, sort_by: str = "id") -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: r[sort_by])


class Batch(dg.Config):
    start: int = 0
    rows: int = 3
    label: str = "a"


def _batch_table(config: Batch) -> pa.Table:
    ids = list(range(config.start, config.start + config.rows))
    return pa.table({"id": ids, "label": [f"{config.label}{i}" for i in ids]})


def _run_config(asset: str, **config: Any) -> dict[str, Any]:
    return {"ops": {asset: {"config": config}}}


# ------------------------------------------------------------------------- append


def _as_output(kind: str, table: pa.Table) -> Any:
    if kind == "arrow":
        return table
    if kind == "reader":
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=1))
    if kind == "pandas":
        return table.to_pandas()
    return pl.from_arrow(table)


_KIND_TYPES = {"arrow": pa.Table, "reader": pa.RecordBatchReader, "pandas": pd.DataFrame, "polars": pl.DataFrame}


@pytest.mark.parametrize("kind", list(_KIND_TYPES))
def test_append_twice_keeps_all_rows_and_increments_the_version(
    kind: str, io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    @dg.asset(metadata={"write_mode": "append"})
    def log(config: Batch) -> _KIND_TYPES[kind]:  # type: ignore[valid-type]
        return _as_output(kind, _batch_table(config))

    first = _materialize([log], io_manager, instance, run_config=_run_config("log", start=0, rows=3, label="a"))
    m1 = manifest(datasets, "log")
    second = _materialize([log], io_manager, instance, run_config=_run_config("log", start=10, rows=4, label="b"))
    m2 = manifest(datasets, "log")

    assert first.success and second.success
    assert (m1.version, m2.version) == (1, 2)
    assert m2.run_id == second.run_id
    assert _rows(read(datasets, "log").select(["id", "label"])) == [{"id": i, "label": f"a{i}"} for i in range(3)] + [
        {"id": i, "label": f"b{i}"} for i in range(10, 14)
    ]
    # The first append's files are still referenced as they were; the second added its own.
    assert set(m1.parts) < set(m2.parts)
    assert parquet_files(datasets, "log") == sorted(f"log/{p}" for p in m2.parts)

    md1, md2 = _metadata(first, "log"), _metadata(second, "log")
    assert (md1["write_mode"], md1["rows_appended"], md1["rows_written"], md1["dagster/row_count"]) == (
        "append",
        3,
        3,
        3,
    )
    assert (md2["rows_appended"], md2["rows_written"], md2["dagster/row_count"], md2["manifest_version"]) == (
        4,
        4,
        7,
        "2",
    )
    assert "bytes_written" not in md2  # not known exactly for an append


def test_append_with_a_new_column_needs_allow_new_columns(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    def make(allow: bool | None) -> dg.AssetsDefinition:
        md: dict[str, Any] = {"write_mode": "append"}
        if allow is not None:
            md["allow_new_columns"] = allow

        @dg.asset(name="wide", metadata=md)
        def wide(config: Batch) -> pa.Table:
            table = _batch_table(config)
            return table.append_column("extra", pa.array([1.5] * table.num_rows)) if config.label == "x" else table

        return wide

    assert _materialize([make(None)], io_manager, instance).success
    refused = _materialize(
        [make(None)], io_manager, instance, run_config=_run_config("wide", start=5, label="x"), raise_on_error=False
    )
    assert not refused.success
    assert "extra" in _error_of(refused)
    assert manifest(datasets, "wide").version == 1

    allowed = _materialize([make(True)], io_manager, instance, run_config=_run_config("wide", start=5, label="x"))
    assert allowed.success
    rows = _rows(read(datasets, "wide"))
    assert [(r["id"], r["extra"]) for r in rows] == [(0, None), (1, None), (2, None), (5, 1.5), (6, 1.5), (7, 1.5)]


# -------------------------------------------------------------------------- merge


class Upsert(dg.Config):
    ids: list[int] = list(range(30))
    tag: str = "v1"


def _merge_asset(name: str = "customers", strategy: str | None = None, **asset_kwargs: Any) -> dg.AssetsDefinition:
    md: dict[str, Any] = {"write_mode": "merge", "key_columns": ["id"]}
    if strategy is not None:
        md["merge_strategy"] = strategy

    @dg.asset(name=name, metadata=md, **asset_kwargs)
    def customers(config: Upsert) -> pa.Table:
        return pa.table(
            {
                "id": config.ids,
                "name": [f"{config.tag}-name-{i}" for i in config.ids],
                "score": [float(i) + (100.0 if config.tag != "v1" else 0.0) for i in config.ids],
            }
        )

    return customers


def test_merge_upserts_whole_rows_rewrites_only_matched_files_and_reports_counts(
    root: str, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    io_manager = RemoteStoreIOManager(store=LocalStoreResource(root=root), max_rows_per_file=10, retain_versions=1)
    customers = _merge_asset()

    created = _materialize([customers], io_manager, instance)  # merge into nothing: everything is inserted
    m1 = manifest(datasets, "customers")
    assert len(m1.parts) == 3  # ids 0-9, 10-19, 20-29
    md1 = _metadata(created, "customers")
    assert (md1["write_mode"], md1["rows_inserted"], md1["rows_updated"], md1["dagster/row_count"]) == (
        "merge",
        30,
        0,
        30,
    )

    merged = _materialize(
        [customers], io_manager, instance, run_config=_run_config("customers", ids=[12, 15, 40, 41], tag="v2")
    )
    assert merged.success
    m2 = manifest(datasets, "customers")
    rows = {r["id"]: r for r in read(datasets, "customers").to_pylist()}
    assert sorted(rows) == [*range(30), 40, 41]
    # Matched rows are replaced whole (every column), new keys inserted, the rest untouched.
    assert rows[12] == {"id": 12, "name": "v2-name-12", "score": 112.0}
    assert rows[15] == {"id": 15, "name": "v2-name-15", "score": 115.0}
    assert rows[40] == {"id": 40, "name": "v2-name-40", "score": 140.0}
    assert rows[11] == {"id": 11, "name": "v1-name-11", "score": 11.0}
    assert rows[29] == {"id": 29, "name": "v1-name-29", "score": 29.0}

    md2 = _metadata(merged, "customers")
    assert (md2["rows_inserted"], md2["rows_updated"], md2["rows_written"]) == (2, 2, 4)
    assert (md2["files_rewritten"], md2["files_preserved"]) == (1, 2)
    assert md2["files_added"] >= 1
    assert (md2["dagster/row_count"], md2["manifest_version"], md2["merge_strategy"]) == (32, "2", "upsert")
    assert md2["key_columns"] == ["id"]
    # Exactly the file holding ids 10-19 left the manifest; the other two are still referenced.
    assert len(set(m1.parts) - set(m2.parts)) == 1
    assert len(set(m1.parts) & set(m2.parts)) == 2
    assert parquet_files(datasets, "customers") == sorted(f"customers/{p}" for p in m2.parts)


@pytest.mark.parametrize(
    ("strategy", "expected_names", "inserted", "updated"),
    [
        ("insert", {1: "v1-name-1", 2: "v1-name-2", 9: "v2-name-9"}, 1, 0),
        ("update", {1: "v1-name-1", 2: "v2-name-2"}, 0, 1),
    ],
)
def test_merge_strategy_insert_or_update(
    strategy: str,
    expected_names: dict[int, str],
    inserted: int,
    updated: int,
    io_manager: RemoteStoreIOManager,
    datasets: ParquetDatasetStore,
    instance: dg.DagsterInstance,
) -> None:
    customers = _merge_asset(strategy=strategy)
    seed = _merge_asset()  # an upsert creates the dataset (an "update" needs one to exist)
    assert _materialize([seed], io_manager, instance, run_config=_run_config("customers", ids=[1, 2])).success
    result = _materialize([customers], io_manager, instance, run_config=_run_config("customers", ids=[2, 9], tag="v2"))
    assert result.success
    assert {r["id"]: r["name"] for r in read(datasets, "customers").to_pylist()} == expected_names
    md = _metadata(result, "customers")
    assert (md["merge_strategy"], md["rows_inserted"], md["rows_updated"]) == (strategy, inserted, updated)


def test_merge_into_daily_partitions_merges_each_partition_dataset_independently(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    daily = dg.DailyPartitionsDefinition(start_date="2024-01-01")
    customers = _merge_asset(partitions_def=daily)

    for day in ("2024-01-01", "2024-01-02"):
        assert _materialize(
            [customers], io_manager, instance, partition_key=day, run_config=_run_config("customers", ids=[1, 2, 3])
        ).success
    merged = _materialize(
        [customers],
        io_manager,
        instance,
        partition_key="2024-01-02",
        run_config=_run_config("customers", ids=[3, 4], tag="v2"),
    )
    assert merged.success

    day1 = {r["id"]: r["name"] for r in read(datasets, "customers/2024-01-01").to_pylist()}
    day2 = {r["id"]: r["name"] for r in read(datasets, "customers/2024-01-02").to_pylist()}
    assert day1 == {1: "v1-name-1", 2: "v1-name-2", 3: "v1-name-3"}
    assert day2 == {1: "v1-name-1", 2: "v1-name-2", 3: "v2-name-3", 4: "v2-name-4"}
    assert (manifest(datasets, "customers/2024-01-01").version, manifest(datasets, "customers/2024-01-02").version) == (
        1,
        2,
    )
    md = _metadata(merged, "customers")
    assert (md["rows_inserted"], md["rows_updated"], md["dagster/partition_row_count"]) == (1, 1, 4)
    assert "dagster/row_count" not in md


def test_merge_on_s3(moto_endpoint: str, instance: dg.DagsterInstance) -> None:
    bucket = make_bucket(moto_endpoint)
    io_manager = RemoteStoreIOManager(
        store=S3StoreResource(bucket=bucket, prefix="lake", endpoint_url=moto_endpoint),
        max_rows_per_file=5,
        retain_versions=1,
    )
    datasets = ParquetDatasetStore(S3Store(bucket, "lake", endpoint_url=moto_endpoint), retain_versions=1)
    customers = _merge_asset()

    assert _materialize(
        [customers], io_manager, instance, run_config=_run_config("customers", ids=list(range(10)))
    ).success
    merged = _materialize([customers], io_manager, instance, run_config=_run_config("customers", ids=[7, 20], tag="v2"))
    assert merged.success
    rows = {r["id"]: r["name"] for r in read(datasets, "customers").to_pylist()}
    assert rows == {**{i: f"v1-name-{i}" for i in range(10) if i != 7}, 7: "v2-name-7", 20: "v2-name-20"}
    md = _metadata(merged, "customers")
    assert (md["rows_inserted"], md["rows_updated"], md["files_rewritten"], md["files_preserved"]) == (1, 1, 1, 1)
    m = manifest(datasets, "customers")
    stored = sorted(f.path for f in datasets.store.list_files("customers") if f.path.endswith(".parquet"))
    assert stored == sorted(f"customers/{p}" for p in m.parts)


# ------------------------------------------------------------------- partition_by


class Sales(dg.Config):
    rows: int = 12


def _sales_table(rows: int) -> pa.Table:
    regions = ["eu", "us", "apac"]
    return pa.table(
        {
            "id": list(range(rows)),
            "region": [regions[i % 3] for i in range(rows)],
            "amount": [float(i) * 1.5 for i in range(rows)],
        }
    )


@dg.asset(metadata={"partition_by": ["region"]})
def sales(config: Sales) -> pd.DataFrame:
    return _sales_table(config.rows).to_pandas()


def test_partition_by_writes_col_value_folders_and_reads_back_typed(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    result = _materialize([sales], io_manager, instance)
    assert result.success
    files = parquet_files(datasets, "sales")
    assert sorted({f.split("/")[1] for f in files}) == ["region=apac", "region=eu", "region=us"]
    assert all(len(f.split("/")) == 3 for f in files)
    m = manifest(datasets, "sales")
    assert m.partition_by == ("region",)
    table = read(datasets, "sales")
    written = pa.Table.from_pandas(_sales_table(12).to_pandas(), preserve_index=None).schema
    assert table.schema.field("region").type == written.field("region").type  # the partition column's own type
    assert _rows(table.select(["id", "region", "amount"])) == _sales_table(12).to_pylist()
    md = _metadata(result, "sales")
    assert (md["write_mode"], md["partition_by"], md["dagster/row_count"], md["part_count"]) == (
        "overwrite",
        ["region"],
        12,
        3,
    )

    # A re-materialization overwrites (partitioned again); the old files are gone.
    assert _materialize([sales], io_manager, instance, run_config=_run_config("sales", rows=3)).success
    assert read(datasets, "sales").num_rows == 3
    assert parquet_files(datasets, "sales") == sorted(f"sales/{p}" for p in manifest(datasets, "sales").parts)


def test_append_into_column_partitions(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    @dg.asset(name="sales", metadata={"write_mode": "append", "partition_by": ["region"]})
    def sales_log(config: Sales) -> pa.Table:
        return _sales_table(config.rows)

    assert _materialize([sales_log], io_manager, instance, run_config=_run_config("sales", rows=6)).success
    assert _materialize([sales_log], io_manager, instance, run_config=_run_config("sales", rows=3)).success
    table = read(datasets, "sales")
    assert sorted(table.column("id").to_pylist()) == sorted([*range(6), *range(3)])
    assert {f.split("/")[1] for f in parquet_files(datasets, "sales")} == {"region=apac", "region=eu", "region=us"}
    assert manifest(datasets, "sales").version == 2


# ------------------------------------------------------------------------ filters


def test_input_filters_load_only_matching_rows_and_prune_files(
    root: str, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    io_manager = RemoteStoreIOManager(store=LocalStoreResource(root=root), max_rows_per_file=4, retain_versions=1)
    seen: dict[str, Any] = {}
    by_region = [("region", "==", "eu")]
    by_id_or = [[("id", "<", 2)], [("region", "=", "us"), ("id", ">=", 20)]]

    @dg.asset(ins={"sales": dg.AssetIn(metadata={"filters": by_region, "columns": ["id", "amount"]})})
    def eu_sales(sales: pa.Table) -> pa.Table:
        seen["eu"] = sales
        return sales

    @dg.asset(ins={"sales": dg.AssetIn(metadata={"filters": by_id_or})})
    def some_sales(sales: pd.DataFrame) -> pd.DataFrame:
        seen["some"] = sales
        return sales

    result = _materialize([sales, eu_sales, some_sales], io_manager, instance, run_config=_run_config("sales", rows=24))
    assert result.success

    everything = _sales_table(24).to_pylist()
    eu = seen["eu"]
    assert eu.column_names == ["id", "amount"]  # the filter column need not be loaded
    assert _rows(eu) == [{"id": r["id"], "amount": r["amount"]} for r in everything if r["region"] == "eu"]
    some = seen["some"]
    expected = [r for r in everything if r["id"] < 2 or (r["region"] == "us" and r["id"] >= 20)]
    assert sorted(some["id"].tolist()) == [r["id"] for r in expected]
    assert set(some.columns) == {"id", "region", "amount"}

    # The same filters prune files on the same dataset: partition folders and id statistics.
    plan = datasets.plan_read("sales", filters=by_region)
    assert plan.selected and plan.pruned
    assert all(e.path.startswith("region=eu/") for e in plan.selected)
    assert {e.path.split("/")[0] for e in plan.pruned} == {"region=us", "region=apac"}
    plan_or = datasets.plan_read("sales", filters=by_id_or)
    assert plan_or.pruned
    assert len(plan_or.selected) < len(plan_or.selected) + len(plan_or.pruned)
    assert sum(e.row_count or 0 for e in plan_or.selected) < 24


def test_input_filters_apply_to_every_upstream_partition(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    daily = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-03")
    seen: dict[str, Any] = {}

    @dg.asset(partitions_def=daily)
    def daily_sales(context: dg.AssetExecutionContext) -> pa.Table:
        day = int(context.partition_key[-1])
        return pa.table({"id": [day * 10 + i for i in range(5)], "day": [context.partition_key] * 5})

    @dg.asset(ins={"daily_sales": dg.AssetIn(metadata={"filters": [("id", "in", [11, 14, 22]), ("day", "!=", "")]})})
    def picked(daily_sales: dict[str, pa.Table]) -> pa.Table:
        seen.update({k: v.column("id").to_pylist() for k, v in daily_sales.items()})
        return pa.concat_tables(list(daily_sales.values()))

    for day in ("2024-01-01", "2024-01-02"):
        assert _materialize([daily_sales], io_manager, instance, partition_key=day).success
    defs_result = dg.materialize(
        [daily_sales, picked],
        selection=[picked],
        resources={"io_manager": io_manager},
        instance=instance,
    )
    assert defs_result.success
    assert seen == {"2024-01-01": [11, 14], "2024-01-02": [22]}
    assert sorted(read(datasets, "picked").column("id").to_pylist()) == [11, 14, 22]


def test_bad_input_filters_fail_naming_the_column(
    io_manager: RemoteStoreIOManager, instance: dg.DagsterInstance
) -> None:
    @dg.asset(ins={"sales": dg.AssetIn(metadata={"filters": [("nope", "==", 1)]})})
    def bad(sales: pa.Table) -> pa.Table:
        return sales

    result = _materialize([sales, bad], io_manager, instance, raise_on_error=False)
    assert not result.success
    assert "'nope'" in _error_of(result) and "region" in _error_of(result)


# ------------------------------------------------------------------------ version


def test_input_version_loads_a_retained_older_version(
    root: str, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    io_manager = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=3)
    seen: dict[str, Any] = {}

    @dg.asset
    def numbers(config: Batch) -> pa.Table:
        return _batch_table(config)

    @dg.asset(ins={"numbers": dg.AssetIn(metadata={"version": 1, "filters": [("id", ">", 0)]})})
    def first_numbers(numbers: pd.DataFrame) -> pd.DataFrame:
        seen["v1"] = numbers["label"].tolist()
        return numbers

    @dg.asset(ins={"numbers": dg.AssetIn(metadata={"version": 2, "columns": ["label"]})})
    def second_numbers(numbers: pa.Table) -> pa.Table:
        seen["v2"] = numbers.to_pydict()
        return numbers

    @dg.asset
    def latest_numbers(numbers: pa.Table) -> pa.Table:
        seen["latest"] = numbers.column("label").to_pylist()
        return numbers

    for start, label in ((0, "a"), (10, "b"), (20, "c")):
        assert _materialize(
            [numbers], io_manager, instance, run_config=_run_config("numbers", start=start, label=label)
        ).success
    assert [m.version for m in datasets.history("numbers")] == [3, 2, 1]

    downstream = [first_numbers, second_numbers, latest_numbers]
    result = dg.materialize(
        [numbers, *downstream], selection=downstream, resources={"io_manager": io_manager}, instance=instance
    )
    assert result.success
    assert seen["v1"] == ["a1", "a2"]
    assert seen["v2"] == {"label": ["b10", "b11", "b12"]}
    assert seen["latest"] == ["c20", "c21", "c22"]


def test_input_version_that_is_not_retained_fails_clearly(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    @dg.asset
    def numbers(config: Batch) -> pa.Table:
        return _batch_table(config)

    @dg.asset(ins={"numbers": dg.AssetIn(metadata={"version": 1})})
    def old(numbers: pa.Table) -> pa.Table:
        return numbers

    assert _materialize([numbers], io_manager, instance).success
    assert _materialize([numbers], io_manager, instance, run_config=_run_config("numbers", start=5)).success
    with pytest.raises(NotFound):
        datasets.read_dataset("numbers", version=1)  # the default retain_versions=1 dropped it
    result = dg.materialize(
        [numbers, old], selection=[old], resources={"io_manager": io_manager}, instance=instance, raise_on_error=False
    )
    assert not result.success
    error = _error_of(result)
    assert "version 1" in error and "retain_versions" in error


# ------------------------------------------------------------------- bad metadata


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"write_mode": "upsert"}, "it must be one of 'overwrite', 'append', 'merge'"),
        ({"write_mode": "merge"}, "'merge' needs metadata 'key_columns'"),
        ({"write_mode": "merge", "key_columns": "id"}, "use ['id']"),
        ({"write_mode": "merge", "key_columns": []}, "must name at least one column"),
        ({"write_mode": "merge", "key_columns": ["id"], "merge_strategy": "replace"}, "'upsert', 'insert', 'update'"),
        ({"key_columns": ["id"]}, "'key_columns' only applies to write_mode 'merge'"),
        ({"write_mode": "overwrite", "allow_new_columns": True}, "only applies to write_mode 'append'"),
        ({"partition_by": ["nope"]}, "nope"),
        ({"write_mode": "merge", "key_columns": ["nope"]}, "nope"),
    ],
)
def test_bad_write_metadata_fails_clearly_and_writes_nothing(
    metadata: dict[str, Any],
    message: str,
    root: str,
    io_manager: RemoteStoreIOManager,
    datasets: ParquetDatasetStore,
    instance: dg.DagsterInstance,
) -> None:
    @dg.asset(name="numbers", metadata=metadata)
    def numbers(config: Batch) -> pa.Table:
        return _batch_table(config)

    result = _materialize([numbers], io_manager, instance, raise_on_error=False)
    assert not result.success
    assert message in _error_of(result)
    assert not datasets.dataset_exists("numbers")
    assert [os.path.join(d, f) for d, _dirs, names in os.walk(root) for f in names] == []  # not even a claim


def test_bad_write_metadata_leaves_the_previous_version_intact(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    @dg.asset(name="numbers")
    def good(config: Batch) -> pa.Table:
        return _batch_table(config)

    @dg.asset(name="numbers", metadata={"write_mode": "merge", "key_columns": ["id"], "merge_strategy": "nope"})
    def bad(config: Batch) -> pa.Table:
        return _batch_table(config)

    assert _materialize([good], io_manager, instance).success
    before = manifest(datasets, "numbers")
    files = parquet_files(datasets, "numbers")
    result = _materialize(
        [bad], io_manager, instance, run_config=_run_config("numbers", start=50), raise_on_error=False
    )
    assert not result.success
    assert manifest(datasets, "numbers") == before
    assert parquet_files(datasets, "numbers") == files
    assert read(datasets, "numbers").column("id").to_pylist() == [0, 1, 2]


# ----------------------------------------------------------------- option parsing


def test_write_options_defaults_and_metadata_values() -> None:
    assert WriteOptions.from_metadata(None, "asset x") == WriteOptions()
    assert WriteOptions.from_metadata({"other": 1}, "asset x").is_default
    parsed = WriteOptions.from_metadata(
        {
            "write_mode": dg.MetadataValue.text("merge"),
            "key_columns": dg.MetadataValue.json(["a", "b"]),
            "partition_by": ("p",),
        },
        "asset x",
    )
    assert parsed == WriteOptions("merge", ("p",), ("a", "b"), "upsert", False)
    assert not parsed.is_default
    with pytest.raises(ValueError, match="asset x: metadata 'key_columns' repeats 'a'"):
        WriteOptions.from_metadata({"write_mode": "merge", "key_columns": ["a", "a"]}, "asset x")
    with pytest.raises(TypeError, match="allow_new_columns"):
        WriteOptions.from_metadata({"write_mode": "append", "allow_new_columns": "yes"}, "asset x")


def test_read_options_checks_types_before_reading() -> None:
    opts = ReadOptions.from_metadata({"filters": [("a", "==", 1)], "version": 2}, "input 'x'")
    assert opts.read_kwargs() == {"filters": [("a", "==", 1)], "version": 2}
    assert ReadOptions.from_metadata({"filters": []}, "input 'x'").read_kwargs() == {}
    with pytest.raises(TypeError, match="input 'x': metadata 'filters' must be a list"):
        ReadOptions.from_metadata({"filters": "a == 1"}, "input 'x'")
    with pytest.raises(TypeError, match="'version' must be an int"):
        ReadOptions.from_metadata({"version": True}, "input 'x'")
    with pytest.raises(ValueError, match="'version' must be >= 1"):
        ReadOptions.from_metadata({"version": 0}, "input 'x'")


def test_version_over_several_partitions_is_refused(
    io_manager: RemoteStoreIOManager, instance: dg.DagsterInstance
) -> None:
    daily = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-03")

    @dg.asset(partitions_def=daily)
    def up(context: dg.AssetExecutionContext) -> pa.Table:
        return pa.table({"day": [context.partition_key]})

    @dg.asset(ins={"up": dg.AssetIn(metadata={"version": 1})})
    def down(up: pa.Table) -> pa.Table:
        return up

    for day in ("2024-01-01", "2024-01-02"):
        assert _materialize([up], io_manager, instance, partition_key=day).success
    result = dg.materialize(
        [up, down], selection=[down], resources={"io_manager": io_manager}, instance=instance, raise_on_error=False
    )
    assert not result.success
    assert "reads 2 partitions" in _error_of(result)


# -------------------------------------------------------------------------- Spark


def test_spark_input_with_filters_and_version_and_spark_output_appended(
    spark: Any, tmp_path: Any, instance: dg.DagsterInstance
) -> None:
    from pyspark.sql import DataFrame

    root = os.path.join(tmp_path, "spark-store")
    io_manager = RemoteStoreIOManager(store=LocalStoreResource(root=root), max_rows_per_file=4, retain_versions=2)
    datasets = ParquetDatasetStore(LocalStore(root), retain_versions=1)
    seen: dict[str, Any] = {}
    filters = [[("region", "in", ["eu", "apac"]), ("id", ">=", 3)], [("id", "==", 1)]]

    @dg.asset
    def events(config: Sales) -> pa.Table:
        return _sales_table(config.rows)

    @dg.asset(ins={"events": dg.AssetIn(metadata={"filters": filters, "columns": ["id"]})})
    def picked(events: DataFrame) -> DataFrame:
        seen["columns"] = events.columns
        seen["ids"] = sorted(r.id for r in events.collect())
        return events

    @dg.asset(metadata={"write_mode": "append"}, deps=[picked])
    def spark_log() -> DataFrame:
        return spark.createDataFrame([(1, "x"), (2, "y")], "id long, tag string")

    @dg.asset(ins={"events": dg.AssetIn(metadata={"version": 1, "filters": [("region", "==", "us")]})})
    def pinned(events: DataFrame) -> pa.Table:
        seen["pinned"] = sorted(r.id for r in events.collect())
        return pa.table({"n": [events.count()]})

    result = _materialize([events, picked, spark_log], io_manager, instance)
    assert result.success
    everything = _sales_table(12).to_pylist()
    expected = [r["id"] for r in everything if (r["region"] in ("eu", "apac") and r["id"] >= 3) or r["id"] == 1]
    assert seen == {"columns": ["id"], "ids": expected}
    assert sorted(read(datasets, "picked").column("id").to_pylist()) == expected

    # A Spark output appended through the Arrow path: both runs' rows are kept.
    assert _materialize([spark_log], io_manager, instance).success
    log = read(datasets, "spark_log")
    assert sorted(zip(log.column("id").to_pylist(), log.column("tag").to_pylist(), strict=True)) == [
        (1, "x"),
        (1, "x"),
        (2, "y"),
        (2, "y"),
    ]
    assert manifest(datasets, "spark_log").version == 2

    # Version 1 of events (12 rows) after version 2 (3 rows) replaced it, filtered in Spark.
    assert _materialize([events], io_manager, instance, run_config=_run_config("events", rows=3)).success
    assert read(datasets, "events").num_rows == 3
    assert _materialize([events, pinned], io_manager, instance, selection=[pinned]).success
    assert seen["pinned"] == [r["id"] for r in everything if r["region"] == "us"]
