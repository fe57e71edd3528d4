"""Find the datasets under a folder: one listing, then one manifest read per dataset, in parallel."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ...errors import ManifestCorrupted, NotFound
from ...storage.base import Store
from ..commit.transaction import TOMBSTONE_OPERATION
from ..format.layout import MANIFEST_NAME, SUCCESS_NAME
from ..manifest import DatasetManifest

_LIST_THREADS = 16


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
    out; one that cannot be parsed is listed with its ``error``.
    """
    keys, done = dataset_keys([f.path for f in store.list_files(prefix)])

    def read(key: str) -> DatasetListing | None:
        try:
            manifest = DatasetManifest.from_json(store.read_bytes(f"{key}/{MANIFEST_NAME}"), store, key)
        except NotFound:
            return None  # deleted since it was listed
        except ManifestCorrupted as exc:
            return DatasetListing(key, None, key in done, " ".join(str(exc).split()))
        if manifest.operation == TOMBSTONE_OPERATION:
            return None  # being deleted
        return DatasetListing(key, manifest, key in done)

    if len(keys) <= 1:
        found = [read(k) for k in keys]
    else:
        with ThreadPoolExecutor(min(_LIST_THREADS, len(keys)), thread_name_prefix="pds-list") as pool:
            found = list(pool.map(read, keys))
    return [listing for listing in found if listing is not None]
