"""Partitioned assets through ``dagster.materialize``: keys, overwrites and partition mappings.

Everything is checked by reading the store back with an independent
``ParquetDatasetStore`` on the same folder.
"""

from dataclasses import dataclass
from typing import Any, Optional

import dagster as dg
import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import RemoteStoreIOManager, escape_segment

from .conftest import manifest, parquet_files, read


class Batch(dg.Config):
    batch: int = 1
    rows: int = 2


def _events_asset(partitions_def: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    @dg.asset(key_prefix=["sales"], partitions_def=partitions_def)
    def events(context: dg.AssetExecutionContext, config: Batch) -> pa.Table:
        n = config.rows
        return pa.table({"partition": [str(context.partition_key)] * n, "batch": [config.batch] * n})

    return events


@dataclass
class Case:
    partitions_def: dg.PartitionsDefinition
    a: Any
    b: Any
    folder_a: str
    folder_b: str
    dynamic: list[str] | None = None


CASES = {
    "daily": Case(
        dg.DailyPartitionsDefinition(start_date="2024-01-01"), "2024-01-01", "2024-01-02", "2024-01-01", "2024-01-02"
    ),
    "static": Case(dg.StaticPartitionsDefinition(["red", "blue"]), "red", "blue", "red", "blue"),
    "multi": Case(
        dg.MultiPartitionsDefinition(
            {
                "region": dg.StaticPartitionsDefinition(["eu", "us"]),
                "date": dg.DailyPartitionsDefinition(start_date="2024-01-01"),
            }
        ),
        dg.MultiPartitionKey({"region": "eu", "date": "2024-01-01"}),
        dg.MultiPartitionKey({"region": "us", "date": "2024-01-01"}),
        "2024-01-01/eu",  # sorted dimension names: date, then region
        "2024-01-01/us",
    ),
    "dynamic": Case(
        dg.DynamicPartitionsDefinition(name="customers"), "acme", "globex", "acme", "globex", dynamic=["acme", "globex"]
    ),
}


def _run(assets: list[Any], io_manager: RemoteStoreIOManager, instance: dg.DagsterInstance, **kwargs: Any) -> Any:
    result = dg.materialize(assets, resources={"io_manager": io_manager}, instance=instance, **kwargs)
    assert result.success
    return result


def _cfg(batch: int, rows: int) -> dict[str, Any]:
    return {"ops": {"sales__events": {"config": {"batch": batch, "rows": rows}}}}


@pytest.mark.parametrize("kind", list(CASES))
def test_materialize_a_then_b_then_a_again(
    kind: str, io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore
) -> None:
    case = CASES[kind]
    events = _events_asset(case.partitions_def)
    with dg.DagsterInstance.ephemeral() as instance:
        if case.dynamic:
            instance.add_dynamic_partitions("customers", case.dynamic)
        run_a1 = _run([events], io_manager, instance, partition_key=case.a, run_config=_cfg(1, 2))
        run_b = _run([events], io_manager, instance, partition_key=case.b, run_config=_cfg(1, 3))
        key_a, key_b = f"sales/events/{case.folder_a}", f"sales/events/{case.folder_b}"
        b_before = manifest(datasets, key_b)
        assert manifest(datasets, key_a).run_id == run_a1.run_id
        run_a2 = _run([events], io_manager, instance, partition_key=case.a, run_config=_cfg(2, 5))

    table_a = read(datasets, key_a)
    assert table_a.column("batch").to_pylist() == [2] * 5  # new data only, not appended
    assert table_a.column("partition").to_pylist() == [str(case.a)] * 5
    m_a = manifest(datasets, key_a)
    assert (m_a.version, m_a.run_id, m_a.row_count) == (2, run_a2.run_id, 5)
    assert parquet_files(datasets, key_a) == [f"{key_a}/{p}" for p in m_a.parts]  # old part deleted

    table_b = read(datasets, key_b)
    assert table_b.column("batch").to_pylist() == [1] * 3
    assert manifest(datasets, key_b) == b_before  # untouched: same version, run, files
    assert b_before.run_id == run_b.run_id

    assert m_a.metadata is not None
    assert m_a.metadata["dagster.asset_key"] == "sales/events"
    assert m_a.metadata["dagster.partition_key"] == str(case.a)
    assert m_a.metadata["dagster.python_type"] == "pyarrow.Table"
    if kind == "multi":
        assert m_a.metadata["dagster.partition.region"] == "eu"
        assert m_a.metadata["dagster.partition.date"] == "2024-01-01"


def test_partition_output_metadata_uses_partition_row_count(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, root: str
) -> None:
    events = _events_asset(dg.StaticPartitionsDefinition(["red"]))
    with dg.DagsterInstance.ephemeral() as instance:
        result = _run([events], io_manager, instance, partition_key="red", run_config=_cfg(1, 4))
    (mat,) = result.get_asset_materialization_events()
    md = mat.materialization.metadata
    assert md["dagster/partition_row_count"].value == 4
    assert "dagster/row_count" not in md
    assert md["dataset_key"].value == "sales/events/red"
    assert md["dagster/uri"].value == datasets.store.uri("sales/events/red")
    assert md["dagster/uri"].value.startswith("file://") and md["dagster/uri"].value.endswith("/sales/events/red")


# --------------------------------------------------------------- partition mappings

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-04")  # 01, 02, 03


@dg.asset(partitions_def=DAILY)
def daily_up(context: dg.AssetExecutionContext) -> pa.Table:
    day = context.partition_key
    return pa.table({"day": [day, day], "n": [int(day[-2:]), int(day[-2:]) * 10]})


@dg.asset(
    partitions_def=DAILY,
    ins={"daily_up": dg.AssetIn(partition_mapping=dg.TimeWindowPartitionMapping(start_offset=-1, end_offset=-1))},
)
def previous_day(daily_up: pa.Table) -> pa.Table:
    return daily_up


@dg.asset
def summary(daily_up: pa.Table) -> pa.Table:
    return daily_up


@dg.asset
def summary_by_day(daily_up: dict[str, pa.Table]) -> pa.Table:
    return pa.table({"day": sorted(daily_up), "rows": [daily_up[k].num_rows for k in sorted(daily_up)]})


@dg.asset(ins={"daily_up": dg.AssetIn(metadata={"allow_missing_partitions": True})})
def summary_lenient(daily_up: pa.Table) -> pa.Table:
    return daily_up


@dg.asset
def lookup() -> pa.Table:
    return pa.table({"code": ["a", "b", "c"]})


@dg.asset(partitions_def=DAILY)
def enriched(context: dg.AssetExecutionContext, lookup: pa.Table) -> pa.Table:
    return lookup.append_column("day", pa.array([context.partition_key] * lookup.num_rows))


ALL = [daily_up, previous_day, summary, summary_by_day, summary_lenient, lookup, enriched]


def _materialize_days(io_manager: RemoteStoreIOManager, instance: dg.DagsterInstance, days: list[str]) -> None:
    for day in days:
        _run(ALL, io_manager, instance, selection=[daily_up], partition_key=day)


def test_time_window_mapping_reads_the_previous_day(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore
) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        _materialize_days(io_manager, instance, ["2024-01-01", "2024-01-02"])
        _run(ALL, io_manager, instance, selection=[previous_day], partition_key="2024-01-02")
    out = read(datasets, "previous_day/2024-01-02")
    assert out.column("day").to_pylist() == ["2024-01-01", "2024-01-01"]
    assert out.column("n").to_pylist() == [1, 10]


def test_unpartitioned_downstream_reads_all_partitions_in_order(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore
) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        _materialize_days(io_manager, instance, ["2024-01-03", "2024-01-01", "2024-01-02"])
        _run(ALL, io_manager, instance, selection=[summary, summary_by_day])
    out = read(datasets, "summary")
    assert out.column("day").to_pylist() == [d for d in ["2024-01-01", "2024-01-02", "2024-01-03"] for _ in (0, 1)]
    assert out.column("n").to_pylist() == [1, 10, 2, 20, 3, 30]
    by_day = read(datasets, "summary_by_day")
    assert by_day.to_pydict() == {"day": ["2024-01-01", "2024-01-02", "2024-01-03"], "rows": [2, 2, 2]}


def test_missing_partition_fails_unless_allowed(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore
) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        _materialize_days(io_manager, instance, ["2024-01-01", "2024-01-03"])
        result = dg.materialize(
            ALL, resources={"io_manager": io_manager}, instance=instance, selection=[summary], raise_on_error=False
        )
        assert not result.success
        (failure,) = result.get_step_failure_events()
        message = str(failure.step_failure_data.error)
        assert "daily_up/2024-01-02" in message and "absent" in message
        _run(ALL, io_manager, instance, selection=[summary_lenient])
    assert not datasets.dataset_exists("summary")
    out = read(datasets, "summary_lenient")
    assert out.column("day").to_pylist() == ["2024-01-01", "2024-01-01", "2024-01-03", "2024-01-03"]


def test_partitioned_downstream_of_unpartitioned_upstream(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore
) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        _run(ALL, io_manager, instance, selection=[lookup])
        _run(ALL, io_manager, instance, selection=[enriched], partition_key="2024-01-02")
        _run(ALL, io_manager, instance, selection=[enriched], partition_key="2024-01-03")
    for day in ("2024-01-02", "2024-01-03"):
        out = read(datasets, f"enriched/{day}")
        assert out.to_pydict() == {"code": ["a", "b", "c"], "day": [day] * 3}
    assert not datasets.dataset_exists("enriched/2024-01-01")


# ------------------------------------------------------------------ key escaping


def test_partition_keys_named_like_the_formats_own_files_are_stored(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore
) -> None:
    """Partition keys are user data (issue 26, #11): one named ``_versions``, ``_segments``,
    ``manifest.json``, ... gets a folder of its own that never collides with a dataset's own files;
    an ordinary key keeps the folder it always had."""
    events = _events_asset(dg.DynamicPartitionsDefinition(name="customers"))
    reserved = ["_versions", "_segments", "manifest.json", "_SUCCESS", "_claim", "_spark_staging-1", ".x.lock"]
    keys = ["acme", *reserved]
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("customers", keys)
        for i, value in enumerate(keys):
            _run([events], io_manager, instance, partition_key=value, run_config=_cfg(i, 1))
            _run([events], io_manager, instance, partition_key=value, run_config=_cfg(i, 1))  # a second version
    folders = {f.path.split("/")[2] for f in datasets.store.list_files("sales/events")}
    assert folders == {"acme", *(f"%{ord(k[0]):02X}{k[1:]}" for k in reserved)}
    for i, value in enumerate(keys):
        assert escape_segment(value) in folders
        table = read(datasets, f"sales/events/{escape_segment(value)}")
        assert table.to_pydict() == {"partition": [value], "batch": [i]}


def test_hostile_partition_values_stay_inside_their_folder(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore, root: str
) -> None:
    events = _events_asset(dg.DynamicPartitionsDefinition(name="customers"))
    hostile = [
        "../x",
        "a/b",
        "a%2Fb",
        "..",
        ".",
        "x\\y",
    ]  # "" is covered in test_keys: materialize() treats it as "no partition"
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("customers", hostile)
        for i, value in enumerate(hostile):
            _run([events], io_manager, instance, partition_key=value, run_config=_cfg(i, 1))
    # Nothing escaped the asset's folder, and each value has exactly one folder of its own.
    all_files = [f.path for f in datasets.store.list_files("sales")]
    folders = {p.split("/")[2] for p in all_files}
    assert all(p.startswith("sales/events/") and len(p.split("/")) == 4 for p in all_files)
    assert folders == {"..%2Fx", "a%2Fb", "a%252Fb", "%2E%2E", "%2E", "x%5Cy"}
    assert [f.path for f in datasets.store.list_files("x")] == []  # "../x" did not land next to sales/
    for i, value in enumerate(hostile):
        table = read(datasets, f"sales/events/{escape_segment(value)}")
        assert table.to_pydict() == {"partition": [value], "batch": [i]}


def test_missing_upstream_partition_names_key_and_state(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore
) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            ALL,
            resources={"io_manager": io_manager},
            instance=instance,
            selection=[previous_day],
            partition_key="2024-01-03",
            raise_on_error=False,
        )
    assert not result.success
    message = str(result.get_step_failure_events()[0].step_failure_data.error)
    assert "daily_up/2024-01-02" in message
    assert "absent" in message


@dg.asset(
    partitions_def=DAILY,
    ins={
        "daily_up": dg.AssetIn(
            partition_mapping=dg.TimeWindowPartitionMapping(
                start_offset=-1, end_offset=-1, allow_nonexistent_upstream_partitions=True
            )
        )
    },
)
def previous_or_none(daily_up: Optional[pa.Table]) -> pa.Table:  # noqa: UP045 - the spelling users write
    return daily_up if daily_up is not None else pa.table({"day": ["no previous day"], "n": [0]})


def test_mapping_to_no_partition_loads_none(io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore) -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        _materialize_days(io_manager, instance, ["2024-01-01"])
        _run(
            [daily_up, previous_or_none], io_manager, instance, selection=[previous_or_none], partition_key="2024-01-01"
        )
        _run(
            [daily_up, previous_or_none], io_manager, instance, selection=[previous_or_none], partition_key="2024-01-02"
        )
    assert read(datasets, "previous_or_none/2024-01-01").to_pydict() == {"day": ["no previous day"], "n": [0]}
    assert read(datasets, "previous_or_none/2024-01-02").to_pydict() == {"day": ["2024-01-01"] * 2, "n": [1, 10]}
