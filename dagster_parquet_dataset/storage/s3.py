"""``S3Store``: objects in an S3 bucket (AWS or any S3-compatible server).

Reads need no boto3 client: with static credentials (given, or in
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``) they are plain signed
``GET``/``HEAD`` requests (one per object read whole, ranged GETs otherwise, so
unread Parquet columns are never downloaded, each checking the object's real
size); with other credentials (profiles, roles) they go through
:class:`pyarrow.fs.S3FileSystem`, which knows the whole credential chain.
Listings and lazy scans use pyarrow's filesystem too. The boto3 client is
created only for writes and commits (and :meth:`S3Store.read_versioned`, which
needs the ETag). Writes stream through a boto3
multipart upload that is completed on success and aborted on failure, so an
object is replaced whole or not at all (pyarrow's own output stream cannot be
aborted from Python). Commits use boto3's conditional ``PutObject``
(``If-Match`` / ``If-None-Match``) as compare-and-swap; before the first one,
the store checks that the server really enforces those conditions (some
S3-compatible servers ignore them, which would make commits unsafe). Both
clients are built from the same settings and, unless credentials are given,
from the standard AWS credential chain.

Credential, bucket, region and connection failures are raised as
:class:`~dagster_parquet_dataset.errors.StoreAccessError` naming the bucket,
prefix and endpoint; :meth:`S3Store.check_access` makes one cheap request to
find them before any work is done.
"""

from __future__ import annotations

import io
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import CapabilityNotSupported, CommitConflict, NotFound, RemoteStoreError, StoreAccessError
from ._s3_checks import CONFLICT_CODES as _CONFLICT_CODES
from ._s3_checks import MISSING_CODES as _MISSING_CODES
from ._s3_checks import PROBE_NAME, access_error, check_credentials, may_have_applied, probe_conditional_writes
from ._s3_checks import error_code as _error_code
from ._s3_http import S3ConnectError, S3Http, S3HttpError
from .base import Capability, FileInfo, Store, validate_key

#: (endpoint, bucket) pairs whose conditional writes were checked in this process:
#: ``None`` when enforced, else why commits there are unsafe.
_CAS_CHECKED: dict[tuple[str, str], str | None] = {}
_CAS_LOCK = threading.Lock()


def _require_credentials() -> None:
    """Raise botocore's ``NoCredentialsError`` when the AWS credential chain (environment, shared files,
    profiles, container or instance roles) yields none, as a boto3 write would."""
    import boto3
    from botocore.exceptions import NoCredentialsError

    if boto3.session.Session().get_credentials() is None:
        raise NoCredentialsError()


