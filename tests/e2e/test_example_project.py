"""The example project's pipeline logic, run in-process with ``dagster.materialize`` on a temp data root.

Every check reads the store back with an independent ``ParquetDatasetStore``
and compares it with values computed here from the deterministic raw data, so
a wrong aggregation, a lost partition or an ignored IO-manager option fails.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dagster_parquet_dataset import ParquetDatasetStore, S3Store
from dagster_parquet_dataset.dagster_io import LocalStoreResource, S3StoreResource

from ..conftest import make_bucket
from .conftest import PROJECT_DIR

DAY1, DAY2, DAY3 = "2024-06-01", "2024-06-02", "2024-06-03"


def _assets() -> Any:
    from example_project import assets

    return assets


def _materialize(resources: dict[str, Any], selection: list[Any], partition_key: str | None = None) -> Any:
    result = dg.materialize(_assets().ALL_ASSETS, selection=selection, partition_key=partition_key, resources=resources)
    assert result.success
    return result


def _day(key: str) -> dt.date:
    return dt.date.fromisoformat(key)


# ------------------------------------------------------------------ raw data and cleaning (no Dagster)


def test_raw_feeds_are_deterministic_per_day_and_realistically_dirty() -> None:
    from example_project import generate

    day1, day2 = generate.raw_events(_day(DAY1)), generate.raw_events(_day(DAY2))
    assert day1.equals(generate.raw_events(_day(DAY1)))
    assert not day1.equals(day2)
    assert day1.schema == generate.EVENTS_SCHEMA
    ids = day1.column("event_id").to_pylist()
    assert len(ids) > len(set(ids)), "some events are delivered twice"
    assert day1.column("customer_id").null_count > 0
    countries = set(day1.column("country").to_pylist())
    assert countries - set(generate.COUNTRIES), "some country codes are badly formatted"
    purchases = day1.filter(pc.equal(day1.column("event_type"), "purchase"))
    assert pc.min(purchases.column("amount")).as_py() < 0
    assert purchases.column("amount").null_count > 0
    # Day k's events come from customers 1 .. 25 (k+1) only.
    assert pc.max(day2.column("customer_id")).as_py() <= 2 * generate.NEW_CUSTOMERS_PER_DAY

    feed1, feed2 = generate.raw_customer_updates(_day(DAY1)), generate.raw_customer_updates(_day(DAY2))
    assert feed1.equals(generate.raw_customer_updates(_day(DAY1)))
    assert feed1.column("customer_id").to_pylist() == list(range(1, 26))
    ids2 = feed2.column("customer_id").to_pylist()
    assert len(ids2) == len(set(ids2)) == 25 + generate.PROFILE_CHANGES_PER_DAY
    assert sum(1 for c in ids2 if c <= 25) == generate.PROFILE_CHANGES_PER_DAY


def test_cleaning_drops_exactly_the_bad_rows() -> None:
    from example_project.assets.staging import clean

    from example_project import generate

    raw = generate.raw_events(_day(DAY2)).to_pandas()
    cleaned, dropped = clean(raw)
    assert len(raw) - sum(dropped.values()) == len(cleaned)
    assert all(n > 0 for n in dropped.values()), dropped
    assert cleaned["event_id"].is_unique
    assert cleaned["customer_id"].notna().all() and cleaned["customer_id"].dtype == "int64"
    assert set(cleaned["country"]) <= set(generate.COUNTRIES)
    assert (cleaned.loc[cleaned["event_type"] == "purchase", "amount"] > 0).all()
    assert set(cleaned["event_date"]) == {_day(DAY2)}
    # First delivery kept: every clean row is identical to the raw row with that id.
    first = raw.drop_duplicates("event_id").set_index("event_id")
    assert (first.loc[cleaned["event_id"], "ts"].to_numpy() == cleaned["ts"].to_numpy()).all()


# ------------------------------------------------------------------ how the assets show in the UI


#: The kind each asset computes with, besides ``parquet`` (how every output is stored).
ENGINE_KINDS = {
    "raw/click_events": "pyarrow",
    "raw/customer_updates": "pyarrow",
    "staging/clean_events": "pandas",
    "marts/daily_event_stats": "spark",
    "marts/event_summary": "pandas",
    "marts/dim_customers": "pyarrow",
    "marts/swiss_customers": "pandas",
}


def test_assets_have_kinds_and_names_that_tell_them_apart() -> None:
    """The asset graph labels a node by its key's last part: no two may share it, nor a group's name."""
    specs = [spec for asset in _assets().ALL_ASSETS for spec in asset.specs]
    names = [spec.key.path[-1] for spec in specs]
    groups = {spec.group_name for spec in specs}
    assert len(set(names)) == len(names), f"two assets show with the same name: {sorted(names)}"
    assert not groups & set(names), f"a group shares an asset's name: {sorted(groups & set(names))}"
    kinds = {spec.key.to_user_string(): set(spec.kinds) for spec in specs}
    assert kinds == {key: {"parquet", engine} for key, engine in ENGINE_KINDS.items()}


# ------------------------------------------------------------------ the pipeline through the IO manager


def _expected_stats(clean_events: pd.DataFrame) -> pd.DataFrame:
    grouped = clean_events.groupby(["event_date", "country", "event_type"])
    expected = pd.DataFrame(
        {
            "events": grouped.size(),
            "customers": grouped["customer_id"].nunique(),
            "revenue": grouped["amount"].sum(min_count=1).fillna(0.0).round(2),
        }
    ).reset_index()
    return expected.sort_values(["country", "event_type"]).reset_index(drop=True)


def test_daily_partitions_and_summary_through_the_io_manager(
    spark: Any, example_resources: dict[str, Any], datasets: ParquetDatasetStore, data_root: Path
) -> None:
    from example_project.assets.staging import clean
    from example_project.generate import raw_events

    a = _assets()
    daily = [a.raw_events, a.raw_customer_updates, a.clean_events, a.daily_event_stats]
    runs = {day: _materialize(example_resources, daily, day) for day in (DAY1, DAY2)}
    summary_run = _materialize(example_resources, [a.event_summary])

    for day, result in runs.items():
        for key in ("raw/click_events", "raw/customer_updates", "staging/clean_events", "marts/daily_event_stats"):
            manifest = datasets.read_manifest(f"{key}/{day}")
            assert manifest.run_id == result.run_id
            assert manifest.metadata is not None
            assert manifest.metadata["dagster.asset_key"] == key
            assert manifest.metadata["dagster.partition_key"] == day
            assert (data_root / key / day / "_SUCCESS").is_file()
        raw = datasets.read_dataset(f"raw/click_events/{day}")
        assert raw.equals(raw_events(_day(day)))
        expected_clean, dropped = clean(raw.to_pandas())
        staged = datasets.read_dataset(f"staging/clean_events/{day}").to_pandas()
        pd.testing.assert_frame_equal(staged, expected_clean)
        clean_md = result.asset_materializations_for_node("staging__clean_events")[0].metadata
        assert {k: clean_md[f"dropped_{k}"].value for k in dropped} == dropped

        stats = datasets.read_dataset(f"marts/daily_event_stats/{day}").to_pandas()
        assert (datasets.read_manifest(f"marts/daily_event_stats/{day}").metadata or {})[
            "dagster.python_type"
        ] == "pyspark.sql.DataFrame"
        got = stats.sort_values(["country", "event_type"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, _expected_stats(expected_clean), check_dtype=False)

    both_days = pd.concat([datasets.read_dataset(f"staging/clean_events/{d}").to_pandas() for d in (DAY1, DAY2)])
    summary = datasets.read_dataset("marts/event_summary").to_pandas().set_index("country")
    assert datasets.read_manifest("marts/event_summary").run_id == summary_run.run_id
    assert (summary["days"] == 2).all()
    assert summary["events"].to_dict() == both_days.groupby("country").size().to_dict()
    purchases = both_days[both_days["event_type"] == "purchase"]
    assert summary["purchases"].to_dict() == purchases.groupby("country").size().to_dict()
    expected_revenue = purchases.groupby("country")["amount"].sum()
    for country, revenue in summary["revenue"].items():
        assert revenue == pytest.approx(expected_revenue[country], abs=0.05)
    assert list(summary["revenue"]) == sorted(summary["revenue"], reverse=True)
    md = summary_run.asset_materializations_for_node("marts__event_summary")[0].metadata
    assert md["days_included"].value == f"{DAY1}, {DAY2}"


def test_rematerializing_a_partition_replaces_it(
    example_resources: dict[str, Any], datasets: ParquetDatasetStore, data_root: Path
) -> None:
    a = _assets()
    first = _materialize(example_resources, [a.raw_events, a.clean_events], DAY1)
    second = _materialize(example_resources, [a.raw_events, a.clean_events], DAY1)
    for key in ("raw/click_events", "staging/clean_events"):
        manifest = datasets.read_manifest(f"{key}/{DAY1}")
        assert manifest.version == 2 and manifest.run_id == second.run_id != first.run_id
        parquet = {p.name for p in (data_root / key / DAY1).iterdir() if p.suffix == ".parquet"}
        replaced = datasets.read_manifest(f"{key}/{DAY1}", version=1)
        # The example keeps the default retention: the replaced version's files stay readable (7 days), no others.
        assert parquet == set(manifest.parts) | set(replaced.parts), "only the live and the replaced version's files"
        assert datasets.read_dataset(f"{key}/{DAY1}", version=1).num_rows == replaced.row_count
    assert datasets.read_manifest(f"staging/clean_events/{DAY1}").row_count == len(
        datasets.read_dataset(f"staging/clean_events/{DAY1}")
    )


# ------------------------------------------------------------------ merge (write_mode) and filters


def _expected_dimension(*days: str) -> pd.DataFrame:
    from example_project.assets.customers import latest_profiles
    from example_project.generate import raw_customer_updates

    feed = pa.concat_tables([raw_customer_updates(_day(d)) for d in days])
    return latest_profiles(feed).to_pandas()


def _dimension(datasets: ParquetDatasetStore) -> pd.DataFrame:
    table = datasets.read_dataset("marts/dim_customers")
    return table.to_pandas().sort_values("customer_id").reset_index(drop=True)


def test_dim_customers_is_upserted_and_keeps_customers_whose_feed_days_were_dropped(
    example_resources: dict[str, Any], datasets: ParquetDatasetStore
) -> None:
    """``write_mode="merge"`` on ``customer_id``: an overwrite would lose day 1's untouched customers."""
    a = _assets()
    for day in (DAY1, DAY2):
        _materialize(example_resources, [a.raw_customer_updates], day)
    first = _materialize(example_resources, [a.dim_customers])
    pd.testing.assert_frame_equal(_dimension(datasets), _expected_dimension(DAY1, DAY2))
    assert datasets.read_manifest("marts/dim_customers").run_id == first.run_id

    # Retention drops the oldest feed day; the next day arrives; the dimension is upserted again.
    datasets.delete_dataset(f"raw/customer_updates/{DAY1}")
    _materialize(example_resources, [a.raw_customer_updates], DAY3)
    second = _materialize(example_resources, [a.dim_customers])

    dimension = _dimension(datasets)
    expected = _expected_dimension(DAY1, DAY2, DAY3)
    assert dimension["customer_id"].tolist() == list(range(1, 76)), (
        "customers only in the dropped feed day must survive the merge; got "
        f"{len(dimension)} customers, first id {dimension['customer_id'].min()}"
    )
    pd.testing.assert_frame_equal(dimension, expected)
    manifest = datasets.read_manifest("marts/dim_customers")
    assert manifest.run_id == second.run_id
    assert manifest.version == 2
    # The second upsert's source: customers 26..75 plus day 2's and day 3's changes to older ones.
    source = _expected_dimension(DAY2, DAY3)
    md = second.asset_materializations_for_node("marts__dim_customers")[0].metadata
    assert md["rows_inserted"].value == 25  # the sign-ups of day 3 (ids 51..75)
    assert md["rows_updated"].value == len(source) - 25
    assert md["dagster/row_count"].value == 75


