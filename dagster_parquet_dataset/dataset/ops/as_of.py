"""Time travel by timestamp: which version of a dataset was live at an instant.

The commit times are the manifests' ``created_at_utc`` (never an object
store's modification times, which a copy or a restore changes). The version
live at ``as_of`` is the newest one committed at or before it: the live
manifest first, then the retained ``_versions/`` copies newest first, one GET
each, stopping at the first committed at or before ``as_of``. No listing is
needed, so a store without ``LIST`` resolves the same way. Stopping at the
first match also keeps the answer well defined when writers' clocks disagree
(a newer version stamped earlier than an older one): it is the highest
version number committed at or before ``as_of``.
"""

from __future__ import annotations

from datetime import datetime, timezone

from ...errors import ManifestCorrupted, NotFound, VersionNotRetained
from ...storage.base import Store
from ..commit.transaction import read_version_copy
from ..manifest import DatasetManifest
from .read import committed_manifest


def check_as_of(as_of: object) -> datetime:
    """``as_of`` checked: an aware ``datetime``.

    Raises:
        TypeError: ``as_of`` is not a ``datetime``.
        ValueError: ``as_of`` is naive (no time zone): it names no instant.
    """
    if not isinstance(as_of, datetime):
        raise TypeError(f"as_of must be a timezone-aware datetime, got {type(as_of).__name__} {as_of!r}")
    if as_of.tzinfo is None or as_of.utcoffset() is None:
        raise ValueError(
            f"as_of {as_of.isoformat()} has no time zone, so it names no instant; pass an aware datetime, "
            "e.g. datetime(..., tzinfo=timezone.utc)"
        )
    return as_of


def committed_at(manifest: DatasetManifest) -> datetime:
    """When ``manifest``'s version was committed: its ``created_at_utc`` (UTC when it has no offset).

    Raises:
        ManifestCorrupted: ``created_at_utc`` is not an ISO-8601 timestamp.
    """
    try:
        created = datetime.fromisoformat(manifest.created_at_utc)
    except (TypeError, ValueError):
        raise ManifestCorrupted(
            f"dataset {manifest.dataset_key!r} version {manifest.version}: created_at_utc "
            f"{manifest.created_at_utc!r} is not an ISO-8601 timestamp",
            reason="bad created_at_utc",
        ) from None
    return created if created.tzinfo is not None else created.replace(tzinfo=timezone.utc)


def version_at(store: Store, key: str, as_of: datetime) -> int:
    """The version of ``key`` live at ``as_of``: the newest committed at or before it (``key`` validated).

    Raises:
        TypeError / ValueError: ``as_of`` is not an aware ``datetime``.
        DatasetNotFound / DatasetIncomplete / ManifestCorrupted: as ``read_dataset`` for the live version.
        VersionNotRetained: the version live at ``as_of`` is no longer kept (older versions were vacuumed).
        NotFound: the dataset's first version was committed after ``as_of``.
    """
    as_of = check_as_of(as_of)
    newer = committed_manifest(store, key)
    if committed_at(newer) <= as_of:
        return newer.version
    for number in range(newer.version - 1, 0, -1):
        copy = read_version_copy(store, key, number)
        if copy is None or copy.version != number:
            raise VersionNotRetained(
                f"dataset {key!r} as of {as_of.isoformat()}: the version live then (version {number} or older) "
                f"is no longer retained; the oldest retained, version {newer.version}, was committed at "
                f"{newer.created_at_utc}"
            )
        if committed_at(copy) <= as_of:
            return number
        newer = copy
    raise NotFound(
        f"dataset {key!r} did not exist as of {as_of.isoformat()}: its first version was committed at "
        f"{newer.created_at_utc}"
    )


def resolve_version(store: Store, key: str, version: int | None, as_of: datetime | None) -> int | None:
    """``version``, or the version live at ``as_of`` when that is given (``key`` validated).

    Raises:
        ValueError: both ``version`` and ``as_of`` are given; or as :func:`version_at`.
    """
    if as_of is None:
        return version
    if version is not None:
        raise ValueError(f"pass version ({version}) or as_of ({as_of!r}), not both: each names the version to read")
    return version_at(store, key, as_of)
