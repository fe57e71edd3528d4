"""Reads on S3 need no boto3 client (issue 11 item 4): plain signed requests, or pyarrow's filesystem.

Observed on the real objects: the store's cached client attribute stays unset,
and a fresh process that reads never imports botocore.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from dagster_parquet_dataset import DatasetIncomplete, NotFound, ParquetDatasetStore, S3Store, StoreAccessError
from dagster_parquet_dataset.storage._s3_http import sign
from tests.conftest import make_bucket

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("host", "path", "token"),
    [
        ("s3.eu-west-1.amazonaws.com", "/bkt/a%20b/%C3%A9t%C3%A9/day%3D2024-01-01/part-0.parquet", None),
        ("127.0.0.1:5000", "/bkt/lake/_SUCCESS", "session-token"),
        ("minio.local", "/base/bkt/k~1/x", None),
    ],
)
def test_signature_is_botocores(host: str, path: str, token: str | None) -> None:
    request = AWSRequest(method="GET", url=f"https://{host}{path}")
    S3SigV4Auth(Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG", token), "s3", "eu-west-1").add_auth(request)
    ours = sign(
        "GET",
        host,
        path,
        region="eu-west-1",
        access_key="AKIDEXAMPLE",
        secret_key="wJalrXUtnFEMI/K7MDENG",
        session_token=token,
        amz_date=request.headers["X-Amz-Date"],
    )
    assert ours["authorization"] == request.headers["Authorization"]


def _write(endpoint: str) -> tuple[str, pa.Table]:
    bucket = make_bucket(endpoint)
    table = pa.table({"day": [1, 1, 2, 2, 3], "n": [10, 11, 20, 21, 30], "s": ["a", "b", "c", "d", "é"]})
    pds = ParquetDatasetStore(S3Store(bucket, prefix="lake/é x", endpoint_url=endpoint), retain_versions=2)
    pds.write_dataset(table.slice(0, 2), "ev", partition_by=["day"])
    pds.append_dataset(table.slice(2), "ev", partition_by=["day"])
    return bucket, table


def test_fresh_store_reads_without_creating_a_boto3_client(moto_endpoint: str) -> None:
    bucket, table = _write(moto_endpoint)
    store = S3Store(bucket, prefix="lake/é x", endpoint_url=moto_endpoint)
    pds = ParquetDatasetStore(store)
    assert pds.dataset_exists("ev") and not pds.dataset_exists("nope")
    assert pds.read_dataset("ev").sort_by("n").equals(table.select(["day", "n", "s"]))
    assert pds.read_dataset("ev", columns=["s"], filters=[("day", "==", 2)]).column("s").to_pylist() == ["c", "d"]
    assert [m.version for m in pds.history("ev")] == [2, 1]
    assert pds.read_dataset("ev", version=1).num_rows == 2
    assert pds.plan_read("ev", filters=[("n", ">", 25)]).selected
    assert pds.scan_dataset("ev", filters=[("n", ">", 10)]).count_rows() == 4
    with pytest.raises(NotFound):
        store.read_bytes("ev/absent")
    assert store._client_obj is None


def test_fresh_process_never_imports_botocore(moto_endpoint: str) -> None:
    bucket, _ = _write(moto_endpoint)
    script = textwrap.dedent(
        f"""
        import sys
        from dagster_parquet_dataset import ParquetDatasetStore, S3Store
        store = S3Store({bucket!r}, prefix="lake/é x", endpoint_url={moto_endpoint!r})
        table = ParquetDatasetStore(store).read_dataset("ev", filters=[("n", ">=", 20)])
        print(table.num_rows, "botocore" in sys.modules, "boto3" in sys.modules)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "False", "False"]


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.mark.parametrize("columns", [None, ["s"]])
def test_truncated_part_raises_on_whole_and_ranged_reads(moto_endpoint: str, columns: list[str] | None) -> None:
    bucket, _ = _write(moto_endpoint)
    store = S3Store(bucket, prefix="lake/é x", endpoint_url=moto_endpoint)
    pds = ParquetDatasetStore(store)
    part = [p for p in pds.read_manifest("ev").parts if "day=3" in p][0]
    data = store.read_bytes(f"ev/{part}")
    store.write_bytes(f"ev/{part}", data[:-20])
    fresh = ParquetDatasetStore(S3Store(bucket, prefix="lake/é x", endpoint_url=moto_endpoint))
    with pytest.raises(DatasetIncomplete, match="truncated"):
        fresh.read_dataset("ev", columns=columns)


def test_reads_without_static_credentials_go_through_pyarrow(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bucket, table = _write(moto_endpoint)
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    (tmp_path / "credentials").write_text("[default]\naws_access_key_id = fromfile\naws_secret_access_key = secret\n")
    store = S3Store(bucket, prefix="lake/é x", endpoint_url=moto_endpoint)
    assert store._http is None
    pds = ParquetDatasetStore(store)
    assert pds.read_dataset("ev").num_rows == table.num_rows
    assert pds.read_dataset("ev", columns=["n"], filters=[("day", "==", 3)]).to_pydict() == {"n": [30]}
    assert pds.scan_dataset("ev").count_rows() == table.num_rows
    with pytest.raises(NotFound):
        store.read_bytes("ev/absent")
    assert store._client_obj is None


def test_read_failures_are_access_errors() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = S3Store("lake", prefix="p", endpoint_url=f"http://127.0.0.1:{port}")
    for call in (lambda: store.read_bytes("x"), lambda: store.size("x"), lambda: store.open_input("x", size=10).read()):
        with pytest.raises(StoreAccessError, match="cannot connect"):
            call()
