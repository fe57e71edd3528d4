"""``build_dataset_checks``: integrity, schema and row-count checks run by Dagster.

Every run goes through ``dagster.materialize`` with a real (temporary, sqlite)
Dagster instance; the data is tampered with directly on disk or with an
independent ``ParquetDatasetStore`` writing outside Dagster, as a person or
another job would.
"""

import os
from collections.abc import Iterator

import dagster as dg
import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, build_dataset_checks
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager


class Rows(dg.Config):
    rows: int = 10
    extra_column: bool = False


@dg.asset
def orders(config: Rows) -> pa.Table:
    columns = {"id": pa.array(range(config.rows), pa.int64()), "amount": pa.array([1.5] * config.rows)}
    if config.extra_column:
        columns["note"] = pa.array(["x"] * config.rows)
    return pa.table(columns)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


def _io(root: str, **kwargs: object) -> RemoteStoreIOManager:
    return RemoteStoreIOManager(store=LocalStoreResource(root=root), **kwargs)


def _run(
    assets: list,
    checks: list,
    instance: dg.DagsterInstance,
    io: RemoteStoreIOManager,
    *,
    checks_only: bool = False,
    config: dict | None = None,
    partition_key: str | None = None,
) -> dict[str, dg.AssetCheckEvaluation]:
    selection = dg.AssetSelection.all_asset_checks() if checks_only else None
    result = dg.materialize(
        [*assets, *checks],
        instance=instance,
        resources={"io_manager": io},
        selection=selection,
        run_config={"ops": {"orders": {"config": config}}} if config else None,
        partition_key=partition_key,
    )
    assert result.success
    if checks_only:
        assert result.get_asset_materialization_events() == []
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def _datasets(root: str) -> ParquetDatasetStore:
    return ParquetDatasetStore(LocalStore(root), retain_versions=1)


def test_checks_pass_after_a_normal_materialization(root: str, instance: dg.DagsterInstance) -> None:
    checks = build_dataset_checks([orders])
    assert [sorted(k.name for k in c.check_keys) for c in checks] == [
        ["dataset_integrity", "row_count_change", "schema_unchanged"]
    ]
    first = _run([orders], checks, instance, _io(root))
    assert set(first) == {"dataset_integrity", "schema_unchanged", "row_count_change"}
    assert all(e.passed for e in first.values()), {n: e.description for n, e in first.items()}
    assert first["dataset_integrity"].severity == dg.AssetCheckSeverity.ERROR
    assert first["dataset_integrity"].metadata["files_checked"].value == 1
    assert "first" in first["row_count_change"].description
    second = _run([orders], checks, instance, _io(root), config={"rows": 12})
    assert all(e.passed for e in second.values()), {n: e.description for n, e in second.items()}
    assert second["row_count_change"].metadata["previous_rows"].value == 10
    assert second["row_count_change"].metadata["rows"].value == 12
    # the evaluation is tied to the materialization of the same run
    assert second["dataset_integrity"].target_materialization_data is not None


@pytest.mark.parametrize("retain", [1, 3], ids=["previous-from-instance", "previous-retained"])
def test_row_count_drop_and_growth_fail(root: str, instance: dg.DagsterInstance, retain: int) -> None:
    checks = build_dataset_checks([orders], row_count_max_ratio=3.0)
    io = _io(root, retain_versions=retain)
    _run([orders], checks, instance, io, config={"rows": 100})
    shrunk = _run([orders], checks, instance, io, config={"rows": 49})
    assert not shrunk["row_count_change"].passed
    assert shrunk["row_count_change"].severity == dg.AssetCheckSeverity.WARN
    assert "100 -> 49" in shrunk["row_count_change"].description
    assert shrunk["dataset_integrity"].passed and shrunk["schema_unchanged"].passed
    kept = _run([orders], checks, instance, io, config={"rows": 147})  # 3x of 49 is 147: still in range
    assert kept["row_count_change"].passed
    grown = _run([orders], checks, instance, io, config={"rows": 442})
    assert not grown["row_count_change"].passed
    assert "grew" in grown["row_count_change"].description
    source = grown["row_count_change"].metadata["compared_with"].value
    assert source.startswith("retained version" if retain > 1 else "version 3 (materialized by run")


