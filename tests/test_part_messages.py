"""A read of a damaged dataset names each bad part once (``DatasetIncomplete``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.errors import DatasetIncomplete


def _written(tmp_path: Path) -> tuple[ParquetDatasetStore, Path]:
    datasets = ParquetDatasetStore(LocalStore(tmp_path))
    datasets.write_dataset(pa.table({"a": list(range(100))}), "k")
    [part] = datasets.read_manifest("k").parts
    return datasets, tmp_path / "k" / part


def test_a_missing_part_is_named_once(tmp_path: Path) -> None:
    datasets, part = _written(tmp_path)
    part.unlink()
    with pytest.raises(DatasetIncomplete) as info:
        datasets.read_dataset("k")
    assert str(info.value).count(part.name) == 1, str(info.value)


def test_a_truncated_part_is_named_once_and_its_size_given(tmp_path: Path) -> None:
    datasets, part = _written(tmp_path)
    data = part.read_bytes()
    part.write_bytes(data[:-10])
    with pytest.raises(DatasetIncomplete) as info:
        datasets.read_dataset("k")
    message = str(info.value)
    assert message.count(part.name) == 1, message
    assert f"is {len(data) - 10} bytes; the manifest records {len(data)}" in message
