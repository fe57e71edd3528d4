"""Lazy scans (``scan_dataset`` / ``scan_datasets``) on memory, local and moto S3 stores.

The property test checks that a scan reads exactly what ``read_dataset`` returns
for random data, partitioning, versions, projections and filters; the other
tests check laziness, pruning, damaged parts, unions of datasets, and queries
from DuckDB and polars.
"""

from __future__ import annotations

import uuid

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagster_parquet_dataset import (
    CapabilityNotSupported,
    DatasetIncomplete,
    DatasetNotFound,
    MemoryStore,
    ParquetDatasetStore,
    S3Store,
    Store,
)
from tests._stores import WrappingStore
from tests.test_pruning import chunks, random_filters, random_table

PARTITIONINGS = [None, ["p"], ["s", "bo"], ["d"]]


def _build(data: st.DataObject, pds: ParquetDatasetStore) -> tuple[str, int]:
    """Write a random dataset in several commits (appends, a column added later); return its key and versions."""
    table = data.draw(random_table(), label="table")
    partition_by = data.draw(st.sampled_from(PARTITIONINGS), label="partition_by")
    pieces = data.draw(chunks(table), label="pieces")
    key = f"prop/{uuid.uuid4().hex[:10]}"
    add_at = data.draw(st.integers(1, len(pieces)), label="new column at")
    for i, piece in enumerate(pieces):
        if i >= add_at:
            piece = piece.append_column("later", pa.array([f"v{k % 3}" for k in range(piece.num_rows)], pa.string()))
        if i == 0:
            pds.write_dataset(piece, key, partition_by=partition_by)
        else:
            pds.append_dataset(piece, key, partition_by=partition_by, allow_new_columns=True)
    return key, len(pieces)


def _check_scan_equals_read(data: st.DataObject, store: Store) -> None:
    pds = ParquetDatasetStore(store, retain_versions=None)
    key, versions = _build(data, pds)
    version = data.draw(st.one_of(st.none(), st.integers(1, versions)), label="version")
    names = pds.read_manifest(key, version=version).schema.names  # type: ignore[union-attr]
    columns = data.draw(
        st.one_of(st.none(), st.lists(st.sampled_from(names), unique=True, max_size=len(names))), label="columns"
    )
    filters = data.draw(st.one_of(st.none(), random_filters()), label="filters")
    if filters is not None and data.draw(st.booleans(), label="filter on the later column"):
        filters = [[*conj, ("later", "!=", "v1")] for conj in filters] if "later" in names else filters
    try:
        expected = pds.read_dataset(key, columns=columns, filters=filters, version=version)
    except (ValueError, TypeError) as exc:
        with pytest.raises(type(exc)):
            pds.scan_dataset(key, columns=columns, filters=filters, version=version).to_table()
        return
    scan = pds.scan_dataset(key, columns=columns, filters=filters, version=version)
    got = scan.to_table()
    assert got.column_names[: expected.num_columns] == expected.column_names
    assert set(got.column_names[expected.num_columns :]) <= {t[0] for conj in filters or [] for t in conj}
    got = got.select(expected.column_names)
    assert got.num_rows == expected.num_rows
    assert got.schema.equals(expected.schema), (got.schema, expected.schema)
    assert _values(got) == _values(expected)
    plan = pds.plan_read(key, filters=filters, version=version)
    base = store.arrow_filesystem()[1]
    assert scan.files == [f"{base}/{key}/{e.path}" if base else f"{key}/{e.path}" for e in plan.selected]


def _values(table: pa.Table) -> dict[str, list[object]]:
    """Column values with NaN made comparable (``Table.equals`` treats NaN as unequal to itself)."""
    return {
        name: ["NaN" if isinstance(v, float) and v != v else v for v in table.column(name).to_pylist()]
        for name in table.column_names
    }


_PROPERTY = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("store", ["memory", "local"], indirect=True)
@settings(_PROPERTY, max_examples=60)
@given(data=st.data())
def test_scan_equals_read_dataset(store: Store, data: st.DataObject) -> None:
    _check_scan_equals_read(data, store)


@settings(_PROPERTY, max_examples=15)
@given(data=st.data())
def test_scan_equals_read_dataset_on_s3(s3_store: S3Store, data: st.DataObject) -> None:
    _check_scan_equals_read(data, s3_store)


