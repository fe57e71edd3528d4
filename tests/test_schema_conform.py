"""Appends and merges fit the data to the dataset's schema; manifests record the types
Parquet reads back; what cannot be stored is refused before anything is written (issue 9)."""

import io
import os
from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pcsv
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, Store
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager

_CSV = b"ts,amount,label\n2026-01-01 00:00:00,1,a\n2026-01-02 12:30:05,2,b\n2026-01-03 23:59:59,3,c\n"


def _csv_table() -> pa.Table:
    """What pyarrow.csv.read_csv gives users: ``timestamp[s]`` columns."""
    table = pcsv.read_csv(io.BytesIO(_CSV))
    assert table.schema.field("ts").type == pa.timestamp("s")
    return table


def _rows(table: pa.Table, by: str = "a") -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: r[by])


def _files(store: Store, key: str) -> list[str]:
    return sorted(f.path for f in store.list_files(key))


def _assert_reads_as_recorded(datasets: ParquetDatasetStore, key: str) -> pa.Table:
    table = datasets.read_dataset(key)
    assert table.schema.equals(datasets.read_manifest(key).schema)
    return table


# ------------------------------------------------------------------- column order and nullability


def test_append_with_columns_in_another_order_reads_back(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(pa.table({"a": [1], "b": ["x"]}), "t")
    datasets.append_dataset(pa.table({"b": ["y"], "a": [2]}), "t")
    stream = pa.table({"b": ["z"], "a": [3]})
    datasets.append_dataset(pa.RecordBatchReader.from_batches(stream.schema, stream.to_batches()), "t")

    table = _assert_reads_as_recorded(datasets, "t")
    assert table.column_names == ["a", "b"]
    assert _rows(table) == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}, {"a": 3, "b": "z"}]


def test_append_of_non_nullable_columns_to_a_nullable_dataset_reads_back(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(pa.table({"a": [1], "b": ["x"]}), "t")
    strict = pa.schema([pa.field("b", pa.string(), nullable=False), pa.field("a", pa.int64(), nullable=False)])
    datasets.append_dataset(pa.table({"b": ["y"], "a": [2]}, schema=strict), "t")

    table = _assert_reads_as_recorded(datasets, "t")
    assert table.schema.field("a").nullable and table.schema.field("b").nullable
    assert _rows(table) == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]


def test_append_of_nulls_to_a_non_nullable_column_is_refused_before_writing(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    strict = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.string())])
    datasets.write_dataset(pa.table({"a": [1], "b": ["x"]}, schema=strict), "t")
    before = _files(store, "t")

    with pytest.raises(ValueError, match="'a'.*not nullable"):
        datasets.append_dataset(pa.table({"a": [None, 2], "b": ["y", "z"]}), "t")

    assert _files(store, "t") == before
    assert datasets.read_manifest("t").version == 1
    assert _rows(datasets.read_dataset("t")) == [{"a": 1, "b": "x"}]


