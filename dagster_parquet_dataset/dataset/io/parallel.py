"""``parallel_map``: the bounded I/O thread pool that reads, scans and key checks fan out on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

_MAX_IO_THREADS = 16
T = TypeVar("T")
R = TypeVar("R")


def parallel_map(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[fn(x) for x in items]`` on I/O threads (inline for a single item)."""
    if len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(_MAX_IO_THREADS, len(items)), thread_name_prefix="pds-read") as pool:
        return list(pool.map(fn, items))
