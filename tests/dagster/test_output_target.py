"""One target per step: a handler's one write hook gets an ``OutputTarget`` built once from the context."""

from dataclasses import dataclass
from typing import Any

import dagster as dg
import pyarrow as pa

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager
from dagster_parquet_dataset.dagster_io.handlers import (
    ArrowTableHandler,
    HandlerRegistry,
    OutputTarget,
    TypeHandler,
    Written,
    builtin_handlers,
    write_arrow,
)


@dataclass
class Rows:
    """A type of our own: a list of dicts."""

    rows: list[dict[str, Any]]


SEEN: list[OutputTarget] = []


class RowsHandler(TypeHandler):
    """Writes ``Rows`` by overriding only the one write hook."""

    type_name = "tests.Rows"

    def handles(self, python_type: type) -> bool:
        return python_type is Rows

    def combine(self, objs: Any) -> Any:
        return Rows([r for o in objs for r in o.rows])

    def from_arrow(self, table: pa.Table) -> Rows:
        return Rows(table.to_pylist())

    def write(self, target: OutputTarget, datasets: ParquetDatasetStore, obj: Any) -> Written:
        SEEN.append(target)
        return write_arrow(target, datasets, pa.Table.from_pylist(obj.rows))


class RowsIOManager(RemoteStoreIOManager):
    @property
    def registry(self) -> HandlerRegistry:
        return HandlerRegistry([RowsHandler(), *builtin_handlers()])


DAYS = dg.StaticPartitionsDefinition(["mon", "tue"])


@dg.asset(partitions_def=DAYS, metadata={"write_mode": "append", "partition_by": ["kind"]})
def events(context: dg.AssetExecutionContext) -> Rows:
    return Rows([{"kind": "a", "n": 1}, {"kind": "b", "n": 2}])


def test_the_write_hook_gets_one_target_with_options_parsed_once(root: str, instance: dg.DagsterInstance) -> None:
    SEEN.clear()
    io = RowsIOManager(store=LocalStoreResource(root=root))
    for _ in range(2):
        assert dg.materialize([events], partition_key="tue", resources={"io_manager": io}, instance=instance).success
    first, second = SEEN
    assert second.dataset_key == "events/tue" and second.partition_keys == ("tue",)
    assert second.asset_key == dg.AssetKey(["events"]) and second.what == "asset events"
    assert (second.write_mode, second.options.partition_by) == ("append", ("kind",))
    assert second.metadata["dagster.python_type"] == "tests.Rows"
    assert second.expect_owner["dagster.asset_key"] == "events"
    assert second.idempotency_key is not None and second.idempotency_key.startswith("dagster:")
    assert first.live is not None and first.live.manifest is None  # read once, before the first write
    assert second.live is not None and second.live.manifest is not None and second.live.manifest.version == 1
    table = ParquetDatasetStore(LocalStore(root), retain_versions=1).read_dataset("events/tue")
    assert sorted(table["n"].to_pylist()) == [1, 1, 2, 2]
    assert ArrowTableHandler().write.__qualname__ == "TypeHandler.write"  # the one hook, not one per mode