def test_checks_only_run_finds_a_deleted_part(root: str, instance: dg.DagsterInstance) -> None:
    checks = build_dataset_checks([orders])
    io = _io(root, max_rows_per_file=4)
    _run([orders], checks, instance, io)
    manifest = _datasets(root).read_manifest("orders")
    assert len(manifest.parts) == 3
    os.remove(os.path.join(root, "orders", manifest.parts[1]))
    found = _run([orders], checks, instance, io, checks_only=True)
    integrity = found["dataset_integrity"]
    assert not integrity.passed
    assert integrity.severity == dg.AssetCheckSeverity.ERROR
    assert f"{manifest.parts[1]}: missing: " in integrity.description
    assert integrity.metadata["problems"].value == 1
    assert integrity.metadata["problem_kinds"].value == ["missing"]
    assert found["schema_unchanged"].passed  # the manifest did not change


def test_checks_only_run_finds_a_truncated_and_a_replaced_part(root: str, instance: dg.DagsterInstance) -> None:
    checks = build_dataset_checks([orders])
    io = _io(root, max_rows_per_file=4)
    _run([orders], checks, instance, io)
    parts = _datasets(root).read_manifest("orders").parts
    first = os.path.join(root, "orders", parts[0])
    with open(first, "r+b") as f:
        f.truncate(os.path.getsize(first) - 10)
    # the same size but other content: a valid Parquet file of another row count, padded to size
    last = os.path.join(root, "orders", parts[2])
    size = os.path.getsize(last)
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()), "amount": [1.0]}), sink)
    data = sink.getvalue().to_pybytes()
    assert len(data) < size
    # keep a valid footer at the end: pad in the front, where no reader looks without the footer's offsets
    with open(last, "wb") as f:
        f.write(b"PAR1" + b"\0" * (size - len(data)) + data[4:])
    found = _run([orders], checks, instance, io, checks_only=True)
    integrity = found["dataset_integrity"]
    assert not integrity.passed
    lines = integrity.description.splitlines()
    # the truncated part: its size differs (and its footer is gone); the replaced one holds other rows
    assert any(line.startswith(f"{parts[0]}: size: ") for line in lines), integrity.description
    assert any(line.startswith(f"{parts[2]}: rows: ") for line in lines), integrity.description
    assert not any(line.startswith(f"{parts[1]}: ") for line in lines)  # the intact part is not blamed
    assert {"size", "rows"} <= set(integrity.metadata["problem_kinds"].value)


def test_checks_only_run_after_an_outside_write_changed_schema_and_rows(
    root: str, instance: dg.DagsterInstance
) -> None:
    checks = build_dataset_checks([orders])
    io = _io(root)
    _run([orders], checks, instance, io, config={"rows": 10})
    # another job rewrites the dataset outside Dagster: a column renamed and retyped, most rows gone
    table = pa.table({"id": pa.array(["1", "2"]), "amount_eur": pa.array([1.0, 2.0])})
    _datasets(root).write_dataset(table, "orders", overwrite=True)
    found = _run([orders], checks, instance, io, checks_only=True)
    schema = found["schema_unchanged"]
    assert not schema.passed
    assert schema.severity == dg.AssetCheckSeverity.WARN
    differences = schema.metadata["differences"].value
    assert "column 'amount' is missing" in differences
    assert "column 'amount_eur' is new" in differences
    assert "column 'id' is string, was int64" in differences
    assert not found["row_count_change"].passed
    assert found["dataset_integrity"].passed


def test_schema_compared_with_the_declared_column_schema(root: str, instance: dg.DagsterInstance) -> None:
    declared = dg.TableSchema(columns=[dg.TableColumn("id", "int64"), dg.TableColumn("amount", "double")])

    @dg.asset(name="orders", metadata={"dagster/column_schema": declared})
    def declared_orders(config: Rows) -> pa.Table:
        return orders(dg.build_asset_context(), config)  # type: ignore[call-arg]

    checks = build_dataset_checks([declared_orders], schema_severity=dg.AssetCheckSeverity.ERROR)
    io = _io(root)
    ok = _run([declared_orders], checks, instance, io)
    assert ok["schema_unchanged"].passed, ok["schema_unchanged"].description
    assert "declared" in ok["schema_unchanged"].description
    bad = _run([declared_orders], checks, instance, io, config={"extra_column": True})
    assert not bad["schema_unchanged"].passed
    assert bad["schema_unchanged"].severity == dg.AssetCheckSeverity.ERROR
    assert bad["schema_unchanged"].metadata["differences"].value == ["column 'note' is new"]


