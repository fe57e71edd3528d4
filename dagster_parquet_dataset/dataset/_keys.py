"""Dataset keys against their store: length limits checked before a write, and keys that only hold nested datasets.

A write creates keys the caller never spells out: the dataset key plus the
layer's own names under it (``manifest.json``, ``_versions/...``, parts, the
Spark layer's staging files) and, when partitioned, escaped ``col=value``
folders. These checks compare them with the store's declared limits
(:attr:`Store.max_segment_bytes`, :attr:`Store.max_key_bytes`) first, so a
key the store cannot hold is a ``ValueError`` naming it instead of a failure
halfway through a write.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa

from ..errors import DatasetIncomplete, DatasetNotFound
from ..storage.base import Store
from ._partition import partition_folder

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

_MANIFEST = "manifest.json"


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def check_key_fits(store: Store, key: str) -> None:
    """Check that ``key`` and the dataset's own files under it fit ``store``'s limits.

    Raises:
        ValueError: a segment of ``key`` is longer than the store allows per
            file or folder name, or ``key`` plus the names the dataset keeps under
            it would be longer than the store allows per key; the message names
            the segment or the key, both limits and what to do.
    """
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
    """Check that the partition folder of ``values`` (after escaping) fits ``store``'s limits.

    Raises:
        ValueError: a ``col=value`` folder name is longer than the store allows
            per folder name, or the folder's part paths would be longer than it
            allows per key; the message names the column and the value.
    """
    segment_limit, key_limit = store.max_segment_bytes, store.max_key_bytes
    if segment_limit is None and key_limit is None:
        return
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


def check_write_fits(
    store: Store, key: str, data: pa.Table | pa.RecordBatchReader, partition_by: Sequence[str]
) -> None:
    """Check the keys a write of ``data`` creates against ``store``'s limits, before anything is written.

    Every partition folder of a table is checked here; a stream's partitions
    are only known while it is read, so the write checks each new folder
    before its first part (:func:`check_folder_fits`), and a failure then
    deletes what the write had written.

    Raises:
        ValueError: as :func:`check_key_fits` and :func:`check_folder_fits`.
    """
    check_key_fits(store, key)
    if not partition_by or not isinstance(data, pa.Table) or data.num_rows == 0:
        return
    if store.max_segment_bytes is None and store.max_key_bytes is None:
        return
    columns = list(partition_by)
    distinct = data.select(columns).group_by(columns, use_threads=False).aggregate([])
    for row in distinct.to_pylist():
        check_folder_fits(store, key, partition_by, [row[c] for c in columns])


def missing_dataset_error(key: str, paths: Iterable[str]) -> DatasetIncomplete:
    """The error for reading ``key`` when it has no ``_SUCCESS``, given the store paths under its folder.

    Files of datasets nested below ``key`` (folders with their own
    ``manifest.json``) do not make ``key`` a dataset, as for ``delete_dataset``.

    Returns:
        ``DatasetIncomplete`` if some file under ``key`` belongs to no nested
        dataset (a write of ``key`` did not finish), else ``DatasetNotFound``
        (naming the nested datasets, if any).
    """
    paths = list(paths)
    own_manifest = f"{key}/{_MANIFEST}"
    nested = sorted(p[: -len(_MANIFEST) - 1] for p in paths if p.endswith("/" + _MANIFEST) and p != own_manifest)
    prefixes = tuple(n + "/" for n in nested)
    if any(not p.startswith(prefixes) for p in paths):
        return DatasetIncomplete(f"dataset {key!r} has files but no _SUCCESS: a write did not finish")
    if not nested:
        return DatasetNotFound(f"dataset {key!r} does not exist")
    named = ", ".join(repr(n) for n in nested[:_NAMED]) + (
        f" and {len(nested) - _NAMED} more" if len(nested) > _NAMED else ""
    )
    return DatasetNotFound(
        f"dataset {key!r} does not exist: {key!r} is a folder that only holds the nested datasets {named}; "
        "read one of those"
    )
