"""Lazy scans (``scan_dataset`` / ``scan_datasets``) on memory, local and moto S3 stores.

The property test checks that a scan reads exactly what ``read_dataset`` returns
for random data, partitioning, versions, projections and filters; the other
tests check laziness, pruning, damaged parts, unions of datasets, and queries
from DuckDB and polars.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
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
    assert scan.count_rows() == expected.num_rows
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


def _property_tests(check: Callable[[st.DataObject, Store], None], examples: int, s3_examples: int) -> tuple[Any, Any]:
    """``check`` as a property test on memory and local stores, and one (fewer examples) on moto S3."""

    @pytest.mark.parametrize("store", ["memory", "local"], indirect=True)
    @settings(_PROPERTY, max_examples=examples)
    @given(data=st.data())
    def on_memory_and_local(store: Store, data: st.DataObject) -> None:
        check(data, store)

    @settings(_PROPERTY, max_examples=s3_examples)
    @given(data=st.data())
    def on_s3(s3_store: S3Store, data: st.DataObject) -> None:
        check(data, s3_store)

    return on_memory_and_local, on_s3


test_scan_equals_read_dataset, test_scan_equals_read_dataset_on_s3 = _property_tests(_check_scan_equals_read, 60, 15)


# ------------------------------------------------------------------------------------------
# Floating columns: NaN, -0.0, infinities and nulls under every operator

_FLOATS = [float("nan"), -0.0, 0.0, 1.0, 2.5, math.inf, -math.inf, None]
_FLOAT_LITERALS = [-0.0, 0.0, 1.0, 2.5, -1.0, 3.0, math.inf, -math.inf, float("nan")]
_OPS = ["==", "=", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null"]


@st.composite
def _float_piece(draw: st.DrawFn, n: int) -> pa.Table:
    """``n`` rows of a float64 and a float32 column, each drawn from a few values (often a single one
    besides NaN: then a file's min and max are equal, where pyarrow's statistics mislead most)."""
    columns = {}
    for name, typ in (("f", pa.float64()), ("g", pa.float32())):
        pool = draw(st.lists(st.sampled_from(_FLOATS), min_size=1, max_size=3, unique_by=repr), label=f"{name} pool")
        columns[name] = pa.array(draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n)), typ)
    columns["p"] = pa.array([draw(st.integers(0, 1))] * n, pa.int32())
    return pa.table(columns)


@st.composite
def _float_filters(draw: st.DrawFn) -> list[list[tuple[Any, ...]]]:
    conjunctions = []
    for _ in range(draw(st.integers(1, 2))):
        terms: list[tuple[Any, ...]] = []
        for _ in range(draw(st.integers(1, 2))):
            column, op = draw(st.sampled_from(["f", "g"])), draw(st.sampled_from(_OPS))
            if op in ("is null", "is not null"):
                terms.append((column, op))
            elif op in ("in", "not in"):
                terms.append((column, op, draw(st.lists(st.sampled_from(_FLOAT_LITERALS), max_size=3))))
            else:
                terms.append((column, op, draw(st.sampled_from(_FLOAT_LITERALS))))
        conjunctions.append(terms)
    return conjunctions


def _rows(table: pa.Table) -> list[tuple[str, ...]]:
    """The rows as sorted tuples of ``repr`` (NaN equal to itself, -0.0 apart from 0.0), for engines whose
    output order may differ."""
    columns = [table.column(name).to_pylist() for name in table.column_names]
    return sorted(tuple(repr(c[k]) for c in columns) for k in range(table.num_rows))


def _check_float_scan(data: st.DataObject, store: Store) -> None:
    pds = ParquetDatasetStore(store, retain_versions=None)
    key = f"floats/{uuid.uuid4().hex[:10]}"
    partition_by = data.draw(st.sampled_from([None, ["p"]]), label="partition_by")
    for i, n in enumerate(data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=4), label="piece sizes")):
        piece = data.draw(_float_piece(n), label=f"piece {i}")
        if i == 0:
            pds.write_dataset(piece, key, partition_by=partition_by)
        else:
            pds.append_dataset(piece, key, partition_by=partition_by)
    filters = data.draw(_float_filters(), label="filters")
    try:
        expected = pds.read_dataset(key, filters=filters)
    except ValueError as exc:  # a NaN literal: refused alike
        with pytest.raises(ValueError, match="NaN"):
            pds.scan_dataset(key, filters=filters)
        assert "NaN" in str(exc)
        return
    scan = pds.scan_dataset(key, filters=filters)
    got = scan.to_table().select(expected.column_names)
    assert got.schema.equals(expected.schema)
    assert _values(got) == _values(expected)
    assert scan.count_rows() == expected.num_rows
    assert _rows(duckdb.connect().from_arrow(scan).to_arrow_table()) == _rows(expected)
    assert _rows(pl.scan_pyarrow_dataset(scan).collect().to_arrow()) == _rows(expected)


test_scan_equals_read_on_floating_columns, test_scan_equals_read_on_floating_columns_on_s3 = _property_tests(
    _check_float_scan, 80, 10
)


@pytest.mark.parametrize("store", ["memory", "local"], indirect=True)
@pytest.mark.parametrize(
    "op, literal, rows",
    [("!=", 1.0, 1), ("not in", [1.0], 1), ("!=", math.inf, 1), ("not in", [0.0], 1), ("==", 1.0, 2), ("<=", 1.0, 2)],
)
def test_nan_rows_are_decided_by_rows_not_by_statistics(store: Store, op: str, literal: Any, rows: int) -> None:
    """Issue 18 #6: min = max in the file's statistics, which leave the NaN out."""
    pds = ParquetDatasetStore(store)
    value = literal[0] if isinstance(literal, list) else literal
    pds.write_dataset(pa.table({"x": [float("nan"), value, value]}), "t")
    filters = [("x", op, literal)]
    scan = pds.scan_dataset("t", filters=filters)
    expected = pds.read_dataset("t", filters=filters)
    assert expected.num_rows == rows
    assert _values(scan.to_table()) == _values(expected)
    assert scan.count_rows() == rows
    assert duckdb.connect().from_arrow(scan).aggregate("count(*)").fetchall() == [(rows,)]
    assert pl.scan_pyarrow_dataset(scan).collect().height == rows


