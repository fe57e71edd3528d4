"""A pruned read costs the manifest and the data: 2 requests on S3 (issue 25).

A 100-file dataset on a moto S3 server, read with a filter that selects one
file, in a fresh process and again (warm) on the same store object. The
requests are counted twice: by wrapping the public ``Store`` (what the package
asks of it) and by an HTTP proxy in front of moto (what reaches the server).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore, S3Store
from tests._s3_proxy import LossyProxy
from tests._stores import WrappingStore
from tests.conftest import make_bucket

ROOT = Path(__file__).resolve().parents[1]
FILES = 100
PER_FILE = 100
FILTERS = [("id", ">=", 4210), ("id", "<", 4220)]

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def proxy(moto_endpoint: str) -> Iterator[LossyProxy]:
    lossy = LossyProxy(moto_endpoint)
    yield lossy
    lossy.close()


def _write(endpoint: str) -> str:
    bucket = make_bucket(endpoint)
    table = pa.table(
        {"id": pa.array(range(FILES * PER_FILE), pa.int64()), "v": [f"r{i}" for i in range(FILES * PER_FILE)]}
    )
    datasets = ParquetDatasetStore(S3Store(bucket, prefix="lake", endpoint_url=endpoint), max_rows_per_file=PER_FILE)
    assert len(datasets.write_dataset(table, "events").parts) == FILES
    return bucket


def _http_requests(proxy: LossyProxy) -> list[tuple[str, str]]:
    return [(method, path.split("?")[0].split("/lake/", 1)[-1]) for method, path, _status in proxy.seen]


def test_a_pruned_read_in_a_fresh_process_makes_two_requests(moto_endpoint: str, proxy: LossyProxy) -> None:
    bucket = _write(moto_endpoint)
    script = textwrap.dedent(
        f"""
        import json
        from dagster_parquet_dataset import ParquetDatasetStore, S3Store
        from tests._stores import WrappingStore

        store = WrappingStore(S3Store({bucket!r}, prefix="lake", endpoint_url={proxy.url!r}))
        table = ParquetDatasetStore(store).read_dataset("events", filters={FILTERS!r})
        print(json.dumps({{"ids": table.column("id").to_pylist(), "log": store.log}}))
        """
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT, timeout=240)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ids"] == list(range(4210, 4220))
    assert [op for op, _ in got["log"]] in (["read_bytes", "open_input"], ["read_versioned", "open_input"]), got
    [(_, manifest), (_, part)] = got["log"]
    assert manifest == "events/manifest.json" and part.startswith("events/part-00042")
    http = _http_requests(proxy)
    assert http == [("GET", "events/manifest.json"), ("GET", part)], http


def test_a_warm_pruned_read_makes_two_requests(moto_endpoint: str, proxy: LossyProxy) -> None:
    bucket = _write(moto_endpoint)
    store = WrappingStore(S3Store(bucket, prefix="lake", endpoint_url=proxy.url))
    datasets = ParquetDatasetStore(store)
    assert datasets.read_dataset("events", filters=FILTERS).column("id").to_pylist() == list(range(4210, 4220))
    store.log.clear()
    proxy.seen.clear()
    assert datasets.read_dataset("events", filters=FILTERS).column("id").to_pylist() == list(range(4210, 4220))
    assert [op for op, _ in store.log] in (["read_bytes", "open_input"], ["read_versioned", "open_input"]), store.log
    assert store.log[0][1] == "events/manifest.json" and store.log[1][1].startswith("events/part-00042")
    assert _http_requests(proxy) == [("GET", "events/manifest.json"), ("GET", store.log[1][1])]
