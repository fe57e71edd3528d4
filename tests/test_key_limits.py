"""Store key limits checked before writing, and keys that only hold nested datasets (issue 9, item 13)."""

from __future__ import annotations

from pathlib import Path

import boto3
import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, S3Store, Store
from dagster_parquet_dataset.errors import DatasetIncomplete, DatasetNotFound, NotFound


def _table(k: list[str | None]) -> pa.Table:
    return pa.table({"id": pa.array(range(len(k)), pa.int64()), "k": pa.array(k, pa.string())})


def _bucket_keys(store: S3Store) -> list[str]:
    client = boto3.client("s3", endpoint_url=store.endpoint_url, region_name="us-east-1")
    return [o["Key"] for o in client.list_objects_v2(Bucket=store.bucket).get("Contents", [])]


def _all_files(store: LocalStore) -> list[str]:
    """Every file under the root except the lock files ``write_if`` leaves (empty, never data)."""
    root = Path(store.root)
    return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.name.endswith(".lock")]


def test_stores_declare_their_limits(s3_store: S3Store, tmp_path: Path) -> None:
    assert LocalStore(tmp_path).max_segment_bytes == 255
    assert LocalStore(tmp_path).max_key_bytes is None
    assert S3Store("bucket").max_key_bytes == 1024
    assert s3_store.prefix == "root/dir"
    assert s3_store.max_key_bytes == 1024 - len("root/dir/")
    assert s3_store.max_segment_bytes is None


# ---------------------------------------------------------------------------------------------- local disk


def test_local_partition_value_longer_than_a_folder_name(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    ds = ParquetDatasetStore(store)
    long_value = "x" * 300
    with pytest.raises(ValueError, match=r"column 'k'.*302 bytes once escaped.*at most 255 bytes per folder name"):
        ds.write_dataset(_table(["a", long_value, "b"]), "ev", partition_by=["k"])
    assert _all_files(store) == []


def test_local_partition_value_too_long_once_escaped(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    ds = ParquetDatasetStore(store)
    ds.write_dataset(_table(["a"]), "ev", partition_by=["k"])
    before = sorted(_all_files(store))
    # 100 characters, 300 bytes once Hive-escaped: "/" becomes "%2F".
    with pytest.raises(ValueError, match=r"column 'k'.*302 bytes once escaped"):
        ds.append_dataset(_table(["/" * 100]), "ev")
    with pytest.raises(ValueError, match=r"column 'k'.*at most 255 bytes per folder name"):
        ds.merge_dataset(_table(["ü" * 130]), "ev", key_columns=["id"])
    assert sorted(_all_files(store)) == before
    assert ds.read_dataset("ev").column("k").to_pylist() == ["a"]


def test_local_streamed_partition_value_too_long_leaves_nothing(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    ds = ParquetDatasetStore(store, max_rows_per_file=2)
    table = _table(["a", "a", "b", "c", "y" * 300])
    with pytest.raises(ValueError, match=r"column 'k'.*at most 255 bytes per folder name"):
        ds.write_dataset(
            pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=2)), "ev", partition_by=["k"]
        )
    assert _all_files(store) == []
    with pytest.raises(DatasetNotFound):
        ds.read_dataset("ev")


def test_local_key_segment_longer_than_a_folder_name(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    ds = ParquetDatasetStore(store)
    key = "bronze/" + "k" * 300 + "/events"
    with pytest.raises(ValueError, match=r"segment 'kkk.*is 300 bytes.*at most 255 bytes per file or folder name"):
        ds.write_dataset(_table(["a"]), key)
    with pytest.raises(ValueError, match="300 bytes"):
        ds.append_dataset(_table(["a"]), key)
    with pytest.raises(ValueError, match="300 bytes"):
        ds.merge_dataset(_table(["a"]), key, key_columns=["id"])
    with pytest.raises(ValueError, match="300 bytes"):
        ds.begin_write(key)
    assert _all_files(store) == []
    # 255 bytes is fine.
    ok = "bronze/" + "k" * 255
    ds.write_dataset(_table(["a"]), ok)
    assert ds.read_dataset(ok).num_rows == 1


# ---------------------------------------------------------------------------------------------------- S3


def test_s3_key_longer_than_1024_bytes(s3_store: S3Store) -> None:
    ds = ParquetDatasetStore(s3_store)
    key = "/".join(["s" * 200] * 6)  # 1205 bytes
    with pytest.raises(ValueError, match=r"is 1205 bytes.*at most 1015 bytes per key"):
        ds.write_dataset(_table(["a"]), key)
    # The key must leave room for the dataset's own names under it: 800 bytes of key is too long too.
    near = "/".join(["n" * 99] * 8)  # 799 bytes
    with pytest.raises(ValueError, match=r"at most 1015 bytes per key.*at most 759 bytes"):
        ds.write_dataset(_table(["a"]), near)
    assert _bucket_keys(s3_store) == []
    longest = "/".join(["m" * 98] * 7) + "/" + "m" * 66  # 759 bytes: the longest allowed
    assert len(longest) == 759
    ds.write_dataset(_table(["a"]), longest, overwrite=True)
    ds.append_dataset(_table(["b"]), longest)
    assert sorted(ds.read_dataset(longest).column("k").to_pylist()) == ["a", "b"]


def test_s3_partition_paths_longer_than_1024_bytes(s3_store: S3Store) -> None:
    ds = ParquetDatasetStore(s3_store)
    key = "/".join(["p" * 99] * 5)  # 499 bytes
    with pytest.raises(ValueError, match=r"part paths for the partition 'k' = 'vvv.*at most 1015 bytes per key"):
        ds.write_dataset(_table(["a", "v" * 500]), key, partition_by=["k"])
    assert _bucket_keys(s3_store) == []
    ds.write_dataset(_table(["a", "v" * 400]), key, partition_by=["k"])
    assert sorted(ds.read_dataset(key).column("k").to_pylist()) == ["a", "v" * 400]


# ------------------------------------------------------------------------------------------- nested keys


def test_key_holding_only_nested_datasets_is_not_found(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(_table(["a"]), "a/b")
    ds.write_dataset(_table(["c"]), "a/c")
    for call in (ds.read_dataset, ds.plan_read):
        with pytest.raises(DatasetNotFound, match=r"only holds the nested datasets 'a/b', 'a/c'"):
            call("a")
    assert not ds.dataset_exists("a")
    with pytest.raises(NotFound, match="does not exist"):
        ds.delete_dataset("a")
    assert ds.read_dataset("a/b").num_rows == 1


def test_unfinished_write_beside_nested_datasets_is_still_incomplete(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(_table(["a"]), "a/b")
    store.write_bytes("a/data.parquet", b"half a write")
    with pytest.raises(DatasetIncomplete, match="has files but no _SUCCESS") as info:
        ds.read_dataset("a")
    assert not isinstance(info.value, NotFound)
