"""LocalStore's commit lock files: gone after use, and still excluding concurrent commits.

Races are forced at exact points: the test holds the lock itself and waits
until the kernel lists the commit under test as blocked on it (``/proc/locks``).
"""

from __future__ import annotations

import faulthandler
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore

_DEADLINE = 20.0


@pytest.fixture(autouse=True)
def _watchdog() -> Iterator[None]:
    faulthandler.dump_traceback_later(60, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def _waiting_on(path: str) -> bool:
    """The kernel lists a process blocked on a flock of the file at ``path``."""
    inode = os.stat(path).st_ino
    with open("/proc/locks") as f:
        return any("->" in line and line.split()[-3].endswith(f":{inode}") for line in f)


def _until(condition, thread: threading.Thread) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + _DEADLINE
    while not condition() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)


def test_a_dataset_folder_holds_only_the_dataset_files(tmp_path: Path) -> None:
    datasets = ParquetDatasetStore(LocalStore(tmp_path))
    datasets.write_dataset(pa.table({"a": [1, 2]}), "sales/orders")
    datasets.append_dataset(pa.table({"a": [3]}), "sales/orders")
    names = os.listdir(tmp_path / "sales" / "orders")
    assert not [n for n in names if n.startswith(".")], names


def test_a_lock_file_left_by_a_dead_process_is_reused_and_removed(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / ".manifest.json.lock").write_bytes(b"")  # as a process killed mid-commit leaves it
    store.write_if("d/manifest.json", b"v1", expected=None)
    assert os.listdir(tmp_path / "d") == ["manifest.json"]


def test_a_waiter_on_a_removed_lock_file_does_not_enter_while_the_current_one_is_held(tmp_path: Path) -> None:
    """Holder A removes the lock file and releases it while B waits on it and C has locked a new one: B must
    wait for C, not commit beside it."""
    store = LocalStore(tmp_path)
    store.write_if("d/manifest.json", b"v1", expected=None)
    _, token = store.read_versioned("d/manifest.json")
    lock = str(tmp_path / "d" / ".manifest.json.lock")

    a = os.open(lock, os.O_RDWR | os.O_CREAT)  # A holds the lock
    fcntl.flock(a, fcntl.LOCK_EX)
    b = threading.Thread(target=store.write_if, args=("d/manifest.json", b"v2"), kwargs={"expected": token})
    b.start()
    _until(lambda: _waiting_on(lock), b)
    assert b.is_alive() and _waiting_on(lock), "B must wait while A holds the lock"

    os.unlink(lock)  # A is done: removes the file while holding it ...
    c = os.open(lock, os.O_RDWR | os.O_CREAT)  # ... C arrives and locks a new file at the same path ...
    fcntl.flock(c, fcntl.LOCK_EX)
    os.close(a)  # ... and A releases: B now holds the removed file's lock
    _until(lambda: _waiting_on(lock), b)
    assert b.is_alive() and _waiting_on(lock), "B must notice the lock file was replaced and wait for C"
    assert store.read_bytes("d/manifest.json") == b"v1"

    os.unlink(lock)
    os.close(c)
    b.join(timeout=_DEADLINE)
    assert not b.is_alive()
    assert store.read_bytes("d/manifest.json") == b"v2"
    assert os.listdir(tmp_path / "d") == ["manifest.json"]