def test_swiss_customers_loads_only_the_filtered_rows(
    example_resources: dict[str, Any], datasets: ParquetDatasetStore
) -> None:
    """Input ``filters=[("country", "==", "CH")]``: the asset body does not filter, so only the IO manager can."""
    a = _assets()
    for day in (DAY1, DAY2, DAY3):
        _materialize(example_resources, [a.raw_customer_updates], day)
    _materialize(example_resources, [a.dim_customers, a.swiss_customers])

    dimension = _dimension(datasets)
    expected = dimension[dimension["country"] == "CH"].reset_index(drop=True)
    assert 0 < len(expected) < len(dimension), "the demo data must have Swiss and other customers"
    swiss = datasets.read_dataset("marts/swiss_customers").to_pandas()
    assert set(swiss["country"]) == {"CH"}, f"non-Swiss rows reached the asset: {sorted(set(swiss['country']))}"
    pd.testing.assert_frame_equal(swiss, expected)


# ------------------------------------------------------------------ the plain-ops Spark job


def test_spark_orders_job_writes_every_op_output_as_a_dataset(
    spark: Any, example_resources: dict[str, Any], datasets: ParquetDatasetStore
) -> None:
    from example_project.generate import COUNTRIES
    from example_project.jobs import spark_orders_job

    result = spark_orders_job.execute_in_process(
        resources=example_resources,
        run_config={"ops": {"extract_orders": {"config": {"orders": 20_000, "customers": 800}}}},
    )
    assert result.success
    run = result.run_id

    orders_manifest = datasets.read_manifest(f"{run}/extract_orders/result")
    assert orders_manifest.row_count == 20_000 and orders_manifest.run_id == run
    assert (orders_manifest.metadata or {})["dagster.python_type"] == "pyspark.sql.DataFrame"
    assert len(orders_manifest.parts) >= 2, "the executors wrote the parts in parallel"
    orders = datasets.read_dataset(f"{run}/extract_orders/result").to_pandas()
    assert sorted(orders["order_id"]) == list(range(20_000))

    revenue = datasets.read_dataset(f"{run}/revenue_by_country/result").to_pandas().set_index("country")
    assert set(revenue.index) == set(COUNTRIES)
    assert revenue["orders"].to_dict() == orders.groupby("country").size().to_dict()
    assert revenue["customers"].to_dict() == orders.groupby("country")["customer_id"].nunique().to_dict()
    for country, total in orders.groupby("country")["amount"].sum().items():
        assert revenue.loc[country, "revenue"] == pytest.approx(total, abs=0.01)

    top = datasets.read_dataset(f"{run}/top_countries/result").to_pandas()
    assert (datasets.read_manifest(f"{run}/top_countries/result").metadata or {})[
        "dagster.python_type"
    ] == "pandas.DataFrame"
    assert top["country"].tolist() == revenue["revenue"].sort_values(ascending=False).index[:3].tolist()


