"""Delete: a committed operation.

The delete first commits a *tombstone* (a manifest with ``operation="delete"``
and no parts) by compare-and-swap against the live version, so it is ordered
with every other commit: a writer that committed before it is deleted with
the dataset, a writer whose commit comes after it loses its race, sees the
tombstone and fails with :class:`CommitConflict` (its parts are removed), and
nobody commits on top of a dataset being deleted. The tombstone goes first (from
then on this package's readers see the dataset absent, and none writes ``_SUCCESS``
back), then ``_SUCCESS`` (a Spec 042 reader sees it absent too), then every file the
dataset had when the tombstone landed, and the tombstone last. A writer that begins
on the tombstone (the delete may have died) replaces it. A file a writer publishes
while the delete runs keeps the tombstone in place (or gets it back), so the key reads
as absent, never as a half-deleted dataset. A store without
conditional writes has no tombstone: there ``_SUCCESS`` goes first.
"""

from __future__ import annotations

import logging

from ...errors import CommitConflict, NotFound
from ...storage.base import Capability
from .._dataset_options import DatasetOptions
from ..commit.conditional import read_raw
from ..commit.tombstone import swap_in_tombstone
from ..format.layout import MANIFEST_NAME, SUCCESS_NAME
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
    if not own_files(store, key):
        raise NotFound(f"dataset {key!r} does not exist")
    manifest_path = f"{key}/{MANIFEST_NAME}"
    # The tombstone first: from the moment it lands readers see the dataset absent and none writes _SUCCESS
    # back (with _SUCCESS removed first, a reader in between repaired it and read the whole dataset).
    token = _commit_tombstone(options, key) if store.supports(Capability.CONDITIONAL_WRITE) else None
    store.delete(f"{key}/{SUCCESS_NAME}", missing_ok=True)
    # Only the files there when the tombstone landed: a writer that begins after it writes new parts and
    # may commit them on top of the tombstone; one that began before it loses its race and removes its own.
    for info in own_files(store, key):
        if info.path != manifest_path:
            store.delete(info.path, missing_ok=True)
    if token is not None and read_raw(store, key)[1] != token:
        return  # a writer committed on top of the tombstone: its dataset stays
    left = list(store.list_files(key))
    if [f.path for f in left] != [manifest_path]:
        ours = [f for f in own_files(store, key) if f.path != manifest_path]
        if token is None or not ours:
            # A nested dataset's files (they stay), or, without a tombstone, a writer's who will find them gone.
            store.delete(manifest_path, missing_ok=True)
        # Else a writer published a file after the listing above: the tombstone stays, so the key reads as
        # absent (never "incomplete"). That writer's commit loses to the tombstone and removes its own files
        # (it began before the delete), or replaces the tombstone (it began on it); the next write or delete
        # of the key replaces it.
        return
    for _ in range(_ROUNDS):
        try:
            store.delete_folder(key)  # the tombstone and, on a local disk, the empty folders
            break
        except NotFound:
            break
        except OSError as exc:
            # A part published mid-delete (ENOTEMPTY). Once the tombstone is gone, its writer's commit
            # loses, finds its parts missing and commits nothing: remove what appeared and try again.
            log.info("dataset %r: a file appeared while its folder was removed (%s)", key, exc)
            store.delete(manifest_path, missing_ok=True)
            for info in own_files(store, key):
                store.delete(info.path, missing_ok=True)
    if token is not None and own_files(store, key):
        _restore_tombstone(options, key)


def _restore_tombstone(options: DatasetOptions, key: str) -> None:
    """A file appeared while the folder was removed (S3 deletes the objects it listed, a local disk may have
    taken the tombstone before a part was published): swap a tombstone back in by compare-and-swap, unless a
    writer committed a manifest meanwhile, so the key reads as absent, not as a half-deleted dataset.

    Raises:
        CommitConflict: the store kept failing for ``commit_timeout`` seconds.
    """
    swap_in_tombstone(
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
