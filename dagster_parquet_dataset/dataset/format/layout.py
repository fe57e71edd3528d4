"""Names of a dataset's own files under its key (Spec 042 plus this package's extensions)."""

from __future__ import annotations

import re

MANIFEST_NAME = "manifest.json"
SUCCESS_NAME = "_SUCCESS"
CLAIM_NAME = "_claim"
SINGLE_FILE_NAME = "data.parquet"
VERSIONS_DIR = "_versions"
#: The Delta log (``delta_log=True``) and the manifests its writers hand over (see ``delta/log_writer.py``).
DELTA_DIRS = ("_delta_log", "_delta_manifests")
SEGMENTS_DIR = "_segments"
#: The Spark layer's staging folders under a dataset key start with this.
STAGING_PREFIX = "_spark_staging-"
RESERVED_NAMES = (MANIFEST_NAME, SUCCESS_NAME, CLAIM_NAME)
#: Folders a dataset keeps for itself under its key (a partitioned asset's folder holds a ``_delta_log`` too).
RESERVED_FOLDERS = (VERSIONS_DIR, SEGMENTS_DIR, *DELTA_DIRS)
#: A store's hidden files beside an object (``LocalStore``'s ``.manifest.json.lock`` and ``.<name>.<hex>.tmp``).
HIDDEN_SUFFIXES = (".lock", ".tmp")
#: Every name the format reserves, as an error message lists them.
RESERVED_DESCRIPTION = (
    f"{MANIFEST_NAME}, {SUCCESS_NAME}, {CLAIM_NAME}, {VERSIONS_DIR}/, {SEGMENTS_DIR}/, "
    + "".join(f"{d}/, " for d in DELTA_DIRS)
    + f"{STAGING_PREFIX}*, hidden lock and temporary files"
)

_VERSION_FILE = re.compile(r"(\d{20})\.json")


def is_reserved_segment(segment: str) -> bool:
    """Whether one segment of a key (a file or folder name) is a name a dataset keeps for its own files:
    the one list of reserved names, used for dataset keys and for Dagster partition keys."""
    hidden = segment.startswith(".") and segment.endswith(HIDDEN_SUFFIXES)
    return segment in RESERVED_NAMES or segment in RESERVED_FOLDERS or segment.startswith(STAGING_PREFIX) or hidden


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


def part_name(index: int, *, txn: str | None = None, kind: str = "") -> str:
    """The one place part file names are built.

    ``part-NNNNN.parquet`` (a Spec name) without ``txn``; with it,
    ``part-NNNNN-<txn>.parquet``, plus ``-<kind>`` for merge (``m``) and
    compaction (``c``) outputs.
    """
    if txn is None:
        return f"part-{index:05d}.parquet"
    return f"part-{index:05d}-{txn}{'-' + kind if kind else ''}.parquet"


def single_name(txn: str | None = None) -> str:
    """A single-file dataset's only part: ``data.parquet`` (Spec name), or ``data-<txn>.parquet``."""
    return SINGLE_FILE_NAME if txn is None else f"data-{txn}.parquet"


def is_spec_name(path: str) -> bool:
    """Whether the file name of ``path`` is a Spec 042 part name (``data.parquet``, ``part-NNNNN.parquet``)."""
    name = path.rpartition("/")[2]
    return name == SINGLE_FILE_NAME or (name.startswith("part-") and name[5:10].isdigit() and name[10:] == ".parquet")


def is_reserved(relative: str) -> bool:
    """Whether ``relative`` (a path relative to a dataset key) names one of the dataset's own files."""
    if relative.split("/", 1)[0] in DELTA_DIRS:
        return True
    return relative in RESERVED_NAMES or relative == VERSIONS_DIR or relative.startswith(VERSIONS_DIR + "/")
