"""The one commit path every write, append and merge goes through.

A commit is a compare-and-swap of ``manifest.json`` against the token of the
version the write was built on. Around it:

- Every write carries a unique token (``txn``). The manifest records it and the
  tokens of the commits before it (``txns``), so a writer whose commit response
  was lost (a timeout, or a 412 on the client's own retry of a request that was
  applied) re-reads the manifest and recognises its own commit instead of
  committing twice or deleting parts a live manifest lists.
- A lost race is retried on top of the latest version with jittered
  exponential backoff until ``commit_timeout`` runs out, so contention slows
  writers down instead of failing them.
- After a conflict that broke the lineage (the dataset was deleted or replaced
  meanwhile), the writer checks that its parts still exist before it commits
  them again.
- A part is deleted only once its write is known to have lost; when the
  outcome cannot be known, the parts stay (``CommitOutcomeUnknown``).
- After the commit: ``_SUCCESS``, then the files no retained version needs,
  past versions' manifest copies first (so ``history`` never lists a version
  whose files are gone).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from ..errors import (
    AlreadyExists,
    CommitConflict,
    CommitOutcomeUnknown,
    ManifestCorrupted,
    NotFound,
)
from ..storage.base import Capability, Store
from ._layout import CLAIM_NAME, MANIFEST_NAME, SINGLE_FILE_NAME, SUCCESS_NAME, VERSIONS_DIR, version_of, version_path
from .manifest import DatasetManifest

log = logging.getLogger(__name__)

#: Write tokens a manifest remembers: a writer recognises its lost-response
#: commit as long as fewer than this many commits landed on top of it.
TXN_WINDOW = 64
_FIRST_DELAY = 0.005
_MAX_DELAY = 1.0
#: Retries of a commit whose outcome the store did not report, before giving up.
_UNANSWERED_RETRIES = 3


@dataclass(frozen=True)
class PendingWrite:
    """A write begun by :meth:`ParquetDatasetStore.begin_write`, to be finished by
    :meth:`ParquetDatasetStore.commit_write`.

    Writers that produce parts themselves (the Spark layer's executors) write
    them under :meth:`part_name` (or any name that carries :attr:`txn`), then
    commit them all at once.

    Attributes:
        key: the validated dataset key.
        txn: a token unique to this write; names of parts that are not Spec
            names carry it, and the committed manifest records it.
        spec_names: whether this writer holds the new dataset's ``_claim``, so
            its parts may carry exactly the Spec names.
        overwrite, run_id, metadata: as given to ``begin_write``.
    """

    key: str
    txn: str
    spec_names: bool
    overwrite: bool
    run_id: str | None
    metadata: dict[str, str] | None
    current: DatasetManifest | None = field(repr=False)
    token: str | None = field(repr=False)

    def part_name(self, index: int) -> str:
        """Name of part ``index`` relative to the dataset key: ``part-NNNNN.parquet``, or with :attr:`txn`."""
        return f"part-{index:05d}.parquet" if self.spec_names else f"part-{index:05d}-{self.txn}.parquet"

    def single_name(self) -> str:
        """Name of a single-file dataset's only part: ``data.parquet``, or with :attr:`txn`."""
        return SINGLE_FILE_NAME if self.spec_names else f"data-{self.txn}.parquet"


Build = Callable[[DatasetManifest | None], DatasetManifest]
"""Builds the new manifest's content on top of the version it will replace;
called again after every lost race, and may raise to give up."""


class Committer:
    """Commits manifests for one store (see the module docstring for the protocol).

    Args:
        store: the backend.
        retain_versions: as :class:`ParquetDatasetStore`'s.
        commit_timeout: seconds a commit keeps retrying lost races before
            :class:`CommitConflict`.
    """

    def __init__(self, store: Store, retain_versions: int | None, commit_timeout: float) -> None:
        self.store = store
        self.retain_versions = retain_versions
        self.commit_timeout = commit_timeout

    # ------------------------------------------------------------------ reading

    def read_current(self, key: str) -> tuple[DatasetManifest | None, str | None]:
        """The live manifest (``None`` if absent or corrupt) and its token (``None`` if absent)."""
        try:
            raw, token = self.store.read_versioned(f"{key}/{MANIFEST_NAME}")
        except NotFound:
            return None, None
        try:
            return DatasetManifest.from_json(raw), token
        except ManifestCorrupted:
            return None, token

    def read_version_copy(self, key: str, version: int) -> DatasetManifest | None:
        """A retained past version's manifest copy, or ``None`` if it is gone or unreadable."""
        try:
            return DatasetManifest.from_json(self.store.read_bytes(f"{key}/{version_path(version)}"))
        except (NotFound, ManifestCorrupted):
            return None

    def highest_copied_version(self, key: str) -> int:
        """The highest version number among ``_versions/`` copies (0 if none or the store cannot list)."""
        if not self.store.supports(Capability.LIST):
            return 0
        numbers = (version_of(f.path[len(key) + 1 :]) for f in self.store.list_files(f"{key}/{VERSIONS_DIR}"))
        return max((n for n in numbers if n is not None), default=0)

    # ------------------------------------------------------------------ claims

    def claim(self, key: str, txn: str) -> bool:
        """Win the right to write Spec-named parts for a new dataset.

        Only one writer ever holds a key's claim, so two writers creating the
        same dataset can never write over each other's ``data.parquet``. The
        claim stays until the dataset is deleted; a writer that finds it taken
        uses unique names instead.
        """
        try:
            self.store.write_if(f"{key}/{CLAIM_NAME}", txn.encode(), expected=None)
            return True
        except CommitConflict:
            return False

    def abandon(self, pending: PendingWrite, attempted: Iterable[str]) -> None:
        """Clean up after a write known not to have committed: its files, and its
        ``_claim`` if it held one and the dataset still has no manifest (so a
        failed first write leaves the key absent, not "incomplete")."""
        self.delete_quietly(attempted)
        if pending.spec_names:
            try:
                if not self.store.exists(f"{pending.key}/{MANIFEST_NAME}"):
                    self.delete_quietly([f"{pending.key}/{CLAIM_NAME}"])
            except Exception as exc:  # cleanup must not hide the real outcome
                log.warning("could not release the claim of %r: %s", pending.key, exc)

    def delete_quietly(self, paths: Iterable[str]) -> None:
        for path in paths:
            try:
                self.store.delete(path, missing_ok=True)
            except Exception as exc:  # cleanup must not hide the real outcome
                log.warning("could not delete %r: %s", path, exc)

    # ------------------------------------------------------------------ commit

    def commit(
        self, pending: PendingWrite, build: Build, attempted: Sequence[str], *, exclusive: bool
    ) -> DatasetManifest:
        """Commit ``build``'s manifest, write ``_SUCCESS`` and delete obsolete files.

        ``attempted`` are the store paths of the parts this write wrote; they
        are deleted if the write is known to have lost, kept if its outcome is
        unknown.

        Raises:
            AlreadyExists: ``exclusive`` and another writer created the dataset meanwhile.
            CommitConflict: other writers kept winning for ``commit_timeout``
                seconds, or the dataset was deleted under this write and took
                some of its parts with it.
            CommitOutcomeUnknown: the store did not answer whether the commit landed.
            ManifestCorrupted: a non-overwrite found the live manifest corrupt.
            Whatever ``build`` raises.
        """
        try:
            committed = self._commit(pending, build, attempted, exclusive=exclusive)
        except CommitOutcomeUnknown:
            raise
        except BaseException:
            self.abandon(pending, attempted)
            raise
        self.finish(pending.key, committed)
        return committed

    def _commit(
        self, pending: PendingWrite, build: Build, attempted: Sequence[str], *, exclusive: bool
    ) -> DatasetManifest:
        key, txn = pending.key, pending.txn
        path = f"{key}/{MANIFEST_NAME}"
        current, token = pending.current, pending.token
        deadline = time.monotonic() + self.commit_timeout
        delay = _FIRST_DELAY
        unanswered = 0
        while True:
            candidate = self._candidate(key, build(current), current, token, txn)
            if current is not None and self.retain_versions != 1:
                # Keep the replaced version readable: its manifest moves into _versions/.
                self.store.write_bytes(f"{key}/{version_path(current.version)}", current.to_json().encode("utf-8"))
            unsure: BaseException | None = None
            try:
                self.store.write_if(path, candidate.to_json().encode("utf-8"), expected=token)
                return candidate
            except CommitConflict:
                pass  # lost the race, or our own request was applied and its retry was refused
            except OSError as exc:  # a timeout or reset (Store.write_if's contract): it may have landed
                unsure = exc
            try:
                latest, latest_token = self.read_current(key)
            except Exception as exc:
                raise CommitOutcomeUnknown(
                    f"dataset {key!r}: could not confirm whether the commit landed ({unsure or exc}); "
                    "its parts were kept. Read the dataset to see which version is live."
                ) from exc
            if latest is not None and txn in latest.txns:
                return latest if latest.txn == txn else candidate  # ours landed; others may have built on it
            if unsure is not None and latest_token == token:
                # Nothing visible changed: our request may still be in flight. Retrying with
                # the same expected token is safe (at most one of the two can land).
                unanswered += 1
                if unanswered > _UNANSWERED_RETRIES or time.monotonic() >= deadline:
                    raise CommitOutcomeUnknown(
                        f"dataset {key!r}: the store did not confirm the commit ({unsure}); its parts were kept. "
                        "Read the dataset to see which version is live."
                    ) from unsure
            else:
                if exclusive and latest_token is not None:
                    raise AlreadyExists(f"dataset {key!r} was created by another writer meanwhile")
                if latest is None and latest_token is not None and not pending.overwrite:
                    raise ManifestCorrupted(
                        f"dataset {key!r}: its manifest became unreadable while this write ran; "
                        "overwrite the dataset to repair it",
                        reason="unreadable after conflict",
                    )
                if not _same_lineage(current, latest):
                    self._check_parts_exist(key, attempted)
                current, token = latest, latest_token
            if time.monotonic() >= deadline:
                raise CommitConflict(
                    f"dataset {key!r}: gave up committing after {self.commit_timeout:g} s; "
                    "other writers keep committing to it (raise commit_timeout to wait longer)"
                )
            time.sleep(random.uniform(0, delay))
            delay = min(delay * 2, _MAX_DELAY)

    def _candidate(
        self,
        key: str,
        new: DatasetManifest,
        current: DatasetManifest | None,
        token: str | None,
        txn: str,
    ) -> DatasetManifest:
        if current is not None:
            version = current.version + 1
            previous = current.txns or ((current.txn,) if current.txn else ())
        else:
            # No readable live manifest. If there was one (it is corrupt, or was deleted by hand
            # while copies of older versions remain), it was newer than every copy: skip its number too.
            copied = self.highest_copied_version(key)
            version = copied + 2 if token is not None or copied else 1
            previous = ()
        return replace(
            new,
            version=version,
            obsolete=self._obsolete(key, new, current),
            txn=txn,
            txns=(txn, *previous)[:TXN_WINDOW],
        )

    def _check_parts_exist(self, key: str, attempted: Sequence[str]) -> None:
        """Raise if any of this write's parts vanished (a racing delete took them)."""
        if not attempted:
            return
        if self.store.supports(Capability.LIST):
            present = {f.path for f in self.store.list_files(key)}
            missing = [p for p in attempted if p not in present]
        else:
            missing = [p for p in attempted if not self.store.exists(p)]
        if missing:
            raise CommitConflict(
                f"dataset {key!r} was deleted or replaced while this write ran, and {len(missing)} of its "
                f"parts went with it (first: {missing[0]!r}); nothing was committed, write again"
            )

    def _obsolete(self, key: str, new: DatasetManifest, current: DatasetManifest | None) -> tuple[str, ...]:
        """Files no retained version needs once ``new`` replaces ``current``."""
        if current is None:
            return ()
        keep = set(new.parts)
        if self.retain_versions is None:
            return tuple(p for p in current.obsolete if p not in keep)
        if self.retain_versions == 1:
            return tuple(p for p in dict.fromkeys([*current.obsolete, *current.parts]) if p not in keep)
        # Versions current.version - retain + 2 .. current.version stay; one drops out.
        dropped_version = current.version + 1 - self.retain_versions
        retained = [current]
        for v in range(max(dropped_version + 1, 1), current.version):
            old = self.read_version_copy(key, v)
            if old is not None:
                retained.append(old)
        for m in retained:
            keep.update(m.parts)
        doomed = list(current.obsolete)
        if dropped_version >= 1:
            dropped = self.read_version_copy(key, dropped_version)
            if dropped is not None:
                doomed += dropped.parts
            doomed.append(version_path(dropped_version))
        return tuple(p for p in dict.fromkeys(doomed) if p not in keep)

    # ------------------------------------------------------------------ after

    def finish(self, key: str, committed: DatasetManifest) -> None:
        """``_SUCCESS``, then the obsolete files: manifest copies before data files,
        so a crash in between never leaves a listed version without its files."""
        self.store.write_bytes(f"{key}/{SUCCESS_NAME}", b"")
        copies = [p for p in committed.obsolete if p.startswith(VERSIONS_DIR + "/")]
        self.delete_quietly(f"{key}/{p}" for p in copies)
        self.delete_quietly(f"{key}/{p}" for p in committed.obsolete if p not in copies)

    def repair_success(self, key: str) -> DatasetManifest | None:
        """If ``key`` has a committed manifest but no ``_SUCCESS`` (its writer died
        between the two), write ``_SUCCESS`` and return the manifest; else ``None``.

        Only manifests this package committed (they carry a write token) are
        repaired: their compare-and-swap is the commit, so the dataset is
        complete. A Spec-only writer's manifest without ``_SUCCESS`` may be an
        unfinished write, and stays "incomplete" as Spec 042 PDS-003 says. A
        store the caller may not write to is left as it is.
        """
        current, _token = self.read_current(key)
        if current is None or current.txn is None or not self.store.supports(Capability.ATOMIC_WRITE):
            return None
        try:
            self.store.write_bytes(f"{key}/{SUCCESS_NAME}", b"")
        except Exception as exc:  # a read-only credential: the read itself can go on
            log.warning("could not repair the missing _SUCCESS of %r: %s", key, exc)
            return current
        if not self.store.exists(f"{key}/{MANIFEST_NAME}"):
            # A delete_dataset ran meanwhile: do not leave a marker without a manifest.
            self.delete_quietly([f"{key}/{SUCCESS_NAME}"])
            return None
        log.info("dataset %r: wrote the _SUCCESS its last commit did not get to", key)
        return current


def _same_lineage(base: DatasetManifest | None, latest: DatasetManifest | None) -> bool:
    """Whether ``latest`` was built on top of ``base`` (so nothing deleted the dataset in between)."""
    if base is None or latest is None or base.txn is None:
        return False
    return base.txn in latest.txns
