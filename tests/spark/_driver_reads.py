"""A :class:`LocalStore` that counts the bytes the driver reads through it (pickled to the executors as is).

Spark's own writer only writes to a ``LocalStore`` (or s3a), so this is a subclass, not a wrapper. On the
driver (no Spark task context) every :meth:`open_input` returns a file that adds what it reads to
:attr:`driver_bytes_read`; on the executors it reads as a plain ``LocalStore``.
"""

from __future__ import annotations

import threading

import pyarrow as pa

from dagster_parquet_dataset import LocalStore

from .._stores import CountingReader, PicklableLock


class DriverReadCountingStore(PicklableLock, LocalStore):
    """``LocalStore`` whose driver-side reads are counted in :attr:`driver_bytes_read`."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.driver_bytes_read = 0
        self._lock = threading.Lock()

    def count(self, n: int) -> None:
        with self._lock:
            self.driver_bytes_read += n

    def open_input(self, path: str, *, size: int | None = None, whole: bool = False) -> pa.NativeFile:
        from pyspark import TaskContext

        plain = super().open_input(path, size=size, whole=whole)
        if TaskContext.get() is not None:
            return plain
        return pa.PythonFile(CountingReader(plain, self.count), mode="r")
