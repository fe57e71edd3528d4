"""Find the datasets under a folder: one listing, then one manifest read per dataset, in parallel."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ...errors import ManifestCorrupted, NotFound
from ...storage.base import Store
from ..commit.tombstone import TOMBSTONE_OPERATION
from ..format.layout import MANIFEST_NAME, SUCCESS_NAME
from ..manifest import DatasetManifest

_LIST_THREADS = 16
#: Manifest reads of one dataset while commits keep replacing the segments its manifest lists.
_SEGMENT_REREADS = 3


@dataclass(frozen=True)
class DatasetListing:
    """One dataset found by :meth:`ParquetDatasetStore.list_datasets`.

    Attributes:
        key: the dataset key.
        manifest: its live manifest, or ``None`` when it could not be read (see ``error``).
        complete: whether its ``_SUCCESS`` marker was listed next to the manifest.
        error: why the manifest could not be read (``None`` when it was).
    """

    key: str
    manifest: DatasetManifest | None
    complete: bool
    error: str | None = None


def dataset_keys(paths: list[str]) -> tuple[list[str], set[str]]:
    """Keys of the folders holding a ``manifest.json`` among ``paths``, and the keys with a ``_SUCCESS``."""
    manifest_suffix, success_suffix = "/" + MANIFEST_NAME, "/" + SUCCESS_NAME
    keys = sorted(p[: -len(manifest_suffix)] for p in paths if p.endswith(manifest_suffix))
    done = {p[: -len(success_suffix)] for p in paths if p.endswith(success_suffix)}
    return keys, done


def list_datasets(store: Store, prefix: str) -> list[DatasetListing]:
    """Every dataset whose key is ``prefix`` or under the folder ``prefix`` (``""``: the whole store).

    Costs one listing of the folder plus one read of each manifest (on parallel
    threads). A manifest that vanished between the listing and its read is left
    out; one that cannot be parsed, or that lists a manifest segment the
    listing lacks (checked again with one ``size`` request, since a commit may
    have written it after the listing) or holds with another size, is listed
    with its ``error`` (and no manifest), so one damaged dataset never hides
    the others.
    """
    infos = list(store.list_files(prefix))
    keys, done = dataset_keys([f.path for f in infos])
    sizes = {f.path: f.size for f in infos}

    def read(key: str) -> DatasetListing | None:
        for _ in range(_SEGMENT_REREADS):
            try:
                manifest = DatasetManifest.from_json(store.read_bytes(f"{key}/{MANIFEST_NAME}"), store, key)
            except NotFound:
                return None  # deleted since it was listed
            except ManifestCorrupted as exc:
                return DatasetListing(key, None, key in done, " ".join(str(exc).split()))
            if manifest.operation == TOMBSTONE_OPERATION:
                return None  # being deleted
            problem = _segment_problem(store, key, manifest, sizes)
            if problem is None:
                return DatasetListing(key, manifest, key in done)
            if _still_live(store, key, manifest):
                return DatasetListing(key, None, key in done, problem)
        return DatasetListing(key, None, key in done, problem)

    if len(keys) <= 1:
        found = [read(k) for k in keys]
    else:
        with ThreadPoolExecutor(min(_LIST_THREADS, len(keys)), thread_name_prefix="pds-list") as pool:
            found = list(pool.map(read, keys))
    return [listing for listing in found if listing is not None]


def _segment_problem(store: Store, key: str, manifest: DatasetManifest, sizes: dict[str, int]) -> str | None:
    """Why a segment ``manifest`` lists is missing or has another size than it records, or ``None``.

    Sizes come from the listing; a segment the listing lacks is asked of the store (a commit after the
    listing wrote it).
    """
    for ref in manifest.segments:
        path = f"{key}/{ref.path}"
        size = sizes.get(path)
        if size is None:
            try:
                size = store.size(path)
            except NotFound:
                return f"dataset {key!r}: segment {ref.path!r} that the manifest lists is missing"
        if size != ref.size_bytes:
            return (
                f"dataset {key!r}: segment {ref.path!r} that the manifest lists is {size} bytes, "
                f"the manifest records {ref.size_bytes}"
            )
    return None


def _still_live(store: Store, key: str, manifest: DatasetManifest) -> bool:
    """Whether ``manifest`` is still the live one (a commit that replaced it may have dropped its segments)."""
    try:
        latest = DatasetManifest.from_json(store.read_bytes(f"{key}/{MANIFEST_NAME}"), store, key)
    except (NotFound, ManifestCorrupted):
        return False
    return latest.txn == manifest.txn and latest.version == manifest.version
