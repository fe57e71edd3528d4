"""Partition folder names that Hive-convention readers decode to the values read_dataset returns (issue 9, item 12)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.dataset.io.encode import PART_PATH_KEY

# Non-ASCII, spaces, every character Hive escapes that a key may hold, and nulls.
VALUES: list[str | None] = [
    "ü",
    "Zürich Straße",
    "日本",
    "a b",
    "x=y",
    "a/b",
    "50%",
    "#1",
    "é/ü%3D",
    "tab\there",
    "quote'\"",
    "colon:star*?",
    "{[^]}",
    "back\\slash",
    "plain",
    None,
]


def _table(values: list[Any]) -> pa.Table:
    n = len(values) * 2
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "k": pa.array([values[i % len(values)] for i in range(n)], pa.string()),
        }
    )


def _pairs(table: pa.Table) -> set[tuple[int, str | None]]:
    return set(zip(table.column("id").to_pylist(), table.column("k").to_pylist(), strict=True))


def _folders(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("_")}


def test_folders_use_hive_escaping(tmp_path: Path) -> None:
    ds = ParquetDatasetStore(LocalStore(tmp_path))
    manifest = ds.write_dataset(_table(VALUES), "ev", partition_by=["k"])
    folders = {p.rpartition("/")[0] for p in manifest.parts}
    assert "k=ü" in folders
    assert "k=Zürich Straße" in folders
    assert "k=日本" in folders
    assert "k=a b" in folders
    assert "k=x%3Dy" in folders
    assert "k=a%2Fb" in folders
    assert "k=50%25" in folders
    assert "k=%231" in folders
    assert "k=é%2Fü%253D" in folders
    assert "k=tab%09here" in folders
    assert "k=quote%27%22" in folders
    assert "k=colon%3Astar%2A%3F" in folders
    assert "k=%7B%5B%5E%5D}" in folders
    assert "k=back%5Cslash" in folders
    assert "k=__HIVE_DEFAULT_PARTITION__" in folders
    assert _folders(tmp_path / "ev") == folders


def test_spark_pyarrow_and_duckdb_read_the_folders_as_read_dataset_does(tmp_path: Path, spark: Any) -> None:
    import duckdb
    from pyspark.sql import types as T

    ds = ParquetDatasetStore(LocalStore(tmp_path / "store"))
    table = _table([*VALUES, ""])
    ds.write_dataset(table, "ev", partition_by=["k"])
    folder = tmp_path / "store" / "ev"
    ours = _pairs(ds.read_dataset("ev"))
    assert ours == _pairs(table)
    # Like Hive, Spark stores an empty string as the null partition; read_dataset keeps it, from the manifest.
    expected = {(i, None if k == "" else k) for i, k in ours}

    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("k", T.StringType())])
    rows = spark.read.schema(schema).option("pathGlobFilter", "*.parquet").parquet(folder.as_uri()).collect()
    assert {(r["id"], r["k"]) for r in rows} == expected

    direct = pads.dataset(
        str(folder),
        format="parquet",
        partitioning=pads.partitioning(pa.schema([("k", pa.string())]), flavor="hive"),
        exclude_invalid_files=True,
    ).to_table()
    assert _pairs(direct) == expected

    relation = duckdb.sql(
        f"select id, k from read_parquet('{folder}/**/*.parquet', hive_partitioning=true, hive_types={{'k': VARCHAR}})"
    )
    assert set(relation.fetchall()) == expected


def test_spark_names_partition_folders_as_we_do(tmp_path: Path, spark: Any) -> None:
    from pyspark.sql import types as T

    ds = ParquetDatasetStore(LocalStore(tmp_path / "store"))
    table = _table([*VALUES, ""])
    ds.write_dataset(table, "ev", partition_by=["k"])
    schema = T.StructType([T.StructField("id", T.LongType()), T.StructField("k", T.StringType())])
    spark_out = tmp_path / "spark_out"
    spark.createDataFrame(table.to_pylist(), schema).write.partitionBy("k").parquet(spark_out.as_uri())
    assert _folders(spark_out) == _folders(tmp_path / "store" / "ev")


def _rewrite_with_old_folder_names(root: Path, key: str) -> None:
    """Lay the dataset out as the earlier code did: every byte outside [A-Za-z0-9_.~-] percent-encoded."""
    path = root / key / "manifest.json"
    manifest = json.loads(path.read_text())
    renamed: dict[str, str] = {}
    for entry in manifest["files"]:
        folder = "/".join(
            f"{quote(c, safe='')}={quote('__HIVE_DEFAULT_PARTITION__' if v is None else str(v), safe='')}"
            for c, v in entry["partition_values"].items()
        )
        old = f"{folder}/{entry['path'].rpartition('/')[2]}"
        os.makedirs(root / key / folder, exist_ok=True)
        # The earlier code wrote no path tag into the footer: write the part again without it.
        with open(root / key / entry["path"], "rb") as f:
            part = pq.read_table(f)
        untagged = {k: v for k, v in (part.schema.metadata or {}).items() if k != PART_PATH_KEY.encode()}
        with open(root / key / f"{old}.tmp", "wb") as f:
            pq.write_table(part.replace_schema_metadata(untagged), f, compression="zstd")
        os.remove(root / key / entry["path"])  # the old and new names can be the same (a value like "#1")
        os.replace(root / key / f"{old}.tmp", root / key / old)
        renamed[entry["path"]] = old
        entry["path"] = old
        entry["size_bytes"] = (root / key / old).stat().st_size
    manifest["parts"] = [renamed[p] for p in manifest["parts"]]
    path.write_text(json.dumps(manifest))


@pytest.mark.parametrize("max_rows", [None, 3])
def test_datasets_with_old_folder_names_still_read_and_append(tmp_path: Path, max_rows: int | None) -> None:
    ds = ParquetDatasetStore(LocalStore(tmp_path), max_rows_per_file=max_rows)
    table = _table(VALUES)
    ds.write_dataset(table, "ev", partition_by=["k"])
    _rewrite_with_old_folder_names(tmp_path, "ev")
    paths = ds.read_manifest("ev").parts
    assert any("%C3%BC" in p for p in paths)  # the old encoding of "ü" is what the manifest lists now
    assert all((tmp_path / "ev" / p).is_file() for p in paths)
    assert _pairs(ds.read_dataset("ev")) == _pairs(table)
    assert _pairs(ds.read_dataset("ev", filters=[("k", "==", "ü")])) == {(i, k) for i, k in _pairs(table) if k == "ü"}
    more = pa.table({"id": pa.array([1000, 1001], pa.int64()), "k": ["ü", None]})
    ds.append_dataset(more, "ev")
    assert _pairs(ds.read_dataset("ev")) == _pairs(table) | _pairs(more)
