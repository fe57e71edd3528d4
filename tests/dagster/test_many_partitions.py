"""An input over many partitions fetches each partition's manifest once, in parallel (issue 21, item 5)."""

import faulthandler
import threading
from collections.abc import Callable, Iterator

import dagster as dg
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, Store
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager
from dagster_parquet_dataset.dagster_io.resources import StoreResource

from .._stores import WrappingStore

DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-07")  # 01 .. 06
N = 6


@dg.asset(partitions_def=DAYS)
def days(context: dg.AssetExecutionContext) -> pa.Table:
    n = int(context.partition_key[-2:])
    return pa.table({"day": [context.partition_key] * n, "n": list(range(n))})


@dg.asset
def all_days(days: pa.Table) -> pa.Table:
    return days


@dg.asset(ins={"days": dg.AssetIn(metadata={"allow_missing_partitions": True})})
def lenient_days(days: pa.Table) -> pa.Table:
    return days


ALL = [days, all_days, lenient_days]

#: What the store under test does once the Nth manifest of ``days`` has been read (set by a test).
_AFTER_ROOTS: list[Callable[[], None]] = []
_SEEN: list["CountingStore"] = []


class CountingStore(WrappingStore):
    """Counts requests; the first N manifest reads of ``days`` wait at a barrier only N concurrent readers pass."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.barrier = threading.Barrier(N)
        self.roots_read = 0

    def read_bytes(self, path: str) -> bytes:
        data = super().read_bytes(path)
        if path.startswith("days/") and path.endswith("/manifest.json"):
            with self._lock:
                self.roots_read += 1
                first_n = self.roots_read <= N
            if first_n:  # the first fetch of the N roots (a fallback after the race below reads them again)
                self.barrier.wait(timeout=60)  # BrokenBarrierError if the N fetches do not overlap
                if self.barrier.wait(timeout=60) == 0 and _AFTER_ROOTS:  # all N read: one thread runs the hook
                    _AFTER_ROOTS.pop()()
        return data

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        return self.inner.arrow_filesystem()

    def upstream_requests(self) -> list[tuple[str, str]]:
        """Requests on ``days`` other than reads of its data parts."""
        return [(op, p) for op, p in self.log if p.startswith("days/") and not p.endswith(".parquet")]


class CountingResource(StoreResource):
    root: str

    def get_store(self) -> Store:
        store = CountingStore(LocalStore(self.root))
        _SEEN.append(store)
        return store


@pytest.fixture(autouse=True)
def _watchdog() -> Iterator[None]:
    faulthandler.dump_traceback_later(300, exit=True)
    _AFTER_ROOTS.clear()
    _SEEN.clear()
    yield
    faulthandler.cancel_dump_traceback_later()


def _materialize_days(root: str, instance: dg.DagsterInstance) -> None:
    plain = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)
    for day in DAYS.get_partition_keys():
        result = dg.materialize(
            ALL, resources={"io_manager": plain}, instance=instance, selection=[days], partition_key=day
        )
        assert result.success


def _load(root: str, instance: dg.DagsterInstance, asset: dg.AssetsDefinition) -> dg.ExecuteInProcessResult:
    counting = RemoteStoreIOManager(store=CountingResource(root=root), retain_versions=1)
    return dg.materialize(
        ALL, resources={"io_manager": counting}, instance=instance, selection=[asset], raise_on_error=False
    )


def test_an_input_over_n_partitions_reads_n_manifests_in_parallel_and_nothing_else(
    root: str, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    _materialize_days(root, instance)
    result = _load(root, instance, all_days)
    assert result.success
    (store,) = {id(s): s for s in _SEEN}.values()
    keys = [f"days/{day}" for day in DAYS.get_partition_keys()]
    assert sorted(store.upstream_requests()) == sorted(("read_bytes", f"{k}/manifest.json") for k in keys)
    out = datasets.read_dataset("all_days")
    assert out.column("n").to_pylist() == [i for d in range(1, N + 1) for i in range(d)]


@pytest.mark.parametrize("lenient", [True, False], ids=["allow_missing", "strict"])
def test_a_partition_deleted_after_its_manifest_was_read(
    root: str, datasets: ParquetDatasetStore, instance: dg.DagsterInstance, lenient: bool
) -> None:
    _materialize_days(root, instance)
    gone = "days/2024-01-03"
    _AFTER_ROOTS[:] = [lambda: ParquetDatasetStore(LocalStore(root), retain_versions=1).delete_dataset(gone)]
    result = _load(root, instance, lenient_days if lenient else all_days)
    assert not _AFTER_ROOTS, "the delete must have run between the manifest reads and the data reads"
    if lenient:
        assert result.success
        out = datasets.read_dataset("lenient_days")
        assert sorted(set(out.column("day").to_pylist())) == [d for d in DAYS.get_partition_keys() if d != "2024-01-03"]
    else:
        assert not result.success
        error = str(result.get_step_failure_events()[0].step_failure_data.error)
        assert "2024-01-03" in error and "DatasetNotFound" in error


def test_a_corrupt_manifest_among_the_partitions_is_named(
    root: str, datasets: ParquetDatasetStore, instance: dg.DagsterInstance
) -> None:
    _materialize_days(root, instance)
    datasets.store.write_bytes("days/2024-01-05/manifest.json", b"{not json")
    result = _load(root, instance, all_days)
    assert not result.success
    error = str(result.get_step_failure_events()[0].step_failure_data.error)
    assert "ManifestCorrupted" in error and "days/2024-01-05" in error