# ------------------------------------------------------------------------------------------
# Laziness, pruning, damaged parts


def _three_parts(store: Store, key: str = "events") -> ParquetDatasetStore:
    pds = ParquetDatasetStore(store, retain_versions=None)
    pds.write_dataset(pa.table({"day": [1, 1], "n": [10, 11]}), key, partition_by=["day"])
    pds.append_dataset(pa.table({"day": [2, 2], "n": [20, 21]}), key, partition_by=["day"])
    pds.append_dataset(pa.table({"day": [3], "n": [30]}), key, partition_by=["day"])
    return pds


def test_scan_reads_no_data_until_scanned(store: Store) -> None:
    """Creating a scan checks each part's size only: a part of the right size but garbage fails when scanned."""
    pds = _three_parts(store)
    part = pds.read_manifest("events").parts[-1]
    size = store.size(f"events/{part}")
    store.write_bytes(f"events/{part}", b"x" * size)
    scan = pds.scan_dataset("events")
    assert scan.schema.names == ["day", "n"]
    with pytest.raises(pa.ArrowInvalid, match="Parquet magic bytes not found"):
        scan.to_table()


def test_a_missing_part_fails_the_scan_before_it_is_returned(store: Store) -> None:
    pds = _three_parts(store)
    for part in pds.read_manifest("events").parts:
        store.delete(f"events/{part}")
    with pytest.raises(DatasetIncomplete, match=r"dataset 'events': part '.*' listed in the manifest is missing"):
        pds.scan_dataset("events")


@pytest.mark.parametrize("store", ["local", "s3"], indirect=True)
def test_a_part_deleted_after_the_scan_was_returned_fails_every_consumer(store: Store) -> None:
    """The scan reads through pyarrow's native filesystem: its own error, naming the file, never a skip;
    DuckDB and polars pass it on."""
    pds = _three_parts(store)
    scan = pds.scan_dataset("events")
    part = pds.read_manifest("events").parts[-1]
    store.delete(f"events/{part}")
    with pytest.raises(OSError, match=re.escape(f"events/{part}")):
        scan.to_table()
    with pytest.raises(OSError, match=re.escape(f"events/{part}")):
        scan.scanner().to_reader().read_all()
    with pytest.raises(duckdb.Error, match=re.escape(f"events/{part}")):
        duckdb.connect().from_arrow(scan).fetchall()
    with pytest.raises(OSError, match=re.escape(f"events/{part}")):
        pl.scan_pyarrow_dataset(scan).collect()


