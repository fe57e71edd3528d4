"""A rich progress bar on standard error, shown only on a terminal and only for many files."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: Fewer files than this finish too fast for a bar to help.
MIN_FILES = 100

Update = Callable[[int, int], None]


def _enabled(quiet: bool) -> bool:
    if quiet:
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def progress_bar(description: str, *, quiet: bool, minimum: int = MIN_FILES) -> Iterator[Update]:
    """Yield ``update(done, total)``; a bar appears once ``total`` reaches ``minimum`` on a terminal.

    ``update`` may be called from several threads. Nothing is drawn when
    ``quiet`` (``--json``), when standard error is not a terminal, or when rich
    is not installed.
    """
    if not _enabled(quiet):
        yield lambda done, total: None
        return
    try:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    except ImportError:  # pragma: no cover - rich is a dependency; a broken install still works
        yield lambda done, total: None
        return
    lock = threading.Lock()
    state: dict[str, Any] = {}

    def update(done: int, total: int) -> None:
        if total < minimum:
            return
        with lock:
            if "progress" not in state:
                progress = Progress(
                    TextColumn("{task.description}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeRemainingColumn(),
                    console=Console(stderr=True),
                    transient=True,
                )
                progress.start()
                state["progress"] = progress
                state["task"] = progress.add_task(description, total=total)
            state["progress"].update(state["task"], completed=done, total=total)

    try:
        yield update
    finally:
        if "progress" in state:
            state["progress"].stop()


@contextmanager
def spinner(description: str, *, quiet: bool) -> Iterator[None]:
    """An indeterminate status line on a terminal while a step with no progress report runs."""
    if not _enabled(quiet):
        yield
        return
    try:
        from rich.console import Console
    except ImportError:  # pragma: no cover
        yield
        return
    with Console(stderr=True).status(description):
        yield
