"""A dataset's versions: the live manifest, retained past versions, their history."""

from __future__ import annotations

from ...errors import DatasetNotFound, ManifestCorrupted, NotFound, VersionNotRetained
from ...storage.base import Capability, Store
from .._dataset_options import check_positive
from ..commit.tombstone import is_tombstone
from ..commit.transaction import read_version_copy
from ..format.layout import MANIFEST_NAME, version_of, version_path
from ..manifest import DatasetManifest


def read_manifest(store: Store, key: str, *, version: int | None = None) -> DatasetManifest:
    """See :meth:`ParquetDatasetStore.read_manifest` (``key`` already validated).

    Raises:
        NotFound: no manifest, or ``version`` is newer than the latest.
        VersionNotRetained: ``version`` is older than the latest and no longer kept.
        ManifestCorrupted: the manifest cannot be parsed or is invalid.
    """
    live = _parse(store, key, MANIFEST_NAME)
    if is_tombstone(live):
        raise DatasetNotFound(f"dataset {key!r} does not exist (it is being deleted)")
    return version_from_live(store, key, live, version)


def version_from_live(store: Store, key: str, live: DatasetManifest, version: int | None) -> DatasetManifest:
    """Version ``version`` of ``key`` (``None``: the latest), given its live manifest ``live`` (read already).

    Raises:
        NotFound: ``version`` is newer than the latest.
        VersionNotRetained: ``version`` is older than the latest and no longer kept.
        ManifestCorrupted: the retained version's manifest cannot be parsed or is invalid.
    """
    if version is None or version == live.version:
        return live
    check_positive("version", version)
    if version > live.version:
        raise NotFound(f"dataset {key!r} has no version {version}; the latest is {live.version}")
    try:
        return _parse(store, key, version_path(version))
    except NotFound:
        raise VersionNotRetained(
            f"version {version} of dataset {key!r} is not retained "
            f"(retained: {[m.version for m in history(store, key)]})"
        ) from None


def _parse(store: Store, key: str, name: str) -> DatasetManifest:
    try:
        raw = store.read_bytes(f"{key}/{name}")
    except NotFound:
        raise NotFound(f"dataset {key!r} has no {name}") from None
    try:
        return DatasetManifest.from_json(raw, store, key)
    except ManifestCorrupted as exc:
        raise ManifestCorrupted(f"dataset {key!r}: {exc}", reason=exc.reason) from None


def history(store: Store, key: str) -> list[DatasetManifest]:
    """See :meth:`ParquetDatasetStore.history` (``key`` already validated).

    Raises:
        NotFound: the dataset has no manifest.
        ManifestCorrupted: the live manifest cannot be parsed.
    """
    live = read_manifest(store, key)
    versions = {live.version: live}
    if store.supports(Capability.LIST):
        present = {f.path[len(key) + 1 :] for f in store.list_files(key)}
        for rel in sorted(present):
            number = version_of(rel)
            if number is None or number >= live.version:
                continue
            old = read_version_copy(store, key, number)
            if old is not None and old.version == number and all(p in present for p in old.parts):
                versions[number] = old
    return [versions[v] for v in sorted(versions, reverse=True)]
