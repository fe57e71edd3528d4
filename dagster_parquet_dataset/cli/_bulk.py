"""Run one command over many datasets on a thread pool, with one progress bar, collecting each outcome."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..errors import RemoteStoreError
from ._format import one_line
from ._progress import progress_bar

R = TypeVar("R")
#: Datasets processed at once. Each dataset's own work (verify's footers, vacuum's deletions) has threads too.
THREADS = 8


@dataclass
class Outcome(Generic[R]):
    """One dataset's result, or the one-line error that stopped it."""

    key: str
    result: R | None = None
    error: str | None = None


def run_each(
    keys: Sequence[str], work: Callable[[str], R], *, description: str, quiet: bool, threads: int = THREADS
) -> list[Outcome[R]]:
    """``work(key)`` for every key in parallel, in key order; an error of one dataset does not stop the others.

    Errors the package raises on purpose, ``OSError``, ``ValueError`` and
    ``TypeError`` become the outcome's ``error``; anything else propagates.
    """
    outcomes = [Outcome[R](key) for key in keys]
    lock = threading.Lock()
    done = [0]
    with progress_bar(description, quiet=quiet, minimum=2) as update:

        def one(outcome: Outcome[R]) -> None:
            try:
                outcome.result = work(outcome.key)
            except (RemoteStoreError, OSError, ValueError, TypeError) as exc:
                outcome.error = one_line(exc)
            with lock:
                done[0] += 1
                update(done[0], len(outcomes))

        if len(outcomes) == 1:
            one(outcomes[0])
        else:
            with ThreadPoolExecutor(max_workers=max(1, min(threads, len(outcomes)))) as pool:
                list(pool.map(one, outcomes))
    return outcomes
