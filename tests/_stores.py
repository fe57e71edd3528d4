"""Store wrappers for tests: real stores underneath, with call counting and crash injection."""

from __future__ import annotations

import io
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa

from dagster_parquet_dataset import Capability, Store
from dagster_parquet_dataset.storage.base import FileInfo


class InjectedCrash(RuntimeError):
    """Raised by :class:`CrashingStore` at the chosen call, standing in for a crash."""


class PicklableLock:
    """Mixin for a test store holding ``_lock``: a pickled copy (a worker's, a Spark executor's) gets a fresh one."""

    _lock: threading.Lock

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


class WrappingStore(PicklableLock, Store):
    """Delegates every call to ``inner``; subclasses hook :meth:`_before`."""

    def __init__(self, inner: Store, capabilities: frozenset[Capability] | None = None) -> None:
        self.inner = inner
        self.capabilities = inner.capabilities if capabilities is None else capabilities
        self.calls: Counter[str] = Counter()
        self.bytes_read = 0
        self.log: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def _count_read(self, n: int) -> None:
        with self._lock:
            self.bytes_read += n

    def _before(self, op: str, path: str) -> None:
        with self._lock:
            self.calls[op] += 1
            self.log.append((op, path))

    def exists(self, path: str) -> bool:
        self._before("exists", path)
        return self.inner.exists(path)

    def size(self, path: str) -> int:
        self._before("size", path)
        return self.inner.size(path)

    def read_bytes(self, path: str) -> bytes:
        self._before("read_bytes", path)
        return self.inner.read_bytes(path)

    def open_input(self, path: str, *, size: int | None = None, whole: bool = False) -> pa.NativeFile:
        self._before("open_input", path)
        source = self.inner.open_input(path, size=size, whole=whole)
        return pa.PythonFile(CountingReader(source, self._count_read), mode="r")

    @contextmanager
    def open_output(self, path: str) -> Iterator[pa.NativeFile]:
        self._before("open_output", path)
        with self.inner.open_output(path) as sink:
            yield sink
            # A crash here is a crash mid-stream: the inner write is abandoned.
            self._before("open_output:close", path)

    def write_bytes(self, path: str, data: bytes) -> None:
        self._before("write_bytes", path)
        self.inner.write_bytes(path, data)

    def delete(self, path: str, *, missing_ok: bool = False) -> None:
        self._before("delete", path)
        self.inner.delete(path, missing_ok=missing_ok)

    def delete_folder(self, path: str) -> None:
        self._before("delete_folder", path)
        self.inner.delete_folder(path)

    def list_files(self, path: str) -> Iterator[FileInfo]:
        self._before("list_files", path)
        return self.inner.list_files(path)

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        self._before("read_versioned", path)
        return self.inner.read_versioned(path)

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        self._before("write_if", path)
        return self.inner.write_if(path, data, expected=expected)

    def delete_if(self, path: str, *, expected: str) -> None:
        self._before("delete_if", path)
        self.inner.delete_if(path, expected=expected)

    def prune_folders(self, path: str) -> bool:
        self._before("prune_folders", path)
        return self.inner.prune_folders(path)

    def uri(self, path: str = "") -> str:
        return self.inner.uri(path)

    def rename(self, src: str, dst: str) -> None:
        self._before("rename", src)
        self.inner.rename(src, dst)


class ThreadRecordingStore(WrappingStore):
    """Records the thread of every call; its reads are local exactly when ``inner``'s are (``Store.local_reads``)."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.local_reads = inner.local_reads
        self.threads: list[tuple[str, str, int]] = []

    def _before(self, op: str, path: str) -> None:
        super()._before(op, path)
        with self._lock:
            self.threads.append((op, path, threading.get_ident()))

    def threads_of(self, op: str, suffix: str = "") -> set[int]:
        """The threads that made ``op`` calls on paths ending in ``suffix``."""
        return {t for o, p, t in self.threads if o == op and p.endswith(suffix)}

    def arrow_filesystem(self) -> Any:
        return self.inner.arrow_filesystem()


class PassThrough:
    """Mixin for a :class:`WrappingStore`: backend-specific methods (``S3Store.check_access``, ...)
    and the inner store's pyarrow filesystem pass through (executors and scans reach them)."""

    inner: Store

    def __getattr__(self, name: str) -> object:
        if name.startswith("__") or name == "inner":  # not during unpickling
            raise AttributeError(name)
        return getattr(self.inner, name)

    def arrow_filesystem(self) -> Any:
        return self.inner.arrow_filesystem()


class CountingReader(io.RawIOBase):
    """Passes reads through to ``source`` and hands the size of each to ``count``."""

    def __init__(self, source: pa.NativeFile, count: Callable[[int], None]) -> None:
        super().__init__()
        self._source = source
        self._count = count

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        return self._source.seek(pos, whence)

    def tell(self) -> int:
        return self._source.tell()

    def read(self, size: int = -1) -> bytes:
        data = self._source.read() if size is None or size < 0 else self._source.read(size)
        self._count(len(data))
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._source.close()
        super().close()


class CrashingStore(WrappingStore):
    """Raises :class:`InjectedCrash` at the ``crash_at``-th store call (1-based)."""

    def __init__(self, inner: Store, crash_at: int) -> None:
        super().__init__(inner)
        self.crash_at = crash_at
        self.count = 0
        self.crashed = False

    def _before(self, op: str, path: str) -> None:
        super()._before(op, path)
        with self._lock:
            self.count += 1
            hit = self.count == self.crash_at
        if hit:
            self.crashed = True
            raise InjectedCrash(f"injected crash at call {self.crash_at}: {op} {path}")

    def committed_before_crash(self, manifest_path: str) -> bool:
        """Whether a compare-and-swap of ``manifest_path`` completed before the injected crash."""
        before = self.log[: self.crash_at - 1] if self.crashed else self.log
        return any(op == "write_if" and p == manifest_path for op, p in before)