class S3Store(Store):
    """Objects under ``s3://bucket/prefix/``.

    Args:
        bucket: bucket name.
        prefix: key prefix that acts as the store root ("" for the bucket root).
        endpoint_url: an S3-compatible endpoint such as ``http://127.0.0.1:9000``;
            ``None`` for AWS.
        region: the bucket's region; defaults to ``AWS_REGION`` /
            ``AWS_DEFAULT_REGION`` or ``us-east-1``.
        aws_access_key_id, aws_secret_access_key, aws_session_token: explicit
            credentials (the key pair together, the token only with it); when
            omitted both clients use the AWS credential chain.
        max_pool_connections: size of boto3's connection pool.
        part_size: bytes buffered per multipart-upload part when streaming a
            write (at least 5 MiB); memory per open write is about two parts.

    Clients are created on first use and dropped when pickled, so the store
    can be shipped to worker processes and Spark executors.

    Raises:
        ValueError: a bucket name with ``/``, an unsafe prefix, ``part_size``
            below 5 MiB, or partial credentials (an access key without its
            secret, a secret without its key, a session token without both).
    """

    capabilities = frozenset(Capability) - {Capability.RENAME}  # a rename on S3 is a full copy
    #: S3 object keys are at most 1024 bytes; an instance with a prefix allows that much less.
    max_key_bytes = 1024

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        max_pool_connections: int = 32,
        part_size: int = 16 * 1024 * 1024,
    ) -> None:
        if not bucket or "/" in bucket:
            raise ValueError(f"bucket must be a bare bucket name, got {bucket!r}")
        prefix = prefix.strip("/")
        if prefix:
            validate_key(prefix, what="prefix")
        check_credentials(aws_access_key_id, aws_secret_access_key, aws_session_token)
        self.bucket = bucket
        self.prefix = prefix
        self.max_key_bytes = 1024 - (len(prefix.encode()) + 1 if prefix else 0)
        self.endpoint_url = endpoint_url
        self.region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        self.aws_access_key_id = aws_access_key_id
        self.aws_secret_access_key = aws_secret_access_key
        self.aws_session_token = aws_session_token
        self.max_pool_connections = max_pool_connections
        if part_size < 5 * 1024 * 1024:
            raise ValueError("part_size must be at least 5 MiB (the S3 minimum for multipart uploads)")
        self.part_size = part_size
        self._init_lock = threading.Lock()
        self._client_obj: Any = None
        self._fs_obj: pafs.S3FileSystem | None = None
        self._http_obj: S3Http | None = None
        self._http_checked = False
        self._cas_checked = False

    def __repr__(self) -> str:
        where = f" at {self.endpoint_url}" if self.endpoint_url else ""
        return f"S3Store('s3://{self.bucket}/{self.prefix}'{where})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_init_lock"] = None
        state["_client_obj"] = None
        state["_fs_obj"] = None
        state["_http_obj"] = None
        state["_http_checked"] = False
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_lock = threading.Lock()

    @property
    def _client(self) -> Any:
        if self._client_obj is None:
            with self._init_lock:
                if self._client_obj is None:
                    try:
                        import boto3
                        from botocore.config import Config
                    except ImportError as exc:  # pragma: no cover - depends on install
                        raise ImportError("S3Store needs boto3: pip install 'dagster-parquet-dataset[s3]'") from exc
                    self._client_obj = boto3.session.Session().client(
                        "s3",
                        endpoint_url=self.endpoint_url,
                        region_name=self.region,
                        aws_access_key_id=self.aws_access_key_id,
                        aws_secret_access_key=self.aws_secret_access_key,
                        aws_session_token=self.aws_session_token,
                        config=Config(
                            max_pool_connections=self.max_pool_connections,
                            retries={"mode": "standard"},
                        ),
                    )
        return self._client_obj

    @property
    def _fs(self) -> pafs.S3FileSystem:
        """pyarrow's filesystem for reads and listings when the credentials are not static.

        Raises:
            botocore.exceptions.NoCredentialsError: no credentials are configured anywhere in the AWS chain
                (pyarrow would send anonymous requests, which S3 answers with "access denied"); callers
                translate it into the same :class:`StoreAccessError` a write raises.
        """
        if self._fs_obj is None:
            with self._init_lock:
                if self._fs_obj is None:
                    if not self.aws_access_key_id:
                        _require_credentials()
                    kwargs: dict[str, Any] = {"region": self.region}
                    if self.endpoint_url:
                        parsed = urlparse(self.endpoint_url)
                        if parsed.scheme and parsed.netloc:
                            kwargs["endpoint_override"] = parsed.netloc + parsed.path.rstrip("/")
                            kwargs["scheme"] = parsed.scheme
                        else:
                            kwargs["endpoint_override"] = self.endpoint_url
                    if self.aws_access_key_id:
                        kwargs["access_key"] = self.aws_access_key_id
                        kwargs["secret_key"] = self.aws_secret_access_key
                        if self.aws_session_token:
                            kwargs["session_token"] = self.aws_session_token
                    self._fs_obj = pafs.S3FileSystem(**kwargs)
        return self._fs_obj

    def _where(self) -> str:
        endpoint = self.endpoint_url or f"AWS S3 (region {self.region})"
        return f"bucket {self.bucket!r}, prefix {self.prefix!r}, endpoint {endpoint}"

    def _access_error(
        self, exc: BaseException, action: str, *, bucket_request: bool = False
    ) -> StoreAccessError | None:
        return access_error(exc, f"{action} failed for {self._where()}", bucket_request=bucket_request)

    def _raise_access(self, exc: BaseException, action: str) -> None:
        """Raise the :class:`StoreAccessError` ``exc`` amounts to (chained to it); return if it is none."""
        error = self._access_error(exc, action)
        if error is not None:
            raise error from exc

    @contextmanager
    def _translated(self, action: str) -> Iterator[None]:
        try:
            yield
        except RemoteStoreError:
            raise
        except Exception as exc:
            self._raise_access(exc, action)
            raise

    def check_access(self) -> None:
        """Check with one cheap request (HeadBucket) that the bucket exists and the credentials are accepted.

        Raises:
            StoreAccessError: no credentials, access denied, the bucket does not exist, the
                endpoint cannot be reached, or the bucket is in another region; the message names
                the bucket, prefix and endpoint and says what to check.
        """
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except Exception as exc:
            error = self._access_error(exc, "checking access", bucket_request=True)
            if error is not None:
                raise error from exc
            raise StoreAccessError(f"checking access failed for {self._where()}: {exc}") from exc

    def check_conditional_writes(self) -> None:
        """Check that the server enforces ``If-None-Match`` / ``If-Match`` on ``PutObject``.

        Writes a small probe object under the prefix with ``If-None-Match: *``,
        writes it again expecting ``412 Precondition Failed``, writes it with a
        wrong ``If-Match`` expecting 412 again, and deletes it. Runs once per
        endpoint and bucket in this process (the result is remembered either
        way); :meth:`write_if` calls it before the first commit.

        Raises:
            CapabilityNotSupported: the server ignores or rejects the conditions, so commits
                would not be safe; the message names the endpoint.
            StoreAccessError: the probe could not be written (credentials, bucket, endpoint).
        """
        if self._cas_checked:
            return
        cache_key = (self.endpoint_url or f"aws:{self.region}", self.bucket)
        with _CAS_LOCK:
            known = cache_key in _CAS_CHECKED
            problem = _CAS_CHECKED.get(cache_key)
        if not known:
            problem = self._probe_conditional_writes()
            with _CAS_LOCK:
                _CAS_CHECKED[cache_key] = problem
        if problem is not None:
            endpoint = self.endpoint_url or f"AWS S3 (region {self.region})"
            raise CapabilityNotSupported(
                f"S3 endpoint {endpoint} (bucket {self.bucket!r}) does not enforce conditional writes: {problem}. "
                "Commits would not be safe there (two writers could overwrite each other's commit and lose "
                "updates), so this store refuses to commit. Use a server that enforces If-None-Match and "
                "If-Match on PutObject, such as AWS S3."
            )
        self._cas_checked = True

    def _probe_conditional_writes(self) -> str | None:
        """Run the probe; ``None`` when the conditions are enforced, else what went wrong."""
        key = self._key(f"{PROBE_NAME}-{uuid.uuid4().hex}")
        try:
            return probe_conditional_writes(self._client, self.bucket, key)
        except Exception as exc:
            self._raise_access(exc, "checking conditional writes")
            raise

    def _key(self, path: str) -> str:
        validate_key(path, what="path")
        return f"{self.prefix}/{path}" if self.prefix else path

    def _rel(self, key: str) -> str:
        return key[len(self.prefix) + 1 :] if self.prefix else key

    @property
    def _http(self) -> S3Http | None:
        """Plain signed requests for reads, when credentials are static (given, or in the
        environment); ``None`` otherwise (reads then go through pyarrow's filesystem)."""
        if not self._http_checked:
            with self._init_lock:
                if not self._http_checked:
                    key, secret, token = self.aws_access_key_id, self.aws_secret_access_key, self.aws_session_token
                    if not (key and secret):
                        key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
                        token = os.environ.get("AWS_SESSION_TOKEN")
                    self._http_obj = (
                        S3Http(self.endpoint_url, self.region, self.bucket, key, secret, session_token=token)
                        if key and secret
                        else None
                    )
                    self._http_checked = True
        return self._http_obj

    def _read_failed(self, exc: Exception, path: str) -> None:
        """Raise what a failed read of ``path`` means (``NotFound``, ``StoreAccessError``); return otherwise."""
        if isinstance(exc, FileNotFoundError) or _error_code(exc) in _MISSING_CODES:
            raise NotFound(f"no object {path!r} in {self!r}") from None
        self._raise_access(exc, f"reading {path!r}")

    def exists(self, path: str) -> bool:
        try:
            self.size(path)
            return True
        except NotFound:
            return False

    def size(self, path: str) -> int:
        key = self._key(path)
        http = self._http
        try:
            if http is not None:
                return int(http.request("HEAD", key).headers["content-length"])
            info = self._fs.get_file_info(f"{self.bucket}/{key}")
        except Exception as exc:
            self._read_failed(exc, path)
            raise
        if info.type != pafs.FileType.File:
            raise NotFound(f"no object {path!r} in {self!r}")
        return int(info.size)

    def _get(self, path: str) -> tuple[bytes, str]:
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=self._key(path))
        except Exception as exc:
            self._read_failed(exc, path)
            raise
        return response["Body"].read(), response["ETag"]

    def read_bytes(self, path: str) -> bytes:
        key = self._key(path)
        http = self._http
        try:
            if http is not None:
                return http.request("GET", key).body
            with self._fs.open_input_stream(f"{self.bucket}/{key}", compression=None) as f:
                return bytes(f.read())
        except Exception as exc:
            self._read_failed(exc, path)
            raise

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        # The only read that needs the ETag (a commit's compare-and-swap token): boto3's GET returns both at once.
        return self._get(path)

    def open_input(self, path: str, *, size: int | None = None, whole: bool = False) -> pa.NativeFile:
        if whole:
            # One GET for footer and data alike: the caller needs every column anyway.
            data = self.read_bytes(path)
            if size is not None and len(data) != size:
                raise OSError(f"s3://{self.bucket}/{self._key(path)} is {len(data)} bytes, expected {size}")
            return pa.BufferReader(data)
        key = self._key(path)
        http = self._http
        if http is not None:
            # Every ranged GET checks the object's real size (Content-Range): no HEAD when it is known.
            return pa.PythonFile(
                _RangeReader(
                    http,
                    self.bucket,
                    key,
                    self.size(path) if size is None else size,
                    lambda exc: self._raise_access(exc, f"reading {path!r}"),
                ),
                mode="r",
            )
        try:
            # pyarrow asks the server for the real size (HEAD) before any ranged read.
            source = self._fs.open_input_file(f"{self.bucket}/{key}")
        except Exception as exc:
            self._read_failed(exc, path)
            raise
        if size is not None and source.size() != size:
            actual = source.size()
            source.close()
            raise OSError(f"s3://{self.bucket}/{key} is {actual} bytes, expected {size}")
        return source

    @contextmanager
    def open_output(self, path: str) -> Iterator[pa.NativeFile]:
        # boto3 rather than pyarrow here: pyarrow cannot abort an upload from
        # Python (its destructor completes it), which would publish a partial
        # object over the previous one. _Upload aborts the multipart upload.
        upload = _Upload(self._client, self.bucket, self._key(path), self.part_size)
        sink = pa.PythonFile(upload, mode="w")
        try:
            yield sink
        except BaseException:
            upload.abort()
            raise
        with self._translated(f"writing {path!r}"):
            upload.complete()

    def write_bytes(self, path: str, data: bytes) -> None:
        with self._translated(f"writing {path!r}"):
            self._client.put_object(Bucket=self.bucket, Key=self._key(path), Body=data)

    def delete(self, path: str, *, missing_ok: bool = False) -> None:
        if not missing_ok and not self.exists(path):
            raise NotFound(f"no object {path!r} in {self!r}")
        with self._translated(f"deleting {path!r}"):
            self._client.delete_object(Bucket=self.bucket, Key=self._key(path))

    def delete_folder(self, path: str) -> None:
        keys = [self._key(f.path) for f in self.list_files(path)]
        if not keys:
            raise NotFound(f"nothing stored under {path!r} in {self!r}")
        for start in range(0, len(keys), 1000):
            batch = keys[start : start + 1000]
            with self._translated(f"deleting under {path!r}"):
                response = self._client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
                )
            if response.get("Errors"):
                first = response["Errors"][0]
                raise RemoteStoreError(
                    f"S3 refused to delete {len(response['Errors'])} objects under {path!r}, "
                    f"first {first.get('Key')!r}: {first.get('Message')}"
                )

    def list_files(self, path: str) -> Iterator[FileInfo]:
        # "" lists the whole store (every dataset under the prefix).
        base = f"{self.bucket}/{self._key(path)}" if path else "/".join(p for p in (self.bucket, self.prefix) if p)
        try:
            # Not allow_not_found: with it, pyarrow also answers "nothing" for a missing bucket.
            infos = self._fs.get_file_info(pafs.FileSelector(base, recursive=True))
        except FileNotFoundError:
            return
        except Exception as exc:
            self._raise_access(exc, f"listing {path!r}")
            raise
        files = sorted((i for i in infos if i.type == pafs.FileType.File), key=lambda i: i.path)
        for info in files:
            modified = info.mtime.timestamp() if info.mtime is not None else None
            yield FileInfo(self._rel(info.path[len(self.bucket) + 1 :]), int(info.size), modified)

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        """Compare-and-swap with a conditional ``PutObject``.

        The first call checks that the server enforces the conditions
        (:meth:`check_conditional_writes`).

        Raises:
            CommitConflict: the object changed (or appeared) meanwhile.
            ConnectionError: no definite answer after botocore's retries (a timeout,
                a reset connection, or a 5xx such as ``InternalError``, ``SlowDown``
                or 503): the write may or may not have been applied.
            CapabilityNotSupported: the server does not enforce conditional writes.
            StoreAccessError: the conditional-write check could not run (credentials, bucket, endpoint).
        """
        self.check_conditional_writes()
        condition = {"IfNoneMatch": "*"} if expected is None else {"IfMatch": expected}
        try:
            response = self._client.put_object(Bucket=self.bucket, Key=self._key(path), Body=data, **condition)
        except Exception as exc:
            code = _error_code(exc)
            if code in _CONFLICT_CODES or (expected is not None and code in _MISSING_CODES):
                raise CommitConflict(
                    f"{path!r} changed since it was read "
                    f"({'it now exists' if expected is None else 'its ETag differs or it was deleted'})"
                ) from None
            if may_have_applied(exc):
                # No definite answer (after botocore's own retries): the PUT may have been applied.
                raise ConnectionError(f"no answer from S3 for the conditional write of {path!r}: {exc}") from exc
            raise
        return str(response["ETag"])

    def delete_if(self, path: str, *, expected: str) -> None:
        """Conditional ``DeleteObject`` with ``If-Match: <ETag>``: AWS S3 supports it in general purpose and
        directory buckets (an S3-compatible server that ignores the header deletes unconditionally).

        Raises:
            CommitConflict: the object's ETag differs (``412 Precondition Failed``); nothing is deleted.
            NotFound: no object at ``path`` (also when botocore retried this very request after its
                response was lost: the first attempt deleted it).
            ConnectionError: no definite answer after botocore's retries; the delete may have been applied.
        """
        try:
            self._client.delete_object(Bucket=self.bucket, Key=self._key(path), IfMatch=expected)
        except Exception as exc:
            code = _error_code(exc)
            if code in _MISSING_CODES:
                raise NotFound(f"no object {path!r} in {self!r}") from None
            if code in _CONFLICT_CODES:
                raise CommitConflict(f"{path!r} changed since it was read (its ETag differs)") from None
            if may_have_applied(exc):
                raise ConnectionError(f"no answer from S3 for the conditional delete of {path!r}: {exc}") from exc
            self._raise_access(exc, f"deleting {path!r}")
            raise

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        """This store's ``pyarrow.fs.S3FileSystem`` and ``"bucket/prefix"`` (see :meth:`Store.arrow_filesystem`).

        Raises:
            StoreAccessError: no AWS credentials are configured.
        """
        with self._translated("scanning"):
            return self._fs, f"{self.bucket}/{self.prefix}" if self.prefix else self.bucket

    def uri(self, path: str = "") -> str:
        key = self._key(path) if path else self.prefix
        return f"s3://{self.bucket}/{key}" if key else f"s3://{self.bucket}"


