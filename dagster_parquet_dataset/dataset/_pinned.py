"""Reading and writing datasets from manifests fetched once: :func:`read_committed_manifests`,
:func:`pin_manifests`, :func:`read_live` and :func:`write_from_live`.

The Dagster and Spark layers read the committed manifests of N partition
datasets in one parallel pass (:func:`read_committed_manifests`), decide from
them what to read (owners, datasets that hold no data, absent partitions), and
then read through :func:`pin_manifests`'s view, whose reads of those datasets'
latest version start from the manifests already fetched instead of fetching
them again. The view reads the versions committed when the manifests were
fetched, as a scan does once it is created.

A write that must look at the live manifest first (the Dagster layer checks the
owner and the exactly-once window recorded in it) reads it with
:func:`read_live` and writes through :func:`write_from_live`'s view, whose
write, append or merge of that dataset begins from it instead of reading it
again; the commit's compare-and-swap refuses it if another writer committed
meanwhile, and then rebuilds on the newer version (see :mod:`.commit.live`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ManifestCorrupted, NotFound
from ..storage.base import validate_key
from .commit.live import LiveVersion
from .commit.live import read_live as _read_live
from .format.segments import SegmentGone
from .io.read_parts import ReadPlan
from .manifest import DatasetManifest
from .ops.many import CommittedManifests, read_committed, scan_many
from .ops.read import check_scan_keys, plan_manifest
from .store import ParquetDatasetStore

if TYPE_CHECKING:
    import pyarrow.dataset as pads

__all__ = [
    "CommittedManifests",
    "LiveDatasets",
    "PinnedDatasets",
    "pin_manifests",
    "read_committed_manifests",
    "read_live",
    "write_from_live",
]


def read_committed_manifests(
    datasets: ParquetDatasetStore, keys: Sequence[str], *, again: bool = False
) -> CommittedManifests:
    """The committed manifest of every dataset in ``keys``, fetched in parallel (a bounded thread pool).

    One ``GET`` of ``manifest.json`` per dataset whose manifest proves its commit
    (one this package wrote); a Spec 042-only manifest also needs its ``_SUCCESS``.
    A dataset that cannot be read is recorded in ``failed`` with the error
    ``read_dataset`` would raise, not raised. When ``datasets`` is a pinned view
    (:func:`pin_manifests`), the keys it pins are taken from it, not fetched,
    unless ``again``.

    Raises:
        TypeError / ValueError: ``keys`` is a string or holds an unsafe key.
        StoreAccessError / OSError: the store cannot be reached.
    """
    if isinstance(keys, (str, bytes)):
        raise TypeError(f"keys must be a list of dataset keys, not a single string {keys!r}")
    checked = list(dict.fromkeys(validate_key(k, what="dataset key") for k in keys))
    pins = datasets.pins if isinstance(datasets, PinnedDatasets) and not again else CommittedManifests((), {}, {})
    fetched = read_committed(datasets.store, [k for k in checked if k not in pins.keys])
    found = {k: m for k, m in pins.found.items() if k in checked}
    failed = {k: e for k, e in pins.failed.items() if k in checked}
    return CommittedManifests(tuple(checked), {**found, **fetched.found}, {**failed, **fetched.failed})


class PinnedDatasets(ParquetDatasetStore):
    """A :class:`ParquetDatasetStore` whose reads of some datasets' latest version use manifests already read.

    ``read_manifest``, ``plan_read``, ``read_dataset``, ``scan_dataset`` and
    ``scan_datasets`` of a key in :attr:`pins` (latest version) start from its
    pinned manifest, or raise the error recorded for it; every other call, and every other key, reads the
    store as the base class does. Made by :func:`pin_manifests`.
    """

    pins: CommittedManifests

    @property
    def unpinned(self) -> ParquetDatasetStore:
        """The same store and options, reading every manifest afresh."""
        return _view(ParquetDatasetStore, self)

    def read_manifest(self, key: str, *, version: int | None = None, as_of: datetime | None = None) -> DatasetManifest:
        """As :meth:`ParquetDatasetStore.read_manifest`; a pinned key's latest is its pinned manifest.

        ``as_of`` reads the store, as the base class does (the pins hold only the latest version).

        Raises:
            As :meth:`ParquetDatasetStore.read_manifest` (for a pinned key, what reading it gave).
        """
        if as_of is None:
            found = self.pins.found.get(key)
            if found is not None and version in (None, found.version):
                return found
            error = self.pins.failed.get(key)
            if version is None and isinstance(error, (NotFound, ManifestCorrupted)):
                raise error  # what reading the manifest again would raise
        return super().read_manifest(key, version=version, as_of=as_of)

    def plan_read(
        self, key: str, *, filters: Any = None, version: int | None = None, as_of: datetime | None = None
    ) -> ReadPlan:
        """As :meth:`ParquetDatasetStore.plan_read`; a pinned key's latest is planned on its pinned manifest.

        ``version`` and ``as_of`` read the store, as the base class does.

        Raises:
            As :meth:`ParquetDatasetStore.plan_read`.
        """
        if version is not None or as_of is not None or key not in self.pins.keys:
            return super().plan_read(key, filters=filters, version=version, as_of=as_of)
        try:
            return plan_manifest(key, self.pins.manifest(key), filters)
        except SegmentGone:  # a commit replaced the pinned version and its segments went: plan on the live one
            return super().plan_read(key, filters=filters)

    def _pinned_for(self, key: str, version: int | None) -> CommittedManifests | None:
        """:attr:`pins` for the latest version of a key it pins (``read_dataset`` and ``scan_dataset`` start
        from its manifest, or raise the error recorded for it), else ``None`` (they read the store)."""
        return self.pins if version is None and key in self.pins.keys else None

    def scan_datasets(
        self, keys: Sequence[str], *, columns: Sequence[str] | None = None, filters: Any = None
    ) -> pads.Dataset:
        """As :meth:`ParquetDatasetStore.scan_datasets`; pinned keys are not fetched again.

        Raises:
            As :meth:`ParquetDatasetStore.scan_datasets`.
        """
        checked = check_scan_keys(keys)
        return scan_many(self.store, checked, columns=columns, filters=filters, committed=self.pins)


def pin_manifests(datasets: ParquetDatasetStore, committed: CommittedManifests) -> PinnedDatasets:
    """A view of ``datasets`` whose reads of ``committed``'s keys start from the manifests it holds.

    Raises:
        TypeError: ``committed`` is not a :class:`CommittedManifests`.
    """
    if not isinstance(committed, CommittedManifests):
        raise TypeError(f"committed must come from read_committed_manifests, got {type(committed).__name__}")
    pinned = _view(PinnedDatasets, datasets)
    pinned.pins = committed
    return pinned


def read_live(datasets: ParquetDatasetStore, key: str) -> LiveVersion:
    """The live version of ``key``: its manifest (``None`` if absent or corrupt) and store token, in one read.

    Write through :func:`write_from_live` to begin from it.

    Raises:
        ValueError: an unsafe key.
        StoreAccessError / OSError: the store cannot be reached.
    """
    return _read_live(datasets.store, validate_key(key, what="dataset key"))


class LiveDatasets(ParquetDatasetStore):
    """A :class:`ParquetDatasetStore` whose writes of one dataset begin from its live version already read.

    ``write_dataset``, ``append_dataset`` and ``merge_dataset`` of :attr:`live`'s key
    begin from :attr:`live` (a merge: its first attempt) instead of reading the manifest;
    every other call, and every other key, works as in the base class. Made by
    :func:`write_from_live`.
    """

    live: LiveVersion

    def _live_for(self, key: str) -> LiveVersion | None:
        """:attr:`live` for its key (the write, append or merge begins from it), else ``None``."""
        return self.live if key == self.live.key else None


def write_from_live(datasets: ParquetDatasetStore, live: LiveVersion) -> LiveDatasets:
    """A view of ``datasets`` whose writes of ``live``'s dataset begin from ``live`` (see :class:`LiveDatasets`).

    Raises:
        TypeError: ``live`` did not come from :func:`read_live`.
    """
    if not isinstance(live, LiveVersion):
        raise TypeError(f"live must come from read_live, got {type(live).__name__}")
    view = _view(LiveDatasets, datasets)
    view.live = live
    return view


_View = TypeVar("_View", bound=ParquetDatasetStore)


def _view(cls: type[_View], datasets: ParquetDatasetStore) -> _View:
    """A ``cls`` with ``datasets``' store and options (no I/O), without another view's pins or live version."""
    view = cls.__new__(cls)
    view.__dict__.update({k: v for k, v in vars(datasets).items() if k not in ("pins", "live")})
    return view
