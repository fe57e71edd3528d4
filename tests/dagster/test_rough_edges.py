"""What the Dagster UI shows: singular and plural wording, identifiers as text, sizes as the CLI writes them,
and the example project's kinds, column descriptions and warnings."""

import os
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, build_dataset_checks
from dagster_parquet_dataset.cli._format import human_bytes as cli_human_bytes
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager
from dagster_parquet_dataset.dagster_io._wording import human_bytes, plural

PROJECT_DIR = Path(__file__).resolve().parents[2] / "example_project"


class Rows(dg.Config):
    rows: int = 10


@dg.asset
def orders(config: Rows) -> pa.Table:
    return pa.table({"id": pa.array(range(config.rows), pa.int64())})


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


def _run(instance: dg.DagsterInstance, root: str, rows: int = 10, **io_options: object) -> Any:
    io = RemoteStoreIOManager(store=LocalStoreResource(root=root), **io_options)
    result = dg.materialize(
        [orders, *build_dataset_checks([orders])],
        instance=instance,
        resources={"io_manager": io},
        run_config={"ops": {"orders": {"config": {"rows": rows}}}},
    )
    assert result.success
    return result


def _checks(result: Any) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_plural_and_sizes() -> None:
    assert [plural(n, "part") for n in (0, 1, 2, 1234)] == ["0 parts", "1 part", "2 parts", "1,234 parts"]
    assert plural(1, "entry", "entries") == "1 entry" and plural(3, "entry", "entries") == "3 entries"
    for size in (0, 1, 1023, 1024, 12008, 1024**2 - 1, 1024**2, 5 * 1024**3 + 7, 3 * 1024**6):
        assert human_bytes(size) == cli_human_bytes(size), size


def test_integrity_says_part_and_problem_in_the_singular(instance: dg.DagsterInstance, root: str) -> None:
    one = _checks(_run(instance, root))["dataset_integrity"]
    assert one.passed and one.description == "the part matches the manifest (version 1)"
    two = _checks(_run(instance, root, rows=10, max_rows_per_file=5))["dataset_integrity"]
    assert two.passed and two.description == "all 2 parts match the manifest (version 2)"

    datasets = ParquetDatasetStore(LocalStore(root), retain_versions=1)
    os.remove(os.path.join(root, "orders", datasets.read_manifest("orders").parts[0]))
    checks_only = dg.materialize(
        [orders, *build_dataset_checks([orders])],
        instance=instance,
        resources={"io_manager": RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)},
        selection=dg.AssetSelection.all_asset_checks(),
    )
    broken = _checks(checks_only)["dataset_integrity"]
    assert not broken.passed
    assert broken.description.startswith("1 problem in version 2:\n"), broken.description


def test_identifiers_are_text_and_measures_numbers(instance: dg.DagsterInstance, root: str) -> None:
    """The UI plots int and float metadata: a manifest version is an identifier, rows and bytes are measures."""
    # Only the live version is kept, so the Parquet stored is exactly what the second run wrote.
    _run(instance, root, rows=10, retain_versions=1)
    second = _run(instance, root, rows=12, retain_versions=1)
    [materialization] = second.asset_materializations_for_node("orders")
    md = materialization.metadata
    assert md["manifest_version"] == dg.MetadataValue.text("2")
    for measure in ("dagster/row_count", "rows_written", "part_count", "bytes_written"):
        assert isinstance(md[measure], dg.IntMetadataValue), measure
    stored = sum(f.size for f in LocalStore(root).list_files("orders") if f.path.endswith(".parquet"))
    assert md["bytes_written"].value == stored
    assert md["size_written"] == dg.MetadataValue.text(cli_human_bytes(stored))

    checks = _checks(second)
    for evaluation in checks.values():
        assert evaluation.metadata["manifest_version"] == dg.MetadataValue.text("2"), evaluation.check_name
    assert isinstance(checks["dataset_integrity"].metadata["files_checked"], dg.IntMetadataValue)
    row_count = checks["row_count_change"]
    # The previous version is found through the text manifest_version the first materialization recorded.
    assert row_count.metadata["previous_rows"].value == 10 and row_count.metadata["rows"].value == 12
    assert "version 1 (materialized by run" in row_count.description


def test_previous_version_recorded_as_a_number_by_earlier_releases(instance: dg.DagsterInstance, root: str) -> None:
    """Materializations recorded before manifest_version became text still serve as the previous version."""
    ParquetDatasetStore(LocalStore(root), retain_versions=1).write_dataset(pa.table({"id": list(range(100))}), "orders")
    instance.report_runless_asset_event(
        dg.AssetMaterialization(
            "orders",
            metadata={
                "dataset_key": dg.MetadataValue.text("orders"),
                "manifest_version": dg.MetadataValue.int(1),
                "dagster/row_count": dg.MetadataValue.int(100),
            },
        )
    )
    row_count = _checks(_run(instance, root, rows=10))["row_count_change"]
    assert not row_count.passed
    assert row_count.description.startswith("100 -> 10 rows"), row_count.description


# ------------------------------------------------------------------ the example project


def _example_assets() -> list[dg.AssetsDefinition]:
    if str(PROJECT_DIR) not in sys.path:
        sys.path.insert(0, str(PROJECT_DIR))
    from example_project.assets import ALL_ASSETS

    return ALL_ASSETS


def _engine_of(annotation: object) -> str:
    module = getattr(annotation, "__module__", "")
    return {"pyarrow.lib": "pyarrow", "pandas.core.frame": "pandas", "pyspark.sql.dataframe": "spark"}[module]


def test_example_kinds_match_what_each_asset_returns() -> None:
    for asset in _example_assets():
        returned = typing.get_type_hints(asset.op.compute_fn.decorated_fn)["return"]
        [spec] = asset.specs
        assert set(spec.kinds) == {"parquet", _engine_of(returned)}, spec.key.to_user_string()


def test_example_assets_describe_every_column() -> None:
    for asset in _example_assets():
        [spec] = asset.specs
        schema = spec.metadata.get("dagster/column_schema")
        assert isinstance(schema, dg.TableSchema), spec.key.to_user_string()
        assert schema.columns and all(c.description and c.type for c in schema.columns), spec.key.to_user_string()


def test_example_loads_without_the_backfill_policy_beta_warning() -> None:
    """Every process that loads the definitions printed it (five per ``dagster asset materialize``)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PROJECT_DIR.parent), str(PROJECT_DIR)])}
    proc = subprocess.run(
        [sys.executable, "-W", "default", "-c", "import example_project.definitions"],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "BetaWarning" not in proc.stderr, proc.stderr[-3000:]
