"""``RemoteStoreIOManager`` through ``dagster.materialize`` and ``execute_in_process``.

Types, metadata, errors, op jobs, resources (local, S3 on moto, in-memory).
Every check reads the store back independently of the IO manager.
"""

from collections.abc import Iterator
from typing import Any, Optional

import dagster as dg
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from dagster_parquet_dataset import DatasetIncomplete, DatasetNotFound, ParquetDatasetStore, S3Store
from dagster_parquet_dataset.dagster_io import (
    ArrowConvertingHandler,
    HandlerRegistry,
    InMemoryStoreResource,
    LocalStoreResource,
    RemoteStoreIOManager,
    S3StoreResource,
    UnsupportedTypeError,
    builtin_handlers,
)

from ..conftest import make_bucket
from .conftest import manifest, parquet_files, read


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


def _materialize(assets: list[Any], io_manager: Any, instance: dg.DagsterInstance, **kwargs: Any) -> Any:
    return dg.materialize(assets, resources={"io_manager": io_manager}, instance=instance, **kwargs)


def _error_of(result: Any) -> str:
    failures = result.get_step_failure_events()
    assert failures, "expected a step failure"
    return str(failures[0].step_failure_data.error)


# ---------------------------------------------------------------- re-materialize


class Rows(dg.Config):
    start: int = 0
    rows: int = 3


@dg.asset(key_prefix=["warehouse"])
def numbers(config: Rows) -> pa.Table:
    return pa.table({"n": list(range(config.start, config.start + config.rows)), "s": ["x"] * config.rows})


