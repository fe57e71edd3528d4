"""What S3 errors mean for the user, which settings are refused, and the check that a server enforces conditional
writes.

Private helpers of :mod:`.s3`; they take a boto3 client or exception and know
nothing about stores or datasets.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from ..errors import StoreAccessError
from ._s3_http import S3ConnectError

#: Error codes of a conditional write that lost (the condition was enforced).
CONFLICT_CODES = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
MISSING_CODES = {"NoSuchKey", "404", "NotFound"}
#: Error codes of a server-side failure (5xx): the request may have been applied before it failed.
SERVER_ERROR_CODES = {"InternalError", "SlowDown", "ServiceUnavailable", "500", "502", "503", "504"}
_DENIED_CODES = {
    "AccessDenied",
    "403",
    "Forbidden",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "TokenRefreshRequired",
}
_REGION_CODES = {"PermanentRedirect", "301", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException"}
_UNSUPPORTED_CODES = {"NotImplemented", "501", "InvalidArgument", "InvalidRequest", "400"}

_CREDENTIALS_HINT = (
    "give credentials through the standard AWS chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, "
    "AWS_PROFILE, an instance or task role) or the aws_access_key_id / aws_secret_access_key settings"
)

#: Name (before a unique suffix) of the object the conditional-write check writes and deletes.
PROBE_NAME = "_conditional_write_probe"

#: An ETag no object has: a PutObject with ``If-Match`` on it must fail.
_WRONG_ETAG = '"00000000000000000000000000000000"'


#: pyarrow's names (``AWS Error NAME during ...`` in its ``OSError`` messages) for S3 error codes.
_PYARROW_CODES = {
    "NO_SUCH_BUCKET": "NoSuchBucket",
    "NO_SUCH_KEY": "NoSuchKey",
    "RESOURCE_NOT_FOUND": "404",
    "ACCESS_DENIED": "AccessDenied",
    "INVALID_ACCESS_KEY_ID": "InvalidAccessKeyId",
    "SIGNATURE_DOES_NOT_MATCH": "SignatureDoesNotMatch",
    "EXPIRED_TOKEN": "ExpiredToken",
}
_PYARROW_ERROR = re.compile(r"AWS Error ([A-Z_]+)")


def error_code(exc: BaseException) -> str:
    """The S3 error code of a botocore ``ClientError``, an :class:`S3HttpError` or a
    pyarrow S3 ``OSError`` (``""`` for anything else)."""
    response = getattr(exc, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    if not code and isinstance(exc, OSError):
        match = _PYARROW_ERROR.search(str(exc))
        if match:
            code = _PYARROW_CODES.get(match.group(1), "")
    return code


def _unreachable(exc: BaseException) -> bool:
    """The request never reached the server (our plain requests, or pyarrow's)."""
    return isinstance(exc, S3ConnectError) or (isinstance(exc, OSError) and "AWS Error NETWORK_CONNECTION" in str(exc))


def access_error(exc: BaseException, failed: str, *, bucket_request: bool = False) -> StoreAccessError | None:
    """The :class:`StoreAccessError` ``exc`` amounts to, or ``None`` if it is something else.

    Args:
        failed: what failed and where, e.g. ``"reading 'x' failed for bucket 'b', ..."``;
            the message goes on with the cause and what to check.
        bucket_request: ``exc`` answers a request on the bucket itself (HeadBucket),
            where a bare 404 means the bucket is missing.
    """
    if _unreachable(exc):
        return StoreAccessError(
            f"{failed}: cannot connect to the endpoint ({exc}); check endpoint_url (scheme, host, port) "
            "and that the server is running and reachable"
        )
    # A botocore exception exists only if botocore was imported: do not import it here (slow).
    boto_exc = sys.modules.get("botocore.exceptions")
    if boto_exc is not None and isinstance(exc, (boto_exc.NoCredentialsError, boto_exc.PartialCredentialsError)):
        return StoreAccessError(f"{failed}: no AWS credentials were found; {_CREDENTIALS_HINT}")
    if boto_exc is not None and isinstance(exc, (boto_exc.EndpointConnectionError, boto_exc.ConnectTimeoutError)):
        return StoreAccessError(
            f"{failed}: cannot connect to the endpoint ({exc}); check endpoint_url (scheme, host, port) "
            "and that the server is running and reachable"
        )
    code = error_code(exc)
    if code == "NoSuchBucket" or (bucket_request and code in MISSING_CODES):
        return StoreAccessError(
            f"{failed}: the bucket does not exist; check the bucket name, and that endpoint_url and region "
            "point at the server that holds it (create the bucket first if it is new)"
        )
    if code in _DENIED_CODES:
        return StoreAccessError(
            f"{failed}: access denied ({code}); check that the credentials are valid and not expired, and "
            f"that they may list, read, write and delete objects under the prefix; {_CREDENTIALS_HINT}"
        )
    if code in _REGION_CODES:
        return StoreAccessError(
            f"{failed}: the bucket is in another region ({code}); set region to the bucket's region"
        )
    return None


def probe_conditional_writes(client: Any, bucket: str, key: str) -> str | None:
    """Check with a probe object at ``key`` that the server enforces ``If-None-Match`` / ``If-Match``.

    Puts the probe with ``If-None-Match: *``, puts it again with
    ``If-None-Match: *`` and then with a wrong ``If-Match``, expecting both to
    fail with 412, and deletes it. Returns ``None`` when the conditions are
    enforced, else what the server did instead.

    Raises:
        Exception: what the client raised for anything other than a refused
            condition (credentials, bucket, endpoint); the caller translates it.
    """
    try:
        client.put_object(Bucket=bucket, Key=key, Body=b"probe", IfNoneMatch="*")
    except Exception as exc:
        if error_code(exc) in _UNSUPPORTED_CODES:
            return f"it rejected a PutObject with If-None-Match: * ({error_code(exc)})"
        raise
    try:
        for condition, label in (
            ({"IfNoneMatch": "*"}, "a PutObject with If-None-Match: * over an existing object"),
            ({"IfMatch": _WRONG_ETAG}, "a PutObject with a wrong If-Match ETag"),
        ):
            try:
                client.put_object(Bucket=bucket, Key=key, Body=b"probe", **condition)
            except Exception as exc:
                if error_code(exc) in CONFLICT_CODES:
                    continue
                raise
            return f"{label} succeeded instead of failing with 412 Precondition Failed"
        return None
    finally:
        try:
            client.delete_object(Bucket=bucket, Key=key)
        except Exception:  # noqa: BLE001 - a leftover probe object is harmless
            pass


def may_have_applied(exc: Exception) -> bool:
    """Whether a failed write request may still have been applied by S3.

    A 4xx answer is definite (the request was refused); a 5xx answer
    (``InternalError``, ``SlowDown``, ``ServiceUnavailable``, 503) or no answer at
    all (a timeout, a reset or closed connection) is not: the server may have
    applied the write before it failed to answer. Errors raised before the
    request was sent (bad parameters, no credentials) are definite too.
    """
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and response:
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(status, int) and status > 0:
            return status >= 500
        return error_code(exc) in SERVER_ERROR_CODES
    boto_exc = sys.modules.get("botocore.exceptions")
    if boto_exc is not None and isinstance(
        exc, (boto_exc.ParamValidationError, boto_exc.NoCredentialsError, boto_exc.PartialCredentialsError)
    ):
        return False
    return isinstance(exc, OSError) or (boto_exc is not None and isinstance(exc, boto_exc.BotoCoreError))


def check_credentials(key: str | None, secret: str | None, token: str | None) -> None:
    """Refuse partial explicit credentials (empty strings count as not given).

    Half of a key pair would be completed from the environment by one client and
    not by another, so reads and writes could run as different identities.

    Raises:
        ValueError: only one of ``aws_access_key_id`` / ``aws_secret_access_key``
            is given, or ``aws_session_token`` without both.
    """
    if bool(key) != bool(secret):
        given, missing = (
            ("aws_access_key_id", "aws_secret_access_key") if key else ("aws_secret_access_key", "aws_access_key_id")
        )
        raise ValueError(
            f"S3Store got {given} but no {missing}: give both (and aws_session_token for temporary "
            "credentials), or neither to use the standard AWS credential chain"
        )
    if token and not key:
        raise ValueError(
            "S3Store got aws_session_token without aws_access_key_id and aws_secret_access_key: a session token "
            "only works with the key pair it was issued with; give all three, or none to use the AWS credential chain"
        )
