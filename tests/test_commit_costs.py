"""What one commit writes on top of an existing version (issue 25's "no case slower by more than 5%").

Counted through a :class:`~tests._stores.WrappingStore` around the public store (memory, local disk, moto S3):
a commit writes its parts, the replaced version's copy into ``_versions/`` (once: guarantee 5's price) and the
manifest; it does not write ``_SUCCESS`` again when it is already there (an empty marker: writing it over
itself changes nothing, but cost a ``PUT``, on a durable local disk two ``fsync`` calls, on every commit).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore, Store
from tests._stores import WrappingStore

OLD = pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]})
NEW = pa.table({"k": [3, 4], "v": ["z", "d"]})

OPERATIONS: dict[str, Callable[[ParquetDatasetStore, str], object]] = {
    "overwrite": lambda ds, key: ds.write_dataset(NEW, key, overwrite=True),
    "append": lambda ds, key: ds.append_dataset(NEW, key),
    "merge": lambda ds, key: ds.merge_dataset(NEW, key, key_columns=["k"]),
    "compact": lambda ds, key: ds.compact_dataset(key, target_file_bytes=1 << 20),
}


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_a_commit_on_an_existing_version_writes_no_second_success(store: Store, name: str) -> None:
    ParquetDatasetStore(store, max_rows_per_file=1).write_dataset(OLD, "t")
    assert store.exists("t/_SUCCESS")
    counted = WrappingStore(store)
    OPERATIONS[name](ParquetDatasetStore(counted, max_rows_per_file=1), "t")
    written = [path for op, path in counted.log if op in ("write_bytes", "open_output")]
    assert "t/_SUCCESS" not in written
    assert [p for p in written if p.startswith("t/_versions/")] == ["t/_versions/00000000000000000001.json"]
    assert store.exists("t/_SUCCESS")
    assert ParquetDatasetStore(store).dataset_exists("t")


def test_a_commit_writes_the_success_a_crash_left_out(store: Store) -> None:
    """The other half: a version whose writer died before ``_SUCCESS`` gets it from the next commit."""
    ParquetDatasetStore(store).write_dataset(OLD, "t")
    store.delete("t/_SUCCESS")
    ParquetDatasetStore(store).append_dataset(NEW, "t")
    assert store.exists("t/_SUCCESS")


def test_a_fresh_process_commit_reads_no_version_copy_while_none_can_have_expired(store: Store) -> None:
    """A process's first commit to a dataset (each Dagster step) lists ``_versions/`` for expired versions;
    the listing's write times show the oldest copy is younger than ``retain_for``, so it reads no copy (a
    ``GET`` per step), and the versions stay."""
    ds = ParquetDatasetStore(store)
    for rows in ([1], [2], [3]):
        ds.write_dataset(pa.table({"k": rows}), "t", overwrite=True)
    fresh = WrappingStore(store)  # another Store object: what this process learnt about "t" does not apply
    ParquetDatasetStore(fresh).write_dataset(NEW, "t", overwrite=True)
    assert [p for op, p in fresh.log if op == "list_files"] == ["t/_versions"]
    assert [p for op, p in fresh.log if op in ("read_bytes", "open_input") and "/_versions/" in p] == []
    assert [m.version for m in ParquetDatasetStore(store).history("t")] == [4, 3, 2, 1]
