"""The one transaction every operation commits through.

A transaction is begun on the live version of a dataset (its manifest and
version token), records every part path *before* the part is written, and
ends in exactly one of:

- :meth:`Transaction.commit`: a compare-and-swap of ``manifest.json`` against
  the token it began on, with a build function that makes the new manifest on
  top of whatever version is live (called again after every lost race, it may
  raise :class:`Replan` or another error to give up); then ``_SUCCESS`` and the
  deletion of files no retained version needs;
- :meth:`Transaction.abandon`: delete the parts it created, and nothing else.

Rules it enforces:

- Every write carries a unique token (``txn``). The manifest records it and the
  tokens of the commits before it (``txns``), so a writer whose commit response
  was lost re-reads the manifest and recognises its own commit instead of
  committing twice or deleting parts a live manifest lists.
- Once the commit request has been sent, nothing is deleted until its outcome
  is known. An interrupt (``KeyboardInterrupt``, ``SystemExit``...) or an error
  while the outcome is unknown re-reads the manifest: if the commit landed the
  parts stay; if the token moved on without it, the parts are deleted; if the
  outcome cannot be learned, they stay for ``vacuum`` (:class:`CommitOutcomeUnknown`).
- Clean-up deletes only files this transaction created, never a file the live
  version or a retained version lists, never a reserved name.
- Lost races are retried on top of the latest version with one jittered
  exponential backoff (:class:`Backoff`) until ``commit_timeout`` runs out.
- With an expected owner (``expect_owner``), the version a commit replaces or
  extends must record that owner or none: checked on every attempt, so a writer
  that lost the race to another owner gives up (:class:`OwnerMismatch`).
- After a conflict that broke the lineage (the dataset was deleted or replaced
  meanwhile), the writer checks its parts still exist before committing them.
- A first write (no manifest, or a delete's tombstone, when it began) lists its parts once after its swap: if a
  ``delete_dataset`` took them, it swaps in a tombstone while its version (or one built on it) is live, and raises
  CommitConflict.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from ...errors import AlreadyExists, CommitConflict, CommitOutcomeUnknown, ManifestCorrupted, NotFound
from ...storage.base import Capability, Store
from .._dataset_options import DatasetOptions
from ..format.layout import (
    CLAIM_NAME,
    MANIFEST_NAME,
    SUCCESS_NAME,
    VERSIONS_DIR,
    is_reserved,
    is_spec_name,
    part_name,
    single_name,
)
from ..format.segments import SEGMENTS_DIR, SegmentGone
from ..manifest import SEGMENTED_FORMAT, DatasetManifest
from .conditional import put_if_absent, read_raw, swap_manifest
from .nested import deletable, outside_nested
from .new_version import new_txn
from .owner import check_expect_owner, check_owner
from .referenced import not_referenced
from .retention import keep_version_copy, obsolete_files, read_version_copy, version_copies
from .retry import Backoff
from .segment_commit import commit_segments, root_format
from .tombstone import is_tombstone, swap_in_tombstone

log = logging.getLogger(__name__)

#: Write tokens a manifest remembers: a writer recognises its lost-response
#: commit as long as fewer than this many commits landed on top of it.
TXN_WINDOW = 64
#: Retries of a commit whose outcome the store did not report, before giving up.
_UNANSWERED_RETRIES = 3


@dataclass(frozen=True, kw_only=True)
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
        expect_owner: the owner the replaced version must record, if any (:func:`.owner.check_owner`).
    """

    key: str
    txn: str
    spec_names: bool
    overwrite: bool
    run_id: str | None
    metadata: dict[str, str] | None
    current: DatasetManifest | None = field(repr=False)
    token: str | None = field(repr=False)
    expect_owner: dict[str, str | None] | None = None

    def part_name(self, index: int) -> str:
        """Name of part ``index`` relative to the dataset key: ``part-NNNNN.parquet``, or with :attr:`txn`."""
        return part_name(index, txn=None if self.spec_names else self.txn)

    def single_name(self) -> str:
        """Name of a single-file dataset's only part: ``data.parquet``, or with :attr:`txn`."""
        return single_name(None if self.spec_names else self.txn)

    def owns(self, relative: str) -> bool:
        """Whether this write may have created the part ``relative``: its name carries :attr:`txn`,
        or it is a Spec name and this write holds the claim."""
        return self.txn in relative.rpartition("/")[2] or (self.spec_names and is_spec_name(relative))


