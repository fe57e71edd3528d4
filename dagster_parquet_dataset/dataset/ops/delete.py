"""Delete: a committed operation.

The delete first commits a *tombstone* (a manifest with ``operation="delete"``
and no parts) by compare-and-swap against the live version, so it is ordered
with every other commit: a writer that committed before it is deleted with
the dataset, a writer whose commit comes after it loses its race, sees the
tombstone and fails with :class:`CommitConflict` (its parts are removed), and
nobody commits on top of a dataset being deleted. The tombstone goes first (from
then on this package's readers see the dataset absent, and none writes ``_SUCCESS``
back), then ``_SUCCESS`` (a Spec 042 reader sees it absent too), then every file the
dataset had when the tombstone landed, and the tombstone last, only on its token
(:func:`delete_manifest_if`). A writer that begins on the tombstone (the delete may have
died) replaces it; if it committed before the delete's last step, its version stays whole
(the delete never removes a file it did not list before the tombstone then live). A file a
writer publishes while the delete runs keeps the tombstone in place (or gets it back), so
the key reads as absent, never as a half-deleted dataset. A store without conditional
writes has no tombstone: there ``_SUCCESS`` goes first.
"""

from __future__ import annotations

import logging

from ...errors import CommitConflict, NotFound
from ...storage.base import Capability, FileInfo, Store
from .._dataset_options import DatasetOptions
from ..commit.conditional import delete_manifest_if, read_raw
from ..commit.tombstone import swap_in_tombstone
from ..format.layout import CLAIM_NAME, DELTA_DIRS, MANIFEST_NAME, SUCCESS_NAME, is_spec_name
from ..io.key_checks import check_key_fits
from .vacuum import own_files

log = logging.getLogger(__name__)

#: Attempts at removing the folder while files keep appearing in it.
_ROUNDS = 3


def delete_dataset(options: DatasetOptions, key: str) -> None:
    """See :meth:`ParquetDatasetStore.delete_dataset` (``key`` already validated).

    Raises:
        NotFound: nothing is stored under ``key``.
        CapabilityNotSupported: the store cannot delete or list.
        CommitConflict: other writers kept committing for ``commit_timeout`` seconds.
    """
    store = options.store
    check_key_fits(store, key)
    options.require(Capability.DELETE, Capability.LIST, action="delete datasets")
    before = own_files(store, key)  # listed before the tombstone lands: no file of a writer that begins on it
    if not before:
        raise NotFound(f"dataset {key!r} does not exist")
    if not store.supports(Capability.CONDITIONAL_WRITE):
        _delete_without_tombstone(store, key)
        return
    # The tombstone first: from the moment it lands readers see the dataset absent and none writes _SUCCESS
    # back (with _SUCCESS removed first, a reader in between repaired it and read the whole dataset).
    token = _commit_tombstone(options, key)
    store.delete(f"{key}/{SUCCESS_NAME}", missing_ok=True)
    _remove_under_tombstone(options, key, token, {_identity(f) for f in before})


def _identity(info: FileInfo) -> tuple[str, int, float | None]:
    return info.path, info.size, info.modified


def _maybe_new(key: str, info: FileInfo, listed_before: set[tuple[str, int, float | None]], *, claimed: bool) -> bool:
    """Whether ``info`` may be a file published after the listing ``listed_before`` was taken: it is not in it,
    or its name is one a later writer publishes again, which a listing cannot tell from the old file of that
    name (S3 lists times to the second): ``_SUCCESS`` and the Delta log always, Spec part names unless the
    dataset's old ``_claim`` (``claimed``) is still there (a writer uses Spec names only once it holds the claim)."""
    relative = info.path[len(key) + 1 :]
    if relative == SUCCESS_NAME or relative.split("/", 1)[0] in DELTA_DIRS or (is_spec_name(relative) and not claimed):
        return True
    return _identity(info) not in listed_before


def _delete_files(store: Store, key: str, files: list[FileInfo]) -> None:
    """Delete ``files``, the ``_claim`` last (once it is gone, a writer may claim the Spec names)."""
    claim = f"{key}/{CLAIM_NAME}"
    for info in sorted(files, key=lambda f: f.path == claim):
        store.delete(info.path, missing_ok=True)


