"""The tombstone: the manifest with ``operation="delete"`` and no parts that ends a dataset's lineage.

:func:`swap_in_tombstone` is the one routine that swaps it in, by compare-and-swap of ``manifest.json``:
``delete_dataset`` runs it before it removes ``_SUCCESS`` and the files, and a first write whose parts
a whole delete took runs it to take its own manifest back (``Transaction.commit``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pyarrow as pa

from ...errors import CommitConflict
from .._dataset_options import DatasetOptions
from ..manifest import DatasetManifest
from .conditional import read_raw, swap_manifest
from .new_version import new_manifest, new_txn
from .retry import Backoff

#: The ``operation`` of the manifest a delete commits before it removes the dataset's files.
TOMBSTONE_OPERATION = "delete"


def tombstone(options: DatasetOptions, key: str, version: int) -> DatasetManifest:
    """The manifest a delete (or a taken-back commit) swaps in: no parts, its own token."""
    txn = new_txn()
    mark = new_manifest(options, key, [], pa.schema([]), run_id=None, metadata=None, partition_by=(), operation="")
    return replace(mark, operation=TOMBSTONE_OPERATION, version=version, txn=txn, txns=(txn,))


def is_tombstone(manifest: DatasetManifest | None) -> bool:
    """Whether ``manifest`` is the marker of a ``delete_dataset`` in progress."""
    return manifest is not None and manifest.operation == TOMBSTONE_OPERATION


def swap_in_tombstone(
    options: DatasetOptions,
    key: str,
    *,
    applies: Callable[[DatasetManifest | None, str | None], bool],
    gave_up: Callable[[], Exception],
    start: tuple[DatasetManifest | None, str | None] | None = None,
) -> str | None:
    """Replace ``key``'s live manifest (or its absence) by a tombstone by compare-and-swap, retried on
    top of the latest version while ``applies(manifest, token)`` holds; the token of the tombstone that
    landed, or ``None`` once ``applies`` no longer holds (nothing was swapped in).

    ``start`` is the live version and its token if the caller knows them (read otherwise). One tombstone
    token serves every attempt, so a swap whose response was lost is recognised on the re-read.

    Raises:
        The exception ``gave_up()`` returns: other writers kept winning, or the store kept failing
            without an answer, for ``options.commit_timeout`` seconds.
    """
    store = options.store
    base = tombstone(options, key, 1)
    latest, token = start if start is not None else read_raw(store, key)
    backoff = Backoff(options.commit_timeout)
    while applies(latest, token):
        mark = replace(base, version=latest.version + 1 if latest is not None else 1)
        try:
            return swap_manifest(store, key, mark, expected=token)
        except (CommitConflict, OSError):
            pass  # lost the race, or a lost response: the re-read tells
        latest, token = read_raw(store, key)
        if latest is not None and latest.txn == base.txn and token is not None:
            return token  # a lost response: it landed
        if backoff.expired():
            raise gave_up()
        backoff.pause()
    return None
