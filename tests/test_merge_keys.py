"""Merge keys compare as ``==`` does (issue 18, #9).

``-0.0`` and ``0.0`` are one key (for matching and for the source's duplicate
check), NaN keys are refused like null keys (NaN equals nothing, not even
itself), NaN rows already stored are never matched, and ``updated`` counts the
source rows that replaced existing rows.
"""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from dagster_parquet_dataset import MemoryStore, ParquetDatasetStore


def floats(keys: list[float], tag: str, typ: pa.DataType = pa.float64()) -> pa.Table:
    return pa.table({"k": pa.array(keys, typ), "v": pa.array([f"{tag}{i}" for i in range(len(keys))])})


def rows_with_zero(datasets: ParquetDatasetStore, key: str) -> list[dict[str, object]]:
    return datasets.read_dataset(key, filters=[("k", "==", 0.0)]).to_pylist()


@pytest.mark.parametrize("typ", [pa.float64(), pa.float32()])
@pytest.mark.parametrize(("stored", "merged"), [(0.0, -0.0), (-0.0, 0.0)])
def test_upsert_of_a_signed_zero_replaces_the_other_zero(typ: pa.DataType, stored: float, merged: float) -> None:
    datasets = ParquetDatasetStore(MemoryStore())
    datasets.write_dataset(floats([stored, 1.0, 2.0], "old", typ), "t")
    result = datasets.merge_dataset(floats([merged], "new", typ), "t", key_columns=["k"])
    assert (result.inserted, result.updated) == (0, 1)
    assert [r["v"] for r in rows_with_zero(datasets, "t")] == ["new0"]
    assert datasets.read_dataset("t").num_rows == 3


def test_insert_and_update_strategies_treat_signed_zeros_as_one_key() -> None:
    datasets = ParquetDatasetStore(MemoryStore(), max_rows_per_file=1)  # several files: statistics pruning too
    datasets.write_dataset(floats([-0.0, 1.0, 2.0], "old"), "t")
    inserted = datasets.merge_dataset(floats([0.0, 3.0], "ins"), "t", key_columns=["k"], strategy="insert")
    assert (inserted.inserted, inserted.updated) == (1, 0)
    assert [r["v"] for r in rows_with_zero(datasets, "t")] == ["old0"]
    updated = datasets.merge_dataset(floats([0.0], "upd"), "t", key_columns=["k"], strategy="update")
    assert (updated.inserted, updated.updated) == (0, 1)
    assert [r["v"] for r in rows_with_zero(datasets, "t")] == ["upd0"]
    assert sorted(datasets.read_dataset("t")["k"].to_pylist()) == [0.0, 1.0, 2.0, 3.0]


def test_composite_key_with_a_signed_zero() -> None:
    datasets = ParquetDatasetStore(MemoryStore())
    datasets.write_dataset(pa.table({"a": [1, 1], "k": [0.0, 1.0], "v": ["x", "y"]}), "t")
    result = datasets.merge_dataset(pa.table({"a": [1], "k": [-0.0], "v": ["z"]}), "t", key_columns=["a", "k"])
    assert (result.inserted, result.updated) == (0, 1)
    assert sorted(datasets.read_dataset("t")["v"].to_pylist()) == ["y", "z"]


def test_source_holding_both_zeros_is_a_duplicate_key() -> None:
    datasets = ParquetDatasetStore(MemoryStore())
    datasets.write_dataset(floats([5.0], "old"), "t")
    with pytest.raises(ValueError, match=r"duplicate keys \(e.g. \{'k': 0.0\} appears 2 times\)"):
        datasets.merge_dataset(floats([-0.0, 0.0], "new"), "t", key_columns=["k"])
    assert datasets.read_manifest("t").version == 1


@pytest.mark.parametrize("typ", [pa.float64(), pa.float32()])
def test_nan_keys_are_refused(typ: pa.DataType) -> None:
    datasets = ParquetDatasetStore(MemoryStore())
    datasets.write_dataset(floats([1.0], "old", typ), "t")
    with pytest.raises(ValueError, match=r"key column 'k' has 1 NaN values in the source.*must not be NaN"):
        datasets.merge_dataset(floats([float("nan"), 2.0], "new", typ), "t", key_columns=["k"])
    with pytest.raises(ValueError, match=r"must not be NaN"):
        datasets.merge_dataset(floats([float("nan")], "new", typ), "absent", key_columns=["k"])
    assert datasets.read_manifest("t").version == 1
    assert not datasets.dataset_exists("absent")


def test_stored_nan_rows_are_never_matched() -> None:
    datasets = ParquetDatasetStore(MemoryStore())
    datasets.write_dataset(floats([float("nan"), 1.0], "old"), "t")
    result = datasets.merge_dataset(floats([1.0, 2.0], "new"), "t", key_columns=["k"])
    assert (result.inserted, result.updated) == (1, 1)
    got = datasets.read_dataset("t").to_pylist()
    assert sum(1 for r in got if math.isnan(r["k"])) == 1
    assert sorted((r["k"], r["v"]) for r in got if not math.isnan(r["k"])) == [(1.0, "new0"), (2.0, "new1")]


def test_updated_counts_source_rows_when_a_stored_key_repeats() -> None:
    datasets = ParquetDatasetStore(MemoryStore(), max_rows_per_file=2)
    # Key 1 is stored three times, in two files.
    datasets.write_dataset(pa.table({"k": [1, 1, 1, 2], "v": ["a", "b", "c", "d"]}), "t")
    result = datasets.merge_dataset(pa.table({"k": [1, 3], "v": ["z", "n"]}), "t", key_columns=["k"])
    assert (result.inserted, result.updated) == (1, 1)
    got = datasets.read_dataset("t").to_pylist()
    # Every stored row of key 1 was replaced by the source row (as before), key 2 kept, key 3 added.
    assert sorted((r["k"], r["v"]) for r in got) == [(1, "z"), (1, "z"), (1, "z"), (2, "d"), (3, "n")]
