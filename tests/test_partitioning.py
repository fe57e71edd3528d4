"""Partitioned writes, statistics in the manifest, and predicate pushdown (issue 5, items 1-3)."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagster_parquet_dataset import LocalStore, MemoryStore, ParquetDatasetStore, S3Store, Store


def events(n: int = 40) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "day": pa.array([dt.date(2026, 1, 1 + i % 4) for i in range(n)], pa.date32()),
            "country": pa.array(["ch", "de", None, "fr/../x"][i % 4 if i % 3 else 0] for i in range(n)),
            "amount": pa.array([decimal.Decimal(f"{i}.25") for i in range(n)], pa.decimal128(10, 2)),
            "ts": pa.array(
                [dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(hours=i) for i in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )


def sort(t: pa.Table) -> pa.Table:
    return t.sort_by("id")


def test_partitioned_layout_and_typed_round_trip(store: Store) -> None:
    table = events()
    ds = ParquetDatasetStore(store)
    manifest = ds.write_dataset(table, "ev", partition_by=["day", "country"])
    assert manifest.partition_by == ("day", "country")
    folders = {p.rpartition("/")[0] for p in manifest.parts}
    assert "day=2026-01-01/country=ch" in folders
    assert any(f.endswith("/country=__HIVE_DEFAULT_PARTITION__") for f in folders)
    assert any(f.endswith("/country=fr%2F..%2Fx") for f in folders)  # escaped: cannot leave its folder
    assert all(len(f.split("/")) == 2 for f in folders)
    for entry in manifest.files:
        raw = pq.read_table(io.BytesIO(store.read_bytes(f"ev/{entry.path}")))
        assert "day" not in raw.column_names and "country" not in raw.column_names
        assert set(entry.partition_values) == {"day", "country"}
    back = ds.read_dataset("ev")
    assert back.schema.equals(table.schema, check_metadata=False)
    assert sort(back).equals(table)
    assert back.column_names == table.column_names
    projected = ds.read_dataset("ev", columns=["country", "id"])
    assert sort(projected).equals(table.select(["country", "id"]))


def test_partition_by_errors_change_nothing(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    for bad, exc in ((["nope"], ValueError), (["amount", "amount"], ValueError), ("day", TypeError)):
        with pytest.raises(exc):
            ds.write_dataset(events(), "ev", partition_by=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="of type double"):
        ds.write_dataset(pa.table({"f": [1.5], "x": [1]}), "ev", partition_by=["f"])
    assert list(store.list_files("ev")) == []


def test_manifest_records_per_file_statistics(store: Store) -> None:
    table = events(100)
    manifest = ParquetDatasetStore(store, max_rows_per_file=30).write_dataset(table, "ev")
    assert [f.row_count for f in manifest.files] == [30, 30, 30, 10]
    for i, entry in enumerate(manifest.files):
        chunk = table.slice(i * 30, 30)
        assert entry.stats is not None
        assert entry.stats["id"]["min"] == pc.min(chunk["id"]).as_py()
        assert entry.stats["id"]["max"] == pc.max(chunk["id"]).as_py()
        assert entry.stats["country"]["null_count"] == chunk["country"].null_count
    raw = json.loads(store.read_bytes("ev/manifest.json"))
    assert raw["files"][0]["stats"]["id"] == {"min": 0, "max": 29, "null_count": 0}


def test_statistics_prune_files_and_rows_are_filtered(store: Store) -> None:
    table = events(100)
    ds = ParquetDatasetStore(store, max_rows_per_file=25)
    ds.write_dataset(table, "ev")
    plan = ds.plan_read("ev", filters=[("id", ">=", 30), ("id", "<", 45)])
    assert [e.path for e in plan.selected] == ["part-00001.parquet"]
    assert len(plan.pruned) == 3
    got = ds.read_dataset("ev", filters=[("id", ">=", 30), ("id", "<", 45)])
    assert got.equals(table.filter((pc.field("id") >= 30) & (pc.field("id") < 45)))


def test_partition_values_prune_files(store: Store) -> None:
    table = events(40)
    ds = ParquetDatasetStore(store)
    ds.write_dataset(table, "ev", partition_by=["day"])
    filters = [("day", "==", dt.date(2026, 1, 2))]
    plan = ds.plan_read("ev", filters=filters)
    assert {e.partition_values["day"] for e in plan.selected} == {"2026-01-02"}
    assert len(plan.pruned) == 3
    got = ds.read_dataset("ev", filters=filters, columns=["id", "day"])
    assert sort(got).equals(table.filter(pc.field("day") == dt.date(2026, 1, 2)).select(["id", "day"]))
    # DNF: a disjunction of two conjunctions.
    dnf = [[("day", "in", [dt.date(2026, 1, 1)]), ("id", "<", 10)], [("country", "is null", None)]]
    expected = table.filter(
        ((pc.field("day") == dt.date(2026, 1, 1)) & (pc.field("id") < 10)) | pc.field("country").is_null()
    )
    assert sort(ds.read_dataset("ev", filters=dnf)).equals(sort(expected))


def test_missing_statistics_are_treated_conservatively(store: Store) -> None:
    table = events(100)
    ds = ParquetDatasetStore(store, max_rows_per_file=25)
    ds.write_dataset(table, "ev")
    raw = json.loads(store.read_bytes("ev/manifest.json"))
    for f in raw["files"]:
        f.pop("stats", None)
    store.write_bytes("ev/manifest.json", json.dumps(raw).encode())
    plan = ds.plan_read("ev", filters=[("id", "==", 3)])
    assert len(plan.selected) == 4 and not plan.pruned
    assert ds.read_dataset("ev", filters=[("id", "==", 3)]).equals(table.slice(3, 1))


def test_bad_filters_are_clear_errors(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(events(), "ev")
    with pytest.raises(ValueError, match="'nope'"):
        ds.read_dataset("ev", filters=[("nope", "==", 1)])
    with pytest.raises(ValueError, match="~"):
        ds.read_dataset("ev", filters=[("id", "~", 1)])
    with pytest.raises((TypeError, ValueError)):
        ds.read_dataset("ev", filters=[("id", "==", "abc")])


_OPS = ["==", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null"]


@st.composite
def data_and_filters(draw: st.DrawFn) -> tuple[pa.Table, list[list[tuple]], int, bool]:  # type: ignore[type-arg]
    n = draw(st.integers(0, 60))
    ints = draw(st.lists(st.one_of(st.none(), st.integers(-20, 20)), min_size=n, max_size=n))
    words = draw(st.lists(st.one_of(st.none(), st.sampled_from(["a", "b", "c", "é", "zz"])), min_size=n, max_size=n))
    days = draw(st.lists(st.sampled_from([dt.date(2026, 1, d) for d in (1, 2, 3)]), min_size=n, max_size=n))
    table = pa.table(
        {"i": pa.array(ints, pa.int64()), "w": pa.array(words, pa.string()), "d": pa.array(days, pa.date32())}
    )
    literals = {
        "i": st.integers(-25, 25),
        "w": st.sampled_from(["a", "b", "c", "é", "zz", "q"]),
        "d": st.sampled_from([dt.date(2026, 1, d) for d in (1, 2, 3, 4)]),
    }

    def predicate() -> tuple:  # type: ignore[type-arg]
        col = draw(st.sampled_from(["i", "w", "d"]))
        op = draw(st.sampled_from(_OPS))
        if op in ("in", "not in"):
            return (col, op, draw(st.lists(literals[col], min_size=1, max_size=3)))
        if op in ("is null", "is not null"):
            return (col, op, None)
        return (col, op, draw(literals[col]))

    dnf = [[predicate() for _ in range(draw(st.integers(1, 3)))] for _ in range(draw(st.integers(1, 3)))]
    return table, dnf, draw(st.integers(1, 15)), draw(st.booleans())


def _expression(dnf: list[list[tuple]]) -> pc.Expression:  # type: ignore[type-arg]
    def one(col: str, op: str, value: object) -> pc.Expression:
        f = pc.field(col)
        return {
            "==": lambda: f == value,
            "!=": lambda: f != value,
            "<": lambda: f < value,
            "<=": lambda: f <= value,
            ">": lambda: f > value,
            ">=": lambda: f >= value,
            "in": lambda: f.isin(value),
            "not in": lambda: ~f.isin(value) & f.is_valid(),
            "is null": lambda: f.is_null(),
            "is not null": lambda: f.is_valid(),
        }[op]()

    result = None
    for conj in dnf:
        term = None
        for col, op, value in conj:
            e = one(col, op, value)
            term = e if term is None else term & e
        result = term if result is None else result | term
    return result


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=data_and_filters())
def test_pruned_read_equals_unpruned_read_filtered_in_memory(case) -> None:  # type: ignore[no-untyped-def]
    table, dnf, rows_per_file, partitioned = case
    ds = ParquetDatasetStore(MemoryStore(), max_rows_per_file=rows_per_file)
    ds.write_dataset(table, "t", partition_by=["d"] if partitioned else None)
    got = ds.read_dataset("t", filters=dnf)
    expected = table.filter(_expression(dnf))
    assert got.num_rows == expected.num_rows
    key = ["i", "w", "d"]
    assert (
        got.select(key)
        .sort_by([(k, "ascending") for k in key])
        .equals(expected.select(key).sort_by([(k, "ascending") for k in key]))
    )
    plan = ds.plan_read("t", filters=dnf)
    assert len(plan.selected) + len(plan.pruned) == len(ds.read_manifest("t").files)
    for entry in plan.pruned:  # soundness: a pruned file really holds no matching row
        rows = pq.read_table(io.BytesIO(ds.store.read_bytes(f"t/{entry.path}")))
        if partitioned:
            day = dt.date.fromisoformat(entry.partition_values["d"])
            rows = rows.append_column("d", pa.array([day] * rows.num_rows, pa.date32()))
        assert rows.filter(_expression(dnf)).num_rows == 0, entry


def test_other_tools_read_partitioned_folders_as_hive(tmp_path) -> None:
    import pyarrow.dataset as pads

    table = events(20).select(["id", "day", "amount"])
    ParquetDatasetStore(LocalStore(tmp_path)).write_dataset(table, "ev", partition_by=["day"])
    hive = pads.dataset(str(tmp_path / "ev"), format="parquet", partitioning="hive", exclude_invalid_files=True)
    got = hive.to_table().sort_by("id")
    assert got.column("id").equals(table.column("id"))
    assert [str(d) for d in got.column("day").to_pylist()] == [str(d) for d in table.column("day").to_pylist()]


def test_pruned_s3_read_makes_two_requests(moto_endpoint) -> None:  # type: ignore[no-untyped-def]
    """The manifest (it carries its write token, so it proves its own commit: no ``_SUCCESS`` check)
    and one file fetched whole: planning needs no per-file request.

    Counted where the server receives them (a forwarding proxy in front of moto), from a
    fresh store: the read creates no boto3 client.
    """
    from tests._s3_proxy import LossyProxy
    from tests.conftest import make_bucket

    proxy = LossyProxy(moto_endpoint)
    try:
        bucket = make_bucket(moto_endpoint)
        table = events(400)
        ParquetDatasetStore(S3Store(bucket, endpoint_url=moto_endpoint), max_rows_per_file=50).write_dataset(
            table, "ev"
        )
        reader = S3Store(bucket, endpoint_url=proxy.url)
        got = ParquetDatasetStore(reader).read_dataset("ev", filters=[("id", ">=", 120), ("id", "<", 140)])
        assert got.equals(table.filter((pc.field("id") >= 120) & (pc.field("id") < 140)))
        sent = [method for method, _path, _status in proxy.seen]
        assert sent == ["GET", "GET"], proxy.seen
        assert reader._client_obj is None
    finally:
        proxy.close()
