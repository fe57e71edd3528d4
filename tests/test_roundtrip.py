"""Property tests: any Arrow table survives a write and a read unchanged."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagster_parquet_dataset import DatasetManifest, LocalStore, ManifestCorrupted, MemoryStore, ParquetDatasetStore

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_COLUMN_KINDS = {
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "int8": (pa.int8(), st.integers(-128, 127)),
    "float64": (pa.float64(), st.floats(allow_nan=False)),
    "bool": (pa.bool_(), st.booleans()),
    "string": (pa.string(), _text),
    "large_string": (pa.large_string(), _text),
    "binary": (pa.binary(), st.binary(max_size=10)),
    "date": (pa.date32(), st.dates(min_value=dt.date(1, 1, 1))),
    "ts_tz": (
        pa.timestamp("us", tz="Europe/Zurich"),
        st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1), timezones=st.just(dt.UTC)),
    ),
    "ts_naive": (
        pa.timestamp("ms"),
        st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(2200, 1, 1)),
    ),
    "decimal": (
        pa.decimal128(12, 3),
        st.decimals(min_value=-(10**8), max_value=10**8, places=3, allow_nan=False, allow_infinity=False).map(
            lambda d: d.quantize(decimal.Decimal("0.001"))
        ),
    ),
    "list": (pa.list_(pa.int32()), st.lists(st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)), max_size=4)),
    "struct": (
        pa.struct([("a", pa.int64()), ("b", pa.string())]),
        st.fixed_dictionaries({"a": st.one_of(st.none(), st.integers(-100, 100)), "b": st.one_of(st.none(), _text)}),
    ),
    "list_struct": (
        pa.list_(pa.struct([("x", pa.float32())])),
        st.lists(st.fixed_dictionaries({"x": st.floats(width=32, allow_nan=False)}), max_size=3),
    ),
}


@st.composite
def arrow_tables(draw: st.DrawFn) -> pa.Table:
    kinds = draw(st.lists(st.sampled_from(sorted(_COLUMN_KINDS)), min_size=1, max_size=5))
    rows = draw(st.integers(0, 30))
    columns = {}
    for i, kind in enumerate(kinds):
        typ, values = _COLUMN_KINDS[kind]
        data = draw(st.lists(st.one_of(st.none(), values), min_size=rows, max_size=rows))
        name = draw(_text.filter(lambda s: s not in columns and s != "")) if i % 2 else f"c{i}_{kind}"
        columns[name] = pa.array(data, type=typ)
    return pa.table(columns)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=arrow_tables(), max_rows=st.one_of(st.none(), st.integers(1, 12)))
def test_any_table_round_trips(table: pa.Table, max_rows: int | None) -> None:
    store = MemoryStore()
    ds = ParquetDatasetStore(store, max_rows_per_file=max_rows)
    manifest = ds.write_dataset(table, "t")
    back = ds.read_dataset("t")
    assert back.schema.equals(table.schema, check_metadata=False)
    assert back.equals(table)
    assert manifest.row_count == table.num_rows
    assert DatasetManifest.from_json(manifest.to_json()) == manifest
    columns = table.column_names[::-1][:2]
    assert ds.read_dataset("t", columns=columns).equals(table.select(columns))


@settings(max_examples=15, deadline=None)
@given(table=arrow_tables())
def test_round_trip_on_local_disk(tmp_path_factory: pytest.TempPathFactory, table: pa.Table) -> None:
    store = LocalStore(tmp_path_factory.mktemp("rt"))
    ds = ParquetDatasetStore(store, max_rows_per_file=7)
    ds.write_dataset(table, "t")
    assert ds.read_dataset("t").equals(table)


@settings(max_examples=100, deadline=None)
@given(
    raw=st.dictionaries(
        st.sampled_from(
            ["dataset_key", "parts", "row_count", "schema_hash", "compression", "created_at_utc", "run_id", "metadata"]
            + ["format_version", "version", "files", "arrow_schema", "obsolete"]
        ),
        st.one_of(
            st.none(), st.integers(), _text, st.lists(_text, max_size=2), st.dictionaries(_text, _text, max_size=2)
        ),
    )
)
def test_from_json_rejects_anything_malformed_with_manifest_corrupted(raw: dict) -> None:  # type: ignore[type-arg]
    """Arbitrary JSON objects either parse into a valid manifest or raise ManifestCorrupted, nothing else."""
    try:
        manifest = DatasetManifest.from_json(json.dumps(raw))
    except ManifestCorrupted as exc:
        assert exc.reason
        return
    assert DatasetManifest.from_json(manifest.to_json()) == manifest