def test_rematerialization_overwrites_rather_than_duplicates(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    first = _materialize([numbers], io_manager, instance)
    m1 = manifest(datasets, "warehouse/numbers")
    second = _materialize(
        [numbers],
        io_manager,
        instance,
        run_config={"ops": {"warehouse__numbers": {"config": {"start": 100, "rows": 4}}}},
    )
    assert first.success and second.success
    assert read(datasets, "warehouse/numbers").column("n").to_pylist() == [100, 101, 102, 103]
    m2 = manifest(datasets, "warehouse/numbers")
    assert (m1.version, m2.version) == (1, 2)
    assert (m1.run_id, m2.run_id) == (first.run_id, second.run_id)
    assert parquet_files(datasets, "warehouse/numbers") == [f"warehouse/numbers/{p}" for p in m2.parts]

    (mat,) = second.get_asset_materialization_events()
    md = mat.materialization.metadata
    assert md["dagster/row_count"].value == 4
    assert md["manifest_version"].value == "2"  # an identifier: text, not plotted
    assert md["dataset_key"].value == "warehouse/numbers"
    assert md["part_count"].value == 1
    stored = sum(f.size for f in datasets.store.list_files("warehouse/numbers") if f.path.endswith(".parquet"))
    assert md["bytes_written"].value == stored
    schema = md["dagster/column_schema"].value
    assert isinstance(schema, dg.TableSchema)
    assert [(c.name, c.type) for c in schema.columns] == [("n", "int64"), ("s", "string")]
    assert md["dagster/uri"].value == datasets.store.uri("warehouse/numbers")


def test_max_rows_per_file_splits_parts_and_reports_them(
    root: str, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    io_manager = RemoteStoreIOManager(
        store=LocalStoreResource(root=root), max_rows_per_file=4, compression="snappy", retain_versions=1
    )
    result = _materialize(
        [numbers], io_manager, instance, run_config={"ops": {"warehouse__numbers": {"config": {"rows": 10}}}}
    )
    m = manifest(datasets, "warehouse/numbers")
    assert [f.row_count for f in m.files] == [4, 4, 2]
    assert m.compression == "snappy"
    assert result.get_asset_materialization_events()[0].materialization.metadata["part_count"].value == 3
    assert read(datasets, "warehouse/numbers").column("n").to_pylist() == list(range(10))


def test_prefix_goes_in_front_and_bad_config_is_named(
    root: str, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    good = RemoteStoreIOManager(store=LocalStoreResource(root=root), prefix="/teams/sales/", retain_versions=1)
    assert _materialize([numbers], good, instance).success
    assert read(datasets, "teams/sales/warehouse/numbers").num_rows == 3
    assert not datasets.dataset_exists("warehouse/numbers")

    for bad, needle in ((dict(prefix="../escape"), "prefix"), (dict(compression="zip"), "compression")):
        io_manager = RemoteStoreIOManager(store=LocalStoreResource(root=root), **bad)
        with pytest.raises(Exception) as info:
            _materialize([numbers], io_manager, instance)
        assert needle in str(info.value) + str(info.value.__cause__)


# ------------------------------------------------------------------------ types


@dg.asset
def indexed() -> pd.DataFrame:
    return pd.DataFrame(
        {"v": [1.5, 2.5, None], "s": ["a", None, "c"]},
        index=pd.Index(["k1", "k2", "k3"], name="key"),
    )


@dg.asset
def multi_indexed() -> pd.DataFrame:
    idx = pd.MultiIndex.from_tuples([("eu", 1), ("us", 2)], names=["region", "n"])
    return pd.DataFrame({"v": [10, 20]}, index=idx)


@dg.asset
def ranged() -> pd.DataFrame:
    return pd.DataFrame({"v": [1, 2, 3]}, index=pd.RangeIndex(5, 11, 2))


def test_pandas_index_round_trips(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    loaded: dict[str, pd.DataFrame] = {}

    @dg.asset
    def capture(indexed: pd.DataFrame, multi_indexed: pd.DataFrame, ranged) -> pa.Table:  # noqa: ANN001
        loaded.update(indexed=indexed, multi_indexed=multi_indexed, ranged=ranged)
        return pa.table({"ok": [True]})

    @dg.asset(ins={"indexed": dg.AssetIn(metadata={"columns": ["v"]})})
    def projected(indexed: pd.DataFrame) -> pd.DataFrame:
        return indexed

    assert _materialize([indexed, multi_indexed, ranged, capture, projected], io_manager, instance).success
    pd.testing.assert_frame_equal(loaded["indexed"], indexed.op.compute_fn.decorated_fn())
    pd.testing.assert_frame_equal(loaded["multi_indexed"], multi_indexed.op.compute_fn.decorated_fn())
    assert isinstance(loaded["ranged"], pd.DataFrame)  # unannotated: the type that was written
    pd.testing.assert_frame_equal(loaded["ranged"], ranged.op.compute_fn.decorated_fn())
    assert list(loaded["ranged"].index) == [5, 7, 9]
    # the projection keeps the index but drops the other column
    stored = read(datasets, "projected").to_pandas()
    assert list(stored.columns) == ["v"] and stored.index.name == "key"
    assert list(stored.index) == ["k1", "k2", "k3"]
    assert manifest(datasets, "indexed").metadata["dagster.python_type"] == "pandas.DataFrame"  # type: ignore[index]


@dg.asset
def pl_frame() -> pl.DataFrame:
    return pl.DataFrame({"a": [1, 2, 3], "b": ["x", "y", None]})


@dg.asset
def pl_lazy() -> pl.LazyFrame:
    return pl.LazyFrame({"a": [4, 5]}).with_columns((pl.col("a") * 2).alias("double"))


def test_polars_frames_round_trip(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    seen: dict[str, Any] = {}

    @dg.asset
    def use_polars(pl_frame, pl_lazy, as_table: pa.Table, as_lazy: pl.LazyFrame) -> pl.DataFrame:  # noqa: ANN001
        seen.update(pl_frame=pl_frame, pl_lazy=pl_lazy, as_table=as_table, as_lazy=as_lazy)
        return pl_frame.join(pl_lazy.collect(), on="a", how="full", coalesce=True).sort("a")

    @dg.asset
    def as_table(pl_frame: pl.DataFrame) -> pa.Table:
        return pl_frame.to_arrow()

    @dg.asset
    def as_lazy(pl_frame: pl.LazyFrame) -> pl.LazyFrame:
        return pl_frame

    assert _materialize([pl_frame, pl_lazy, as_table, as_lazy, use_polars], io_manager, instance).success
    assert isinstance(seen["pl_frame"], pl.DataFrame) and isinstance(seen["pl_lazy"], pl.LazyFrame)
    assert seen["pl_frame"].equals(pl.DataFrame({"a": [1, 2, 3], "b": ["x", "y", None]}))
    assert seen["pl_lazy"].collect().to_dict(as_series=False) == {"a": [4, 5], "double": [8, 10]}
    assert isinstance(seen["as_table"], pa.Table)
    assert isinstance(seen["as_lazy"], pl.LazyFrame)
    out = read(datasets, "use_polars").to_pydict()
    assert out["a"] == [1, 2, 3, 4, 5] and out["double"] == [None, None, None, 8, 10]
    assert manifest(datasets, "pl_lazy").metadata["dagster.python_type"] == "polars.LazyFrame"  # type: ignore[index]


@dg.asset
def streamed() -> pa.RecordBatchReader:
    schema = pa.schema([("i", pa.int64())])
    batches = (pa.record_batch([pa.array(range(k * 3, k * 3 + 3))], schema=schema) for k in range(4))
    return pa.RecordBatchReader.from_batches(schema, batches)


def test_record_batch_reader_is_streamed_into_parts(
    root: str, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    seen: dict[str, Any] = {}

    @dg.asset
    def consume(streamed) -> pa.Table:  # noqa: ANN001
        seen["streamed"] = streamed
        return streamed.read_all()

    io_manager = RemoteStoreIOManager(store=LocalStoreResource(root=root), max_rows_per_file=5, retain_versions=1)
    assert _materialize([streamed, consume], io_manager, instance).success
    m = manifest(datasets, "streamed")
    assert [f.row_count for f in m.files] == [5, 5, 2]
    assert isinstance(seen["streamed"], pa.RecordBatchReader)  # unannotated: as written
    assert read(datasets, "consume").column("i").to_pylist() == list(range(12))


def test_column_selection_loads_only_those_columns(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    @dg.asset(ins={"numbers": dg.AssetIn(key=["warehouse", "numbers"], metadata={"columns": ["s"]})})
    def only_s(numbers: pa.Table) -> pa.Table:
        return numbers

    @dg.asset(ins={"numbers": dg.AssetIn(key=["warehouse", "numbers"], metadata={"columns": ["nope"]})})
    def unknown(numbers: pa.Table) -> pa.Table:
        return numbers

    assert _materialize([numbers, only_s], io_manager, instance).success
    assert read(datasets, "only_s").to_pydict() == {"s": ["x", "x", "x"]}
    result = _materialize([numbers, unknown], io_manager, instance, selection=[unknown], raise_on_error=False)
    assert "nope" in _error_of(result)


# ----------------------------------------------------------------------- errors


def test_unsupported_output_type_names_the_supported_types(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    @dg.asset
    def as_list() -> list:  # type: ignore[type-arg]
        return [1, 2, 3]

    result = _materialize([as_list], io_manager, instance, raise_on_error=False)
    message = _error_of(result)
    assert "builtins.list" in message and UnsupportedTypeError.__name__ in message
    for name in ("pyarrow.Table", "pandas.DataFrame", "polars.DataFrame", "pyspark.sql.DataFrame"):
        assert name in message
    assert not datasets.dataset_exists("as_list")


def test_unsupported_input_annotation_is_an_error(
    io_manager: RemoteStoreIOManager, instance: dg.DagsterInstance
) -> None:
    @dg.asset
    def wants_list(numbers: int) -> pa.Table:
        return pa.table({})

    assert _materialize([numbers], io_manager, instance).success
    asset = dg.asset(key="wants_list", ins={"numbers": dg.AssetIn(key=["warehouse", "numbers"])})(
        wants_list.op.compute_fn.decorated_fn
    )
    result = _materialize([numbers, asset], io_manager, instance, selection=[asset], raise_on_error=False)
    message = _error_of(result)
    assert "as builtins.int" in message and "pyarrow.Table" in message


def test_missing_and_incomplete_upstream_are_told_apart(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    @dg.asset(ins={"numbers": dg.AssetIn(key=["warehouse", "numbers"])})
    def downstream(numbers: pa.Table) -> pa.Table:
        return numbers

    absent = _materialize([numbers, downstream], io_manager, instance, selection=[downstream], raise_on_error=False)
    message = _error_of(absent)
    assert "'warehouse/numbers'" in message and "absent" in message
    assert DatasetNotFound.__name__ in message

    assert _materialize([numbers], io_manager, instance).success
    # A part the manifest lists is gone (a missing _SUCCESS alone is repaired, issue 9 item 6).
    datasets.store.delete(f"warehouse/numbers/{datasets.read_manifest('warehouse/numbers').parts[0]}")
    incomplete = _materialize([numbers, downstream], io_manager, instance, selection=[downstream], raise_on_error=False)
    message = _error_of(incomplete)
    assert "'warehouse/numbers'" in message and "incomplete" in message
    assert DatasetIncomplete.__name__ in message


def test_none_output_for_optional_writes_nothing(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    @dg.asset
    def maybe() -> Optional[pa.Table]:  # noqa: UP045 - the Optional spelling is what many users write
        return None

    @dg.asset
    def maybe_too() -> pa.Table | None:
        return None

    result = _materialize([maybe, maybe_too], io_manager, instance)
    assert result.success
    assert not datasets.store.exists("maybe/manifest.json")
    assert [f.path for f in datasets.store.list_files("maybe")] == []
    assert [f.path for f in datasets.store.list_files("maybe_too")] == []
    for event in result.get_asset_materialization_events():
        md = event.materialization.metadata
        assert md["written"].value is False
        assert "None" in md["note"].value


# -------------------------------------------------------------------------- ops


@dg.op
def make_table() -> pa.Table:
    return pa.table({"x": [1, 2, 3]})


@dg.op
def to_pandas(t: pa.Table) -> pd.DataFrame:
    return t.to_pandas().assign(y=lambda df: df.x * 2)


@dg.op(out=dg.DynamicOut(pa.Table))
def fan_out() -> Iterator[dg.DynamicOutput]:
    for k in ("first", "second"):
        yield dg.DynamicOutput(pa.table({"k": [k]}), mapping_key=k)


@dg.op
def echo(t) -> pa.Table:  # noqa: ANN001
    return t


@dg.job
def op_job() -> None:
    to_pandas(make_table())
    fan_out().map(echo)


def test_job_of_plain_ops_uses_run_step_output_keys(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore
) -> None:
    result = op_job.execute_in_process(resources={"io_manager": io_manager})
    assert result.success
    run = result.run_id
    assert read(datasets, f"{run}/make_table/result").to_pydict() == {"x": [1, 2, 3]}
    out = read(datasets, f"{run}/to_pandas/result").to_pandas()
    assert list(out["y"]) == [2, 4, 6]
    assert result.output_for_node("to_pandas")["y"].tolist() == [2, 4, 6]
    m = manifest(datasets, f"{run}/make_table/result")
    assert m.run_id == run
    assert m.metadata == {
        "dagster.python_type": "pyarrow.Table",
        "dagster.step_key": "make_table",
        "dagster.output_name": "result",
    }
    # dynamic outputs: one dataset per mapping key, under the step key
    for k in ("first", "second"):
        assert read(datasets, f"{run}/fan_out/result/{k}").to_pydict() == {"k": [k]}
        assert read(datasets, f"{run}/echo[{k}]/result").to_pydict() == {"k": [k]}


# -------------------------------------------------------------------- resources


def test_s3_store_resource_against_moto(
    moto_endpoint: str, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = make_bucket(moto_endpoint)
    monkeypatch.setenv("PDS_TEST_S3_KEY", "testing")  # credentials through dagster.EnvVar
    resource = S3StoreResource(
        bucket=bucket,
        prefix="lake",
        endpoint_url=moto_endpoint,
        region="us-east-1",
        aws_access_key_id=dg.EnvVar("PDS_TEST_S3_KEY"),
        aws_secret_access_key=dg.EnvVar("PDS_TEST_S3_KEY"),
    )
    io_manager = RemoteStoreIOManager(store=resource, prefix="prod", retain_versions=1)  # replaced files go at once

    @dg.asset(ins={"numbers": dg.AssetIn(key=["warehouse", "numbers"])})
    def doubled(numbers: pd.DataFrame) -> pd.DataFrame:
        return numbers.assign(n=numbers.n * 2)

    first = _materialize([numbers, doubled], io_manager, instance)
    assert first.success
    second = _materialize(
        [numbers, doubled],
        io_manager,
        instance,
        run_config={"ops": {"warehouse__numbers": {"config": {"start": 10, "rows": 2}}}},
    )
    assert second.success
    s3 = ParquetDatasetStore(S3Store(bucket, "lake", endpoint_url=moto_endpoint), retain_versions=1)
    assert s3.read_dataset("prod/doubled").column("n").to_pylist() == [20, 22]
    m = s3.read_manifest("prod/warehouse/numbers")
    assert (m.version, m.run_id) == (2, second.run_id)
    assert sorted(f.path for f in s3.store.list_files("prod/doubled") if f.path.endswith(".parquet")) == [
        f"prod/doubled/{p}" for p in s3.read_manifest("prod/doubled").parts
    ]
    md = {e.asset_key.to_user_string(): e.materialization.metadata for e in second.get_asset_materialization_events()}
    assert md["doubled"]["dagster/uri"].value == f"s3://{bucket}/lake/prod/doubled"


def test_in_memory_store_is_shared_across_in_process_runs(instance: dg.DagsterInstance) -> None:
    resource = InMemoryStoreResource(namespace="test-shared")
    resource.clear()
    io_manager = RemoteStoreIOManager(store=resource, retain_versions=1)

    @dg.asset(ins={"numbers": dg.AssetIn(key=["warehouse", "numbers"])})
    def total(numbers: pa.Table) -> pa.Table:
        return pa.table({"sum": [pa.compute.sum(numbers["n"]).as_py()]})

    assert _materialize([numbers], io_manager, instance).success
    # a second run with a freshly built resource of the same namespace sees the first run's output
    fresh = RemoteStoreIOManager(store=InMemoryStoreResource(namespace="test-shared"), retain_versions=1)
    assert _materialize([numbers, total], fresh, instance, selection=[total]).success
    store = InMemoryStoreResource(namespace="test-shared").get_store()
    assert ParquetDatasetStore(store, retain_versions=1).read_dataset("total").to_pydict() == {"sum": [3]}
    other = InMemoryStoreResource(namespace="test-other").get_store()
    assert not ParquetDatasetStore(other, retain_versions=1).dataset_exists("total")
    resource.clear()


# ------------------------------------------------------------------ extension


class Columns(dict):  # type: ignore[type-arg]
    """A toy user type: a dict of column name -> list of values."""


class ColumnsHandler(ArrowConvertingHandler):
    """A handler written outside the package, the way the Spark layer adds its own."""

    type_name = "tests.Columns"

    def handles(self, python_type: type) -> bool:
        return isinstance(python_type, type) and issubclass(python_type, Columns)

    def to_arrow(self, obj: Any) -> pa.Table:
        return pa.table(dict(obj))

    def from_arrow(self, table: pa.Table) -> Columns:
        return Columns(table.to_pydict())

    def combine(self, objs: Any) -> Columns:
        out = Columns()
        for obj in objs:
            for k, v in obj.items():
                out.setdefault(k, []).extend(v)
        return out


class ColumnsIOManager(RemoteStoreIOManager):
    @property
    def registry(self) -> HandlerRegistry:
        return _COLUMNS_REGISTRY


_COLUMNS_REGISTRY = HandlerRegistry([*builtin_handlers(), ColumnsHandler()])


def test_a_new_type_is_one_more_handler_class(
    root: str, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    seen: dict[str, Any] = {}

    @dg.asset
    def cols() -> Columns:
        return Columns(a=[1, 2])

    @dg.asset
    def back(cols) -> pa.Table:  # noqa: ANN001
        seen["cols"] = cols
        return pa.table(dict(cols))

    io_manager = ColumnsIOManager(store=LocalStoreResource(root=root))
    assert _materialize([cols, back], io_manager, instance).success
    assert type(seen["cols"]) is Columns and seen["cols"] == {"a": [1, 2]}
    assert manifest(datasets, "cols").metadata["dagster.python_type"] == "tests.Columns"  # type: ignore[index]


def test_optional_handlers_load_lazily_and_report_what_is_missing() -> None:
    registry = HandlerRegistry(
        builtin_handlers(),
        optional=[
            ("tests.Columns", "tests.dagster.test_io_manager", "ColumnsHandler"),
            ("nope.Frame", "not_installed_pkg_xyz.handler", "FrameHandler"),
        ],
    )
    assert registry.for_type(pa.Table) is not None
    handler = registry.for_type(Columns)
    assert isinstance(handler, ColumnsHandler)
    assert registry.for_name("nope.Frame") is None
    described = registry.describe_supported()
    assert (
        "tests.Columns" in described and "nope.Frame (needs not_installed_pkg_xyz, which is not installed)" in described
    )
