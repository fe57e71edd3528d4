"""A write that begins from a live version read earlier (``read_live`` / ``write_from_live``) is never stale-unsafe.

The Dagster layer reads a dataset's manifest once per step and hands it to the write. If another
writer commits between that read and the commit, the commit's compare-and-swap (which names the
token the live version was read with) is refused, and the write rebuilds on the newer version.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from dagster_parquet_dataset import AlreadyExists, ParquetDatasetStore, Store
from dagster_parquet_dataset.dataset import LiveVersion, read_live, write_from_live


def _rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "v": [float(i) for i in range(start, start + n)]})


def test_an_append_from_a_stale_live_version_keeps_the_rows_committed_meanwhile(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(_rows(2), "t")
    live = read_live(datasets, "t")
    datasets.append_dataset(_rows(3, start=10), "t")  # another writer commits after the read
    committed = write_from_live(datasets, live).append_dataset(_rows(1, start=20), "t")
    assert committed.version == 3
    assert sorted(datasets.read_dataset("t")["id"].to_pylist()) == [0, 1, 10, 11, 12, 20]


def test_a_merge_from_a_stale_live_version_merges_into_the_newer_version(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(_rows(2), "t")
    live = read_live(datasets, "t")
    datasets.append_dataset(_rows(1, start=5), "t")
    update = pa.table({"id": [5, 7], "v": [50.0, 70.0]})
    result = write_from_live(datasets, live).merge_dataset(update, "t", key_columns=["id"])
    table = datasets.read_dataset("t").sort_by("id")
    assert table["id"].to_pylist() == [0, 1, 5, 7]
    assert table["v"].to_pylist() == [0.0, 1.0, 50.0, 70.0]
    assert result.manifest is not None and result.manifest.version == result.version == 3


def test_a_first_write_from_a_live_version_read_before_another_writer_created_it_is_refused(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    live = read_live(datasets, "t")
    assert (live.manifest, live.token) == (None, None)
    datasets.write_dataset(_rows(2), "t")
    with pytest.raises(AlreadyExists):
        write_from_live(datasets, live).write_dataset(_rows(1, start=9), "t")
    assert datasets.read_dataset("t")["id"].to_pylist() == [0, 1]


def test_a_live_version_is_used_for_its_own_key_only(store: Store) -> None:
    datasets = ParquetDatasetStore(store)
    datasets.write_dataset(_rows(1), "a")
    live = read_live(datasets, "a")
    view = write_from_live(datasets, live)
    view.write_dataset(_rows(2), "b")  # another key: read as usual
    assert datasets.read_dataset("b").num_rows == 2
    with pytest.raises(TypeError, match="read_live"):
        write_from_live(datasets, ("a", None))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="read for dataset 'a', not 'b'"):
        LiveVersion("a", None, None).begin_at("b")
