"""The owner a write expects a dataset to hold: checked when it begins and by every commit attempt.

A caller that records in the manifest ``metadata`` whose data a dataset holds
(the Dagster IO manager: asset and partition, or step and output) passes the
same entries as ``expect_owner``. The transaction then commits only on top of a
version that records that owner or none at all, so of two writers with
different owners racing to one key, one commits and the other gets
:class:`OwnerMismatch` with nothing committed.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...errors import OwnerMismatch
from ..manifest import DatasetManifest


def check_expect_owner(expect_owner: Mapping[str, str | None] | None) -> dict[str, str | None] | None:
    """``expect_owner`` as a plain dict (``None`` or empty: no owner check).

    Raises:
        TypeError: it is not a mapping of string keys to strings or ``None``.
    """
    if expect_owner is None:
        return None
    if not isinstance(expect_owner, Mapping):
        raise TypeError(f"expect_owner must be a mapping of metadata keys to values, got {type(expect_owner).__name__}")
    for k, v in expect_owner.items():
        if not isinstance(k, str) or not (v is None or isinstance(v, str)):
            raise TypeError(f"expect_owner maps metadata keys (str) to str or None, got {k!r}: {v!r}")
    return dict(expect_owner) or None


def check_owner(key: str, expect_owner: Mapping[str, str | None] | None, manifest: DatasetManifest | None) -> None:
    """Refuse to commit over ``manifest`` when it records another owner than ``expect_owner``.

    ``expect_owner`` names the metadata keys that say whose data a dataset holds,
    each with the value this write records (``None``: it records none). A
    version recording none of those keys (no dataset, one written before owners
    were recorded, or by someone who records none) is accepted as it is.

    Raises:
        OwnerMismatch: ``manifest`` records any of the keys, with other values.
    """
    if not expect_owner or manifest is None:
        return
    metadata = manifest.metadata or {}
    recorded = {k: metadata[k] for k in expect_owner if metadata.get(k) is not None}
    expected = {k: v for k, v in expect_owner.items() if v is not None}
    if not recorded or recorded == expected:
        return
    raise OwnerMismatch(
        f"dataset {key!r} (version {manifest.version}) records owner {recorded}, not {expected} as this write "
        "expected: nothing was committed, so its data is intact",
        key=key,
        recorded=recorded,
        expected=expected,
    )
