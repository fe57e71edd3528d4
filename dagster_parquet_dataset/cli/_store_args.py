"""Turn ``--store`` (a folder, ``file://`` URL or ``s3://bucket/prefix``) into a Store."""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse

from ..storage import LocalStore, S3Store, Store
from ._usage_error import UsageError

#: Environment variable used when ``--store`` is not given.
STORE_ENV = "DAGSTER_PARQUET_DATASET_STORE"

_S3_SCHEMES = ("s3", "s3a")


def open_store(spec: str | None, *, endpoint_url: str | None = None, region: str | None = None) -> Store:
    """The store ``spec`` names. No I/O except checking that a local folder exists.

    S3 credentials come from the standard AWS chain (environment, profile,
    instance role); the endpoint from ``endpoint_url``, else ``AWS_ENDPOINT_URL_S3``
    or ``AWS_ENDPOINT_URL``.

    Raises:
        UsageError: no store given, an unsupported URL scheme, a bad bucket name,
            or a local folder that does not exist.
    """
    if not spec:
        raise UsageError(
            f"no store given: pass --store PATH, --store file://PATH or --store s3://BUCKET/PREFIX (or set {STORE_ENV})"
        )
    parsed = urlparse(spec)
    scheme = parsed.scheme.lower() if "://" in spec else ""
    if scheme in _S3_SCHEMES:
        bucket, prefix = parsed.netloc, parsed.path.strip("/")
        if not bucket:
            raise UsageError(f"--store {spec!r} names no bucket; use s3://BUCKET or s3://BUCKET/PREFIX")
        endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        try:
            return S3Store(bucket, prefix, endpoint_url=endpoint or None, region=region)
        except ValueError as exc:
            raise UsageError(f"--store {spec!r}: {exc}") from None
    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise UsageError(f"--store {spec!r}: file URLs must name a local path (file:///path/to/folder)")
        path = unquote(parsed.path)
    elif scheme:
        raise UsageError(f"--store {spec!r}: unsupported scheme {scheme!r}; use a folder path, file://... or s3://...")
    else:
        path = spec
    path = os.path.expanduser(path)
    if not os.path.isdir(path):
        raise UsageError(f"store folder {path!r} does not exist (or is not a folder)")
    return LocalStore(path)
