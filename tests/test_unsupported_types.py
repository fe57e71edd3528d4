"""Filters and merges pyarrow cannot carry out on a column's type are refused up front with an
error naming the column, and a read of no columns still counts the rows (issue 13)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore, Store


def _files(store: Store, key: str) -> list[str]:
    return sorted(f.path for f in store.list_files(key))


def test_filtered_reads_of_a_string_view_dataset_are_refused(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(pa.table({"id": [1, 2], "s": pa.array(["a", "b"], pa.string_view())}), "t")

    with pytest.raises(TypeError, match="'s'.*string_view"):
        datasets.read_dataset("t", filters=[("s", "==", "a")])
    with pytest.raises(TypeError, match="'s'.*string_view"):
        datasets.read_dataset("t", filters=[("id", "==", 1)])
    assert datasets.read_dataset("t", columns=["id"], filters=[("id", "==", 2)]).to_pylist() == [{"id": 2}]


def test_comparing_a_list_or_struct_column_is_refused(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(pa.table({"id": [1], "l": [[1, 2]], "st": [{"a": 1}]}), "t")

    with pytest.raises(TypeError, match="'l'.*list"):
        datasets.read_dataset("t", filters=[("l", "==", [1, 2])])
    with pytest.raises(TypeError, match="'st'.*struct"):
        datasets.read_dataset("t", filters=[("st", "in", [{"a": 1}])])


def test_merges_into_string_view_data_or_on_struct_keys_are_refused_before_writing(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(pa.table({"id": [1, 2], "s": pa.array(["a", "b"], pa.string_view())}), "sv")
    datasets.write_dataset(pa.table({"id": [1], "st": [{"a": 1}]}), "st")
    before = {k: _files(store, k) for k in ("sv", "st")}

    with pytest.raises(ValueError, match="'s'.*string_view"):
        datasets.merge_dataset(pa.table({"id": [2, 3], "s": ["x", "y"]}), "sv", key_columns=["id"])
    with pytest.raises(ValueError, match="'st'.*struct"):
        datasets.merge_dataset(pa.table({"id": [5], "st": [{"a": 1}]}), "st", key_columns=["st"])
    with pytest.raises(ValueError, match="'st'.*struct"):
        datasets.merge_dataset(pa.table({"id": [5], "st": [{"a": 1}]}), "new", key_columns=["st"])

    assert {k: _files(store, k) for k in ("sv", "st")} == before
    assert not datasets.dataset_exists("new")


def test_reading_no_columns_keeps_the_row_count(store: Store) -> None:
    datasets = ParquetDatasetStore(store, max_rows_per_file=2)
    datasets.write_dataset(pa.table({"p": [1, 1, 1, 2, 2], "v": [1, 2, 3, 4, 5]}), "t", partition_by=["p"])

    assert datasets.read_dataset("t", columns=[]).num_rows == 5
    assert datasets.read_dataset("t", columns=[]).num_columns == 0
    assert datasets.read_dataset("t", columns=[], filters=[("v", ">", 1)]).num_rows == 4
