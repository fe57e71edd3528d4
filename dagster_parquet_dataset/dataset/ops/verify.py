"""Verify: check every part of a dataset (or a retained version) against its manifest."""

from __future__ import annotations

from collections.abc import Callable

from ...errors import ManifestCorrupted, NotFound
from ...storage.base import Store
from ..format.layout import MANIFEST_NAME
from ..io.verify_parts import VERIFY_THREADS, VerifyReport, manifest_problem, missing_manifest, verify_parts
from .history import read_manifest


def verify_dataset(
    store: Store,
    key: str,
    *,
    version: int | None,
    progress: Callable[[int, int], None] | None,
    threads: int = VERIFY_THREADS,
) -> VerifyReport:
    """See :meth:`ParquetDatasetStore.verify_dataset` (``key`` already validated).

    Raises:
        DatasetNotFound: nothing is stored under ``key``.
        NotFound / VersionNotRetained: ``version`` is not a retained version.
        TypeError / ValueError: ``threads`` is not an int of at least 1.
    """
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise TypeError(f"threads must be an int, got {type(threads).__name__}")
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    try:
        manifest = read_manifest(store, key, version=version)
    except ManifestCorrupted as exc:
        return manifest_problem(key, str(exc))
    except NotFound:
        if version is not None and store.exists(f"{key}/{MANIFEST_NAME}"):
            raise
        return missing_manifest(store, key)
    return verify_parts(store, key, manifest, progress, threads)
