"""Store resources: Dagster ``ConfigurableResource``s that each provide one :class:`Store`.

They are nested into :class:`~dagster_parquet_dataset.dagster_io.RemoteStoreIOManager`::

    Definitions(
        assets=[...],
        resources={"io_manager": RemoteStoreIOManager(store=LocalStoreResource(root="data"))},
    )
"""

from __future__ import annotations

import threading
from typing import ClassVar

from dagster import ConfigurableResource
from pydantic import PrivateAttr

from ..storage.base import Store
from ..storage.local import LocalStore
from ..storage.memory import MemoryStore
from ..storage.s3 import S3Store


class StoreResource(ConfigurableResource):
    """Base class of the store resources: something that provides a :class:`Store`.

    A new backend is one more subclass that implements :meth:`get_store`.
    """

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
        root: folder holding the datasets; created on first write. Relative
            paths are resolved against the working directory of the process
            that first uses the store.
    """

    root: str

    _store: LocalStore | None = PrivateAttr(default=None)

    def get_store(self) -> Store:
        """A :class:`LocalStore` on ``root``.

        Raises:
            ValueError: ``root`` is empty.
        """
        if self._store is None:
            if not self.root:
                raise ValueError("LocalStoreResource.root must be a folder path, got an empty string")
            self._store = LocalStore(self.root)
        return self._store


class S3StoreResource(StoreResource):
    """Datasets under ``s3://bucket/prefix/`` on AWS or any S3-compatible server.

    Credential fields accept ``dagster.EnvVar("...")``; leave them unset to use
    the standard AWS credential chain (environment, profile, instance role).

    Attributes:
        bucket: bucket name.
        prefix: key prefix acting as the store root (``""`` for the bucket root).
        endpoint_url: an S3-compatible endpoint such as ``http://127.0.0.1:9000``.
        region: the bucket's region (default: ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` / ``us-east-1``).
    """

    bucket: str
    prefix: str = ""
    endpoint_url: str | None = None
    region: str | None = None
    aws_access_key_id: str | None = None
    aws_secret_access_key: str | None = None
    aws_session_token: str | None = None

    _store: S3Store | None = PrivateAttr(default=None)

    def get_store(self) -> Store:
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

    namespace: str = "default"

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
