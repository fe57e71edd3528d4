"""The IO manager with every context Dagster's test helpers build (issue 13, item 6).

``build_input_context`` / ``build_output_context`` may leave out the name, the
step key, the partitions definition or the instance; unit tests of assets use
them that way.
"""

import dagster as dg
import pandas as pd
import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore
from dagster_parquet_dataset.dagster_io import RemoteStoreIOManager, UnsupportedTypeError

from .conftest import read

#: Deliberately not in alphabetical order.
letters = dg.StaticPartitionsDefinition(["c", "a", "b", "e", "d"])


def _write(io_manager: RemoteStoreIOManager, asset: str, table: pa.Table, **kwargs: object) -> None:
    io_manager.handle_output(dg.build_output_context(asset_key=dg.AssetKey([asset]), **kwargs), table)  # type: ignore[arg-type]


def test_input_without_a_name_loads(io_manager: RemoteStoreIOManager) -> None:
    _write(io_manager, "numbers", pa.table({"n": [1, 2]}))
    loaded = io_manager.load_input(dg.build_input_context(asset_key=dg.AssetKey(["numbers"])))
    assert loaded.to_pydict() == {"n": [1, 2]}
    as_pandas = io_manager.load_input(
        dg.build_input_context(
            asset_key=dg.AssetKey(["numbers"]),
            dagster_type=dg.PythonObjectDagsterType(pd.DataFrame),
            definition_metadata={"columns": ["n"]},
        )
    )
    assert as_pandas["n"].tolist() == [1, 2]


def test_unsupported_types_without_a_name_raise_our_type_error(io_manager: RemoteStoreIOManager) -> None:
    with pytest.raises(UnsupportedTypeError, match="cannot store the output of asset things: it is a builtins.set"):
        io_manager.handle_output(dg.build_output_context(asset_key=dg.AssetKey(["things"])), {1, 2})
    _write(io_manager, "numbers", pa.table({"n": [1]}))
    with pytest.raises(UnsupportedTypeError, match="cannot load the input as builtins.set"):
        io_manager.load_input(
            dg.build_input_context(asset_key=dg.AssetKey(["numbers"]), dagster_type=dg.PythonObjectDagsterType(set))
        )


def test_partition_key_without_partitions_definition(
    io_manager: RemoteStoreIOManager, datasets: ParquetDatasetStore
) -> None:
    _write(io_manager, "events", pa.table({"n": [1]}), partition_key="2024-06-01")
    assert read(datasets, "events/2024-06-01").to_pydict() == {"n": [1]}
    assert datasets.read_manifest("events/2024-06-01").metadata["dagster.partition_key"] == "2024-06-01"
    loaded = io_manager.load_input(
        dg.build_input_context(asset_key=dg.AssetKey(["events"]), partition_key="2024-06-01")
    )
    assert loaded.to_pydict() == {"n": [1]}

    # A MultiPartitionKey object carries its dimensions: values go in sorted dimension order.
    key = dg.MultiPartitionKey({"region": "eu", "date": "2024-06-01"})
    _write(io_manager, "sales", pa.table({"n": [2]}), partition_key=key)
    assert read(datasets, "sales/2024-06-01/eu").to_pydict() == {"n": [2]}


def test_several_partitions_come_back_in_partition_order(io_manager: RemoteStoreIOManager) -> None:
    for letter in letters.get_partition_keys():
        _write(io_manager, "letters", pa.table({"l": [letter]}), partition_key=letter, asset_partitions_def=letters)

    def context(annotation: type) -> dg.InputContext:
        return dg.build_input_context(
            name="letters",  # only the order is under test here
            asset_key=dg.AssetKey(["letters"]),
            asset_partitions_def=letters,
            asset_partition_key_range=dg.PartitionKeyRange("c", "d"),
            dagster_type=dg.PythonObjectDagsterType(annotation),
        )

    assert io_manager.load_input(context(pa.Table)).column("l").to_pylist() == ["c", "a", "b", "e", "d"]
    assert list(io_manager.load_input(context(dict))) == ["c", "a", "b", "e", "d"]


def test_op_output_context_without_step_key_says_what_to_pass(io_manager: RemoteStoreIOManager) -> None:
    with pytest.raises(ValueError, match="pass asset_key=..., or step_key=... and name=..."):
        io_manager.handle_output(dg.build_output_context(), pa.table({"n": [1]}))
    with pytest.raises(ValueError, match="pass asset_key=..., or step_key=... and name=..."):
        io_manager.load_input(dg.build_input_context(upstream_output=dg.build_output_context(step_key="s")))