# ------------------------------------------------------------------ store selection by environment


def test_store_is_chosen_by_environment_variables() -> None:
    from example_project.resources import DEFAULT_DATA_ROOT, store_from_env

    default = store_from_env({})
    assert isinstance(default, LocalStoreResource)
    assert Path(default.root) == DEFAULT_DATA_ROOT == PROJECT_DIR / "data"
    assert store_from_env({"PDS_DATA_ROOT": "/srv/lake"}).root == "/srv/lake"  # type: ignore[attr-defined]

    s3 = store_from_env(
        {
            "PDS_STORE": "s3",
            "PDS_S3_BUCKET": "lake",
            "PDS_S3_PREFIX": "dev",
            "PDS_S3_ENDPOINT_URL": "http://127.0.0.1:5000",
            "PDS_S3_REGION": "eu-central-2",
        }
    )
    assert isinstance(s3, S3StoreResource)
    assert (s3.bucket, s3.prefix, s3.endpoint_url, s3.region) == (
        "lake",
        "dev",
        "http://127.0.0.1:5000",
        "eu-central-2",
    )
    assert store_from_env({"PDS_STORE": "S3", "PDS_S3_BUCKET": "b"}).prefix == "example_project"  # type: ignore[attr-defined]

    with pytest.raises(ValueError, match="PDS_S3_BUCKET"):
        store_from_env({"PDS_STORE": "s3"})
    with pytest.raises(ValueError, match="PDS_STORE must be one of local, s3; got 'gcs'"):
        store_from_env({"PDS_STORE": "gcs"})