def test_append_reordered_to_a_partitioned_dataset_with_a_new_column(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(pa.table({"p": [1, 2], "a": [1, 2], "b": ["x", "y"]}), "t", partition_by=["p"])
    datasets.append_dataset(pa.table({"b": ["z"], "p": [2], "a": [3]}), "t")
    datasets.append_dataset(pa.table({"c": [1.5], "b": ["w"], "a": [4], "p": [1]}), "t", allow_new_columns=True)

    table = _assert_reads_as_recorded(datasets, "t")
    assert table.column_names == ["p", "a", "b", "c"]
    assert _rows(table) == [
        {"p": 1, "a": 1, "b": "x", "c": None},
        {"p": 2, "a": 2, "b": "y", "c": None},
        {"p": 2, "a": 3, "b": "z", "c": None},
        {"p": 1, "a": 4, "b": "w", "c": 1.5},
    ]
    assert _rows(datasets.read_dataset("t", filters=[("p", "==", 2)])) == [
        {"p": 2, "a": 2, "b": "y", "c": None},
        {"p": 2, "a": 3, "b": "z", "c": None},
    ]


def test_append_converts_compatible_types_with_checked_casts(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(pa.table({"a": [1], "b": ["x"]}), "t")
    datasets.append_dataset(pa.table({"a": pa.array([2], pa.int32()), "b": pa.array(["y"], pa.large_string())}), "t")

    assert _rows(_assert_reads_as_recorded(datasets, "t")) == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    with pytest.raises(ValueError, match="'a'.*uint64.*without loss"):
        datasets.append_dataset(pa.table({"a": pa.array([2**63], pa.uint64()), "b": ["z"]}), "t")
    assert datasets.read_manifest("t").version == 2


def test_merge_of_a_reordered_non_nullable_csv_typed_source(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    csv = _csv_table()
    datasets.write_dataset(csv, "t")
    strict = pa.schema(
        [pa.field("label", pa.string(), nullable=False), pa.field("ts", pa.timestamp("s"), nullable=False)]
        + [pa.field("amount", pa.int32(), nullable=False)]
    )
    ts = csv.column("ts").to_pylist()
    source = pa.table({"label": ["B", "d"], "ts": [ts[1], ts[2]], "amount": [2, 4]}).cast(strict)
    result = datasets.merge_dataset(source, "t", key_columns=["amount"])

    assert (result.inserted, result.updated) == (1, 1)
    table = _assert_reads_as_recorded(datasets, "t")
    assert [(r["amount"], r["label"]) for r in _rows(table, "amount")] == [(1, "a"), (2, "B"), (3, "c"), (4, "d")]


class _Order(dg.Config):
    reverse: bool = False


def test_io_manager_append_of_a_reordered_pandas_frame(tmp_path: os.PathLike[str]) -> None:
    root = os.path.join(tmp_path, "store")

    @dg.asset(metadata={"write_mode": "append"})
    def log(config: _Order) -> pd.DataFrame:
        frame = pd.DataFrame({"id": [2 if config.reverse else 1], "label": ["b" if config.reverse else "a"]})
        return frame[["label", "id"]] if config.reverse else frame

    io_manager = RemoteStoreIOManager(store=LocalStoreResource(root=root))
    with dg.DagsterInstance.ephemeral() as instance:
        for reverse in (False, True):
            run_config = {"ops": {"log": {"config": {"reverse": reverse}}}}
            result = dg.materialize(
                [log], resources={"io_manager": io_manager}, instance=instance, run_config=run_config
            )
            assert result.success

    table = _assert_reads_as_recorded(ParquetDatasetStore(LocalStore(root)), "log")
    assert _rows(table, "id") == [{"id": 1, "label": "a"}, {"id": 2, "label": "b"}]


# ------------------------------------------------------------------- types Parquet stores differently


def test_csv_typed_table_writes_overwrites_and_appends(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    csv = _csv_table()
    datasets.write_dataset(csv, "t")
    expected = csv.cast(pa.schema([("ts", pa.timestamp("ms")), ("amount", pa.int64()), ("label", pa.string())]))
    assert _assert_reads_as_recorded(datasets, "t").equals(expected)

    datasets.write_dataset(pa.table({"ts": pa.array([0], pa.timestamp("ms")), "amount": [0], "label": ["z"]}), "o")
    datasets.write_dataset(csv, "o", overwrite=True)
    assert _assert_reads_as_recorded(datasets, "o").equals(expected)

    datasets.append_dataset(csv, "t")
    datasets.append_dataset(pa.RecordBatchReader.from_batches(csv.schema, csv.to_batches(max_chunksize=1)), "t")
    table = _assert_reads_as_recorded(datasets, "t")
    assert table.equals(pa.concat_tables([expected] * 3))
    later = datasets.read_dataset("t", filters=[("ts", ">", csv.column("ts")[0].as_py())])
    assert later.num_rows == 6


def test_partitioned_csv_typed_table_keeps_its_partition_type(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    csv = _csv_table()
    csv = csv.append_column("day", csv.column("ts"))  # a timestamp[s] partition column, one in the files
    datasets.write_dataset(csv, "t", partition_by=["day"])
    table = _assert_reads_as_recorded(datasets, "t")
    assert (table.schema.field("day").type, table.schema.field("ts").type) == (pa.timestamp("s"), pa.timestamp("ms"))
    assert _rows(table, "amount") == csv.to_pylist()
    datasets.append_dataset(csv, "t")
    assert datasets.read_dataset("t", filters=[("day", "==", csv.column("ts")[1].as_py())]).num_rows == 2


def test_overwrite_with_a_type_parquet_cannot_hold_is_refused_and_keeps_the_old_version(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(pa.table({"a": [1]}), "t")
    before = _files(store, "t")
    unstorable = pa.table({"a": [2], "gap": pa.array([(1, 2, 3)], pa.month_day_nano_interval())})

    with pytest.raises(TypeError, match="'gap'"):
        datasets.write_dataset(unstorable, "t", overwrite=True)
    with pytest.raises(TypeError, match="'gap'"):
        datasets.write_dataset(unstorable, "new")
    with pytest.raises(TypeError, match="'gap'"):
        datasets.append_dataset(unstorable, "t", allow_new_columns=True)

    assert _files(store, "t") == before
    assert datasets.read_dataset("t").to_pylist() == [{"a": 1}]
    assert not datasets.dataset_exists("new")


# ------------------------------------------------------------------- duplicate column names


def test_duplicate_column_names_are_refused_before_writing(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    doubled = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"])
    with pytest.raises(ValueError, match="'a'.*more than once"):
        datasets.write_dataset(doubled, "new")
    assert not datasets.dataset_exists("new")

    datasets.write_dataset(pa.table({"a": [1]}), "t")
    with pytest.raises(ValueError, match="'a'.*more than once"):
        datasets.append_dataset(doubled, "t")
    with pytest.raises(ValueError, match="'a'.*more than once"):
        datasets.merge_dataset(doubled, "t", key_columns=["a"])
    assert datasets.read_manifest("t").version == 1
    assert datasets.read_dataset("t").to_pylist() == [{"a": 1}]