Build = Callable[[DatasetManifest | None], DatasetManifest]
"""Builds the new manifest's content on top of the version it will replace;
called again after every lost race, and may raise to give up."""


# ---------------------------------------------------------------------- reading


def read_current(store: Store, key: str) -> tuple[DatasetManifest | None, str | None]:
    """The live manifest (``None`` if absent or corrupt) and its token (``None`` if absent).

    A delete's tombstone reads as absent (``None, None``).
    """
    manifest, token = read_raw(store, key)
    if is_tombstone(manifest):
        return None, None
    return manifest, token


def delete_quietly(store: Store, paths: Iterable[str]) -> None:
    """Delete ``paths``, logging (not raising) what cannot be deleted: clean-up must not hide the real outcome."""
    for path in paths:
        try:
            store.delete(path, missing_ok=True)
        except Exception as exc:
            log.warning("could not delete %r: %s", path, exc)


def repair_success(store: Store, key: str) -> DatasetManifest | None:
    """If ``key`` has a committed manifest but no ``_SUCCESS`` (its writer died
    between the two), write ``_SUCCESS`` and return the manifest; else ``None``.

    Only manifests this package committed (they carry a write token) are
    repaired: their compare-and-swap is the commit, so the dataset is complete.
    A Spec-only writer's manifest without ``_SUCCESS`` may be an unfinished
    write, and stays "incomplete" as Spec 042 PDS-003 says. A store the caller
    may not write to is left as it is.
    """
    current, _token = read_raw(store, key)
    if current is None or is_tombstone(current) or current.txn is None or not store.supports(Capability.ATOMIC_WRITE):
        return None
    try:
        store.write_bytes(f"{key}/{SUCCESS_NAME}", b"")
    except Exception as exc:  # a read-only credential: the read itself can go on
        log.warning("could not repair the missing _SUCCESS of %r: %s", key, exc)
        return current
    if not store.exists(f"{key}/{MANIFEST_NAME}"):
        # A delete_dataset ran meanwhile: do not leave a marker without a manifest.
        delete_quietly(store, [f"{key}/{SUCCESS_NAME}"])
        return None
    log.info("dataset %r: wrote the _SUCCESS its last commit did not get to", key)
    return current


# ------------------------------------------------------------------ transaction


