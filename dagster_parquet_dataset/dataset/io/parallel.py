"""``parallel_map``: the bounded I/O thread pool that reads, scans and key checks fan out on."""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from ...storage.base import Store

_MAX_IO_THREADS = 16
#: Threads of the shared I/O pool (:func:`parallel_map` callers ask for at most this many at once).
POOL_THREADS = 32
T = TypeVar("T")
R = TypeVar("R")

_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_pool_lock = threading.Lock()
_worker = threading.local()


def _mark_worker() -> None:
    _worker.active = True


def _shared_pool() -> ThreadPoolExecutor:
    """The process's I/O pool, created on first use (and again in a forked child, whose copy has no threads)."""
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="pds-io", initializer=_mark_worker)
            _pool_pid = os.getpid()
        return _pool


def store_threads(store: Store, threads: int = _MAX_IO_THREADS) -> int:
    """The ``threads`` for :func:`parallel_map` over small reads or checks of ``store``: 1 (the calling
    thread) when its reads are local (``Store.local_reads``: a hand-off to a thread costs more than the
    read; three ``exists`` on local disk took 250 us on the pool, 27 us inline), else ``threads``."""
    return 1 if store.local_reads else threads


def parallel_map(fn: Callable[[T], R], items: Sequence[T], threads: int = _MAX_IO_THREADS) -> list[R]:
    """``[fn(x) for x in items]`` on I/O threads, at most ``threads`` at once (inline for a single item
    or ``threads=1``).

    The threads come from one pool per process, started on first use (365 manifest reads need
    not start 32 threads each time). A call from one of its own threads (a read inside a
    parallel read) gets a pool of its own, so that it never waits for threads busy waiting on it.

    Raises:
        The first exception (in the order of ``items``) that ``fn`` raised, once the calls
        already started have finished; no more calls start after a failure.
    """
    if len(items) <= 1 or threads <= 1:
        return [fn(item) for item in items]
    threads = max(1, min(threads, POOL_THREADS, len(items)))
    if getattr(_worker, "active", False):
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pds-read") as own:
            return list(own.map(fn, items))
    pool = _shared_pool()
    results: list[Any] = [None] * len(items)
    errors: dict[int, BaseException] = {}
    pending: dict[Future[R], int] = {}
    queue = iter(range(len(items)))
    for index in itertools.islice(queue, threads):
        pending[pool.submit(fn, items[index])] = index
    while pending:
        done, _ = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            index = pending.pop(future)
            error = future.exception()
            if error is not None:
                errors[index] = error
            else:
                results[index] = future.result()
            following = None if errors else next(queue, None)
            if following is not None:
                pending[pool.submit(fn, items[following])] = following
    if errors:
        raise errors[min(errors)]
    return results