class _Upload(io.RawIOBase):
    """A write-only stream that uploads to one S3 key, visible only on :meth:`complete`.

    Data is buffered into ``part_size`` chunks; each full chunk is uploaded as a
    multipart part while the caller keeps writing (one upload in flight). A
    write smaller than one chunk becomes a single ``PutObject``.
    """

    def __init__(self, client: Any, bucket: str, key: str, part_size: int) -> None:
        super().__init__()
        self._client = client
        self._bucket = bucket
        self._key = key
        self._part_size = part_size
        self._buffer = bytearray()
        self._position = 0
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []
        self._pending: Future[dict[str, Any]] | None = None
        self._pool: ThreadPoolExecutor | None = None

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self._buffer += view
        self._position += len(view)
        while len(self._buffer) >= self._part_size:
            chunk = bytes(self._buffer[: self._part_size])
            del self._buffer[: self._part_size]
            self._send(chunk)
        return len(view)

    def _send(self, chunk: bytes) -> None:
        if self._upload_id is None:
            response = self._client.create_multipart_upload(Bucket=self._bucket, Key=self._key)
            self._upload_id = response["UploadId"]
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="s3-upload")
        self._wait()
        number = len(self._parts) + 1
        assert self._pool is not None
        self._pending = self._pool.submit(self._upload_part, number, chunk)

    def _upload_part(self, number: int, chunk: bytes) -> dict[str, Any]:
        response = self._client.upload_part(
            Bucket=self._bucket, Key=self._key, UploadId=self._upload_id, PartNumber=number, Body=chunk
        )
        return {"PartNumber": number, "ETag": response["ETag"]}

    def _wait(self) -> None:
        if self._pending is not None:
            self._parts.append(self._pending.result())
            self._pending = None

    def complete(self) -> None:
        try:
            if self._upload_id is None:
                self._client.put_object(Bucket=self._bucket, Key=self._key, Body=bytes(self._buffer))
                return
            if self._buffer:
                self._send(bytes(self._buffer))
                self._buffer.clear()
            self._wait()
            self._client.complete_multipart_upload(
                Bucket=self._bucket,
                Key=self._key,
                UploadId=self._upload_id,
                MultipartUpload={"Parts": self._parts},
            )
        except BaseException:
            self.abort()
            raise
        finally:
            self._shutdown()

    def abort(self) -> None:
        try:
            if self._pending is not None:
                self._pending.exception()  # let the in-flight part finish before aborting
                self._pending = None
            if self._upload_id is not None:
                self._client.abort_multipart_upload(Bucket=self._bucket, Key=self._key, UploadId=self._upload_id)
                self._upload_id = None
        finally:
            self._buffer.clear()
            self._shutdown()

    def _shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


