"""Which files a commit's clean-up may delete: never a reserved name, a path outside the dataset, or a file
inside another dataset nested in this one's folder."""

from __future__ import annotations

from collections.abc import Sequence

from ...storage.base import Store
from ..format.layout import MANIFEST_NAME, SUCCESS_NAME, is_reserved


def deletable(relative: str) -> bool:
    """Whether a path from a manifest's ``obsolete`` list may be deleted at all."""
    if not relative or relative.startswith("/") or is_reserved(relative):
        return False
    segments = relative.split("/")
    return all(s not in ("", ".", "..") for s in segments) and segments[-1] not in (MANIFEST_NAME, SUCCESS_NAME)


def outside_nested(store: Store, key: str, paths: Sequence[str]) -> list[str]:
    """``paths`` (relative) minus those inside a folder that holds another dataset's manifest."""
    nested: dict[str, bool] = {}

    def in_nested(relative: str) -> bool:
        segments = relative.split("/")[:-1]
        for depth in range(1, len(segments) + 1):
            folder = "/".join(segments[:depth])
            if folder not in nested:
                nested[folder] = store.exists(f"{key}/{folder}/{MANIFEST_NAME}")
            if nested[folder]:
                return True
        return False

    return [p for p in paths if not in_nested(p)]
