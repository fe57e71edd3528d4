"""Every conditional write of the package: the only module outside ``storage/`` that calls
:meth:`Store.write_if` (``tests/test_architecture.py`` checks it).

- :func:`read_raw` and :func:`swap_manifest`: read ``manifest.json`` with its token, and replace it by
  compare-and-swap against that token (the transaction's commit and the tombstone routine);
- :func:`put_if_absent`: create an object only if nothing is there yet (the ``_claim`` of Spec-named
  parts, the Delta log's commits and checkpoints).
"""

from __future__ import annotations

from ...errors import ManifestCorrupted, NotFound
from ...storage.base import Store
from ..format.layout import MANIFEST_NAME
from ..manifest import DatasetManifest


def read_raw(store: Store, key: str) -> tuple[DatasetManifest | None, str | None]:
    """The live manifest (``None`` if absent or corrupt; a delete's tombstone as it is) and its token.

    The manifest remembers the bytes it was parsed from (:meth:`DatasetManifest.read_as`): a commit that
    replaces it keeps exactly those bytes as its ``_versions/`` copy.
    """
    try:
        raw, token = store.read_versioned(f"{key}/{MANIFEST_NAME}")
    except NotFound:
        return None, None
    try:
        return DatasetManifest.from_json(raw, store, key).remember_bytes(raw), token
    except ManifestCorrupted:
        return None, token


def swap_manifest(store: Store, key: str, manifest: DatasetManifest, *, expected: str | None) -> str:
    """Replace ``key``'s ``manifest.json`` by ``manifest`` if it still carries the token ``expected``
    (``None``: only if there is none yet); the new token.

    Raises:
        CommitConflict: the manifest changed (or appeared) meanwhile, or a retried request of this very
            write was refused (the caller recognises its own write by re-reading).
        OSError: the store did not answer; the swap may or may not have landed.
    """
    return store.write_if(f"{key}/{MANIFEST_NAME}", manifest.to_json().encode("utf-8"), expected=expected)


def put_if_absent(store: Store, path: str, data: bytes) -> str:
    """Write ``data`` at ``path`` only if nothing is there yet; the new token.

    Raises:
        CommitConflict: an object is already at ``path`` (it may be this very write, retried).
        OSError: the store did not answer; the write may or may not have landed.
    """
    return store.write_if(path, data, expected=None)
