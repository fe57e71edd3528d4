"""Dataset keys for Dagster assets, partitions and op outputs (the published mapping of docs/dagster.md, "Keys").

* asset ``["a", "b"]``                      -> ``a/b``
* single-dimension partition ``p``         -> ``a/b/p``
* multi-dimension partition               -> ``a/b/<v1>/<v2>``, values ordered by sorted dimension name
* op output (no asset key)                -> ``<run_id>/<step_key>/<output_name>``
  (plus ``/<mapping_key>`` for a dynamic output)
* an optional ``prefix`` goes in front.

Every segment taken from Dagster (asset key parts, partition values, step keys,
output names) is escaped with :func:`escape_segment`, so no value can add a
folder level or leave its folder: the result always passes
:func:`~dagster_parquet_dataset.storage.base.validate_key`.

A value that is a name the dataset format keeps for itself (``_versions``,
``_segments``, ``_delta_log``, ...) gets its first character percent-encoded, so partition keys
(user data) can be anything and still never collide with a dataset's own files.

This module is pure: it knows nothing about Dagster contexts, only strings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..dataset.engine import is_reserved_segment
from ..storage.base import validate_key

#: Characters that are percent-encoded wherever they occur in a segment.
#: ``%`` itself comes first so the encoding is reversible (injective).
_ESCAPED_CHARS = ("%", "/", "\\", "\x00")

#: What an empty value becomes. A lone ``%`` cannot come out of the escaping
#: of any other value (every literal ``%`` becomes ``%25``), so the mapping
#: stays injective.
EMPTY_SEGMENT = "%"


def escape_segment(value: str) -> str:
    """Make ``value`` safe to use as exactly one folder name of a dataset key.

    Percent-encodes ``%``, ``/``, ``\\`` and NUL anywhere, a segment that is
    exactly ``.`` or ``..`` (as ``%2E`` / ``%2E%2E``), the empty string
    (as a lone ``%``), and the first character of a name the dataset format
    reserves (``_versions`` -> ``%5Fversions``, ``_segments``, ``_delta_log``, ``manifest.json``,
    ``_SUCCESS``, ``_claim``, ``_spark_staging-*``, hidden ``.*.lock`` /
    ``.*.tmp``; see :func:`~dagster_parquet_dataset.dataset.engine.is_reserved_segment`). Everything else (dates, ``|``, ``:``, spaces, unicode)
    is kept as is, so ordinary partition keys stay readable. Distinct values
    always give distinct segments (see :func:`unescape_segment`).

    Raises:
        TypeError: ``value`` is not a ``str``.
    """
    if not isinstance(value, str):
        raise TypeError(f"a dataset key segment must be a str, got {type(value).__name__}: {value!r}")
    if value == "":
        return EMPTY_SEGMENT
    if value in (".", ".."):
        return "%2E" * len(value)
    out = value
    for ch in _ESCAPED_CHARS:
        if ch in out:
            out = out.replace(ch, f"%{ord(ch):02X}")
    if is_reserved_segment(out):
        # A name a dataset keeps for its own files (``_versions``, ``_segments``, ``manifest.json``, ...):
        # its first character is percent-encoded, so user data never lands on the format's names. Such
        # values were refused before, so no key that worked changes.
        out = f"%{ord(out[0]):02X}{out[1:]}"
    return out


def unescape_segment(segment: str) -> str:
    """Invert :func:`escape_segment`.

    Raises:
        ValueError: ``segment`` is not something :func:`escape_segment` produces.
    """
    if segment == EMPTY_SEGMENT:
        return ""
    if segment in ("%2E", "%2E%2E"):
        return "." * (len(segment) // 3)
    out: list[str] = []
    i = 0
    hex_digits = set("0123456789ABCDEF")
    while i < len(segment):
        ch = segment[i]
        if ch == "%":
            code = segment[i + 1 : i + 3]
            if len(code) != 2 or not set(code) <= hex_digits:
                raise ValueError(f"{segment!r} is not an escaped dataset key segment (bad escape at {i})")
            out.append(chr(int(code, 16)))
            i += 3
        else:
            out.append(ch)
            i += 1
    value = "".join(out)
    if escape_segment(value) != segment:
        raise ValueError(f"{segment!r} is not an escaped dataset key segment (bad escape: not how it is escaped)")
    return value


def normalize_prefix(prefix: str) -> str:
    """Return ``prefix`` without leading/trailing ``/``; ``""`` means no prefix.

    The prefix is configuration, not data, so it may hold several folder
    levels (``"warehouse/prod"``), but it must be a safe relative key.

    Raises:
        TypeError: ``prefix`` is not a ``str``.
        ValueError: the prefix has an empty, ``.`` or ``..`` segment, a NUL or a backslash.
    """
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
    stripped = prefix.strip("/")
    if stripped:
        validate_key(stripped, what="RemoteStoreIOManager prefix")
    return stripped


def _join(prefix: str, segments: Sequence[str]) -> str:
    escaped = [escape_segment(s) for s in segments]
    key = "/".join([prefix, *escaped] if prefix else escaped)
    # Defence in depth: escaping guarantees this, and the dataset layer checks again.
    return validate_key(key, what="dataset key")


def asset_dataset_key(prefix: str, asset_path: Sequence[str], partition_values: Sequence[str] = ()) -> str:
    """Dataset key of an asset (``a/b``) or one of its partitions (``a/b/p``, ``a/b/v1/v2``).

    Args:
        prefix: a prefix already checked by :func:`normalize_prefix` (``""`` for none).
        asset_path: the asset key's path, e.g. ``["a", "b"]``.
        partition_values: ``[]`` when unpartitioned, ``[p]`` for one dimension, the
            values in sorted-dimension-name order for several (see :func:`partition_values`).

    Raises:
        ValueError: ``asset_path`` is empty.
    """
    if not asset_path:
        raise ValueError("an asset key must have at least one part")
    return _join(prefix, [*asset_path, *partition_values])


def partition_values(partition_key: str, keys_by_dimension: Mapping[str, str] | None = None) -> list[str]:
    """Folder values for one partition key.

    A single-dimension key is its own value. A multi-dimension key gives one
    value per dimension, ordered by sorted dimension name (docs/dagster.md), no
    matter the order the partitions definition lists them in.
    """
    if keys_by_dimension is None:
        return [partition_key]
    return [keys_by_dimension[name] for name in sorted(keys_by_dimension)]


def op_output_dataset_key(prefix: str, identifier: Sequence[str]) -> str:
    """Dataset key of an op output: ``<run_id>/<step_key>/<output_name>[/<mapping_key>]``.

    ``identifier`` is what Dagster's ``OutputContext.get_identifier()`` returns
    (which already uses the parent run's id on re-execution).

    Raises:
        ValueError: ``identifier`` is empty.
    """
    if not identifier:
        raise ValueError("an op output identifier must not be empty")
    return _join(prefix, list(identifier))
