"""Exactly-once appends and merges across step retries (see docs/dagster.md, "Exactly-once retries").

An append or merge output commits with an idempotency key that stays the same for every attempt
of the same step output: Dagster's ``RetryPolicy`` retries (same run) and re-executions (a new
run whose ``root_run_id`` is the original run's). If an earlier attempt committed and then died
before Dagster recorded the event, the retry's commit finds the key with the same content in the
manifest's window and returns that version instead of adding the rows again.
"""

from __future__ import annotations

from typing import Any

from dagster import MetadataValue, OutputContext

from ..dataset import DatasetManifest
from . import _context as _ctx

Entry = tuple[str, str, str]


def idempotency_key(context: OutputContext | None, partition_key: str | None) -> str | None:
    """``dagster:<root run id>/<step key>/<output name>/<partition key>``, or ``None`` outside a run.

    The root run id is the run's own, or for a re-execution the run it re-executes (the first of
    the chain), so a re-execution from failure finds what the failed run committed.
    """
    if context is None:
        return None
    step = _ctx.step_context_of(context)
    if step is None:
        return None
    run = step.dagster_run
    root = run.root_run_id or run.run_id
    return f"dagster:{root}/{step.step.key}/{_ctx.name_of(context)}/{partition_key or ''}"


def window_entry(manifest: DatasetManifest | None, key: str | None) -> Entry | None:
    """The newest ``(key, content hash, write token)`` entry recorded for ``key`` in ``manifest``."""
    if manifest is None or key is None:
        return None
    return next((e for e in manifest.idempotency if e[0] == key), None)


def recognised(before: Entry | None, after: DatasetManifest, key: str | None) -> dict[str, Any]:
    """Output metadata saying this attempt found its write already committed, or ``{}``.

    The write was recognised when the entry for ``key`` is still the one recorded before it
    ran: a commit of its own would have put a new entry (its own write token) first.
    """
    if before is None or window_entry(after, key) != before:
        return {}
    # The version the earlier attempt committed, from its write token (``after`` is the live version,
    # which other writers may have moved on since).
    version = after.version_of(before[2])
    which = f"version {version}" if version is not None else f"a version before {after.version}"
    return {
        "exactly_once": MetadataValue.text(
            f"recognized retry: an earlier attempt of this step committed the same data as {which} "
            f"(write {before[2]}); nothing was written again"
        )
    }
