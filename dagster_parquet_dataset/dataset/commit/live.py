"""The live version of one dataset, read once and handed to the write that builds on it.

A caller that must look at the live manifest before it writes (the Dagster IO
manager checks the owner and the exactly-once window recorded in it) reads it
with :func:`read_live` and writes through ``write_from_live``'s view (see
:mod:`.._pinned`): its ``write_dataset`` / ``append_dataset`` / ``merge_dataset``
pass the :class:`LiveVersion` to the operation (``live=``), whose transaction
then begins from it instead of reading it again. It is never
trusted beyond that: the commit's compare-and-swap names the token it was read
with, so if another writer committed in between, the swap is refused and the
commit reads the newer version and rebuilds on it, as after any lost race.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...storage.base import Store
from ..manifest import DatasetManifest
from .conditional import read_raw
from .tombstone import is_tombstone


@dataclass(frozen=True)
class LiveVersion:
    """The live manifest of dataset ``key`` as read at one instant, and the store token it was read with.

    Attributes:
        key: the dataset key.
        stored: the manifest as stored (a delete's tombstone included); ``None`` when there is no
            manifest or it cannot be parsed.
        token: the store's token for it (``None`` when there is no manifest); the commit's
            compare-and-swap expects it.
    """

    key: str
    stored: DatasetManifest | None
    token: str | None

    @property
    def manifest(self) -> DatasetManifest | None:
        """The live manifest, or ``None`` when the dataset is absent, being deleted or its manifest is corrupt."""
        return None if is_tombstone(self.stored) else self.stored

    @property
    def corrupt(self) -> bool:
        """Whether a manifest is stored but cannot be parsed."""
        return self.stored is None and self.token is not None

    def begin_at(self, key: str) -> tuple[DatasetManifest | None, str | None]:
        """``(stored, token)`` for a transaction on ``key`` to begin from.

        Raises:
            ValueError: it was read for another dataset key.
        """
        if self.key != key:
            raise ValueError(f"live was read for dataset {self.key!r}, not {key!r}")
        return self.stored, self.token


def read_live(store: Store, key: str) -> LiveVersion:
    """One read of ``{key}/manifest.json`` with its token (``key`` already validated).

    Raises:
        StoreAccessError / OSError: the store cannot be reached.
    """
    stored, token = read_raw(store, key)
    return LiveVersion(key, stored, token)


def begin_point(live: LiveVersion | None, key: str) -> tuple[DatasetManifest | None, str | None] | None:
    """What ``Transaction.begin``'s ``current`` takes for an operation given ``live`` (``None``: read it).

    Raises:
        TypeError / ValueError: as :meth:`LiveVersion.begin_at`.
    """
    if live is None:
        return None
    if not isinstance(live, LiveVersion):
        raise TypeError(f"live must come from read_live, got {type(live).__name__}")
    return live.begin_at(key)
