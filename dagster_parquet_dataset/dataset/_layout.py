"""Names of a dataset's own files under its key (Spec 042 plus this package's extensions)."""

from __future__ import annotations

import re

MANIFEST_NAME = "manifest.json"
SUCCESS_NAME = "_SUCCESS"
CLAIM_NAME = "_claim"
SINGLE_FILE_NAME = "data.parquet"
VERSIONS_DIR = "_versions"
RESERVED_NAMES = (MANIFEST_NAME, SUCCESS_NAME, CLAIM_NAME)

_VERSION_FILE = re.compile(r"(\d{20})\.json")


def version_path(version: int) -> str:
    """Where a retained past version's manifest lives, relative to the dataset key."""
    return f"{VERSIONS_DIR}/{version:020d}.json"


def version_of(relative: str) -> int | None:
    """The version number of a ``_versions/`` copy's relative path, or ``None`` for
    anything else there (a writer's temporary file, a stray upload)."""
    folder, _, name = relative.rpartition("/")
    if folder != VERSIONS_DIR:
        return None
    match = _VERSION_FILE.fullmatch(name)
    return int(match.group(1)) if match else None
