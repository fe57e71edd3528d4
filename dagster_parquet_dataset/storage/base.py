"""The ``Store`` protocol: the few operations the dataset layer needs.

Every path is a ``/``-separated key relative to the store's root, checked by
:func:`validate_key`. Backends know nothing about datasets.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import CapabilityNotSupported

_FORBIDDEN_CHARS = ("\x00", "\\")


class Capability(enum.Enum):
    """What a backend can do; operations check these before any I/O."""

    ATOMIC_WRITE = "atomic_write"
    """A written object becomes visible whole, or not at all."""
    DELETE = "delete"
    """Objects and folders can be deleted."""
    CONDITIONAL_WRITE = "conditional_write"
    """Compare-and-swap writes (:meth:`Store.write_if`)."""
    CONDITIONAL_DELETE = "conditional_delete"
    """Deletes that happen only if the object still carries a token (:meth:`Store.delete_if`)."""
    LIST = "list"
    """Objects under a folder can be listed."""
    RENAME = "rename"
    """An object can be moved to a new key atomically, never replacing another (:meth:`Store.rename`)."""


@dataclass(frozen=True)
class FileInfo:
    """One stored object: its key relative to the store root, its size, and
    when it was last written (seconds since the epoch, ``None`` if unknown)."""

    path: str
    size: int
    modified: float | None = None


def validate_key(key: str, *, what: str = "key") -> str:
    """Return ``key`` if it is a safe relative key, else raise.

    A safe key is a non-empty ``/``-separated relative path with no empty,
    ``.`` or ``..`` segment, no NUL and no backslash.

    Raises:
        TypeError: ``key`` is not a ``str``.
        ValueError: the key is unsafe; the message says why.
    """
    if not isinstance(key, str):
        raise TypeError(f"{what} must be a str, got {type(key).__name__}")
    if not key:
        raise ValueError(f"{what} must not be empty")
    for ch in _FORBIDDEN_CHARS:
        if ch in key:
            raise ValueError(f"{what} {key!r} contains a forbidden character {ch!r}")
    if key.startswith("/"):
        raise ValueError(f"{what} {key!r} must be relative, not absolute")
    for segment in key.split("/"):
        if segment in ("", ".", ".."):
            raise ValueError(f"{what} {key!r} has an empty, '.' or '..' segment; keys must stay inside their folder")
    return key


def join_key(*parts: str) -> str:
    """Join key segments with ``/`` (no validation)."""
    return "/".join(p.strip("/") for p in parts if p)


class Store(abc.ABC):
    """A flat key/object store with atomic writes and compare-and-swap.

    Implementations must be safe to use from several threads, must pickle
    (workers and Spark executors receive copies), and create their clients
    lazily.
    """

    #: What this backend supports.
    capabilities: frozenset[Capability] = frozenset()

    #: Whether a read is served from this machine's memory or disk, with no round trip to wait
    #: on. Callers that read many small objects (the manifests of 365 daily datasets) then read
    #: them one after the other in the calling thread, where handing each to a thread would cost
    #: more than the read; otherwise they overlap the reads on a pool of threads. ``False`` (the
    #: safe choice for a backend that does not say, or a local path on a network mount) only
    #: costs those thread hand-offs.
    local_reads: bool = False

    #: The longest path segment (file or folder name) the backend can store, in
    #: UTF-8 bytes; ``None`` for no limit. Callers check keys they build against it
    #: before writing, so a too-long name is a clear error rather than a half-done write.
    max_segment_bytes: int | None = None

    #: The longest key (a whole store-relative path, UTF-8 bytes) the backend can
    #: store, after anything it puts in front of the key (such as a prefix);
    #: ``None`` for no limit.
    max_key_bytes: int | None = None

    def supports(self, capability: Capability) -> bool:
        """Whether this store has ``capability``."""
        return capability in self.capabilities

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        """Whether an object exists at ``path``."""

    @abc.abstractmethod
    def size(self, path: str) -> int:
        """Size in bytes of the object at ``path``.

        Raises:
            NotFound: no object at ``path``.
        """

    @abc.abstractmethod
    def read_bytes(self, path: str) -> bytes:
        """Return the whole object at ``path``.

        Raises:
            NotFound: no object at ``path``.
        """

    @abc.abstractmethod
    def open_input(self, path: str, *, size: int | None = None, whole: bool = False) -> pa.NativeFile:
        """Open ``path`` for random-access reading (ranged reads on S3).

        ``size`` is the object's size when the caller already knows it (from a
        manifest); a backend may then skip asking the server. If the object
        turns out to be missing or of another size, reading raises ``OSError``.
        Without ``size``, the returned file's ``size()`` is the object's size.
        ``whole`` says the caller will read (nearly) all of it: a remote backend
        may then fetch it in one request instead of several ranged ones.

        Raises:
            NotFound: no object at ``path`` (when the backend checks on open).
        """

    @abc.abstractmethod
    def open_output(self, path: str) -> AbstractContextManager[pa.NativeFile]:
        """Open ``path`` for a streaming write that is atomic on close.

        Use as a context manager: the object appears whole when the block
        exits normally, replacing any previous object at ``path``. When the
        block raises, the write is abandoned and the previous object (if
        any) is left as it was.
        """

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` atomically, replacing any object there."""
        with self.open_output(path) as out:
            out.write(data)

    @abc.abstractmethod
    def delete(self, path: str, *, missing_ok: bool = False) -> None:
        """Delete the object at ``path``.

        Raises:
            NotFound: no object at ``path`` and ``missing_ok`` is false.
        """

    @abc.abstractmethod
    def delete_folder(self, path: str) -> None:
        """Delete every object whose key starts with ``path + "/"``.

        Raises:
            NotFound: nothing is stored under ``path``.
        """

    @abc.abstractmethod
    def list_files(self, path: str) -> Iterator[FileInfo]:
        """Yield every object under the folder ``path``, recursively.

        Keys in the result are relative to the store root, like ``path``.
        An empty folder yields nothing; ``path=""`` yields every object in the store.
        """

    @abc.abstractmethod
    def read_versioned(self, path: str) -> tuple[bytes, str]:
        """Return the object at ``path`` and an opaque version token for it.

        Raises:
            NotFound: no object at ``path``.
        """

    @abc.abstractmethod
    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        """Compare-and-swap: write ``data`` only if ``path`` is as expected.

        ``expected=None`` means the object must not exist yet; otherwise it
        must still carry the token :meth:`read_versioned` returned. The write
        is atomic. Returns the new token.

        Raises:
            CommitConflict: the object changed (or appeared) meanwhile. A remote
                backend whose client retried a request that was applied but whose
                response was lost also gets this; callers recognise their own
                write by its content.
            OSError: the store did not answer (timeout, reset connection): the
                write may or may not have been applied.
        """

    def delete_if(self, path: str, *, expected: str) -> None:
        """Delete the object at ``path`` only if it still carries the token ``expected`` (from
        :meth:`read_versioned` or :meth:`write_if`), atomically with respect to :meth:`write_if`: of a
        ``delete_if`` and a ``write_if`` that both expect one token, exactly one succeeds.

        Only backends with :attr:`Capability.CONDITIONAL_DELETE` implement it (memory, a local disk, S3).
        A caller on a store without it may read the token with :meth:`read_versioned` and then
        :meth:`delete`; that is not atomic: a ``write_if`` that lands between the two is deleted with it.

        Raises:
            CapabilityNotSupported: the backend cannot delete conditionally (the default).
            CommitConflict: the object carries another token (it was replaced meanwhile); nothing is deleted.
            NotFound: no object at ``path`` (never created, or deleted meanwhile: by this very request too,
                when a remote backend's client retried a request whose response was lost).
            OSError: the store did not answer (timeout, reset connection): the delete may or may not
                have been applied.
        """
        raise CapabilityNotSupported(f"{type(self).__name__} cannot delete objects conditionally")

    def prune_folders(self, path: str) -> bool:
        """Remove the folders under ``path`` (and ``path`` itself) that hold no object, on backends whose
        folders exist apart from their objects (a local disk); never an object. A folder in which an object
        appears meanwhile stays. Whether ``path`` is gone (``False``: something is still in it, such as an
        object published meanwhile or a nested dataset's folder). Object stores have no such folders: the
        default does nothing and returns ``True``."""
        return True

    def uri(self, path: str = "") -> str:
        """A URI for ``path`` that other tools understand (``file://``, ``s3://``)."""
        return f"{type(self).__name__.lower()}://{path}"

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        """A pyarrow filesystem that reads this store's objects, and where the store root is on it.

        The object at key ``k`` is at ``f"{base}/{k}"`` on the returned filesystem
        (at ``k`` when ``base`` is ``""``). Lazy scans (``pyarrow.dataset``, DuckDB,
        polars) read through it; use it for reading only: writes must go through
        the store so that they stay atomic. The filesystem is created lazily and
        may be shared with the store.

        Raises:
            CapabilityNotSupported: the backend cannot be read through a pyarrow
                filesystem (the default for backends that do not override this).
        """
        raise CapabilityNotSupported(f"{type(self).__name__} cannot be read through a pyarrow filesystem")

    def rename(self, src: str, dst: str) -> None:
        """Move the object at ``src`` to ``dst`` atomically; an object already at ``dst`` is never replaced.

        Only backends with :attr:`Capability.RENAME` implement it (a local disk, memory);
        on object stores a rename is a full copy, so they do not offer it.

        Raises:
            CapabilityNotSupported: the backend cannot rename (the default).
            NotFound: no object at ``src``.
            AlreadyExists: an object is already at ``dst``; nothing is moved.
        """
        raise CapabilityNotSupported(f"{type(self).__name__} cannot rename objects")
