"""The command line's own error: bad usage (exit status 2)."""

from __future__ import annotations


class UsageError(Exception):
    """The command line was used wrongly (missing store, bad filter, unknown column): exit status 2."""