def test_a_corrupt_manifest_or_missing_dataset_fails_the_checks(root: str, instance: dg.DagsterInstance) -> None:
    checks = build_dataset_checks([orders])
    io = _io(root)
    missing = _run([orders], checks, instance, io, checks_only=True)
    assert not missing["dataset_integrity"].passed
    assert "does not exist" in missing["dataset_integrity"].description
    _run([orders], checks, instance, io)
    with open(os.path.join(root, "orders", "manifest.json"), "w") as f:
        f.write("{not json")
    corrupt = _run([orders], checks, instance, io, checks_only=True)
    assert not corrupt["dataset_integrity"].passed
    assert "manifest cannot be read" in corrupt["dataset_integrity"].description


DAYS = dg.StaticPartitionsDefinition(["2024-01-01", "2024-01-02"])


@dg.asset(partitions_def=DAYS)
def daily(context: dg.AssetExecutionContext) -> pa.Table:
    n = 10 if context.partition_key.endswith("1") else 20
    return pa.table({"day": [context.partition_key] * n, "n": list(range(n))})


def test_partitioned_checks_look_at_the_partition_just_written(root: str, instance: dg.DagsterInstance) -> None:
    checks = build_dataset_checks([daily])
    io = _io(root)
    for day in DAYS.get_partition_keys():
        found = _run([daily], checks, instance, io, partition_key=day)
        assert all(e.passed for e in found.values()), {n: e.description for n, e in found.items()}
        assert found["dataset_integrity"].partition == day
        assert found["dataset_integrity"].metadata["dataset_key"].value == f"daily/{day}"
        assert "first" in found["row_count_change"].description  # the other partition is not "previous"
    os.remove(os.path.join(root, "daily", "2024-01-02", "data.parquet"))
    # a checks-only run of one partition: Dagster's partition_key= wants a selected asset, so the run is
    # tagged with the partition as the UI does when it launches checks of a partition
    defs = dg.Definitions(
        assets=[daily],
        asset_checks=checks,
        jobs=[dg.define_asset_job("check_daily", selection=dg.AssetSelection.all_asset_checks())],
        resources={"io_manager": io},
    )
    job = defs.resolve_job_def("check_daily")
    for day, ok in (("2024-01-02", False), ("2024-01-01", True)):
        result = job.execute_in_process(instance=instance, tags={"dagster/partition": day})
        assert result.get_asset_materialization_events() == []
        found = {e.check_name: e for e in result.get_asset_check_evaluations()}
        assert found["dataset_integrity"].passed is ok
        assert found["dataset_integrity"].partition == day
    assert "data.parquet: missing: " in found_description(instance, "2024-01-02")
    # no partition given: the checks say what they need
    unpartitioned = job.execute_in_process(instance=instance, raise_on_error=False)
    [failure] = [e for e in unpartitioned.all_events if e.is_step_failure]
    assert "ran without a partition" in str(failure.step_failure_data.error)


def found_description(instance: dg.DagsterInstance, partition: str) -> str:
    """The description of the latest dataset_integrity evaluation of ``daily``'s ``partition``, from the instance."""
    key = dg.AssetCheckKey(dg.AssetKey("daily"), "dataset_integrity")
    records = instance.event_log_storage.get_asset_check_execution_history(key, limit=10)
    for record in records:
        evaluation = record.event.dagster_event.asset_check_evaluation_data if record.event else None
        if evaluation is not None and evaluation.partition == partition:
            return evaluation.description or ""
    raise AssertionError(f"no evaluation of partition {partition}")