# ------------------------------------------------------------------------------------------
# Laziness, pruning, damaged parts


def _three_parts(store: Store, key: str = "events") -> ParquetDatasetStore:
    pds = ParquetDatasetStore(store, retain_versions=None)
    pds.write_dataset(pa.table({"day": [1, 1], "n": [10, 11]}), key, partition_by=["day"])
    pds.append_dataset(pa.table({"day": [2, 2], "n": [20, 21]}), key, partition_by=["day"])
    pds.append_dataset(pa.table({"day": [3], "n": [30]}), key, partition_by=["day"])
    return pds


def test_scan_reads_nothing_until_scanned(store: Store) -> None:
    pds = _three_parts(store)
    parts = pds.read_manifest("events").parts
    for part in parts:
        store.delete(f"events/{part}")
    scan = pds.scan_dataset("events")  # only the manifest is read: no error yet
    assert scan.schema.names == ["day", "n"]
    with pytest.raises(DatasetIncomplete, match=r"dataset 'events': part '.*' listed in the manifest is missing"):
        scan.to_table()


def test_scan_prunes_by_partition_and_statistics(store: Store) -> None:
    pds = _three_parts(store)
    scan = pds.scan_dataset("events", filters=[("day", ">=", 2), ("n", "<", 30)])
    assert len(scan.files) == 1 and "day=2" in scan.files[0]
    assert scan.to_table().to_pydict() == {"day": [2, 2], "n": [20, 21]}
    # A pruned part may be damaged: the scan never opens it.
    pruned = [p for p in pds.read_manifest("events").parts if "day=1" in p]
    store.write_bytes(f"events/{pruned[0]}", b"garbage")
    assert scan.to_table().num_rows == 2


