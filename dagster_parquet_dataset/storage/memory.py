"""``MemoryStore``: a thread-safe in-process store, for tests and notebooks."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import AlreadyExists, CommitConflict, NotFound
from .base import Capability, FileInfo, Store, validate_key


class MemoryStore(Store):
    """Objects held in a dict in this process, guarded by one lock.

    A pickled copy holds a snapshot of the objects: it does not share them
    with the original, so a ``MemoryStore`` cannot connect processes.
    """

    capabilities = frozenset(Capability)
    local_reads = True

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

    def delete_if(self, path: str, *, expected: str) -> None:
        """Delete the object under the store's lock if it still carries ``expected``.

        Raises:
            CommitConflict: the object carries another token; nothing is deleted.
            NotFound: no object at ``path``.
        """
        validate_key(path, what="path")
        with self._lock:
            current = self._objects.get(path)
            if current is None:
                raise NotFound(f"no object at {path!r} in {self!r}")
            if current[1] != expected:
                raise CommitConflict(f"{path!r} changed since it was read (expected version {expected})")
            del self._objects[path]

    def uri(self, path: str = "") -> str:
        return f"memory://{path}"

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        """A read-only ``pyarrow.fs.PyFileSystem`` over this store's objects, base ``""``
        (see :meth:`Store.arrow_filesystem`). Reads see the objects as they are when opened.

        Its handler is Python code: pyarrow calls it, holding its own locks, from its I/O threads, which
        can deadlock against the GIL in threaded scans. Use it from one thread; the package's scans never
        read through it (they copy their parts into a native in-memory filesystem when created)."""
        return pafs.PyFileSystem(_MemoryHandler(self)), ""

    def rename(self, src: str, dst: str) -> None:
        """Move the object under the store's lock.

        Raises:
            NotFound: no object at ``src``.
            AlreadyExists: an object is already at ``dst``; nothing is moved.
        """
        validate_key(src, what="path")
        validate_key(dst, what="path")
        with self._lock:
            if src not in self._objects:
                raise NotFound(f"no object at {src!r} in {self!r}")
            if dst in self._objects:
                raise AlreadyExists(f"cannot rename {src!r} to {dst!r}: {dst!r} already exists in {self!r}")
            self._objects[dst] = self._objects.pop(src)


class _MemoryHandler(pafs.FileSystemHandler):
    """Read-only pyarrow view of a :class:`MemoryStore` (paths are store keys)."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _MemoryHandler) and other._store is self._store

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return id(self._store)

    def get_type_name(self) -> str:
        return "pds-memory"

    def normalize_path(self, path: str) -> str:
        return path.strip("/")

    def _info(self, path: str) -> pafs.FileInfo:
        path = path.strip("/")
        with self._store._lock:
            obj = self._store._objects.get(path)
            if obj is not None:
                return pafs.FileInfo(path, pafs.FileType.File, size=obj[0].size, mtime=obj[2])
            if not path or any(k.startswith(path + "/") for k in self._store._objects):
                return pafs.FileInfo(path, pafs.FileType.Directory)
        return pafs.FileInfo(path, pafs.FileType.NotFound)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [self._info(p) for p in paths]

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base = selector.base_dir.strip("/")
        prefix = base + "/" if base else ""
        if self._info(base).type != pafs.FileType.Directory:
            if selector.allow_not_found:
                return []
            raise FileNotFoundError(f"no folder {base!r} in {self._store!r}")
        with self._store._lock:
            keys = sorted(k for k in self._store._objects if k.startswith(prefix))
        out: dict[str, pafs.FileInfo] = {}
        for key in keys:
            rest = key[len(prefix) :].split("/")
            depth = len(rest) if selector.recursive else 1
            for i in range(1, min(depth, len(rest) - 1) + 1):
                folder = prefix + "/".join(rest[:i])
                out.setdefault(folder, pafs.FileInfo(folder, pafs.FileType.Directory))
            if selector.recursive or len(rest) == 1:
                out[key] = self._info(key)
        return list(out.values())

    def open_input_file(self, path: str) -> pa.NativeFile:
        try:
            return pa.BufferReader(self._store._get(path.strip("/"))[0])
        except NotFound:
            raise FileNotFoundError(f"no object {path!r} in {self._store!r}") from None

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.open_input_file(path)

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise OSError("the pyarrow view of a MemoryStore is read-only; write through the store")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = _read_only
    delete_file = move = copy_file = open_output_stream = open_append_stream = _read_only
