"""The one retry policy of every commit and re-plan: jittered exponential backoff until a timeout."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from ...errors import CommitConflict
from ..format.segments import SegmentGone
from ..io.part_check import PartsVanished

_FIRST_DELAY = 0.005
_MAX_DELAY = 1.0

T = TypeVar("T")


class Replan(Exception):
    """A concurrent commit touched the files an operation planned on: plan again."""


class Backoff:
    """The one retry policy: jittered exponential backoff until ``timeout`` seconds have passed."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._deadline = time.monotonic() + timeout
        self._delay = _FIRST_DELAY

    def expired(self) -> bool:
        return time.monotonic() >= self._deadline

    def pause(self) -> None:
        time.sleep(random.uniform(0, self._delay))
        self._delay = min(self._delay * 2, _MAX_DELAY)


def retry_replans(timeout: float, attempt: Callable[[], T], gave_up: Callable[[], str]) -> T:
    """Call ``attempt`` until it does not raise :class:`Replan` (or a ``PartsVanished``), with :class:`Backoff`.

    Raises:
        CommitConflict: still re-planning after ``timeout`` seconds (message from ``gave_up``).
        Whatever ``attempt`` raises otherwise.
    """
    backoff = Backoff(timeout)
    while True:
        try:
            return attempt()
        except (Replan, PartsVanished, SegmentGone):
            pass  # a concurrent commit replaced files this operation planned on: plan again
        if backoff.expired():
            raise CommitConflict(gave_up())
        backoff.pause()
