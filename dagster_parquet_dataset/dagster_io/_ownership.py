"""One dataset serves one asset partition (or one op output): the check behind that rule.

The key mapping (docs/dagster.md, "Keys") is a published contract (asset ``a/b`` -> ``a/b``,
partition ``p`` of asset ``a`` -> ``a/p``), and it is not injective across
assets: asset ``["sales", "eu"]`` and partition ``"eu"`` of asset
``["sales"]`` both map to ``sales/eu``. Instead of changing the mapping, every
manifest records whose output it holds (``metadata``), and the IO manager
compares that record with the asset and partition it expects before writing
and before reading. Manifests without a record (written before it existed, or
outside Dagster) are accepted as they are.

The check before a write is only the early, cheap refusal: the write also
passes its owner to the dataset layer (:func:`commit_owner`, ``expect_owner``),
whose commit checks it against the very version it replaces, so of two assets
racing to create or replace one key, the second gets :class:`DatasetKeyCollision`
and commits nothing.

This module is pure: it compares metadata dicts, it does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from ..errors import OwnerMismatch
from ._handler_base import ASSET_KEY_KEY, OUTPUT_NAME_KEY, PARTITION_KEY_KEY, STEP_KEY_KEY

#: The manifest metadata keys that say whose output a dataset holds.
OWNER_KEYS = (ASSET_KEY_KEY, PARTITION_KEY_KEY, STEP_KEY_KEY, OUTPUT_NAME_KEY)


class DatasetKeyCollision(OwnerMismatch):
    """Two assets (or partitions) map to the same dataset key; the dataset holds the other one's data."""


def owner(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """The owner entries of manifest ``metadata`` (empty when none were recorded)."""
    return {k: metadata[k] for k in OWNER_KEYS if metadata and metadata.get(k) is not None}


def commit_owner(metadata: Mapping[str, str]) -> dict[str, str | None]:
    """The ``expect_owner`` of a write recording ``metadata``: every owner key, ``None`` where it records none."""
    return {k: metadata.get(k) for k in OWNER_KEYS}


def asset_owner(asset_key: str, partition_key: str | None) -> dict[str, str]:
    """What a manifest written for ``asset_key`` (a user string like ``sales/eu``) and partition records."""
    expected = {ASSET_KEY_KEY: asset_key}
    if partition_key is not None:
        expected[PARTITION_KEY_KEY] = str(partition_key)
    return expected


def describe(record: Mapping[str, str]) -> str:
    """``asset sales, partition 'eu'`` / ``asset sales/eu`` / ``output 'result' of step 's'``."""
    if ASSET_KEY_KEY in record:
        text = f"asset {record[ASSET_KEY_KEY]}"
        if PARTITION_KEY_KEY in record:
            text += f", partition {record[PARTITION_KEY_KEY]!r}"
        return text
    if OUTPUT_NAME_KEY in record or STEP_KEY_KEY in record:
        return f"output {record.get(OUTPUT_NAME_KEY)!r} of step {record.get(STEP_KEY_KEY)!r}"
    return "nothing recorded"


def check_owner(recorded: Mapping[str, str] | None, expected: Mapping[str, str], *, key: str, writing: bool) -> None:
    """Refuse when dataset ``key``'s manifest records another owner than ``expected``.

    Args:
        recorded: the manifest's ``metadata``.
        expected: what this output would record (:func:`owner` of its metadata), or
            what the input expects (:func:`asset_owner`).
        writing: whether the caller is about to write (else read); only changes the message.

    Raises:
        DatasetKeyCollision: the manifest records an owner, and it is not ``expected``;
            the message names both and the ``prefix`` setting that separates them.
    """
    found = owner(recorded)
    if not found or found == dict(expected):
        return
    raise collision(key, found, expected, writing=writing)


def collision(key: str, found: Mapping[str, str], expected: Mapping[str, str], *, writing: bool) -> DatasetKeyCollision:
    """The :class:`DatasetKeyCollision` for dataset ``key`` holding ``found`` when ``expected`` maps to it."""
    consequence = (
        "Nothing was written, so its data is intact."
        if writing
        else "Loading it would return the other one's data, so nothing was loaded."
    )
    return DatasetKeyCollision(
        f"dataset {key!r} holds {describe(found)} (recorded in its manifest), but {describe(expected)} maps to "
        f"the same key: one dataset never serves two assets or partitions. {consequence} Keep them apart with "
        "the RemoteStoreIOManager 'prefix' setting (give one of them its own IO manager resource with another "
        "prefix, chosen with io_manager_key), or rename one of the assets.",
        key=key,
        recorded=dict(found),
        expected=dict(expected),
    )


@contextmanager
def collisions(key: str) -> Iterator[None]:
    """Around a write of dataset ``key``: the dataset layer's :class:`OwnerMismatch` (its commit found
    another owner, e.g. after losing a race) becomes a :class:`DatasetKeyCollision`.

    Raises:
        DatasetKeyCollision: the write raised :class:`OwnerMismatch`.
    """
    try:
        yield
    except DatasetKeyCollision:
        raise
    except OwnerMismatch as exc:
        raise collision(exc.key or key, exc.recorded, exc.expected, writing=True) from exc
