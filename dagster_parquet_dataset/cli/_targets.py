"""Which datasets a key names: one dataset, or every dataset under a prefix (an asset's partitions, a group).

Also the one "not found" wording every command uses, with "did you mean"
suggestions, and the grouping of partition datasets into assets.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ..dataset import DatasetListing, ParquetDatasetStore
from ..errors import NotFound, RemoteStoreError

_MANIFEST = "manifest.json"
#: A path segment that looks like a Dagster partition key: a date, an hour, a number, or ``col=value``.
_PARTITION_SEGMENT = re.compile(r"^(\d|[^=]+=)")
_SUGGESTIONS = 3
T = TypeVar("T")


class KeyNotFound(NotFound):
    """No dataset at or under a key (exit status 1); the message carries suggestions."""


def not_found(ds: ParquetDatasetStore, key: str, known: Iterable[str] | None = None) -> KeyNotFound:
    """The error for a key with no dataset at or under it, suggesting close keys of the store.

    ``known`` are the store's dataset keys when already listed (else they are listed here).
    """
    if known is None:
        try:
            known = [item.key for item in list_under(ds, "")]
        except Exception:  # noqa: BLE001 - a suggestion is a courtesy; the not-found error is the answer
            known = []
    message = f"dataset {key!r} does not exist: nothing at or under {key!r} in {ds.store.uri()}"
    close = suggest(key, known)
    if close:
        message += "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    return KeyNotFound(message)


def suggest(key: str, known: Iterable[str]) -> list[str]:
    """Up to three keys (datasets or their assets/folders) that look like ``key``."""
    candidates: set[str] = set()
    for name in known:
        parts = name.split("/")
        candidates.update("/".join(parts[:n]) for n in range(1, len(parts) + 1))
    candidates.discard(key)
    return difflib.get_close_matches(key, sorted(candidates), n=_SUGGESTIONS, cutoff=0.6)


def list_under(ds: ParquetDatasetStore, prefix: str) -> list[DatasetListing]:
    """``ds.list_datasets(prefix)``, with a listing failure naming the store location and the reason.

    Raises:
        RemoteStoreError: the listing failed (e.g. a missing bucket or denied access).
        ValueError: ``prefix`` is not a safe key.
    """
    return _naming_location(ds, prefix, lambda: ds.list_datasets(prefix))


def keys_under(ds: ParquetDatasetStore, prefix: str) -> list[str]:
    """The keys of every dataset (a folder holding a manifest) under ``prefix``, from one listing.

    Unlike :func:`list_under` no manifest is read: for a command that reads
    each dataset's manifest itself (``verify --all``), reading them twice
    would double its cost.

    Raises:
        RemoteStoreError: the listing failed (e.g. a missing bucket or denied access).
    """
    suffix = "/" + _MANIFEST
    paths = _naming_location(ds, prefix, lambda: [f.path for f in ds.store.list_files(prefix)])
    return sorted(p[: -len(suffix)] for p in paths if p.endswith(suffix))


def _naming_location(ds: ParquetDatasetStore, prefix: str, listing: Callable[[], T]) -> T:
    """``listing()``, with a store error (other than a missing key) naming the location listed.

    Raises:
        NotFound: as ``listing`` raises it.
        RemoteStoreError: the listing failed.
    """
    try:
        return listing()
    except NotFound:
        raise
    except RemoteStoreError as exc:
        raise RemoteStoreError(f"cannot list {ds.store.uri(prefix)}: {exc}") from None


def is_dataset(ds: ParquetDatasetStore, key: str) -> bool:
    """Whether ``key`` itself holds a manifest (a dataset, possibly a broken one)."""
    return ds.store.exists(f"{key.strip('/')}/{_MANIFEST}")


class NotOneDataset(KeyNotFound):
    """A command that reads one dataset was given an asset or folder holding several (exit status 1)."""


def require_dataset(ds: ParquetDatasetStore, key: str, *, command: str) -> str:
    """``key`` without surrounding slashes, if it is a dataset.

    Raises:
        NotOneDataset: ``key`` holds no manifest but datasets lie under it (an asset's partitions, a folder);
            the message names how many, an example key for ``command``, and ``show`` / ``verify`` which take it.
        KeyNotFound: nothing at or under ``key`` (the message suggests close keys).
    """
    key = key.strip("/")
    if is_dataset(ds, key):
        return key
    under = keys_under(ds, key) if key else []
    if not under:
        raise not_found(ds, key)
    assets = {asset_of(k)[0] for k in under}
    if assets == {key}:
        what = f"an asset with {len(under):,} partition{'s' if len(under) != 1 else ''}, each its own dataset"
    else:
        what = f"a folder with {len(under):,} dataset{'s' if len(under) != 1 else ''}"
    raise NotOneDataset(
        f"{key!r} is {what}: {command} reads one, e.g. '{command} {under[-1]}' (first {under[0]!r}, last "
        f"{under[-1]!r}); 'show {key}' and 'verify {key}' take the whole of it"
    )


def expand(ds: ParquetDatasetStore, key: str) -> list[str]:
    """The dataset keys ``key`` names: itself if it is a dataset, else every dataset under it.

    Raises:
        KeyNotFound: nothing at or under ``key``.
        ValueError: ``key`` is not a safe key.
    """
    key = key.strip("/")
    if key and is_dataset(ds, key):
        return [key]
    keys = [item.key for item in list_under(ds, key)]
    if not keys:
        raise not_found(ds, key)
    return keys


def expand_all(ds: ParquetDatasetStore, keys: Sequence[str], every: bool) -> list[str]:
    """The datasets named by ``keys`` (each a dataset or a prefix), or every dataset with ``every``.

    Raises:
        KeyNotFound: a key with nothing at or under it.
    """
    if every:
        return [item.key for item in list_under(ds, "")]
    out: dict[str, None] = {}
    for key in keys:
        out.update(dict.fromkeys(expand(ds, key)))
    return list(out)


def asset_of(key: str) -> tuple[str, str | None]:
    """``raw/clicks/2024-01-01`` -> (``raw/clicks``, ``2024-01-01``); a key with no partition segment is its own asset.

    A partition segment starts with a digit (dates, hours, numbers) or is
    ``column=value``; it and every later segment (a multi-dimension partition)
    form the partition.
    """
    parts = key.split("/")
    for i in range(1, len(parts)):
        if _PARTITION_SEGMENT.match(parts[i]):
            return "/".join(parts[:i]), "/".join(parts[i:])
    return key, None


@dataclass
class Asset:
    """Datasets grouped under one asset key: its partitions, or the asset itself when unpartitioned."""

    key: str
    listings: list[DatasetListing] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)

    @property
    def partitioned(self) -> bool:
        return bool(self.partitions)


#: The line ``ls`` gives every Dagster op output (``<run_id>/<step_key>/<output_name>``), after the assets.
OP_OUTPUTS = "(op outputs)"


def _is_op_output(item: DatasetListing) -> bool:
    """Whether the manifest records a Dagster op output: a step key and no asset key."""
    metadata = (item.manifest.metadata if item.manifest is not None else None) or {}
    return "dagster.step_key" in metadata and "dagster.asset_key" not in metadata


def group_assets(listings: Sequence[DatasetListing]) -> list[Asset]:
    """Listings grouped by :func:`asset_of`, in key order; Dagster op outputs (stored under their run id)
    together as :data:`OP_OUTPUTS`, last."""
    groups: dict[str, Asset] = {}
    for item in listings:
        if _is_op_output(item):
            groups.setdefault(OP_OUTPUTS, Asset(OP_OUTPUTS)).listings.append(item)
            continue
        asset, partition = asset_of(item.key)
        group = groups.setdefault(asset, Asset(asset))
        group.listings.append(item)
        if partition is not None:
            group.partitions.append(partition)
    return [groups[k] for k in sorted(groups, key=lambda k: (k == OP_OUTPUTS, k))]
