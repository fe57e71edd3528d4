"""A store with no AWS credentials anywhere says so, for reads as for writes (moto S3 server).

Without credentials, pyarrow's S3 filesystem sends anonymous requests, which
S3 answers with "access denied"; the store refuses the read up front with the
message a write gets.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore, S3Store
from dagster_parquet_dataset.errors import StoreAccessError

_CAUSE = "no AWS credentials were found"


def _drop_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credentials in the environment, the shared files or an instance role."""
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    empty = tmp_path / "empty"
    empty.write_text("")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role to ask for (and no wait)


def _cause(exc: pytest.ExceptionInfo[StoreAccessError]) -> str:
    return str(exc.value).split(": ", 1)[1]


def test_reads_without_credentials_say_so_like_writes(
    s3_store: S3Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ParquetDatasetStore(s3_store).write_dataset(pa.table({"a": [1, 2]}), "sales")  # with the suite's credentials
    _drop_credentials(monkeypatch, tmp_path)
    bare = S3Store(s3_store.bucket, prefix=s3_store.prefix, endpoint_url=s3_store.endpoint_url)
    datasets = ParquetDatasetStore(bare)

    with pytest.raises(StoreAccessError, match=_CAUSE) as written:
        datasets.write_dataset(pa.table({"a": [3]}), "other")
    reads = {
        "read_dataset": lambda: datasets.read_dataset("sales"),
        "scan_dataset": lambda: datasets.scan_dataset("sales").to_table(),
        "read_manifest": lambda: datasets.read_manifest("sales"),
        "exists": lambda: bare.exists("sales/manifest.json"),
        "list_files": lambda: list(bare.list_files("")),
    }
    for name, read in reads.items():
        with pytest.raises(StoreAccessError, match=_CAUSE) as failed:
            read()
        assert _cause(failed) == _cause(written), name
        assert "access denied" not in str(failed.value), name