@pytest.mark.parametrize("damage", ["missing", "truncated", "longer"])
def test_damaged_part_raises_when_the_scan_reaches_it(store: Store, damage: str) -> None:
    pds = _three_parts(store)
    part = [p for p in pds.read_manifest("events").parts if "day=2" in p][0]
    path = f"events/{part}"
    if damage == "missing":
        store.delete(path)
        message = "is missing"
    else:
        data = store.read_bytes(path)
        # The manifest keeps recording the old size; the stored object changes size.
        store.write_bytes(path, data[: len(data) // 2] if damage == "truncated" else data + b"x" * 100)
        message = "truncated or was replaced"
    scan = pds.scan_dataset("events")
    with pytest.raises(DatasetIncomplete) as info:
        scan.to_table()
    assert "dataset 'events'" in str(info.value) and part in str(info.value) and message in str(info.value)
    # The undamaged parts alone still scan.
    assert pds.scan_dataset("events", filters=[("day", "!=", 2)]).to_table().num_rows == 3


def test_truncated_s3_object_with_its_footer_intact_raises(s3_store: S3Store) -> None:
    """A part replaced by a shorter object whose tail is a valid footer: only the real size tells."""
    pds = ParquetDatasetStore(s3_store)
    pds.write_dataset(pa.table({"n": list(range(1000))}), "t")
    part = pds.read_manifest("t").parts[0]
    smaller = ParquetDatasetStore(MemoryStore())
    smaller.write_dataset(pa.table({"n": [1, 2, 3]}), "t")
    s3_store.write_bytes(f"t/{part}", smaller.store.read_bytes(f"t/{smaller.read_manifest('t').parts[0]}"))
    with pytest.raises(DatasetIncomplete, match="truncated or was replaced"):
        pds.scan_dataset("t").to_table()


def test_scan_errors_before_any_read(store: Store) -> None:
    pds = _three_parts(store)
    with pytest.raises(ValueError, match="no column 'nope'"):
        pds.scan_dataset("events", columns=["nope"])
    with pytest.raises(ValueError, match="nope"):
        pds.scan_dataset("events", filters=[("nope", "==", 1)])
    with pytest.raises(DatasetNotFound):
        pds.scan_dataset("absent")
    with pytest.raises(TypeError, match="single string"):
        pds.scan_datasets("events")
    with pytest.raises(ValueError, match="more than once"):
        pds.scan_datasets(["events", "events"])
    with pytest.raises(ValueError, match="at least one"):
        pds.scan_datasets([])


def test_filter_columns_outside_the_projection_are_carried(store: Store) -> None:
    pds = _three_parts(store)
    scan = pds.scan_dataset("events", columns=["n"], filters=[("day", "==", 2)])
    assert scan.schema.names == ["n", "day"]
    assert scan.to_table().column("n").to_pylist() == [20, 21]


def test_versions_scan_their_own_files(store: Store) -> None:
    pds = _three_parts(store)
    assert pds.scan_dataset("events", version=1).to_table().to_pydict() == {"day": [1, 1], "n": [10, 11]}
    assert pds.scan_dataset("events").count_rows() == 5


def test_store_without_a_pyarrow_filesystem_is_refused() -> None:
    pds = _three_parts(WrappingStore(MemoryStore()))
    with pytest.raises(CapabilityNotSupported, match="pyarrow filesystem"):
        pds.scan_dataset("events")


# ------------------------------------------------------------------------------------------
# Several datasets as one


def test_scan_datasets_is_one_dataset_over_the_union(store: Store) -> None:
    pds = ParquetDatasetStore(store)
    pds.write_dataset(pa.table({"day": ["2024-01-01"] * 2, "n": [1, 2]}), "daily/2024-01-01")
    pds.write_dataset(pa.table({"day": ["2024-01-02"], "n": [3]}), "daily/2024-01-02")
    pds.write_dataset(pa.table({"day": ["2024-01-03"], "n": [4], "extra": [1.5]}), "daily/2024-01-03")
    keys = ["daily/2024-01-03", "daily/2024-01-01", "daily/2024-01-02"]
    scan = pds.scan_datasets(keys)
    assert isinstance(scan, pads.FileSystemDataset)
    assert scan.schema.names == ["day", "n", "extra"]
    table = scan.to_table()
    expected = pa.concat_tables([pds.read_dataset(k) for k in keys], promote_options="default")
    assert table.equals(expected.select(table.column_names))
    filtered = pds.scan_datasets(keys, columns=["n"], filters=[("n", ">", 1)])
    assert filtered.to_table().column("n").to_pylist() == [4, 2, 3]
    assert len(filtered.files) == 3
    pruned = pds.scan_datasets(keys, columns=["n"], filters=[("n", ">", 3)])
    assert len(pruned.files) == 1 and pruned.to_table().column("n").to_pylist() == [4]


def test_scan_datasets_refuses_conflicting_schemas(store: Store) -> None:
    pds = ParquetDatasetStore(store)
    pds.write_dataset(pa.table({"n": [1]}), "a")
    pds.write_dataset(pa.table({"n": ["x"]}), "b")
    with pytest.raises(ValueError, match=r"datasets \['a', 'b'\] cannot be scanned together"):
        pds.scan_datasets(["a", "b"])


# ------------------------------------------------------------------------------------------
# DuckDB and polars


def test_duckdb_and_polars_query_a_scan(store: Store) -> None:
    pds = _three_parts(store)
    scan = pds.scan_dataset("events", filters=[("n", "!=", 11)])
    rel = duckdb.from_arrow(scan)
    assert sorted(rel.aggregate("day, sum(n)", "day").fetchall()) == [(1, 10), (2, 41), (3, 30)]
    events = scan  # noqa: F841 - DuckDB's replacement scan finds the local variable by name
    assert duckdb.sql("select count(*) from events where day >= 2").fetchall() == [(3,)]
    lazy = pl.scan_pyarrow_dataset(pds.scan_datasets(["events"]))
    out = lazy.filter(pl.col("day") == 2).group_by("day").agg(pl.col("n").sum()).collect()
    assert out.to_dicts() == [{"day": 2, "n": 41}]


def test_duckdb_and_polars_surface_a_missing_part(store: Store) -> None:
    pds = _three_parts(store)
    part = pds.read_manifest("events").parts[-1]
    store.delete(f"events/{part}")
    scan = pds.scan_dataset("events")
    with pytest.raises(Exception, match=f"dataset 'events': part '{part}'"):
        duckdb.from_arrow(scan).fetchall()
    with pytest.raises(DatasetIncomplete, match=part):
        pl.scan_pyarrow_dataset(scan).collect()
