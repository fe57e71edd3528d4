"""Errors say which dataset failed in an attribute (``exc.key``), never only in their text.

The Dagster layer tells which partition of an input failed from the error's ``key``; an input
whose partitions cannot be combined fails with ``PartitionsNotCombinable`` (a ``ValueError``), which
the IO manager re-words to name the asset. No code looks inside an error's message.
"""

from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from dagster_parquet_dataset import (
    DatasetIncomplete,
    DatasetNotFound,
    LocalStore,
    ParquetDatasetStore,
    PartitionsNotCombinable,
    RemoteStoreError,
)
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager
from dagster_parquet_dataset.dagster_io.handlers import ArrowTableHandler


def test_read_errors_carry_the_dataset_key(datasets: ParquetDatasetStore) -> None:
    with pytest.raises(DatasetNotFound) as info:
        datasets.read_dataset("nothing/here")
    assert info.value.key == "nothing/here"
    datasets.write_dataset(pa.table({"x": [1]}), "p/1")
    datasets.write_dataset(pa.table({"x": [2]}), "p/10")
    part = datasets.read_manifest("p/1").parts[0]
    datasets.store.delete(f"p/1/{part}")
    with pytest.raises(DatasetIncomplete) as info:
        datasets.scan_datasets(["p/10", "p/1"]).to_table()
    assert info.value.key == "p/1"


def test_the_key_is_kept_when_set_and_read_as_dataset_key() -> None:
    exc = RemoteStoreError("dataset 'b' and dataset 'a'", key="a")
    assert exc.about("b") is exc and exc.key == exc.dataset_key == "a"
    assert RemoteStoreError("no key").about("c").key == "c"


def test_read_many_finds_the_failed_key_by_its_attribute_not_its_message(datasets: ParquetDatasetStore) -> None:
    """The error of one key names another in its text (as a message quoting a nested key might): the
    attribute decides."""
    for key in ("q/a", "q/b"):
        datasets.write_dataset(pa.table({"x": [1]}), key)

    class Misleading(ArrowTableHandler):
        def read(self, context: Any, datasets: ParquetDatasetStore, key: str, **kwargs: Any) -> Any:
            if key == "q/b":
                raise DatasetIncomplete("dataset 'q/a' is mentioned here, but 'q/b' failed", key="q/b")
            return super().read(context, datasets, key, **kwargs)

        def _scan_fits(self, schema: pa.Schema) -> bool:
            return False  # per-key reads

    with pytest.raises(DatasetIncomplete) as info:
        Misleading().read_many(None, datasets, ["q/a", "q/b"], columns=None)
    assert info.value.key == "q/b"


PARTS = dg.StaticPartitionsDefinition(["a", "b"])


@dg.asset(partitions_def=PARTS)
def clashing(context: dg.AssetExecutionContext) -> pa.Table:
    values: Any = [1, 2] if context.partition_key == "a" else [[1], [2]]  # int64 vs list<int64>
    return pa.table({"x": values})


@dg.asset(ins={"clashing": dg.AssetIn(partition_mapping=dg.AllPartitionMapping())})
def together(clashing: pa.Table) -> int:
    return clashing.num_rows


def test_partitions_that_cannot_be_combined_fail_with_a_specific_error(root: str, instance: dg.DagsterInstance) -> None:
    io = RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=1)
    resources = {"io_manager": io}
    for pk in ("a", "b"):
        assert dg.materialize([clashing, together], selection=[clashing], partition_key=pk, resources=resources,
                              instance=instance).success  # fmt: skip
    with pytest.raises(PartitionsNotCombinable, match="cannot concatenate the partitions of asset clashing") as info:
        dg.materialize([clashing, together], selection=[together], resources=resources, instance=instance)
    assert isinstance(info.value, ValueError)
    assert ParquetDatasetStore(LocalStore(root), retain_versions=1).read_dataset("clashing/a").num_rows == 2
