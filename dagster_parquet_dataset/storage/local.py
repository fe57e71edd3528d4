"""``LocalStore``: objects as files under a root folder on a local disk."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import AlreadyExists, CapabilityNotSupported, CommitConflict, NotFound
from .base import Capability, FileInfo, Store, validate_key

log = logging.getLogger(__name__)

_TMP_SUFFIX = ".tmp"
_LOCK_SUFFIX = ".lock"
#: ``os.open`` flags of :meth:`LocalStore.read_bytes`; the errors ``O_NOFOLLOW`` gives for a symbolic link.
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC
_LINK_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK})
_READ_CHUNK = 1 << 20
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$")


def _check_root(root: str | os.PathLike[str]) -> str:
    """The absolute folder for ``root``, with a leading ``~`` expanded to the home folder.

    Raises:
        TypeError: ``root`` is not a ``str`` or path.
        ValueError: ``root`` is a URL (``s3://...``, ``file://...``), which would
            otherwise become a local folder named after the scheme.
    """
    text = os.fspath(root)
    if not isinstance(text, str):
        raise TypeError(f"LocalStore root must be a str or path, got {type(text).__name__}")
    match = _URL.match(text)
    if match:
        scheme, rest = match.group(1).lower(), match.group(2)
        if scheme == "file":
            hint = f"pass the plain folder path instead, e.g. {('/' + rest.lstrip('/'))!r}"
        elif scheme in ("s3", "s3a", "s3n"):
            bucket, _, prefix = rest.partition("/")
            hint = (
                f"for S3 use S3Store({bucket!r}, prefix={prefix.strip('/')!r}) "
                f"(in Dagster: S3StoreResource(bucket={bucket!r}, prefix={prefix.strip('/')!r}))"
            )
        else:
            hint = "LocalStore writes to a local or mounted folder; for S3 or an S3-compatible server use S3Store (S3StoreResource in Dagster)"
        raise ValueError(f"LocalStore root {text!r} is a URL, not a local folder path: {hint}")
    return os.path.abspath(os.path.expanduser(text))


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass  # deleted meanwhile


def _rmdir(path: str) -> None:
    """Remove an empty folder. Raises ``OSError`` (``ENOTEMPTY``) if a file appeared in it meanwhile."""
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass


def _remove_empty_folders(top: str) -> None:
    """Remove ``top`` and the folders under it while they hold no file; a folder that gained one stays."""
    for dirpath, dirnames, _filenames in os.walk(top, topdown=False):
        for name in dirnames:
            if not os.path.islink(os.path.join(dirpath, name)):
                with suppress(OSError):
                    _rmdir(os.path.join(dirpath, name))
    with suppress(OSError):
        _rmdir(top)


def _fsync_path(path: str, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def _locked(full: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the hidden lock file beside ``full`` (``.<name>.lock``), removed after use.

    The lock file exists only while a holder (or a waiter) needs it, so a
    dataset's folder holds only its own files between commits. Removing it is
    safe because the holder unlinks it while still holding the lock, and a
    process that obtains the lock proceeds only if the file it locked is still
    the one at the lock's path; otherwise it locked a removed file and tries
    again on the current one. The kernel releases the lock of a process that
    dies; the next holder reuses and removes the file it left.
    """
    folder, name = os.path.split(full)
    lock = os.path.join(folder, f".{name}{_LOCK_SUFFIX}")
    while True:
        os.makedirs(folder, exist_ok=True)
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except FileNotFoundError:
            continue  # the folder was removed between makedirs and open
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(lock)
            except FileNotFoundError:
                continue  # the previous holder removed the file we waited on
            locked = os.fstat(fd)
            if (current.st_dev, current.st_ino) != (locked.st_dev, locked.st_ino):
                continue  # removed and created again meanwhile: lock the current one
            try:
                yield
            finally:
                _unlink_quietly(lock)  # while still held: see the docstring
            return
        finally:
            os.close(fd)  # closing the descriptor releases the flock


class LocalStore(Store):
    """Files under ``root``; every write is temp file, fsync, ``os.replace``.

    * Writes go to a hidden temp file in the target folder, are fsynced,
      renamed over the target, and the folder is fsynced, so a crash leaves
      either the old or the new file, never a torn one.
    * Files are created with mode ``0o666`` less the umask, like any tool.
    * No path outside ``root`` is ever touched: keys are validated and every
      resolved path is checked to stay under the resolved root.
    * :meth:`write_if` holds an exclusive ``flock`` on a hidden sibling lock
      file, removed after use (see :func:`_locked`); the kernel releases the
      lock if the process dies, so a crash never leaves it held.

    Args:
        root: folder holding the objects; created on first write. A leading
            ``~`` means the home folder; a URL (``s3://...``) is refused.
        durable: fsync files and folders on write (default). Turning it off
            keeps atomicity against process crashes but not power loss.

    A root on a network mount (NFS, EFS) pays a round trip per read: set
    ``local_reads = False`` on the store so that many small reads overlap on threads.
    """

    capabilities = frozenset(Capability)
    local_reads = True
    #: ``NAME_MAX`` of common local file systems (ext4, XFS, APFS, NTFS).
    max_segment_bytes = 255

    def __init__(self, root: str | os.PathLike[str], *, durable: bool = True) -> None:
        """Raises ``ValueError`` for a URL root (see :func:`_check_root`), before touching the disk."""
        self.root = _check_root(root)
        self.durable = durable
        self._real_root: str | None = None

    def __repr__(self) -> str:
        return f"LocalStore({self.root!r})"

    def _path(self, key: str, *, leaf: bool = True) -> str:
        """The file path of ``key``, checked to stay under the resolved root.

        ``leaf=False`` leaves out the check of the last segment: for a caller that opens the path with
        ``O_NOFOLLOW`` (so the kernel refuses a symbolic link there) and calls this again with ``leaf=True``
        when it does (:meth:`read_bytes`).

        Raises:
            ValueError / TypeError: an unsafe key, or one that resolves outside the root.
        """
        validate_key(key, what="path")
        segments = key.split("/")
        full = os.path.join(self.root, *segments)
        real_root = self._real_root
        if real_root is None:
            real_root = os.path.realpath(self.root)
            if os.path.isdir(real_root):  # resolved for good once the root exists
                self._real_root = real_root
        # Keys have no '..' segments: only a symlink below the root can lead outside it.
        below = real_root.rstrip(os.sep)  # "" for the file system's root folder
        for segment in segments if leaf else segments[:-1]:
            below = f"{below}{os.sep}{segment}"
            if os.path.islink(below):
                break
        else:
            return full
        real = os.path.realpath(full)
        if real != real_root and not real.startswith(real_root + os.sep):
            raise ValueError(f"path {key!r} resolves outside the store root {self.root!r}")
        return full

    def exists(self, path: str) -> bool:
        return os.path.isfile(self._path(path))

    def size(self, path: str) -> int:
        full = self._path(path)
        try:
            if os.path.isfile(full):
                return os.stat(full).st_size
        except FileNotFoundError:
            pass
        raise NotFound(f"no file {path!r} under {self.root!r}")

    def read_bytes(self, path: str) -> bytes:
        """The file's content: its folders checked as :meth:`_path` checks them, the file itself opened with
        ``O_NOFOLLOW`` (a symbolic link there is checked like a folder's, then followed), then one ``fstat`` and
        reads to the end: no ``lstat`` of the file, no buffered file object.

        Raises:
            NotFound: no file at ``path`` (or a folder).
            ValueError / TypeError: an unsafe key, or one that resolves outside the root.
        """
        try:
            try:
                fd = os.open(self._path(path, leaf=False), _READ_FLAGS | os.O_NOFOLLOW)
            except OSError as exc:
                if exc.errno not in _LINK_ERRNOS:
                    raise
                fd = os.open(self._path(path), _READ_FLAGS)  # the file is a symbolic link: checked, then followed
            try:
                chunks = [os.read(fd, os.fstat(fd).st_size + 1)]  # EISDIR for a folder
                while chunks[-1]:
                    chunks.append(os.read(fd, _READ_CHUNK))  # to the end, as a file object's read() does
            finally:
                os.close(fd)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise NotFound(f"no file {path!r} under {self.root!r}") from None
        return b"".join(chunks)

    def open_input(self, path: str, *, size: int | None = None, whole: bool = False) -> pa.NativeFile:
        full = self._path(path)
        try:
            if not os.path.isfile(full):
                raise FileNotFoundError(full)
            f = pa.OSFile(full, "rb")
        except FileNotFoundError:
            raise NotFound(f"no file {path!r} under {self.root!r}") from None
        if size is not None and f.size() != size:
            f.close()
            raise OSError(f"{path!r} is {os.stat(full).st_size} bytes, expected {size}")
        return f

    @contextmanager
    def open_output(self, path: str) -> Iterator[pa.NativeFile]:
        """Raises :class:`NotFound` if the folder (or the temporary file) is deleted while the object is
        written, e.g. by a concurrent ``delete_dataset``; nothing is published then."""
        full = self._path(path)
        folder, name = os.path.split(full)
        tmp = os.path.join(folder, f".{name}.{uuid.uuid4().hex}{_TMP_SUFFIX}")
        try:
            os.makedirs(folder, exist_ok=True)
            sink = pa.OSFile(tmp, "wb")
        except FileNotFoundError:
            raise NotFound(f"could not write {path!r}: its folder was deleted meanwhile") from None
        try:
            yield sink
            sink.close()
            try:
                self._publish(tmp, full)
            except FileNotFoundError:
                raise NotFound(f"could not publish {path!r}: its folder was deleted while it was written") from None
        except BaseException:
            sink.close()
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    def _publish(self, tmp: str, full: str) -> None:
        if self.durable:
            _fsync_path(tmp)
        os.replace(tmp, full)
        if self.durable:
            _fsync_path(os.path.dirname(full), os.O_RDONLY | os.O_DIRECTORY)

    def delete(self, path: str, *, missing_ok: bool = False) -> None:
        try:
            os.unlink(self._path(path))
        except (FileNotFoundError, NotADirectoryError):
            if not missing_ok:
                raise NotFound(f"no file {path!r} under {self.root!r}") from None

    def delete_folder(self, path: str) -> None:
        full = self._path(path)
        if not os.path.isdir(full) or not any(True for _ in self.list_files(path)):
            if os.path.isdir(full) and not os.path.islink(full):
                _remove_empty_folders(full)  # e.g. a Spark write's staging folder its renames emptied
            raise NotFound(f"nothing stored under {path!r} in {self.root!r}")
        for dirpath, dirnames, filenames in os.walk(full, topdown=False):
            for name in filenames:
                _unlink_quietly(os.path.join(dirpath, name))
            for name in dirnames:
                sub = os.path.join(dirpath, name)
                if os.path.islink(sub):
                    _unlink_quietly(sub)  # the link only: never what it points to
                else:
                    _rmdir(sub)
        _rmdir(full)

    def list_files(self, path: str) -> Iterator[FileInfo]:
        full = self.root if path == "" else self._path(path)
        found: list[FileInfo] = []
        for dirpath, _dirnames, filenames in os.walk(full):
            rel_dir = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
            for name in filenames:
                if name.endswith(_LOCK_SUFFIX) and name.startswith("."):
                    continue
                try:
                    info = os.stat(os.path.join(dirpath, name))
                except FileNotFoundError:
                    continue
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"  # rel_dir is "." when listing the root
                found.append(FileInfo(rel, info.st_size, info.st_mtime))
        yield from sorted(found, key=lambda f: f.path)

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        data = self.read_bytes(path)
        return data, hashlib.sha256(data).hexdigest()

    def _token_at(self, full: str) -> str | None:
        """The token of the file at ``full`` (the hash of its content), ``None`` if there is none."""
        try:
            with open(full, "rb") as f:
                return hashlib.sha256(f.read()).hexdigest()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        full = self._path(path)
        with _locked(full):
            current = self._token_at(full)
            if current != expected:
                raise CommitConflict(
                    f"{path!r} changed since it was read "
                    f"({'it now exists' if expected is None else 'its content differs'})"
                )
            with self.open_output(path) as out:
                out.write(data)
            return hashlib.sha256(data).hexdigest()

    def delete_if(self, path: str, *, expected: str) -> None:
        """Delete the file if it still carries ``expected``, holding the lock :meth:`write_if` holds.

        The check and the unlink happen under the exclusive ``flock`` that every :meth:`write_if` of
        ``path`` holds from its check to its publish (see :func:`_locked`), so the two are serialised across
        threads and processes: a ``write_if`` that expected the deleted token waits, then finds no file and
        raises ``CommitConflict``; a ``write_if`` that landed first changed the token, so this delete raises
        ``CommitConflict`` and leaves its file. No moment exists at which the file is away from ``path``
        while still live, so readers (which take no lock) see it or its absence. The kernel releases the
        lock of a process that dies in between, with nothing deleted or the file deleted.

        Raises:
            CommitConflict: the file carries another token; nothing is deleted.
            NotFound: no file at ``path``.
        """
        full = self._path(path)
        if not os.path.isfile(full):
            raise NotFound(f"no file {path!r} under {self.root!r}")  # and no lock file in a folder made for it
        with _locked(full):
            current = self._token_at(full)
            if current is None:
                raise NotFound(f"no file {path!r} under {self.root!r}")
            if current != expected:
                raise CommitConflict(f"{path!r} changed since it was read (its content differs)")
            os.unlink(full)
            if self.durable:
                _fsync_path(os.path.dirname(full), os.O_RDONLY | os.O_DIRECTORY)

    def prune_folders(self, path: str) -> bool:
        """Remove the empty folders under ``path`` and ``path`` itself if it is left empty, and the symbolic
        links to folders below it (the links only, never what they point to); never a file. A folder in
        which a file appears meanwhile stays (``rmdir`` refuses a folder that is not empty). Whether the
        folder ``path`` is gone."""
        full = self._path(path)
        if os.path.islink(full) or not os.path.isdir(full):
            return not os.path.lexists(full)
        for dirpath, dirnames, _filenames in os.walk(full, topdown=False):
            for name in dirnames:
                sub = os.path.join(dirpath, name)
                if os.path.islink(sub) and os.path.isdir(sub):
                    _unlink_quietly(sub)
        _remove_empty_folders(full)
        return not os.path.lexists(full)

    def uri(self, path: str = "") -> str:
        return Path(self.root, *(path.split("/") if path else [])).as_uri()

    def arrow_filesystem(self) -> tuple[pafs.FileSystem, str]:
        """pyarrow's ``LocalFileSystem`` and the store's root folder (see :meth:`Store.arrow_filesystem`)."""
        return pafs.LocalFileSystem(), self.root.replace(os.sep, "/")

    def rename(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst`` atomically for every caller, never replacing a file at ``dst``.

        First ``src`` is renamed to a fresh hidden name beside it (``.<name>.<hex>.tmp``): one atomic
        step that exactly one of several concurrent renames of ``src`` wins (the others find no
        ``src``). Then the hidden file is hard-linked at ``dst`` (which fails if ``dst`` exists) and
        unlinked; if the link fails, the file goes back to ``src``. Folders are fsynced if durable.

        Raises:
            NotFound: no file at ``src`` (or another rename of ``src`` took it first).
            AlreadyExists: a file is already at ``dst``; nothing is moved.
            CapabilityNotSupported: ``dst`` is on another device than ``src`` (a mount point below
                the store's root); nothing is moved.
        """
        source, target = self._path(src), self._path(dst)
        if not os.path.isfile(source):
            raise NotFound(f"no file {src!r} under {self.root!r}")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        folder, name = os.path.split(source)
        held = os.path.join(folder, f".{name}.{uuid.uuid4().hex}{_TMP_SUFFIX}")
        try:
            os.rename(source, held)  # claims src: a concurrent rename of it now finds nothing
        except FileNotFoundError:
            raise NotFound(f"no file {src!r} under {self.root!r}") from None
        try:
            os.link(held, target)
        except FileExistsError:
            self._put_back(held, source, src)
            raise AlreadyExists(
                f"cannot rename {src!r} to {dst!r}: {dst!r} already exists under {self.root!r}"
            ) from None
        except OSError as exc:
            self._put_back(held, source, src)
            if exc.errno == errno.EXDEV:
                raise CapabilityNotSupported(
                    f"cannot rename {src!r} to {dst!r}: {dst!r} is on another device than {src!r} under "
                    f"{self.root!r}; keep the store's root on one file system"
                ) from exc
            raise
        os.unlink(held)
        if self.durable:
            _fsync_path(os.path.dirname(target), os.O_RDONLY | os.O_DIRECTORY)
            if os.path.dirname(source) != os.path.dirname(target):
                _fsync_path(os.path.dirname(source), os.O_RDONLY | os.O_DIRECTORY)

    def _put_back(self, held: str, source: str, src: str) -> None:
        """Move a claimed file back to ``src`` after a failed rename (never over a new file at ``src``)."""
        try:
            os.link(held, source)
        except FileExistsError:
            log.warning("%r was written again during a failed rename; the old file stays at %r", src, held)
            return
        os.unlink(held)