class _RangeReader(io.RawIOBase):
    """Random-access reads of one S3 object of known size, one ranged GET per read.

    Raises ``FileNotFoundError`` when the object is gone and ``OSError`` when
    its size differs from the expected one (truncated or replaced).
    """

    def __init__(self, http: S3Http, bucket: str, key: str, size: int, translate: Callable[[Exception], None]) -> None:
        super().__init__()
        self._translate = translate
        self._http = http
        self._bucket = bucket
        self._key = key
        self._size = size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        if end <= self._pos:
            return b""
        try:
            response = self._http.request("GET", self._key, byte_range=(self._pos, end - 1))
        except (S3HttpError, S3ConnectError) as exc:
            code = _error_code(exc)
            if code in _MISSING_CODES:
                raise FileNotFoundError(f"s3://{self._bucket}/{self._key} does not exist") from None
            if code in ("InvalidRange", "416"):
                raise OSError(
                    f"s3://{self._bucket}/{self._key} is shorter than the expected {self._size} bytes"
                ) from None
            self._translate(exc)  # credentials, bucket, endpoint: a StoreAccessError
            raise
        total = response.headers.get("content-range", "").rpartition("/")[2]
        if total.isdigit() and int(total) != self._size:
            raise OSError(f"s3://{self._bucket}/{self._key} is {total} bytes, expected {self._size}")
        data = response.body
        if not total.isdigit() and len(data) != self._size:  # a 200 answer: the whole object
            raise OSError(f"s3://{self._bucket}/{self._key} is {len(data)} bytes, expected {self._size}")
        if not total.isdigit():
            data = data[self._pos : end]
        self._pos += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