def test_pipeline_on_s3_selected_by_environment(moto_endpoint: str) -> None:
    """The README's S3 recipe: the same assets, ``PDS_STORE=s3``, a moto server on 127.0.0.1."""
    from example_project.resources import build_resources

    bucket = make_bucket(moto_endpoint)
    resources = build_resources({"PDS_STORE": "s3", "PDS_S3_BUCKET": bucket, "PDS_S3_ENDPOINT_URL": moto_endpoint})
    a = _assets()
    result = _materialize(resources, [a.raw_events, a.clean_events], DAY1)

    s3 = ParquetDatasetStore(S3Store(bucket, "example_project", endpoint_url=moto_endpoint))
    manifest = s3.read_manifest(f"staging/clean_events/{DAY1}")
    assert manifest.run_id == result.run_id
    assert s3.read_dataset(f"staging/clean_events/{DAY1}").num_rows == manifest.row_count > 2_000
    uri = result.asset_materializations_for_node("staging__clean_events")[0].metadata["dagster/uri"].value
    assert uri == f"s3://{bucket}/example_project/staging/clean_events/{DAY1}"


# ------------------------------------------------------------------ single-run backfill of the Spark aggregation


def _check_stats_for(datasets: ParquetDatasetStore, day: str, run_id: str) -> None:
    from example_project.assets.staging import clean
    from example_project.generate import raw_events

    expected_clean, _dropped = clean(raw_events(_day(day)).to_pandas())
    stats = datasets.read_dataset(f"marts/daily_event_stats/{day}").to_pandas()
    assert set(stats["event_date"]) == {_day(day)}
    got = stats.sort_values(["country", "event_type"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, _expected_stats(expected_clean), check_dtype=False)
    manifest = datasets.read_manifest(f"marts/daily_event_stats/{day}")
    assert manifest.run_id == run_id
    assert (manifest.metadata or {})["dagster.partition_key"] == day


def test_daily_event_stats_backfills_a_range_in_one_run(
    spark: Any, example_resources: dict[str, Any], datasets: ParquetDatasetStore
) -> None:
    """Upstream days one run each, then the Spark aggregation over the three days in a single run."""
    a = _assets()
    for day in (DAY1, DAY2, DAY3):
        _materialize(example_resources, [a.raw_events, a.clean_events], day)
    assert a.daily_event_stats.backfill_policy == dg.BackfillPolicy.single_run()
    result = dg.materialize(
        a.ALL_ASSETS,
        selection=[a.daily_event_stats],
        resources=example_resources,
        tags={"dagster/asset_partition_range_start": DAY1, "dagster/asset_partition_range_end": DAY3},
    )
    assert result.success
    for day in (DAY1, DAY2, DAY3):
        _check_stats_for(datasets, day, result.run_id)
    mats = {m.partition: m.metadata for m in result.asset_materializations_for_node("marts__daily_event_stats")}
    assert sorted(mats) == [DAY1, DAY2, DAY3]
    for day, md in mats.items():
        assert (
            md["dagster/partition_row_count"].value
            == datasets.read_manifest(f"marts/daily_event_stats/{day}").row_count
        )
        assert md["dataset_key"].value == f"marts/daily_event_stats/{day}"


def test_cli_partition_range_backfills_in_one_run(
    example_resources: dict[str, Any], datasets: ParquetDatasetStore, data_root: Path, tmp_path: Path
) -> None:
    """The command docs/example-project.md shows: ``dagster asset materialize --partition-range``."""
    import subprocess

    from .test_dagster_dev import DAGSTER, _example_env

    a = _assets()
    for day in (DAY1, DAY2):
        _materialize(example_resources, [a.raw_events, a.clean_events], day)
    proc = subprocess.run(
        [
            DAGSTER,
            "asset",
            "materialize",
            "-m",
            "example_project.definitions",
            "--select",
            "marts/daily_event_stats",
            "--partition-range",
            f"{DAY1}...{DAY2}",
        ],
        cwd=PROJECT_DIR,
        env=_example_env(tmp_path / "home", data_root),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_ids = {datasets.read_manifest(f"marts/daily_event_stats/{d}").run_id for d in (DAY1, DAY2)}
    assert len(run_ids) == 1 and None not in run_ids  # both days from one run
    for day in (DAY1, DAY2):
        _check_stats_for(datasets, day, next(iter(run_ids)))
