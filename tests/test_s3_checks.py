"""S3 start-up checks: conditional writes really enforced, access errors early and named.

The refusal case runs against a real HTTP server on 127.0.0.1 that forwards
every request to moto but drops ``If-Match`` / ``If-None-Match``, like an
S3-compatible server that ignores conditions.
"""

from __future__ import annotations

import http.client
import socket
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

import boto3
import dagster as dg
import pyarrow as pa
import pytest

from dagster_parquet_dataset import (
    CapabilityNotSupported,
    CommitConflict,
    ParquetDatasetStore,
    S3Store,
    StoreAccessError,
)
from dagster_parquet_dataset.dagster_io import RemoteStoreIOManager, S3StoreResource

from .conftest import make_bucket

_DROPPED = {"if-match", "if-none-match"}
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection"}


class _Forwarder:
    """A forwarding S3 endpoint on 127.0.0.1; with ``drop_conditions`` it drops conditional-write headers.

    ``requests`` records ``(method, path)`` of every forwarded request.
    """

    def __init__(self, upstream: str, *, drop_conditions: bool) -> None:
        target = urlparse(upstream)
        dropped = _DROPPED if drop_conditions else set()
        self.requests: list[tuple[str, str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped | _HOP_BY_HOP}
                owner.requests.append((self.command, self.path))
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    response = conn.getresponse()
                    data = response.read()
                    self.send_response(response.status, response.reason)
                    for k, v in response.getheaders():
                        if k.lower() not in _HOP_BY_HOP | {"content-length"}:
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def probes(self) -> set[str]:
        """The distinct probe objects written (one per conditional-write check)."""
        return {p for m, p in self.requests if m == "PUT" and "_conditional_write_probe" in p}


@pytest.fixture
def ignoring(moto_endpoint: str) -> Iterator[_Forwarder]:
    """An endpoint that ignores If-Match / If-None-Match (forwards to moto without them)."""
    server = _Forwarder(moto_endpoint, drop_conditions=True)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def recording(moto_endpoint: str) -> Iterator[_Forwarder]:
    """An endpoint that forwards everything to moto unchanged, recording the requests."""
    server = _Forwarder(moto_endpoint, drop_conditions=False)
    try:
        yield server
    finally:
        server.close()


def _objects(endpoint: str, bucket: str) -> list[str]:
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    return [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]


# ------------------------------------------------------------ conditional writes


def test_endpoint_that_ignores_conditions_is_refused_before_any_commit(
    moto_endpoint: str, ignoring: _Forwarder
) -> None:
    bucket = make_bucket(moto_endpoint)
    # What the check must detect: through this endpoint a second create-only put succeeds.
    raw = boto3.client("s3", endpoint_url=ignoring.url, region_name="us-east-1")
    raw.put_object(Bucket=bucket, Key="k", Body=b"1", IfNoneMatch="*")
    raw.put_object(Bucket=bucket, Key="k", Body=b"2", IfNoneMatch="*")
    raw.delete_object(Bucket=bucket, Key="k")

    store = S3Store(bucket, prefix="lake", endpoint_url=ignoring.url)
    with pytest.raises(CapabilityNotSupported) as info:
        store.write_if("d/manifest.json", b"{}", expected=None)
    message = str(info.value)
    assert ignoring.url in message and bucket in message
    assert "does not enforce conditional writes" in message and "not be safe" in message
    assert _objects(moto_endpoint, bucket) == []  # neither the target nor the probe is left behind

    datasets = ParquetDatasetStore(S3Store(bucket, prefix="lake", endpoint_url=ignoring.url))
    with pytest.raises(CapabilityNotSupported):
        datasets.write_dataset(pa.table({"a": [1]}), "t")
    assert not ParquetDatasetStore(S3Store(bucket, prefix="lake", endpoint_url=moto_endpoint)).dataset_exists("t")


def test_check_runs_once_per_endpoint_and_bucket(moto_endpoint: str, ignoring: _Forwarder) -> None:
    bucket = make_bucket(moto_endpoint)
    for _ in range(3):
        with pytest.raises(CapabilityNotSupported):
            S3Store(bucket, endpoint_url=ignoring.url).write_if("x", b"1", expected=None)
    assert len(ignoring.probes()) == 1
    assert not any(m == "PUT" and p.endswith("/x") for m, p in ignoring.requests)


def test_enforcing_endpoint_passes_and_the_probe_is_deleted(moto_endpoint: str, recording: _Forwarder) -> None:
    bucket = make_bucket(moto_endpoint)
    store = S3Store(bucket, prefix="lake", endpoint_url=recording.url)
    token = store.write_if("k", b"1", expected=None)
    with pytest.raises(CommitConflict):
        store.write_if("k", b"2", expected=None)
    store.write_if("k", b"3", expected=token)
    (probe,) = recording.probes()
    assert probe.startswith(f"/{bucket}/lake/_conditional_write_probe")
    assert [m for m, p in recording.requests if p == probe] == ["PUT", "PUT", "PUT", "DELETE"]
    assert _objects(moto_endpoint, bucket) == ["lake/k"]


def test_s3_store_resource_refuses_at_start(moto_endpoint: str, ignoring: _Forwarder) -> None:
    ran: list[str] = []

    @dg.asset
    def numbers() -> pa.Table:
        ran.append("numbers")
        return pa.table({"n": [1]})

    bucket = make_bucket(moto_endpoint)
    io_manager = RemoteStoreIOManager(store=S3StoreResource(bucket=bucket, endpoint_url=ignoring.url))
    with pytest.raises(Exception) as info:
        dg.materialize([numbers], resources={"io_manager": io_manager})
    assert _chain_has(info.value, CapabilityNotSupported, ignoring.url)
    assert ran == []


# ----------------------------------------------------------------------- access


def _chain_has(exc: BaseException | None, cls: type, needle: str) -> bool:
    while exc is not None:
        if isinstance(exc, cls) and needle in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _start_fails(resource: S3StoreResource, needle: str) -> StoreAccessError:
    """Materialize through ``resource``; it must fail at resource start, before the asset computes."""
    ran: list[str] = []

    @dg.asset
    def numbers() -> pa.Table:
        ran.append("numbers")
        return pa.table({"n": [1]})

    with pytest.raises(Exception) as info:
        dg.materialize([numbers], resources={"io_manager": RemoteStoreIOManager(store=resource)})
    assert ran == []
    exc: BaseException | None = info.value
    while exc is not None and not isinstance(exc, StoreAccessError):
        exc = exc.__cause__ or exc.__context__
    assert isinstance(exc, StoreAccessError), f"no StoreAccessError in {info.value!r}"
    message = str(exc)
    assert repr(resource.bucket) in message and needle in message
    return exc


def test_missing_bucket_fails_at_resource_start(moto_endpoint: str) -> None:
    bucket = f"absent-{uuid.uuid4().hex[:8]}"
    _start_fails(S3StoreResource(bucket=bucket, prefix="p", endpoint_url=moto_endpoint), "does not exist")


def test_missing_credentials_fail_at_resource_start(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    bucket = make_bucket(moto_endpoint)
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    for var in ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("AWS_WEB_IDENTITY_TOKEN_FILE", raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    error = _start_fails(S3StoreResource(bucket=bucket, prefix="p", endpoint_url=moto_endpoint), "no AWS credentials")
    assert "AWS_ACCESS_KEY_ID" in str(error) and moto_endpoint in str(error)


def test_unreachable_endpoint_fails_at_resource_start() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    error = _start_fails(S3StoreResource(bucket="lake", endpoint_url=endpoint), "cannot connect")
    assert endpoint in str(error) and "endpoint_url" in str(error)


def test_store_operations_wrap_access_errors(moto_endpoint: str) -> None:
    store = S3Store(f"absent-{uuid.uuid4().hex[:8]}", prefix="p", endpoint_url=moto_endpoint)
    for call in (
        lambda: store.read_bytes("x"),
        lambda: list(store.list_files("d")),
        lambda: store.write_bytes("x", b"1"),
    ):
        with pytest.raises(StoreAccessError) as info:
            call()
        assert store.bucket in str(info.value) and "'p'" in str(info.value) and moto_endpoint in str(info.value)
    with pytest.raises(StoreAccessError, match="does not exist"):
        store.check_access()
