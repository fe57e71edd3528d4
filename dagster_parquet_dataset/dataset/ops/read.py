"""Reading committed datasets: the committed manifest, existence, read plans, the read retry loop, scans."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ...errors import DatasetIncomplete, DatasetNotFound, ManifestCorrupted, NotFound
from ...storage.base import Capability, Store, validate_key
from ..commit.tombstone import is_tombstone
from ..commit.transaction import read_current, repair_success
from ..format.layout import MANIFEST_NAME, SUCCESS_NAME
from ..format.segments import SegmentGone
from ..io.key_checks import missing_dataset_error
from ..io.part_check import PartsVanished
from ..io.read_parts import ReadPlan, plan, read_parts
from ..manifest import DatasetManifest
from .history import read_manifest, version_from_live

if TYPE_CHECKING:
    import pyarrow.dataset as pads

_READ_ATTEMPTS = 10


def proven_manifest(store: Store, key: str) -> DatasetManifest | None:
    """The live manifest of ``key`` if it proves it is committed, else ``None``: one ``GET``.

    A manifest this package wrote carries its write token (``txn``), and the
    compare-and-swap that put it there *is* the commit (the rule
    ``repair_success`` relies on), so it is committed whether or not its
    ``_SUCCESS`` has been written yet. A manifest without a token (a Spec
    042-only writer) is committed only with ``_SUCCESS`` (PDS-003): one more
    existence check. No manifest, a corrupt one or a delete's tombstone: ``None``
    (the caller's slower path says which error it is).
    """
    try:
        raw = store.read_bytes(f"{key}/{MANIFEST_NAME}")
    except NotFound:
        return None
    try:
        manifest = DatasetManifest.from_json(raw, store, key)
    except ManifestCorrupted:
        return None
    if manifest.txn is None and not store.exists(f"{key}/{SUCCESS_NAME}"):
        return None
    return None if is_tombstone(manifest) else manifest


def committed_manifest(store: Store, key: str, version: int | None = None) -> DatasetManifest:
    """The manifest of a committed dataset: one ``GET`` of ``manifest.json`` when it proves its
    commit (:func:`proven_manifest`), else with ``_SUCCESS`` present (or repaired).

    A missing ``_SUCCESS`` of a manifest that proves its commit is not looked for here (that
    would cost a request on every read): ``dataset_exists`` and the next commit write it.

    Raises:
        DatasetNotFound / DatasetIncomplete / NotFound / ManifestCorrupted: as :meth:`ParquetDatasetStore.read_dataset`.
    """
    live = proven_manifest(store, key)
    if live is not None:
        return version_from_live(store, key, live, version)
    if not store.exists(f"{key}/{SUCCESS_NAME}"):
        if store.exists(f"{key}/{MANIFEST_NAME}"):
            if repair_success(store, key) is not None:
                return read_manifest(store, key, version=version)
            if _is_deleted(store, key):
                raise DatasetNotFound(f"dataset {key!r} does not exist (it was deleted)")
            raise DatasetIncomplete(
                f"dataset {key!r} has a manifest but no {SUCCESS_NAME}: its first write did not finish"
            )
        if store.supports(Capability.LIST):
            raise missing_dataset_error(key, (f.path for f in store.list_files(key)))
        raise DatasetNotFound(f"dataset {key!r} does not exist")
    try:
        return read_manifest(store, key, version=version)
    except DatasetNotFound:
        raise  # a delete's tombstone: the dataset is being deleted
    except NotFound as exc:
        if version is not None:
            raise
        if not store.exists(f"{key}/{SUCCESS_NAME}"):
            raise DatasetNotFound(f"dataset {key!r} does not exist (it was deleted while it was read)") from None
        raise DatasetIncomplete(f"dataset {key!r} has {SUCCESS_NAME} but no {MANIFEST_NAME}") from exc


def dataset_exists(store: Store, key: str) -> bool:
    """See :meth:`ParquetDatasetStore.dataset_exists`."""
    if store.exists(f"{key}/{SUCCESS_NAME}"):
        # A delete that died between its tombstone and removing _SUCCESS left both: the dataset is deleted.
        return not (store.supports(Capability.CONDITIONAL_WRITE) and _is_deleted(store, key))
    return store.exists(f"{key}/{MANIFEST_NAME}") and repair_success(store, key) is not None


def _is_deleted(store: Store, key: str) -> bool:
    """Whether ``key``'s manifest is a delete's tombstone: read without its version token (a plain GET:
    on S3 the token would need a boto3 client, which a read never creates)."""
    try:
        return is_tombstone(DatasetManifest.from_json(store.read_bytes(f"{key}/{MANIFEST_NAME}"), store, key))
    except (NotFound, ManifestCorrupted):
        return False


def plan_read(store: Store, key: str, *, filters: Any, version: int | None) -> ReadPlan:
    """See :meth:`ParquetDatasetStore.plan_read`: planned again on the new manifest when a commit replaced
    the version read and its segments went (the last attempt's error is raised)."""
    for _attempt in range(_READ_ATTEMPTS - 1):
        try:
            return plan_manifest(key, committed_manifest(store, key, version), filters)
        except SegmentGone:
            if version is not None:
                raise
    return plan_manifest(key, committed_manifest(store, key, version), filters)


def plan_manifest(key: str, manifest: DatasetManifest, filters: Any) -> ReadPlan:
    """``plan_read`` of a committed manifest already read (no I/O).

    Raises:
        ValueError / TypeError: malformed filters, an unknown column, or filters on a manifest without a schema.
    """
    schema = manifest.schema
    if schema is None:
        if filters:
            raise ValueError(f"dataset {key!r} has a Spec 042-only manifest without a schema; it cannot be planned")
        return ReadPlan(key, manifest.version, manifest.file_entries(), (), None, manifest)
    return plan(manifest, schema, filters)


def read_dataset(
    store: Store,
    key: str,
    *,
    columns: Sequence[str] | None,
    filters: Any,
    version: int | None,
    committed: DatasetManifest | None = None,
) -> pa.Table:
    """See :meth:`ParquetDatasetStore.read_dataset`: a read that starts again on the new manifest
    when a commit replaced the parts it planned on. ``committed``: the latest committed manifest,
    already read (then ``version`` is ``None``); the read starts from it instead of fetching it."""
    manifest = committed if committed is not None else committed_manifest(store, key, version)
    for attempt in range(_READ_ATTEMPTS):
        if attempt:
            time.sleep(random.uniform(0, 0.01 * attempt))  # let a burst of commits pass
        try:
            return read_parts(store, key, manifest, columns, filters)
        except (PartsVanished, SegmentGone) as exc:  # a commit replaced the version (and its files went)
            if version is not None:
                raise DatasetIncomplete(
                    f"version {version} of dataset {key!r} can no longer be read (its files were removed): {exc}"
                ) from None
            latest, token = read_current(store, key)
            if latest is None and token is None:
                raise DatasetNotFound(f"dataset {key!r} was deleted while it was read") from None
            if latest is None or (latest.version, latest.parts) == (manifest.version, manifest.parts):
                raise DatasetIncomplete(
                    f"dataset {key!r}: parts listed in the manifest are missing or unreadable: {exc}"
                ) from None
            manifest = latest
    raise DatasetIncomplete(f"dataset {key!r} kept changing while it was read; try again")


def check_scan_keys(keys: Sequence[str]) -> list[str]:
    """``keys`` validated for ``scan_datasets``.

    Raises:
        TypeError: ``keys`` is a single string.
        ValueError: ``keys`` is empty, repeats a key or holds an unsafe key.
    """
    if isinstance(keys, (str, bytes)):
        raise TypeError(f"keys must be a list of dataset keys, not a single string {keys!r}")
    checked = [validate_key(k, what="dataset key") for k in keys]
    if not checked:
        raise ValueError("scan_datasets needs at least one dataset key")
    if len(set(checked)) != len(checked):
        raise ValueError(f"scan_datasets got a key more than once ({checked}); its rows would be read twice")
    return checked


def scan(
    store: Store, key: str, *, columns: Sequence[str] | None, filters: Any, version: int | None = None
) -> pads.Dataset:
    """See :meth:`ParquetDatasetStore.scan_dataset` (``key`` already validated; ``scan_datasets`` is
    ``many.scan_many``).

    Raises:
        DatasetNotFound / DatasetIncomplete / ManifestCorrupted: as ``read_dataset`` (``DatasetIncomplete``
            too when commits kept replacing the version read, or ``version``'s files were removed).
        ValueError / TypeError / CapabilityNotSupported: as ``scan_manifests``.
    """
    from ..io.scan import scan_manifests  # pyarrow.dataset is slow to import: only when scanning

    for attempt in range(_READ_ATTEMPTS):
        if attempt:
            time.sleep(random.uniform(0, 0.01 * attempt))  # let a burst of commits pass
        manifests = [(key, committed_manifest(store, key, version))]
        try:
            return scan_manifests(store, manifests, columns, filters)
        except SegmentGone as exc:  # a commit replaced the manifest read above, and its segments went: read again
            if version is not None:
                raise DatasetIncomplete(
                    f"version {version} of dataset {key!r} can no longer be read (its files were removed): {exc}"
                ) from None
    raise DatasetIncomplete(f"dataset {key!r} kept changing while it was scanned; try again")
