"""Dataset keys against their store: length limits, keys that overlap other datasets, nested datasets.

A write creates keys the caller never spells out: the dataset key plus the
layer's own names under it (``manifest.json``, ``_versions/...``, parts, the
Spark layer's staging files) and, when partitioned, escaped ``col=value``
folders. These checks compare them with the store's declared limits
(:attr:`Store.max_segment_bytes`, :attr:`Store.max_key_bytes`) first, so a
key the store cannot hold is a ``ValueError`` naming it instead of a failure
halfway through a write.

Datasets may nest (``a`` and ``a/b``), but never inside each other's files: a
key may not use a name a dataset keeps for its own files (``manifest.json``,
``_SUCCESS``, ``_claim``, ``_versions``, ``_segments``, ``_spark_staging-*``, a store's hidden
lock and temporary files), may not be (or lie inside) a partition folder or a
listed file of a dataset above it, and a partitioned write may not put parts
into a folder that already holds another dataset. Otherwise one dataset's
write, delete or vacuum would overwrite or delete the other's committed files.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa

from ...errors import DatasetIncomplete, DatasetNotFound, ManifestCorrupted, NotFound
from ...storage.base import Store
from ..format.layout import (
    CLAIM_NAME,
    DELTA_DIRS,
    HIDDEN_SUFFIXES,
    MANIFEST_NAME,
    RESERVED_DESCRIPTION,
    is_reserved_segment,
)
from ..format.partition import partition_folder
from ..manifest import DatasetManifest
from .parallel import parallel_map, store_threads

#: The most bytes the dataset layer appends to a dataset key for its own files, with
#: the ``/`` before them: ``_versions/<20 digits>.json``, ``part-NNNNN-<token>-m.parquet``,
#: the Spark layer's ``_spark_staging-<token>/part-NNNNN-NNNNN-<token>-t<task id>.parquet``
#: (about 80), and the paths Spark's own writer uses in that staging folder
#: (``_temporary/0/_temporary/attempt_<job>_<task>/part-<uuid>-c000.<codec>.parquet``, about 180).
OWN_NAMES_BYTES = 256

#: The most bytes a part's file name adds below a partition folder (``/part-NNNNN-<token>.parquet``).
PART_NAME_BYTES = 48

#: How many nested datasets an error message names at most.
_NAMED = 5

_MANIFEST = MANIFEST_NAME


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def check_key_fits(store: Store, key: str) -> None:
    """Check that ``key`` fits ``store``'s limits and overlaps no other dataset's files.

    Costs no I/O for the limits and reserved names; then one ``exists`` of
    ``{ancestor}/manifest.json`` per folder above ``key`` (in parallel, or in turn
    on a store whose reads are local), and a read of the manifests that exist, to
    learn their partition columns and files.

    Raises:
        ValueError: a segment of ``key`` is longer than the store allows per
            file or folder name, or ``key`` plus the names the dataset keeps under
            it would be longer than the store allows per key (the message names
            the segment or the key, both limits and what to do); a segment of
            ``key`` is a name datasets keep for their own files; or ``key`` is,
            or lies inside, a partition folder or a listed file of a dataset
            above it (the message names that dataset).
    """
    _check_limits(store, key)
    _check_reserved(key)
    _check_ancestors(store, key)


def _check_reserved(key: str) -> None:
    segments = key.split("/")
    for i, segment in enumerate(segments):
        if is_reserved_segment(segment):
            owner = "/".join(segments[:i])
            where = f"inside the folder of {owner!r}, " if owner else ""
            raise ValueError(
                f"dataset key {_short(key)} uses the name {segment!r}, {where}which a dataset keeps for its own "
                f"files ({RESERVED_DESCRIPTION}); a dataset there would overwrite or delete them. "
                "Use another name for that segment"
            )


def _check_ancestors(store: Store, key: str) -> None:
    segments = key.split("/")
    ancestors = ["/".join(segments[:i]) for i in range(1, len(segments))]
    found = parallel_map(store.exists, [f"{a}/{MANIFEST_NAME}" for a in ancestors], store_threads(store))
    for ancestor, exists in zip(ancestors, found, strict=True):
        if not exists:
            continue
        reason = _overlap(store, ancestor, key[len(ancestor) + 1 :])
        if reason is not None:
            raise ValueError(
                f"dataset key {_short(key)} lies inside the dataset {ancestor!r}: {reason}, so a dataset there "
                f"would overwrite or delete the files of {ancestor!r}. Use a key outside its partition folders "
                "and files (a plain sub-folder name without '=' is fine)"
            )


def _column_prefix(column: str) -> str:
    """How a partition folder of ``column`` starts (``col=``, the column name escaped as in the folder)."""
    return partition_folder((column,), (None,)).partition("=")[0] + "="


def _overlap(store: Store, ancestor: str, relative: str) -> str | None:
    """Why the folder ``relative`` below the dataset ``ancestor`` holds files of it, or ``None``."""
    first = relative.split("/", 1)[0]
    try:
        manifest = DatasetManifest.from_json(store.read_bytes(f"{ancestor}/{MANIFEST_NAME}"), store, ancestor)
    except NotFound:
        return None  # deleted meanwhile: no dataset there any more
    except ManifestCorrupted:
        # Its partition columns are unknown: any folder named like a partition folder may be one.
        if "=" in first:
            return f"{first!r} is named like a partition folder and {ancestor!r}'s manifest cannot be read"
        return None
    for column in manifest.partition_by:
        if first.startswith(_column_prefix(column)):
            return f"{first!r} is one of its partition folders (it is partitioned by {list(manifest.partition_by)})"
    inside = relative + "/"
    for part in manifest.parts:
        if part == relative or part.startswith(inside) or relative.startswith(part + "/"):
            return f"its manifest lists the file {part!r} there"
    return None


def _check_limits(store: Store, key: str) -> None:
    segment_limit = store.max_segment_bytes
    if segment_limit is not None:
        for segment in key.split("/"):
            size = len(segment.encode())
            if size > segment_limit:
                raise ValueError(
                    f"dataset key {_short(key)}: its segment {_short(segment)} is {size} bytes, but {store!r} "
                    f"allows at most {segment_limit} bytes per file or folder name; use a shorter key"
                )
    key_limit = store.max_key_bytes
    if key_limit is not None:
        size = len(key.encode())
        if size + OWN_NAMES_BYTES > key_limit:
            raise ValueError(
                f"dataset key {_short(key)} is {size} bytes, but {store!r} allows at most {key_limit} bytes per "
                f"key and a dataset needs up to {OWN_NAMES_BYTES} more for its own files under its key; "
                f"use a key of at most {key_limit - OWN_NAMES_BYTES} bytes (or a shorter store prefix)"
            )


def check_folder_fits(store: Store, key: str, partition_by: Sequence[str], values: Sequence[object]) -> None:
    """Check that the partition folder of ``values`` (after escaping) fits ``store``'s limits and holds
    no other dataset.

    Costs one ``exists`` per folder level (``col=value``, then ``col=value/col2=value2``, ...), in parallel
    (in turn on a store whose reads are local).

    Raises:
        ValueError: a ``col=value`` folder name is longer than the store allows
            per folder name, or the folder's part paths would be longer than it
            allows per key (the message names the column and the value); or the
            folder, or one above it, already holds another dataset (a
            ``manifest.json``), whose files the write would overwrite (the
            message names that dataset).
    """
    segments = _folder_limits(store, key, partition_by, values)
    _check_no_dataset_in(store, key, _levels([segments]))


def _levels(folders: Iterable[Sequence[str]]) -> list[str]:
    """Each folder level of partition folders given as their segments, once, in order."""
    seen: dict[str, None] = {}
    for segments in folders:
        for i in range(1, len(segments) + 1):
            seen.setdefault("/".join(segments[:i]), None)
    return list(seen)


def _check_no_dataset_in(store: Store, key: str, folders: Sequence[str]) -> None:
    found = parallel_map(store.exists, [f"{key}/{folder}/{MANIFEST_NAME}" for folder in folders], store_threads(store))
    for folder, exists in zip(folders, found, strict=True):
        if exists:
            raise ValueError(
                f"dataset {_short(key)}: its partition folder {folder!r} already holds the dataset "
                f"{key + '/' + folder!r}; writing its parts there would overwrite or delete that dataset's files. "
                f"Delete or move {key + '/' + folder!r} first, or partition {key!r} by other columns"
            )


def _folder_limits(store: Store, key: str, partition_by: Sequence[str], values: Sequence[object]) -> list[str]:
    """The escaped segments of the partition folder of ``values``, checked against ``store``'s limits.

    Raises:
        ValueError: as :func:`check_folder_fits`, for the limits.
    """
    segment_limit, key_limit = store.max_segment_bytes, store.max_key_bytes
    segments = partition_folder(partition_by, values).split("/")
    for col, value, segment in zip(partition_by, values, segments, strict=True):
        size = len(segment.encode())
        if segment_limit is not None and size > segment_limit:
            raise ValueError(
                f"dataset {_short(key)}: the partition folder for column {col!r} = {_short(str(value))} is "
                f"{size} bytes once escaped ({_short(segment)}), but {store!r} allows at most {segment_limit} "
                f"bytes per folder name; shorten the values of {col!r} or partition by another column"
            )
    if key_limit is not None:
        size = len(key.encode()) + 1 + len("/".join(segments).encode()) + PART_NAME_BYTES
        if size > key_limit:
            described = ", ".join(f"{c!r} = {_short(str(v), 30)}" for c, v in zip(partition_by, values, strict=True))
            raise ValueError(
                f"dataset {_short(key)}: the part paths for the partition {described} would be up to {size} "
                f"bytes, but {store!r} allows at most {key_limit} bytes per key; use a shorter dataset key or "
                "shorter partition values"
            )
    return segments


def check_write_fits(
    store: Store, key: str, data: pa.Table | pa.RecordBatchReader, partition_by: Sequence[str]
) -> None:
    """Check the partition folders a write of ``data`` creates, before anything is written.

    The key itself is the caller's to check with :func:`check_key_fits` (every
    operation does, once, at its start: checking it here too cost every write
    a second round of ancestor requests). Every partition folder of a table is
    checked here; a stream's partitions are only known while it is read, so
    the write checks each new folder before its first part
    (:func:`check_folder_fits`), and a failure then deletes what the write had
    written.

    Raises:
        ValueError: as :func:`check_folder_fits`.
    """
    if not partition_by or not isinstance(data, pa.Table) or data.num_rows == 0:
        return
    columns = list(partition_by)
    distinct = data.select(columns).group_by(columns, use_threads=False).aggregate([])
    folders = [_folder_limits(store, key, partition_by, [row[c] for c in columns]) for row in distinct.to_pylist()]
    _check_no_dataset_in(store, key, _levels(folders))


def _is_hidden_marker(path: str) -> bool:
    name = path.rpartition("/")[2]
    return name.startswith(".") and name.endswith(HIDDEN_SUFFIXES)


def missing_dataset_error(key: str, paths: Iterable[str]) -> DatasetIncomplete:
    """The error for reading ``key`` when it has no ``_SUCCESS``, given the store paths under its folder.

    Files of datasets nested below ``key`` (folders with their own
    ``manifest.json``) do not make ``key`` a dataset, as for ``delete_dataset``.

    Returns:
        ``DatasetIncomplete`` if some file under ``key`` belongs to no nested
        dataset (a write of ``key`` did not finish), else ``DatasetNotFound``
        (naming the nested datasets, if any).
    """
    # A ``_claim`` or a lock file alone is a write that stopped before writing any data: nothing to read.
    # Nor does a partitioned asset's Delta table over its nested partition datasets (``<key>/_delta_log/``).
    delta = tuple(f"{key}/{d}/" for d in DELTA_DIRS)
    paths = [p for p in paths if p != f"{key}/{CLAIM_NAME}" and not _is_hidden_marker(p) and not p.startswith(delta)]
    own_manifest = f"{key}/{_MANIFEST}"
    nested = sorted(p[: -len(_MANIFEST) - 1] for p in paths if p.endswith("/" + _MANIFEST) and p != own_manifest)
    prefixes = tuple(n + "/" for n in nested)
    if any(not p.startswith(prefixes) for p in paths):
        return DatasetIncomplete(f"dataset {key!r} has files but no _SUCCESS: a write did not finish", key=key)
    if not nested:
        return DatasetNotFound(f"dataset {key!r} does not exist", key=key)
    named = ", ".join(repr(n) for n in nested[:_NAMED]) + (
        f" and {len(nested) - _NAMED} more" if len(nested) > _NAMED else ""
    )
    return DatasetNotFound(
        f"dataset {key!r} does not exist: {key!r} is a folder that only holds the nested datasets {named}; "
        "read one of those",
        key=key,
    )