def test_a_single_check_can_run_alone(root: str, instance: dg.DagsterInstance) -> None:
    checks = build_dataset_checks([orders])
    io = _io(root)
    _run([orders], checks, instance, io)
    result = dg.materialize(
        [orders, *checks],
        instance=instance,
        resources={"io_manager": io},
        selection=dg.AssetSelection.checks(dg.AssetCheckKey(dg.AssetKey("orders"), "row_count_change")),
    )
    assert [e.check_name for e in result.get_asset_check_evaluations()] == ["row_count_change"]


def test_a_prefix_and_another_io_manager_key(root: str, instance: dg.DagsterInstance) -> None:
    @dg.asset(io_manager_key="warehouse")
    def stock() -> pa.Table:
        return pa.table({"sku": ["a", "b"]})

    checks = build_dataset_checks([stock])
    io = _io(root, prefix="prod/v1")
    result = dg.materialize([stock, *checks], instance=instance, resources={"warehouse": io})
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == "dataset_integrity"]
    assert evaluation.passed
    assert evaluation.metadata["dataset_key"].value == "prod/v1/stock"
    assert _datasets(root).read_dataset("prod/v1/stock").num_rows == 2


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="row_count_min_ratio"):
        build_dataset_checks([orders], row_count_min_ratio=0)
    with pytest.raises(ValueError, match="must not exceed"):
        build_dataset_checks([orders], row_count_min_ratio=2, row_count_max_ratio=1)
    with pytest.raises(ValueError, match="more than once"):
        build_dataset_checks([orders, "orders"])
    with pytest.raises(TypeError, match="asset keys"):
        build_dataset_checks([42])  # type: ignore[list-item]


def test_checks_refuse_another_io_manager(instance: dg.DagsterInstance) -> None:
    checks = build_dataset_checks(["orders"])
    result = dg.materialize(
        [orders, *checks],
        instance=instance,
        resources={"io_manager": dg.mem_io_manager},
        selection=dg.AssetSelection.all_asset_checks(),
        raise_on_error=False,
    )
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    assert "need a RemoteStoreIOManager" in str(failure.step_failure_data.error)


def test_multi_assets_and_specs_get_checks_per_key(root: str, instance: dg.DagsterInstance) -> None:
    @dg.multi_asset(outs={"left": dg.AssetOut(), "right": dg.AssetOut()})
    def pair() -> Iterator[dg.Output]:
        yield dg.Output(pa.table({"v": [1, 2]}), output_name="left")
        yield dg.Output(pa.table({"v": [1]}), output_name="right")

    checks = build_dataset_checks([pair])
    assert len(checks) == 1  # one step checks both keys
    assert len(build_dataset_checks([pair, daily])) == 2  # other partitions: another step
    assert sorted(k.asset_key.to_user_string() for c in checks for k in c.check_keys) == ["left"] * 3 + ["right"] * 3
    found = dg.materialize([pair, *checks], instance=instance, resources={"io_manager": _io(root)})
    evaluations = found.get_asset_check_evaluations()
    assert len(evaluations) == 6 and all(e.passed for e in evaluations)
    spec_checks = build_dataset_checks([dg.AssetSpec("external_table")])
    assert {k.name for k in spec_checks[0].check_keys} == {"dataset_integrity", "schema_unchanged", "row_count_change"}


def test_checks_on_s3_find_an_object_deleted_behind_dagsters_back(
    moto_endpoint: str, instance: dg.DagsterInstance
) -> None:
    import boto3

    from dagster_parquet_dataset.dagster_io import S3StoreResource

    from ..conftest import make_bucket

    bucket = make_bucket(moto_endpoint)
    io = RemoteStoreIOManager(
        store=S3StoreResource(bucket=bucket, prefix="lake", endpoint_url=moto_endpoint), retain_versions=1
    )
    checks = build_dataset_checks([orders])
    assert all(e.passed for e in _run([orders], checks, instance, io).values())
    [part] = io.datasets.read_manifest("orders").parts
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1").delete_object(
        Bucket=bucket, Key=f"lake/orders/{part}"
    )
    found = _run([orders], checks, instance, io, checks_only=True)
    assert not found["dataset_integrity"].passed
    assert found["dataset_integrity"].metadata["problem_kinds"].value == ["missing"]
