"""Every conditional write of the package: the only module outside ``storage/`` that calls
:meth:`Store.write_if` and :meth:`Store.delete_if` (``tests/test_architecture.py`` checks it).

- :func:`read_raw` and :func:`swap_manifest`: read ``manifest.json`` with its token, and replace it by
  compare-and-swap against that token (the transaction's commit and the tombstone routine);
- :func:`delete_manifest_if`: delete ``manifest.json`` only if it still carries a token (a delete's last step);
- :func:`put_if_absent`: create an object only if nothing is there yet (the ``_claim`` of Spec-named
  parts, the Delta log's commits and checkpoints).
"""

from __future__ import annotations

from ...errors import CommitConflict, ManifestCorrupted, NotFound
from ...storage.base import Capability, Store
from ..format.layout import MANIFEST_NAME
from ..manifest import ROOTLESS_FORMAT, SEGMENTED_FORMAT, DatasetManifest

#: Per (store object, dataset key): the store, and the bytes and manifest of the last ``manifest.json`` this process
#: swapped in. Reading those very bytes back (the writer's next commit) gives that manifest again instead of
#: parsing the root (issue 28: successive appends parsed the few hundred inline entries they had just written).
_written: dict[tuple[int, str], tuple[Store, bytes, DatasetManifest]] = {}
_WRITTEN_SIZE = 64


def _as_parsed(manifest: DatasetManifest) -> bool:
    """Whether ``manifest`` holds its content in the form parsing its text gives: a root with segments, its inline
    entries in ``added`` (no ``files`` at hand), its ``parts`` listed exactly when its format lists them. Other
    manifests (a first write, formats 0 and 1) are parsed again when read."""
    held = manifest.__dict__
    if manifest.format_version < SEGMENTED_FORMAT or not manifest.segments or held.get("_files"):
        return False
    return (held.get("_parts") is None) == (manifest.format_version >= ROOTLESS_FORMAT)


def _remember_written(store: Store, key: str, data: bytes, manifest: DatasetManifest) -> None:
    if not _as_parsed(manifest):
        _written.pop((id(store), key), None)
        return
    if len(_written) >= _WRITTEN_SIZE:
        _written.clear()
    kept = manifest.evolve()  # a copy without the link to the version it was built on (clean-up's business)
    kept.__dict__.pop("_adds_to", None)
    _written[(id(store), key)] = (store, data, kept.bind(store, key))


def read_raw(store: Store, key: str) -> tuple[DatasetManifest | None, str | None]:
    """The live manifest (``None`` if absent or corrupt; a delete's tombstone as it is) and its token.

    The manifest remembers the bytes it was parsed from (:meth:`DatasetManifest.read_as`): a commit that
    replaces it keeps exactly those bytes as its ``_versions/`` copy. Bytes this process swapped in last
    are not parsed again: the manifest it wrote is given back (a copy).
    """
    try:
        raw, token = store.read_versioned(f"{key}/{MANIFEST_NAME}")
    except NotFound:
        return None, None
    known = _written.get((id(store), key))
    if known is not None and known[0] is store and known[1] == raw:
        return known[2].evolve().remember_bytes(raw), token  # the bytes this process wrote: no parse
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
    data = manifest.to_json().encode("utf-8")
    token = store.write_if(f"{key}/{MANIFEST_NAME}", data, expected=expected)
    _remember_written(store, key, data, manifest)
    return token


def delete_manifest_if(store: Store, key: str, *, expected: str) -> bool:
    """Delete ``key``'s ``manifest.json`` only if it still carries the token ``expected``; whether it is gone
    (``False``: another manifest replaced it, which stays).

    With :attr:`Capability.CONDITIONAL_DELETE` this is one atomic :meth:`Store.delete_if`. A store without
    it (a custom ``Store``) gets the fallback: the token is read, then the manifest deleted. That is not
    atomic: a manifest swapped in between the two (a writer that began on the tombstone being removed and
    committed in that instant) is deleted too, and the key then reads as absent although that write
    reported success (its parts stay, in no manifest, until the key is written or deleted again).

    Raises:
        OSError: the store did not answer; the manifest may or may not be gone.
    """
    path = f"{key}/{MANIFEST_NAME}"
    if not store.supports(Capability.CONDITIONAL_DELETE):
        try:
            if store.read_versioned(path)[1] != expected:
                return False
        except NotFound:
            return True
        store.delete(path, missing_ok=True)
        return True
    try:
        store.delete_if(path, expected=expected)
    except CommitConflict:
        return False
    except NotFound:
        pass  # deleted meanwhile (or by a retry of this very request)
    return True


def put_if_absent(store: Store, path: str, data: bytes) -> str:
    """Write ``data`` at ``path`` only if nothing is there yet; the new token.

    Raises:
        CommitConflict: an object is already at ``path`` (it may be this very write, retried).
        OSError: the store did not answer; the write may or may not have landed.
    """
    return store.write_if(path, data, expected=None)
