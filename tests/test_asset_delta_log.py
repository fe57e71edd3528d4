"""One Delta table over a partitioned asset's partition datasets (``ParquetDatasetStore.sync_asset_delta_log``,
issue 29 item 4), read back through ``deltalake`` on a local disk and on moto S3."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from dagster_parquet_dataset import DatasetNotFound, LocalStore, ParquetDatasetStore, S3Store, Store
from dagster_parquet_dataset.storage.base import FileInfo
from tests._stores import WrappingStore

ASSET = "sales/daily"


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "local":
        return LocalStore(str(tmp_path))
    return request.getfixturevalue("s3_store")


def _table(store: Store, version: int | None = None) -> DeltaTable:
    inner = store.inner if isinstance(store, WrappingStore) else store
    options = None
    if isinstance(inner, S3Store):
        options = {
            "AWS_ENDPOINT_URL": inner.endpoint_url,  # type: ignore[attr-defined]
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
        }
    return DeltaTable(inner.uri(ASSET), version=version, storage_options=options)


def _rows(table: DeltaTable, column: str = "partition") -> dict[Any, list[int]]:
    out: dict[Any, list[int]] = {}
    for row in table.to_pyarrow_table().to_pylist():
        out.setdefault(row[column], []).append(row["n"])
    return {k: sorted(v) for k, v in out.items()}


def _write(datasets: ParquetDatasetStore, folder: str, ns: list[int], **kwargs: Any) -> None:
    datasets.write_dataset(pa.table({"n": pa.array(ns, pa.int64())}), f"{ASSET}/{folder}", **kwargs)


def test_partitions_read_as_one_table_and_follow_every_change(backend: Store) -> None:
    datasets = ParquetDatasetStore(backend, delta_log=True, retain_versions=None)
    _write(datasets, "2024-01-01", [1, 2], run_id="r1")
    _write(datasets, "2024-01-02", [3], run_id="r2")
    assert datasets.sync_asset_delta_log(ASSET, columns=["partition"]) == 0
    assert _rows(_table(backend)) == {"2024-01-01": [1, 2], "2024-01-02": [3]}
    # A partition replaced, one appended to, one added, one deleted: each update is one version.
    _write(datasets, "2024-01-01", [9], overwrite=True, run_id="r3")
    assert datasets.sync_asset_delta_log(ASSET, partitions=["2024-01-01"]) == 1
    datasets.append_dataset(pa.table({"n": pa.array([4], pa.int64())}), f"{ASSET}/2024-01-02", run_id="r4")
    _write(datasets, "2024-01-03", [5], run_id="r4")
    assert datasets.sync_asset_delta_log(ASSET, partitions=["2024-01-02", "2024-01-03"]) == 2
    assert _rows(_table(backend)) == {"2024-01-01": [9], "2024-01-02": [3, 4], "2024-01-03": [5]}
    assert _rows(_table(backend, 1)) == {"2024-01-01": [9], "2024-01-02": [3]}  # time travel
    datasets.delete_dataset(f"{ASSET}/2024-01-01")
    assert datasets.sync_asset_delta_log(ASSET) == 3  # the whole folder: the deleted partition leaves
    assert datasets.sync_asset_delta_log(ASSET) == 3  # nothing more to do
    table = _table(backend)
    assert _rows(table) == {"2024-01-02": [3, 4], "2024-01-03": [5]}
    live = {f"{d}/{p}" for d in ("2024-01-02", "2024-01-03") for p in datasets.read_manifest(f"{ASSET}/{d}").parts}
    assert set(table.get_add_actions(flatten=True).column("path").to_pylist()) == live
    if isinstance(backend, LocalStore):  # deltalake's history() lists with start-after, which moto never answers
        assert [h.get("runId") for h in table.history()][1:] == ["r4", "r3", None]


def test_awkward_partition_values_and_several_dimensions(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    datasets = ParquetDatasetStore(store)  # delta_log off: the asset table does not need the datasets' own logs
    values = {"a b": 1, "50%": 2, "x=y": 3, "ünï": 4, "": 5, "_delta_log": 6}
    # The Dagster layer's folder names: % escaped, "" as a lone %, a reserved name's first character escaped.
    folders = {"a b": "a b", "50%": "50%25", "x=y": "x=y", "ünï": "ünï", "": "%", "_delta_log": "%5Fdelta_log"}
    for value, n in values.items():
        datasets.write_dataset(pa.table({"n": [n]}), f"{ASSET}/eu/{folders[value]}")
    datasets.write_dataset(pa.table({"n": [7], "k": ["v"]}), f"{ASSET}/us/2024", partition_by=["k"])
    datasets.sync_asset_delta_log(ASSET, columns=["region", "day"])
    table = DeltaTable(str(tmp_path / ASSET))
    assert table.metadata().partition_columns == ["region", "day", "k"]
    got = {(r["region"], r["day"], r["k"]): r["n"] for r in table.to_pyarrow_table().to_pylist()}
    # Delta reads an empty partition value as null (docs/delta.md).
    expected = {("eu", v if v else None, None): n for v, n in values.items()} | {("us", "2024", "v"): 7}
    assert got == expected


def test_the_asset_folder_is_still_no_dataset(tmp_path: Path) -> None:
    """The asset table in the folder above the partitions does not make that folder an incomplete dataset."""
    datasets = ParquetDatasetStore(LocalStore(str(tmp_path)))
    _write(datasets, "a", [1])
    datasets.sync_asset_delta_log(ASSET, columns=["partition"])
    with pytest.raises(DatasetNotFound, match=r"only holds the nested datasets 'sales/daily/a'"):
        datasets.read_dataset(ASSET)
    assert not datasets.dataset_exists(ASSET)
    assert [d.key for d in datasets.list_datasets()] == [f"{ASSET}/a"]


def test_schema_conflicts_are_refused_and_change_nothing(tmp_path: Path) -> None:
    datasets = ParquetDatasetStore(LocalStore(str(tmp_path)))
    _write(datasets, "a", [1])
    datasets.sync_asset_delta_log(ASSET, columns=["partition"])
    datasets.write_dataset(pa.table({"n": ["text"]}), f"{ASSET}/b")
    before = sorted(f.path for f in datasets.store.list_files(f"{ASSET}/_delta_log"))
    with pytest.raises(ValueError, match=r"partition\(s\) \['b'\] cannot join"):
        datasets.sync_asset_delta_log(ASSET, partitions=["b"])
    with pytest.raises(ValueError, match=r"made with the partition columns \['partition'\], not \['day'\]"):
        datasets.sync_asset_delta_log(ASSET, columns=["day"])
    with pytest.raises(ValueError, match=r"pass columns="):
        datasets.sync_asset_delta_log("other")
    assert datasets.sync_asset_delta_log("other", columns=["partition"], partitions=["never"]) == -1  # no table
    assert not list(datasets.store.list_files("other"))
    assert sorted(f.path for f in datasets.store.list_files(f"{ASSET}/_delta_log")) == before


def test_twelve_updates_write_a_checkpoint_that_loads(tmp_path: Path) -> None:
    datasets = ParquetDatasetStore(LocalStore(str(tmp_path)))
    for i in range(12):
        _write(datasets, f"p{i:02d}", [i])
        assert datasets.sync_asset_delta_log(ASSET, columns=["partition"], partitions=[f"p{i:02d}"]) == i
    log = tmp_path / ASSET / "_delta_log"
    assert (log / "00000000000000000010.checkpoint.parquet").exists()
    (log / "00000000000000000003.json").unlink()  # a reader (and the next update) starts from the checkpoint
    assert _rows(DeltaTable(str(tmp_path / ASSET))) == {f"p{i:02d}": [i] for i in range(12)}
    _write(datasets, "p00", [100], overwrite=True)
    assert datasets.sync_asset_delta_log(ASSET, partitions=["p00"]) == 12
    assert _rows(DeltaTable(str(tmp_path / ASSET)))["p00"] == [100]


class Race(WrappingStore):
    """Holds the thread named ``slow`` at its put of the asset log's version 1 until the other update has
    put version 1 itself: the slow one then finds it taken. The other update does not see the slow one's
    hand-over marker (so it cannot take the slow one's partition along: the slow one must retry)."""

    def list_files(self, path: str) -> Iterator[FileInfo]:
        if path == f"{ASSET}/_delta_manifests" and threading.current_thread().name != "slow":
            return iter(())
        return super().list_files(path)

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.slow_at_put = threading.Event()
        self.other_landed = threading.Event()

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        if path == f"{ASSET}/_delta_log/00000000000000000001.json":
            if threading.current_thread().name == "slow" and not self.slow_at_put.is_set():
                self.slow_at_put.set()
                assert self.other_landed.wait(timeout=60)
            else:
                token = super().write_if(path, data, expected=expected)
                self.other_landed.set()
                return token
        return super().write_if(path, data, expected=expected)


@pytest.mark.timeout(120)
def test_racing_partition_updates_never_lose_each_others_files(backend: Store) -> None:
    store = Race(backend)
    datasets = ParquetDatasetStore(store)
    for folder, n in (("p0", 0), ("p1", 1), ("p2", 2)):
        _write(datasets, folder, [n])
    datasets.sync_asset_delta_log(ASSET, columns=["partition"], partitions=["p0"])
    errors: list[BaseException] = []

    def slow() -> None:
        try:
            datasets.sync_asset_delta_log(ASSET, partitions=["p1"])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=slow, name="slow")
    thread.start()
    assert store.slow_at_put.wait(timeout=60)
    assert datasets.sync_asset_delta_log(ASSET, partitions=["p2"]) == 1  # wins version 1
    thread.join(timeout=60)
    assert not errors and not thread.is_alive()
    table = _table(store)
    assert table.version() == 2  # the slow update re-read the log and the manifests, and took version 2
    assert _rows(table) == {"p0": [0], "p1": [1], "p2": [2]}
