"""Store resources: Dagster ``ConfigurableResource``s that each provide one :class:`Store`.

They are nested into :class:`~dagster_parquet_dataset.dagster_io.RemoteStoreIOManager`::

    Definitions(
        assets=[...],
        resources={"io_manager": RemoteStoreIOManager(store=LocalStoreResource(root="data"))},
    )
"""

from __future__ import annotations

import logging
import os
import threading
from typing import ClassVar

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from ..errors import StoreAccessError
from ..storage.base import Store
from ..storage.local import LocalStore
from ..storage.memory import MemoryStore
from ..storage.s3 import S3Store


class StoreResource(ConfigurableResource):
    """Base class of the store resources: something that provides a :class:`Store`.

    A new backend is one more subclass that implements :meth:`get_store`.

    Attributes:
        delta_log: every ``RemoteStoreIOManager`` on this store keeps each dataset's Delta log (and each
            partitioned asset's one Delta table), as its own ``delta_log=True`` does (docs/delta.md).
    """

    delta_log: bool = Field(
        default=False,
        description=(
            "Every RemoteStoreIOManager on this store also keeps each dataset's Delta log (_delta_log/) and "
            "each partitioned asset's one Delta table, as RemoteStoreIOManager(delta_log=True) does (docs/delta.md)."
        ),
    )

    #: Whether the store is visible only inside the process that created it
    #: (then only Dagster's in-process executor can pass data between steps).
    process_local: ClassVar[bool] = False

    def get_store(self) -> Store:
        """The configured store (created on first call, then reused).

        Raises:
            NotImplementedError: on the base class.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement get_store()")


class LocalStoreResource(StoreResource):
    """Datasets as files under ``root`` on a local (or mounted) disk.

    Attributes:
        root: folder holding the datasets; created on first write. A leading
            ``~`` is the home folder; relative paths are resolved against the
            working directory of the process that first uses the store. A URL
            (``s3://...``) is refused with a pointer to :class:`S3StoreResource`.
    """

    root: str = Field(
        description=(
            "Folder holding the datasets, created on first write. '~' is the home folder; a relative path "
            "is resolved against the working directory of the process that runs the step. A local or "
            "mounted path, not a URL: for S3 use S3StoreResource."
        )
    )

    _store: LocalStore | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        """Check ``root`` when the run starts (no I/O).

        Raises:
            ValueError: as :meth:`get_store`.
        """
        self.get_store()

    def get_store(self) -> Store:
        """A :class:`LocalStore` on ``root``.

        Raises:
            ValueError: ``root`` is empty or a URL (the message says to use ``S3StoreResource`` for S3).
        """
        if self._store is None:
            if not self.root:
                raise ValueError("LocalStoreResource.root must be a folder path, got an empty string")
            try:
                self._store = LocalStore(self.root)
            except ValueError as exc:
                raise ValueError(f"LocalStoreResource.root: {exc}") from None
        return self._store


class S3StoreResource(StoreResource):
    """Datasets under ``s3://bucket/prefix/`` on AWS or any S3-compatible server.

    Credential fields accept ``dagster.EnvVar("...")``; leave them unset to use
    the standard AWS credential chain (environment, profile, instance role).

    When a run starts, the resource checks access with one request (HeadBucket)
    and that the server enforces conditional writes (a probe object under the
    prefix, deleted again; once per endpoint and bucket per process), so a
    missing bucket, missing credentials, an unreachable endpoint or a server
    that would make commits unsafe fail the run before any asset computes.
    If the credentials may read but not write, the conditional-write check is
    left to the first commit.

    Attributes:
        bucket: bucket name.
        prefix: key prefix acting as the store root (``""`` for the bucket root).
        endpoint_url: an S3-compatible endpoint such as ``http://127.0.0.1:9000``.
        region: the bucket's region (default: ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` / ``us-east-1``).
    """

    bucket: str = Field(description="Bucket name (a bare name, not an s3:// URL).")
    prefix: str = Field(default="", description="Key prefix under which the datasets live ('' for the bucket root).")
    endpoint_url: str | None = Field(
        default=None,
        description="Endpoint of an S3-compatible server, e.g. 'http://127.0.0.1:9000'; unset for AWS S3.",
    )
    region: str | None = Field(
        default=None,
        description="The bucket's region; unset uses AWS_REGION / AWS_DEFAULT_REGION, else 'us-east-1'.",
    )
    aws_access_key_id: str | None = Field(
        default=None,
        description="Access key id (use EnvVar); unset uses the standard AWS credential chain.",
    )
    aws_secret_access_key: str | None = Field(
        default=None,
        description="Secret access key (use EnvVar); unset uses the standard AWS credential chain.",
    )
    aws_session_token: str | None = Field(
        default=None, description="Session token for temporary credentials (use EnvVar); usually unset."
    )

    _store: S3Store | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        """Check access and conditional writes before any step runs.

        Raises:
            StoreAccessError: no credentials, access denied, a missing bucket, an unreachable
                endpoint or a wrong region (the message names bucket, prefix and endpoint).
            CapabilityNotSupported: the server does not enforce conditional writes.
            ValueError: ``bucket`` is not a bare bucket name or ``prefix`` is unsafe.
        """
        store = self.get_store()
        store.check_access()
        try:
            store.check_conditional_writes()
        except StoreAccessError as exc:  # e.g. read-only credentials: checked again before the first commit
            message = f"S3StoreResource: could not check conditional writes now ({exc})"
            if context.log is not None:
                context.log.warning(message)
            else:  # a context built without a log manager
                logging.getLogger(__name__).warning(message)

    def get_store(self) -> S3Store:
        """An :class:`S3Store` with these settings (no I/O until first use).

        Raises:
            ValueError: ``bucket`` is not a bare bucket name or ``prefix`` is unsafe.
        """
        if self._store is None:
            self._store = S3Store(
                self.bucket,
                self.prefix,
                endpoint_url=self.endpoint_url or None,
                region=self.region or None,
                aws_access_key_id=self.aws_access_key_id or None,
                aws_secret_access_key=self.aws_secret_access_key or None,
                aws_session_token=self.aws_session_token or None,
            )
        return self._store


_MEMORY_STORES: dict[str, MemoryStore] = {}
_MEMORY_LOCK = threading.Lock()


class InMemoryStoreResource(StoreResource):
    """Datasets in this process's memory, for tests and notebooks.

    Every ``InMemoryStoreResource`` with the same ``namespace`` returns the same
    :class:`MemoryStore` for the life of the process, so one in-process run
    (or several) can load what an earlier step wrote. Steps in other processes
    (Dagster's default multiprocess executor) cannot see it: the IO manager
    refuses it there with an error that says what to use instead.

    Attributes:
        namespace: which process-wide store to use; give tests their own.
    """

    namespace: str = Field(
        default="default",
        description="Which process-wide in-memory store to use; resources with the same namespace share it.",
    )

    process_local: ClassVar[bool] = True

    def get_store(self) -> Store:
        """The process-wide :class:`MemoryStore` of ``namespace``."""
        with _MEMORY_LOCK:
            store = _MEMORY_STORES.get(self.namespace)
            if store is None:
                store = _MEMORY_STORES[self.namespace] = MemoryStore()
            return store

    def clear(self) -> None:
        """Forget every dataset of this ``namespace`` (the next call gets an empty store)."""
        with _MEMORY_LOCK:
            _MEMORY_STORES.pop(self.namespace, None)


def store_resource_for(base_dir: str) -> StoreResource:
    """The store resource for ``RemoteStoreIOManager(base_dir=...)``: ``s3://bucket/prefix`` gives an
    :class:`S3StoreResource` (the endpoint from ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` when set,
    region and credentials from the standard AWS settings), anything else a :class:`LocalStoreResource`
    on that folder.

    Raises:
        ValueError: an empty value, an ``s3://`` URL without a bucket, or another URL scheme (``gs://``,
            ``https://``, ...), which no store here serves.
    """
    if not base_dir:
        raise ValueError("RemoteStoreIOManager.base_dir must be a folder path or an s3://bucket/prefix URL, got ''")
    scheme, sep, rest = base_dir.partition("://")
    if not sep:
        return LocalStoreResource(root=base_dir)
    if scheme.lower() in ("s3", "s3a"):
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise ValueError(f"RemoteStoreIOManager.base_dir {base_dir!r} names no bucket: use s3://bucket/prefix")
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
        return S3StoreResource(bucket=bucket, prefix=prefix.strip("/"), endpoint_url=endpoint)
    if scheme.lower() == "file":
        return LocalStoreResource(root=rest)
    raise ValueError(
        f"RemoteStoreIOManager.base_dir {base_dir!r}: {scheme}:// is not a supported store; use a local folder, "
        "an s3://bucket/prefix URL, or store=S3StoreResource(...) for an S3-compatible server"
    )