def _remove_under_tombstone(
    options: DatasetOptions, key: str, token: str, listed_before: set[tuple[str, int, float | None]]
) -> None:
    """Delete the files under ``key`` while the tombstone ``token`` is live, then the tombstone by its token.

    A writer that begins on a tombstone (the key reads as absent) writes new parts and commits them by
    compare-and-swap against that tombstone, then checks once that its parts are all there. So the delete
    removes only files listed before the tombstone live when it removes them had landed (``listed_before``).
    Its first listing after its tombstone may hold files it did not list before: it then first swaps in a
    fresh tombstone against its own, after which no writer that began on the old one can commit (it raises
    ``CommitConflict`` and removes its parts); if a writer committed first, that swap fails and the writer's
    version stays whole. Files that appear later stay under the tombstone (the key reads as absent; the next
    write or delete of the key removes them). The tombstone goes last, by :func:`delete_manifest_if` (atomic
    with :attr:`Capability.CONDITIONAL_DELETE`): a version a writer swapped in meanwhile stays, with every file
    it lists. After the tombstone nothing but empty folders is removed; if a file appeared by then, a
    tombstone goes back (unless a writer's manifest is there), so the key reads as absent; files that
    appeared while the folder was removed (a local disk could not remove it) are then removed like the
    others, having been listed before that tombstone; files that appeared once the folder was gone stay
    under it.

    Raises:
        CommitConflict: the store kept failing for ``commit_timeout`` seconds while swapping a tombstone in.
    """
    store = options.store
    manifest_path = f"{key}/{MANIFEST_NAME}"
    rounds = 0  # batches of files found; more than _ROUNDS: files keep appearing, the tombstone stays
    while True:
        files = [f for f in own_files(store, key) if f.path != manifest_path]
        if files:
            rounds += 1
            if rounds > _ROUNDS:
                return  # the tombstone stays over them, so the key reads as absent
            claim = f"{key}/{CLAIM_NAME}"
            claimed = any(f.path == claim and _identity(f) in listed_before for f in files)
            new = [f for f in files if _maybe_new(key, f, listed_before, claimed=claimed)]
            if new:
                old = [f for f in files if f not in new]
                if rounds > 1:
                    _delete_files(store, key, old)
                    return  # published while the delete ran: the tombstone stays over them (the key reads as absent)
                renewed = _renew_tombstone(options, key, token)
                if renewed is None:
                    _delete_files(store, key, old)  # listed before the tombstone: no file of the writer's
                    return  # a writer committed on top of the tombstone: its version and files stay whole
                token = renewed
                listed_before |= {_identity(f) for f in files}
            _delete_files(store, key, files)
            if read_raw(store, key)[1] != token:
                return  # a writer committed on top of the tombstone: its dataset stays
            continue  # list again: a file may have appeared meanwhile
        if not delete_manifest_if(store, key, expected=token):
            return  # a writer swapped in a version after the delete's last listing: it stays, with its files
        pruned = store.prune_folders(key)  # empty folders only (a local disk): never a file
        left = own_files(store, key)
        if not left:
            return
        restored = _restore_tombstone(options, key)  # files appeared: the key reads as absent, not incomplete
        if restored is None or pruned:
            return  # a writer's manifest is there (its version stays), or files appeared once the folder was gone
        token = restored  # files appeared while the folder was removed: remove them, listed before this tombstone
        listed_before = {_identity(f) for f in left}
        rounds += 1
        if rounds > _ROUNDS:
            return  # the next write or delete of the key replaces the tombstone


def _delete_without_tombstone(store: Store, key: str) -> None:
    """A store without conditional writes has no tombstone (and no compare-and-swap commits): ``_SUCCESS``
    first, then every file, then the folder."""
    manifest_path = f"{key}/{MANIFEST_NAME}"
    store.delete(f"{key}/{SUCCESS_NAME}", missing_ok=True)
    for info in own_files(store, key):
        if info.path != manifest_path:
            store.delete(info.path, missing_ok=True)
    left = list(store.list_files(key))
    if [f.path for f in left] != [manifest_path]:
        store.delete(manifest_path, missing_ok=True)  # a nested dataset's files stay
        return
    for _ in range(_ROUNDS):
        try:
            store.delete_folder(key)  # the manifest and, on a local disk, the empty folders
            break
        except NotFound:
            break
        except OSError as exc:
            log.info("dataset %r: a file appeared while its folder was removed (%s)", key, exc)
            store.delete(manifest_path, missing_ok=True)
            for info in own_files(store, key):
                store.delete(info.path, missing_ok=True)


def _renew_tombstone(options: DatasetOptions, key: str, token: str) -> str | None:
    """Swap a fresh tombstone in against the delete's own (``token``); its token, or ``None`` if another
    manifest replaced the delete's tombstone (nothing was swapped in).

    Raises:
        CommitConflict: the store kept failing for ``commit_timeout`` seconds.
    """
    return swap_in_tombstone(
        options,
        key,
        applies=lambda _latest, live: live == token,
        gave_up=lambda: CommitConflict(f"dataset {key!r}: could not finish deleting it; delete it again"),
    )


def _restore_tombstone(options: DatasetOptions, key: str) -> str | None:
    """A file appeared after the delete removed its tombstone: swap a tombstone back in by compare-and-swap,
    unless a writer committed a manifest meanwhile, so the key reads as absent, not as a half-deleted dataset;
    its token, or ``None`` (a manifest is there).

    Raises:
        CommitConflict: the store kept failing for ``commit_timeout`` seconds.
    """
    return swap_in_tombstone(
        options,
        key,
        applies=lambda latest, token: token is None,
        gave_up=lambda: CommitConflict(f"dataset {key!r}: could not mark it deleted; delete it again"),
    )


def _commit_tombstone(options: DatasetOptions, key: str) -> str:
    """Replace the live manifest (or its absence) by a tombstone, by compare-and-swap; its token.

    Raises:
        CommitConflict: other writers kept committing for ``commit_timeout`` seconds.
    """
    token = swap_in_tombstone(
        options,
        key,
        applies=lambda _latest, _token: True,
        gave_up=lambda: CommitConflict(
            f"dataset {key!r}: gave up deleting after {options.commit_timeout:g} s; other writers keep "
            "committing to it (raise commit_timeout to wait longer)"
        ),
    )
    assert token is not None  # `applies` always holds: it returns only once the tombstone landed
    return token