class Transaction:
    """One operation's commit (see the module docstring for the rules).

    Build one with :meth:`begin` (reads the live version) or :meth:`resume`
    (from a :class:`PendingWrite` an external writer carried around).
    """

    def __init__(self, options: DatasetOptions, pending: PendingWrite, *, exclusive: bool = False) -> None:
        self.options = options
        self.store = options.store
        self.pending = pending
        self.exclusive = exclusive
        #: Store paths of the parts this transaction created (recorded before each is written).
        self.created: list[str] = []
        self._sent_against: str | None = None
        #: The token of the manifest this transaction's swap put in place, when known.
        self._landed: str | None = None
        self._in_flight = False
        #: Whether a dataset (not just a delete's tombstone) was live when the transaction began.
        self.exists = pending.token is not None
        self._idempotency: tuple[str, str] | None = None
        #: Whether :meth:`commit` found this write already committed by an earlier attempt (its ``idempotency``).
        self.recognised = False

    @classmethod
    def begin(
        cls,
        options: DatasetOptions,
        key: str,
        *,
        overwrite: bool,
        run_id: str | None = None,
        metadata: dict[str, str] | None = None,
        claim: bool = False,
        exclusive: bool = False,
        current: tuple[DatasetManifest | None, str | None] | None = None,
        expect_owner: Mapping[str, str | None] | None = None,
    ) -> Transaction:
        """Begin on the live version of ``key`` (or on ``current``, a ``(manifest, token)`` already read).

        With ``claim``, a new dataset's ``_claim`` is tried, so the parts may carry Spec names.

        Raises:
            TypeError: a bad ``expect_owner``.
            OwnerMismatch: the live version records another owner than ``expect_owner``.
        """
        expect_owner = check_expect_owner(expect_owner)
        manifest, token = read_raw(options.store, key) if current is None else current
        tombstone = is_tombstone(manifest)
        if tombstone:
            manifest = None  # a delete's (possibly one that crashed): the dataset is absent, replace the tombstone
        check_owner(key, expect_owner, manifest)  # early; the commit checks again on what it replaces
        txn = new_txn()
        spec_names = claim and (token is None or tombstone) and _claim(options.store, key, txn)
        pending = PendingWrite(
            key=key,
            txn=txn,
            spec_names=spec_names,
            overwrite=overwrite,
            run_id=run_id,
            metadata=metadata,
            current=manifest,
            token=token,
            expect_owner=expect_owner,
        )
        made = cls(options, pending, exclusive=exclusive)
        made.exists = token is not None and not tombstone
        return made

    @classmethod
    def resume(cls, options: DatasetOptions, pending: PendingWrite, *, exclusive: bool = False) -> Transaction:
        """The transaction of a write begun earlier (``begin_write``, ``begin_append``, ``plan_merge``)."""
        return cls(options, pending, exclusive=exclusive)

    @property
    def key(self) -> str:
        return self.pending.key

    @property
    def txn(self) -> str:
        return self.pending.txn

    @property
    def current(self) -> DatasetManifest | None:
        return self.pending.current

    def record(self, path: str) -> None:
        """Note that this transaction is about to create ``path`` (a store path)."""
        self.created.append(path)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Around writing parts: any failure (an interrupt included) abandons the transaction, and a
        part whose folder a concurrent ``delete_dataset`` removed while it was written (the store's
        :class:`NotFound`) becomes a :class:`CommitConflict`."""
        try:
            yield
        except NotFound as exc:
            self.abandon()
            raise CommitConflict(
                f"dataset {self.key!r} was deleted while this write ran ({exc}); nothing was committed, write again"
            ) from exc
        except BaseException:
            self.abandon()
            raise

    def adopt(self, relative_paths: Iterable[str]) -> None:
        """Record parts an external writer wrote, but only those this write may have created
        (:meth:`PendingWrite.owns`): clean-up never deletes a file under another name."""
        self.created.extend(f"{self.key}/{p}" for p in relative_paths if self.pending.owns(p))

    # ------------------------------------------------------------------ commit

    def commit(self, build: Build, *, idempotency: tuple[str, str] | None = None) -> DatasetManifest:
        """Commit ``build``'s manifest, write ``_SUCCESS`` and delete obsolete files.

        If the commit is known to have lost, the parts are deleted (:meth:`abandon`);
        if its outcome is unknown, they are kept.

        With ``idempotency`` (an idempotency key and the content hash of what this write adds),
        the commit records both in the manifest's window (:attr:`DatasetManifest.idempotency`);
        if the version it would build on already records the same key with the same content
        hash, an earlier attempt of this write committed it: this one's parts are deleted and
        that version is returned, with :attr:`recognised` set. The same key with another
        content hash commits normally.

        Raises:
            AlreadyExists: ``exclusive`` and another writer created the dataset meanwhile.
            OwnerMismatch: the version the commit would replace records another owner than
                the write's ``expect_owner`` (checked on every attempt); nothing is committed.
            CommitConflict: other writers kept winning for ``commit_timeout``
                seconds, or the dataset was deleted under this write and took
                some of its parts with it.
            CommitOutcomeUnknown: the store did not answer whether the commit landed.
            ManifestCorrupted: a non-overwrite found the live manifest corrupt.
            Whatever ``build`` raises.
        """
        self._idempotency = idempotency
        try:
            committed = self._commit(build)
        except CommitOutcomeUnknown:
            raise
        except BaseException:
            # Before the send, or once the commit is known to have lost, the parts go. After the
            # send with an unknown outcome (an interrupt, an unexpected error), or if it landed,
            # they stay: vacuum removes them if the commit did not land.
            if not self._in_flight or self._outcome() is False:
                self.abandon()
            raise
        if self.recognised:
            self.abandon()
            return committed
        if self.pending.current is None and self.created and self._missing_parts(quiet=True):
            self._take_back(committed)  # raises, unless a later commit or delete replaced it already
            return committed
        self._finish(committed)
        self.options.after_commit(self.key, self.pending.current, committed)  # the Delta log, if kept
        return committed

    def _take_back(self, committed: DatasetManifest) -> None:
        """Replace this first write's manifest (or one built on it) by a tombstone, by compare-and-swap, and
        abandon; return if no live version descends from it (a later delete or overwrite replaced it).

        Raises:
            CommitConflict: the manifest was taken back; nothing stays committed.
            CommitOutcomeUnknown: the tombstone's swap kept failing without an answer.
        """
        key, txn = self.key, self.txn
        landed = swap_in_tombstone(
            self.options,
            key,
            applies=lambda latest, token: (
                latest is not None and token is not None and txn in latest.txns and not is_tombstone(latest)
            ),
            gave_up=lambda: CommitOutcomeUnknown(
                f"dataset {key!r}: could not take back a manifest listing deleted parts"
            ),
            start=(committed, self._landed) if self._landed else None,
        )
        if landed is None:
            return
        delete_quietly(self.store, [f"{key}/{SUCCESS_NAME}"])  # a commit built on it may have written it
        self.abandon()
        with suppress(Exception):  # NotFound: the delete took it
            if self.pending.spec_names and self.store.read_bytes(f"{key}/{CLAIM_NAME}") == self.txn.encode():
                delete_quietly(self.store, [f"{key}/{CLAIM_NAME}"])
        raise CommitConflict(
            f"dataset {key!r} was deleted while this write ran and its parts went with it; the manifest it "
            "committed was taken back, so nothing stays committed: write again"
        )

    def _outcome(self) -> bool | None:
        """After an interrupted send: ``True`` landed, ``False`` can never land, ``None`` unknown."""
        try:
            latest, latest_token = read_raw(self.store, self.key)
        except Exception:
            return None
        if latest is not None and self.txn in latest.txns:
            return True
        return False if latest_token != self._sent_against else None

    def _commit(self, build: Build) -> DatasetManifest:
        key, txn = self.key, self.txn
        current, token = self.pending.current, self.pending.token
        backoff = Backoff(self.options.commit_timeout)
        unanswered = 0
        while True:
            check_owner(key, self.pending.expect_owner, current)
            if (
                current is not None
                and self._idempotency is not None
                and any((k, c) == self._idempotency for k, c, _t in current.idempotency)
            ):
                self.recognised = True  # an earlier attempt of this very write committed it
                return current
            if not (unanswered and token == self._sent_against):  # an unanswered send is re-sent as it was
                try:
                    candidate = self._candidate(build(current), current, token).bind(self.store, key)
                except SegmentGone:
                    candidate = None  # a commit replaced `current` and its segments went: build on the new version
            if candidate is not None and current is not None and self.options.retain_versions != 1:
                # Keep the replaced version readable: its manifest moves into _versions/ (once per version).
                keep_version_copy(self.store, key, current)
            unsure: BaseException | None = None
            self._sent_against, self._in_flight = token, candidate is not None
            try:
                if candidate is None:
                    raise CommitConflict("lost the race before sending")
                self._landed = swap_manifest(self.store, key, candidate, expected=token)
                self._in_flight = False
                return candidate
            except CommitConflict:
                pass  # lost the race, or our own request was applied and its retry was refused
            except OSError as exc:  # a timeout or reset (Store.write_if's contract): it may have landed
                unsure = exc
            except Exception:
                self._in_flight = False  # any other error is a definite failure (Store.write_if's contract)
                raise
            try:
                latest, latest_token = read_raw(self.store, key)
            except Exception as exc:
                raise CommitOutcomeUnknown(
                    f"dataset {key!r}: could not confirm whether the commit landed ({unsure or exc}); "
                    "its parts were kept. Read the dataset to see which version is live."
                ) from exc
            if latest is not None and txn in latest.txns:
                self._in_flight = False
                self._landed = latest_token if latest.txn == txn else None
                # Ours landed; others may have built on it. Then the version that landed is ``candidate``, the last
                # one sent (a send whose expected token moved on without it can never land).
                return latest if latest.txn == txn or candidate is None else candidate
            if unsure is not None and latest_token == token:
                # Nothing visible changed: our request may still be in flight. Retrying with
                # the same expected token is safe (at most one of the two can land).
                unanswered += 1
                if unanswered > _UNANSWERED_RETRIES or backoff.expired():
                    raise CommitOutcomeUnknown(
                        f"dataset {key!r}: the store did not confirm the commit ({unsure}); its parts were kept. "
                        "Read the dataset to see which version is live."
                    ) from unsure
            else:
                self._in_flight = False  # the token moved on without our commit: it can never land
                if is_tombstone(latest):
                    raise CommitConflict(
                        f"dataset {key!r} was deleted while this write ran; nothing was committed, write again"
                    )
                if self.exclusive and latest_token is not None:
                    raise AlreadyExists(f"dataset {key!r} was created by another writer meanwhile")
                if latest is None and latest_token is not None and not self.pending.overwrite:
                    raise ManifestCorrupted(
                        f"dataset {key!r}: its manifest became unreadable while this write ran; "
                        "overwrite the dataset to repair it",
                        reason="unreadable after conflict",
                    )
                if not _same_lineage(current, latest):
                    self._check_parts_exist()
                current, token = latest, latest_token
            if backoff.expired():
                raise CommitConflict(
                    f"dataset {key!r}: gave up committing after {self.options.commit_timeout:g} s; "
                    "other writers keep committing to it (raise commit_timeout to wait longer)"
                )
            backoff.pause()

    def _candidate(self, new: DatasetManifest, current: DatasetManifest | None, token: str | None) -> DatasetManifest:
        if current is not None:
            version = current.version + 1
            previous = current.txns or ((current.txn,) if current.txn else ())
            done = current.idempotency
        else:
            # No readable live manifest. If there was one (it is corrupt, or was deleted by hand
            # while copies of older versions remain), it was newer than every copy: skip its number too.
            copied = max(version_copies(self.store, self.key), default=0)
            version = copied + 2 if token is not None or copied else 1
            previous, done = (), ()
        ours = () if self._idempotency is None else ((*self._idempotency, self.txn),)
        record = lambda relative: self.record(f"{self.key}/{relative}")  # noqa: E731
        segments, inline = commit_segments(self.store, self.key, new, current, name=self._segment_name, record=record)
        if segments or new.added or new.segments:
            new = new.evolve(segments=segments, added=inline)
        if new.format_version >= SEGMENTED_FORMAT:
            new = new.evolve(format_version=root_format(new))
        return new.evolve(
            version=version,
            obsolete=obsolete_files(self.options, self.key, new, current),
            txn=self.txn,
            txns=(self.txn, *previous)[:TXN_WINDOW],
            idempotency=(*ours, *done)[:TXN_WINDOW],
        )

    def _segment_name(self) -> str:
        """A new segment's path (relative): unique per attempt, so a retry never writes over one a landed commit lists."""
        return f"{SEGMENTS_DIR}/{self.txn}-{sum(SEGMENTS_DIR in p for p in self.created)}.parquet"

    def _missing_parts(self, *, quiet: bool = False) -> list[str]:
        """This write's parts that vanished (one listing); with ``quiet``, none when the store cannot tell."""
        try:
            if self.store.supports(Capability.LIST):
                present = {f.path for f in self.store.list_files(self.key)}
                return [p for p in self.created if p not in present]
            return [p for p in self.created if not self.store.exists(p)]
        except Exception:
            if not quiet:
                raise
            return []

    def _check_parts_exist(self) -> None:
        """Raise if any of this write's parts vanished (a racing delete took them)."""
        missing = self._missing_parts() if self.created else []
        if missing:
            raise CommitConflict(
                f"dataset {self.key!r} was deleted or replaced while this write ran, and {len(missing)} of its "
                f"parts went with it (first: {missing[0]!r}); nothing was committed, write again"
            )

    def _finish(self, committed: DatasetManifest) -> None:
        """``_SUCCESS``, then the obsolete files: manifest copies before data files,
        so a crash in between never leaves a listed version without its files.
        Files inside a dataset nested in this one's folder are never deleted."""
        key = self.key
        self._mark_success()
        self._drop_unused_segments({s.path for s in committed.segments})  # the segments the version lists
        copies = [p for p in committed.obsolete if p.startswith(VERSIONS_DIR + "/")]
        others = [p for p in committed.obsolete if p not in copies]
        data = [p for p in not_referenced(others, committed) if deletable(p)]
        delete_quietly(self.store, (f"{key}/{p}" for p in copies))
        delete_quietly(self.store, (f"{key}/{p}" for p in outside_nested(self.store, key, data)))

    def _mark_success(self) -> None:
        """Write ``_SUCCESS`` unless it is there already. It is an empty marker, so writing it again over itself
        changes nothing a reader can see and protects nothing a crash could lose, but costs a ``PUT`` (on a
        durable local disk, a file written, renamed and two ``fsync`` calls) on every commit; a commit on top of
        an existing version checks for it instead (a ``stat``, a ``HEAD``). A new dataset (nothing live when
        this write began: a first write, or one over a tombstone or a corrupt manifest) writes it at once.

        Raises:
            Whatever the store's ``exists`` or ``write_bytes`` raises.
        """
        path = f"{self.key}/{SUCCESS_NAME}"
        if self.pending.current is None or not self.store.exists(path):
            self.store.write_bytes(path, b"")

    def _drop_unused_segments(self, committed: set[str]) -> None:
        """Segments this transaction wrote on attempts that lost a race, unless some version lists them."""
        prefix = f"{self.key}/{SEGMENTS_DIR}/"
        unused = [p for p in self.created if p.startswith(prefix) and p[len(self.key) + 1 :] not in committed]
        if unused:
            listed = _listed_paths(self.store, self.key)
            delete_quietly(self.store, [p for p in unused if p[len(self.key) + 1 :] not in listed])

    # ------------------------------------------------------------------ abandon

    def abandon(self) -> None:
        """Delete the parts this transaction created, never one a live or retained version lists,
        and release its ``_claim`` if it held one and the dataset still has no manifest (so a
        failed first write leaves the key absent, not "incomplete"). Never raises for a file it
        cannot delete (vacuum removes leftovers)."""
        key = self.key
        try:
            listed = _listed_paths(self.store, key)
        except Exception as exc:
            log.warning("dataset %r: could not read its versions; its parts were kept (%s)", key, exc)
            return
        prefix = key + "/"
        own = [
            p
            for p in dict.fromkeys(self.created)
            if p.startswith(prefix) and not is_reserved(p[len(prefix) :]) and p[len(prefix) :] not in listed
        ]
        delete_quietly(self.store, own)
        if self.pending.spec_names:
            try:
                if not self.store.exists(f"{key}/{MANIFEST_NAME}"):
                    delete_quietly(self.store, [f"{key}/{CLAIM_NAME}"])
            except Exception as exc:  # cleanup must not hide the real outcome
                log.warning("could not release the claim of %r: %s", key, exc)


def _claim(store: Store, key: str, txn: str) -> bool:
    """Win the right to write Spec-named parts for a new dataset.

    Only one writer ever holds a key's claim, so two writers creating the same
    dataset can never write over each other's ``data.parquet``. The claim stays
    until the dataset is deleted; a writer that finds it taken uses unique names.
    """
    try:
        put_if_absent(store, f"{key}/{CLAIM_NAME}", txn.encode())
        return True
    except CommitConflict:
        return False


def _listed_paths(store: Store, key: str) -> set[str]:
    """Every part the live version or a retained ``_versions/`` copy lists."""
    live, _token = read_raw(store, key)
    listed = set(live.referenced()) if live is not None else set()
    for number in version_copies(store, key):
        old = read_version_copy(store, key, number)
        if old is not None:
            listed.update(old.referenced())
    return listed


def _same_lineage(base: DatasetManifest | None, latest: DatasetManifest | None) -> bool:
    """Whether ``latest`` was built on top of ``base`` (so nothing deleted the dataset in between)."""
    if base is None or latest is None or base.txn is None:
        return False
    return base.txn in latest.txns
