"""Plain signed S3 ``GET`` / ``HEAD`` requests, for reads that need no SDK client.

Creating a boto3 client costs a fresh process more than a whole pruned read
(loading botocore's service models), and pyarrow's S3 filesystem sends a
``HEAD`` before every ``GET``. A read needs neither: this module signs single
requests with AWS Signature Version 4 (they have no body) and sends them over one kept-alive
:mod:`http.client` connection per thread. It is used only with static
credentials (given explicitly or in ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``); otherwise the store reads through pyarrow's S3
filesystem, which knows the whole AWS credential chain.

Private helper of :mod:`.s3`; it knows nothing about stores or datasets.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import re
import threading
import time
from dataclasses import dataclass
from urllib.parse import quote, urlparse

_ERROR_CODE = re.compile(rb"<Code>([^<]*)</Code>")
_ERROR_MESSAGE = re.compile(rb"<Message>([^<]*)</Message>")
#: Transient answers worth one more try (throttling, server errors).
_RETRY_STATUS = {500, 502, 503, 504}
_ATTEMPTS = 3
#: SHA-256 of the empty body: the payload hash of a GET or HEAD.
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_TIMEOUT = 60.0


class S3HttpError(OSError):
    """An S3 error answer. ``response`` mimics botocore's ``ClientError.response``
    (``{"Error": {"Code", "Message"}, "ResponseMetadata": {"HTTPStatusCode"}}``), so the
    same error-code helpers apply."""

    def __init__(self, status: int, code: str, message: str, what: str) -> None:
        super().__init__(f"{what}: HTTP {status} {code or ''} {message}".strip())
        self.status = status
        self.response: dict[str, dict[str, object]] = {
            "Error": {"Code": code or str(status), "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }


class S3ConnectError(ConnectionError):
    """The endpoint could not be reached (connection refused, unknown host, timeout)."""


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def sign(
    method: str,
    host: str,
    path: str,
    *,
    region: str,
    access_key: str,
    secret_key: str,
    session_token: str | None,
    amz_date: str,
) -> dict[str, str]:
    """The headers that sign a body-less S3 request with SigV4 (``path`` already URI-encoded,
    no query string); ``amz_date`` is the request time as ``YYYYMMDDTHHMMSSZ``."""
    headers = {"host": host, "x-amz-content-sha256": _EMPTY_SHA256, "x-amz-date": amz_date}
    if session_token:
        headers["x-amz-security-token"] = session_token
    names = sorted(headers)
    signed = ";".join(names)
    canonical = "\n".join(
        [method, path, "", "".join(f"{n}:{headers[n].strip()}\n" for n in names), signed, _EMPTY_SHA256]
    )
    day = amz_date[:8]
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{secret_key}".encode(), day), region), "s3"), "aws4_request")
    signature = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={signed}, Signature={signature}"
    )
    return headers


class S3Http:
    """Signed ``GET``/``HEAD`` requests on one bucket (path-style addressing)."""

    def __init__(
        self,
        endpoint_url: str | None,
        region: str,
        bucket: str,
        access_key: str,
        secret_key: str,
        *,
        session_token: str | None,
    ) -> None:
        parsed = urlparse(endpoint_url or f"https://s3.{region}.amazonaws.com")
        self._https = parsed.scheme == "https"
        self._host = parsed.netloc
        self._base = parsed.path.rstrip("/")
        self._region = region
        self._bucket = bucket
        self._access_key = access_key
        self._secret_key = secret_key
        self._token = session_token
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = cls(self._host, timeout=_TIMEOUT)
            self._local.conn = conn
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def request(self, method: str, key: str, *, byte_range: tuple[int, int] | None = None) -> Response:
        """Send ``method`` for object ``key``; ``byte_range`` is ``(first, last)``, inclusive.

        Returns any 2xx answer. Connection failures and 5xx answers are retried twice.

        Raises:
            S3HttpError: an error answer (404, 403, 416, ...), with the S3 error code.
            S3ConnectError: the endpoint could not be reached.
        """
        path = f"{self._base}/{self._bucket}/{quote(key, safe='/~')}"
        what = f"{method} s3://{self._bucket}/{key}"
        for attempt in range(_ATTEMPTS):
            amz_date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            headers = sign(
                method,
                self._host,
                path,
                region=self._region,
                access_key=self._access_key,
                secret_key=self._secret_key,
                session_token=self._token,
                amz_date=amz_date,
            )
            if byte_range is not None:
                headers["range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
            conn = self._connection()
            try:
                conn.request(method, path, headers=headers)
                answer = conn.getresponse()
                body = answer.read()
            except (OSError, http.client.HTTPException) as exc:
                self._drop_connection()
                if attempt + 1 < _ATTEMPTS:
                    time.sleep(0.05 * (attempt + 1))
                    continue
                raise S3ConnectError(f"{what}: cannot connect to {self._host}: {exc}") from exc
            status = answer.status
            if 200 <= status < 300:
                return Response(status, {k.lower(): v for k, v in answer.getheaders()}, body)
            if status in _RETRY_STATUS and attempt + 1 < _ATTEMPTS:
                time.sleep(0.05 * (attempt + 1))
                continue
            code = _ERROR_CODE.search(body)
            message = _ERROR_MESSAGE.search(body)
            raise S3HttpError(
                status,
                code.group(1).decode("utf-8", "replace") if code else str(status),
                message.group(1).decode("utf-8", "replace") if message else "",
                what,
            )
        raise AssertionError("unreachable")  # pragma: no cover
