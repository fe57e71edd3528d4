"""A wrapping store that interrupts the caller at its N-th store call, as Ctrl-C or a run termination would.

Two modes:

- ``before``: the N-th call raises before it reaches the real store (nothing happened);
- ``after``: the N-th call reaches the real store and takes effect, then raises, so the caller
  never learns that it did (the interrupt arrived while the response was on its way).

The exception is a ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``,
``SystemExit``), raised once; every later call goes through, so clean-up code runs as it would after
a real interrupt. It is raised in whichever thread makes the N-th call (a worker's exception reaches
the caller through its future, as an interrupt arriving while the caller waits on that future does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import pyarrow as pa

from dagster_parquet_dataset import Store
from dagster_parquet_dataset.storage.base import FileInfo
from tests._stores import WrappingStore

T = TypeVar("T")
MODES = ("before", "after")


class InterruptingStore(WrappingStore):
    """Raises ``exc_type`` at store call number ``at`` (1-based), ``before`` or ``after`` the call."""

    def __init__(self, inner: Store, at: int, exc_type: type[BaseException], mode: str) -> None:
        super().__init__(inner)
        assert mode in MODES, mode
        self.at = at
        self.exc_type = exc_type
        self.mode = mode
        self.count = 0
        self.fired_on: tuple[str, str] | None = None

    def arm(self, at: int, exc_type: type[BaseException] = KeyboardInterrupt, mode: str = "before") -> None:
        """Interrupt at call ``at`` counted from now (``0``: never)."""
        assert mode in MODES, mode
        with self._lock:
            self.at, self.exc_type, self.mode = at, exc_type, mode
            self.count = 0
            self.fired_on = None

    @property
    def fired(self) -> bool:
        return self.fired_on is not None

    def _hit(self, op: str, path: str) -> bool:
        with self._lock:
            self.count += 1
            if self.count != self.at:
                return False
            self.fired_on = (op, path)
            return True

    def _interrupt(self, op: str, path: str) -> BaseException:
        return self.exc_type(f"interrupted {self.mode} store call {self.at}: {op} {path}")

    def _call(self, op: str, path: str, run: Callable[[], T]) -> T:
        super()._before(op, path)
        hit = self._hit(op, path)
        if hit and self.mode == "before":
            raise self._interrupt(op, path)
        result = run()
        if hit:
            raise self._interrupt(op, path)
        return result

    def exists(self, path: str) -> bool:
        return self._call("exists", path, lambda: self.inner.exists(path))

    def size(self, path: str) -> int:
        return self._call("size", path, lambda: self.inner.size(path))

    def read_bytes(self, path: str) -> bytes:
        return self._call("read_bytes", path, lambda: self.inner.read_bytes(path))

    def open_input(self, path: str, *, size: int | None = None, whole: bool = False) -> pa.NativeFile:
        return self._call("open_input", path, lambda: self.inner.open_input(path, size=size, whole=whole))

    @contextmanager
    def open_output(self, path: str) -> Iterator[pa.NativeFile]:
        # One call point: "before" stops the write before it starts, "after" once the object is stored.
        super()._before("open_output", path)
        hit = self._hit("open_output", path)
        if hit and self.mode == "before":
            raise self._interrupt("open_output", path)
        with self.inner.open_output(path) as sink:
            yield sink
        if hit:
            raise self._interrupt("open_output", path)

    def write_bytes(self, path: str, data: bytes) -> None:
        self._call("write_bytes", path, lambda: self.inner.write_bytes(path, data))

    def delete(self, path: str, *, missing_ok: bool = False) -> None:
        self._call("delete", path, lambda: self.inner.delete(path, missing_ok=missing_ok))

    def delete_folder(self, path: str) -> None:
        self._call("delete_folder", path, lambda: self.inner.delete_folder(path))

    def list_files(self, path: str) -> Iterator[FileInfo]:
        return iter(self._call("list_files", path, lambda: list(self.inner.list_files(path))))

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        return self._call("read_versioned", path, lambda: self.inner.read_versioned(path))

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        return self._call("write_if", path, lambda: self.inner.write_if(path, data, expected=expected))
