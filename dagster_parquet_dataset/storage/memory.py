"""``MemoryStore``: a thread-safe in-process store, for tests and notebooks."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa

from ..errors import CommitConflict, NotFound
from .base import Capability, FileInfo, Store, validate_key


class MemoryStore(Store):
    """Objects held in a dict in this process, guarded by one lock.

    A pickled copy holds a snapshot of the objects: it does not share them
    with the original, so a ``MemoryStore`` cannot connect processes.
    """

    capabilities = frozenset(Capability)

    def __init__(self) -> None:
        self._objects: dict[str, tuple[pa.Buffer, str, float]] = {}
        self._lock = threading.RLock()
        self._tokens = itertools.count(1)

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            return {"objects": dict(self._objects), "next": next(self._tokens)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._objects = state["objects"]
        self._lock = threading.RLock()
        self._tokens = itertools.count(state["next"])

    def __repr__(self) -> str:
        return f"MemoryStore(<{len(self._objects)} objects>)"

    def _put(self, path: str, data: pa.Buffer) -> str:
        token = str(next(self._tokens))
        self._objects[path] = (data, token, time.time())
        return token

    def _get(self, path: str) -> tuple[pa.Buffer, str, float]:
        validate_key(path, what="path")
        with self._lock:
            try:
                return self._objects[path]
            except KeyError:
                raise NotFound(f"no object at {path!r} in {self!r}") from None

    def exists(self, path: str) -> bool:
        validate_key(path, what="path")
        with self._lock:
            return path in self._objects

    def size(self, path: str) -> int:
        return self._get(path)[0].size

    def read_bytes(self, path: str) -> bytes:
        return self._get(path)[0].to_pybytes()

    def open_input(self, path: str, *, size: int | None = None, whole: bool = False) -> pa.NativeFile:
        data = self._get(path)[0]
        if size is not None and data.size != size:
            raise OSError(f"{path!r} is {data.size} bytes, expected {size}")
        return pa.BufferReader(data)

    @contextmanager
    def open_output(self, path: str) -> Iterator[pa.NativeFile]:
        validate_key(path, what="path")
        sink = pa.BufferOutputStream()
        yield sink
        data = sink.getvalue()
        with self._lock:
            self._put(path, data)

    def delete(self, path: str, *, missing_ok: bool = False) -> None:
        validate_key(path, what="path")
        with self._lock:
            if self._objects.pop(path, None) is None and not missing_ok:
                raise NotFound(f"no object at {path!r} in {self!r}")

    def delete_folder(self, path: str) -> None:
        validate_key(path, what="path")
        prefix = path + "/"
        with self._lock:
            doomed = [k for k in self._objects if k.startswith(prefix)]
            if not doomed:
                raise NotFound(f"nothing stored under {path!r} in {self!r}")
            for k in doomed:
                del self._objects[k]

    def list_files(self, path: str) -> Iterator[FileInfo]:
        if path:
            validate_key(path, what="path")
        prefix = path + "/" if path else ""
        with self._lock:
            found = [FileInfo(k, v[0].size, v[2]) for k, v in self._objects.items() if k.startswith(prefix)]
        yield from sorted(found, key=lambda f: f.path)

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        data, token, _ = self._get(path)
        return data.to_pybytes(), token

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        validate_key(path, what="path")
        with self._lock:
            current = self._objects.get(path)
            current_token = current[1] if current is not None else None
            if current_token != expected:
                raise CommitConflict(
                    f"{path!r} changed since it was read (expected "
                    f"{'no object' if expected is None else 'version ' + expected})"
                )
            return self._put(path, pa.py_buffer(bytes(data)))

    def uri(self, path: str = "") -> str:
        return f"memory://{path}"