def test_scans_never_read_through_a_python_filesystem(store: Store) -> None:
    """Issue 18 #7: a Python filesystem handler runs on Arrow's I/O threads and can deadlock on the GIL."""
    pds = _three_parts(store)
    pds.write_dataset(pa.table({"n": [1]}), "other")
    unfiltered = pds.scan_datasets(["events", "other"])
    fragments = [fragment.filesystem for fragment in unfiltered.get_fragments()]
    for filesystems in (
        [pds.scan_dataset("events", filters=[("n", ">", 10)]).filesystem],
        [unfiltered.filesystem, *fragments],
    ):
        assert not any(isinstance(fs, pafs.PyFileSystem) for fs in filesystems), filesystems
        native = {"MemoryStore": "mock", "LocalStore": "local", "S3Store": "s3"}[type(store).__name__]
        assert {fs.type_name for fs in filesystems} == {native}


def test_a_memory_scan_holds_the_parts_it_checked() -> None:
    """A ``MemoryStore`` scan reads copies of its parts taken when it was created (no Python filesystem
    runs on Arrow's threads): a part deleted later is still read from the copy."""
    store = MemoryStore()
    pds = _three_parts(store)
    scan = pds.scan_dataset("events")
    for part in pds.read_manifest("events").parts:
        store.delete(f"events/{part}")
    assert scan.to_table().to_pydict() == {"day": [1, 1, 2, 2, 3], "n": [10, 11, 20, 21, 30]}


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
def test_damaged_part_raises_when_the_scan_is_created(store: Store, damage: str) -> None:
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
    with pytest.raises(DatasetIncomplete) as info:
        pds.scan_dataset("events")
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


@pytest.mark.parametrize("cut", ["half", "into the last page"])
def test_an_s3_part_truncated_after_the_scan_was_created_always_errors(s3_store: S3Store, cut: str) -> None:
    """Issue 26, defect 12: pyarrow must not read a shorter object with the size the manifest recorded
    (its fragment keeps the footer it read, so a read past the new end filled bytes from memory)."""
    pds = ParquetDatasetStore(s3_store)
    pds.write_dataset(pa.table({"n": list(range(100)), "s": [f"x{i}" * 20 for i in range(100)]}), "t")
    path = f"t/{pds.read_manifest('t').parts[0]}"
    data = s3_store.read_bytes(path)
    for filters in (None, [("n", ">=", 0)]):
        s3_store.write_bytes(path, data)
        scan = pds.scan_dataset("t", filters=filters)
        assert scan.to_table().num_rows == 100  # the fragment now holds the part's footer
        footer = int.from_bytes(data[-8:-4], "little") + 8  # the footer's length, its length field and magic
        s3_store.write_bytes(path, data[: len(data) // 2] if cut == "half" else data[: len(data) - footer - 3])
        for _attempt in range(3):
            with pytest.raises((OSError, pa.ArrowInvalid)):
                scan.to_table()


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


def test_a_process_that_scanned_s3_exits_cleanly(moto_endpoint: str) -> None:
    """pyarrow aborts at exit when S3 file handles outlive its S3 finalizer; a scan must not leave any."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.conftest import make_bucket

    bucket = make_bucket(moto_endpoint)
    ParquetDatasetStore(S3Store(bucket, endpoint_url=moto_endpoint)).write_dataset(pa.table({"a": [1, 2, 3]}), "k")
    script = (
        "from dagster_parquet_dataset import ParquetDatasetStore, S3Store\n"
        f"store = ParquetDatasetStore(S3Store({bucket!r}, endpoint_url={moto_endpoint!r}))\n"
        "print(store.scan_dataset('k', filters=[('a', '>', 1)]).to_table().num_rows)\n"
    )
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root))
    for _ in range(6):  # the abort was a race: most runs hit it
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
        assert (out.returncode, out.stdout.strip()) == (0, "2"), out.stderr[-500:]
