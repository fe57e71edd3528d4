"""Spark task failures injected from the tests, through a wrapping store pickled to the executors.

:class:`FailAfterPartStore` behaves as its inner store, except that attempt 0
of the Spark task for partition ``partition`` raises right after it published
its first Parquet part: Spark then retries the task (the test session is
``local[2,2]``), so the tests exercise a real task retry with a real leftover
file from the failed attempt. On the driver (no task context) it never fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.fs as pafs

from dagster_parquet_dataset import Store
from tests._stores import WrappingStore


class InjectedTaskFailure(RuntimeError):
    """Raised by :class:`FailAfterPartStore` in the chosen task attempt."""


class FailAfterPartStore(WrappingStore):
    """``inner``, with attempt 0 of Spark partition ``partition`` failing after publishing a part."""

    def __init__(self, inner: Store, partition: int) -> None:
        super().__init__(inner)
        self.partition = partition

    def __getattr__(self, name: str) -> object:
        # Backend-specific methods (e.g. S3Store.check_access) pass through; not during unpickling.
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        # Reads (a backfill's preview reads its partitions back) go straight to the inner store.
        return self.inner.arrow_filesystem()

    @contextmanager
    def open_output(self, path: str) -> Iterator[pa.NativeFile]:
        with super().open_output(path) as sink:
            yield sink
        if path.endswith(".parquet"):
            from pyspark import TaskContext

            ctx = TaskContext.get()
            if ctx is not None and ctx.partitionId() == self.partition and ctx.attemptNumber() == 0:
                raise InjectedTaskFailure(f"attempt 0 of Spark partition {self.partition} fails after writing {path}")


class SuccessWriteFails(WrappingStore):
    """``inner``, except that writing ``{key}/_SUCCESS`` raises (on the driver, after the manifest swap
    of ``key`` landed): a commit that fails once its outcome is already decided."""

    def __init__(self, inner: Store, key: str) -> None:
        super().__init__(inner)
        self.key = key

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        return self.inner.arrow_filesystem()

    def write_bytes(self, path: str, data: bytes) -> None:
        if path == f"{self.key}/_SUCCESS":
            raise PermissionError(f"injected: writing {path} is refused")
        super().write_bytes(path, data)
