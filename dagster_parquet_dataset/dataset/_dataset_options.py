"""The settings every dataset operation takes (instead of the facade itself), and their checks."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from ..errors import CapabilityNotSupported
from ..storage.base import Capability, Store
from .io.encode import PartOptions

#: An option not given (a method's default that means "as this store was configured").
UNSET: Any = object()

if TYPE_CHECKING:
    from .manifest import DatasetManifest

COMPRESSIONS = ("none", "uncompressed", "snappy", "gzip", "brotli", "lz4", "zstd")


@dataclass(frozen=True, kw_only=True)
class DatasetOptions:
    """What :class:`ParquetDatasetStore` was configured with (see its docstring), validated on construction:
    ``compression`` is held lower-case, ``retain_for`` and ``commit_timeout`` as seconds.

    Raises:
        TypeError: ``store`` is not a :class:`Store`, or an option has the wrong type.
        ValueError: an option is out of range or the codec is unknown.
        CapabilityNotSupported: ``delta_log`` on a store that cannot put-if-absent and list.
    """

    store: Store
    compression: str = "zstd"
    row_group_size: int | None = None
    max_rows_per_file: int | None = None
    max_workers: int | None = None
    retain_versions: int | None = None
    #: How long a replaced version stays retained (see :mod:`.commit.retention`), given as a ``timedelta``
    #: or seconds and held as seconds; ``None``: no time limit.
    retain_for: timedelta | float | None = 7 * 24 * 3600.0
    commit_timeout: float = 60.0
    delta_log: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.store, Store):
            raise TypeError(f"store must be a dagster_parquet_dataset Store, got {type(self.store).__name__}")
        # Frozen: the checked (normalised) values are set with object.__setattr__, in the order checked.
        object.__setattr__(self, "compression", check_compression(self.compression))
        for name in ("row_group_size", "max_rows_per_file", "max_workers", "retain_versions"):
            check_positive(name, getattr(self, name))
        object.__setattr__(self, "retain_for", check_retain_for(self.retain_for))
        object.__setattr__(self, "commit_timeout", check_commit_timeout(self.commit_timeout))
        object.__setattr__(self, "delta_log", _check_delta_log(self.store, self.delta_log))

    def after_commit(self, key: str, base: DatasetManifest | None, committed: DatasetManifest) -> None:
        """What every commit does once it landed (``committed`` built on ``base`` as far as it knows):
        with ``delta_log``, write the dataset's Delta log up to it. Never raises an ``Exception``."""
        if self.delta_log:
            from .delta import after_commit  # the log reads manifests: imported when first needed

            after_commit(self.store, key, base, committed)

    @property
    def retain_seconds(self) -> float | None:
        """:attr:`retain_for` as the seconds it is held as once constructed."""
        return cast("float | None", self.retain_for)

    @property
    def retain_period(self) -> timedelta | None:
        """:attr:`retain_for` as a ``timedelta``."""
        seconds = self.retain_seconds
        return None if seconds is None else timedelta(seconds=seconds)

    @property
    def part_options(self) -> PartOptions:
        return PartOptions(self.compression, self.row_group_size)

    def require(self, *capabilities: Capability, action: str) -> None:
        """Raises :class:`CapabilityNotSupported` naming what the store lacks to ``action``."""
        missing = [c.name for c in capabilities if not self.store.supports(c)]
        if missing:
            raise CapabilityNotSupported(f"{self.store!r} cannot {action}: it lacks {', '.join(missing)}")


def check_positive(name: str, value: int | None) -> None:
    """Raises ``TypeError`` (not an int) or ``ValueError`` (not positive); ``None`` passes."""
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int or None, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive number of rows, got {value}")


def check_commit_timeout(value: object) -> float:
    """``value`` as seconds. Raises ``ValueError``: not a finite, non-negative number (NaN, inf, a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"commit_timeout must be a finite, non-negative number of seconds, got {value!r}")
    return float(value)


def check_retain_for(value: object, name: str = "retain_for") -> float | None:
    """``value`` (a ``timedelta`` or seconds) as seconds; ``None`` passes.

    Raises:
        TypeError: neither a ``timedelta``, a number nor ``None``.
        ValueError: negative, NaN or infinite.
    """
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a timedelta, a number of seconds or None, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite, non-negative duration, got {value!r}")
    return float(value)


def check_compression(value: object) -> str:
    """Raises ``ValueError``: an unknown codec."""
    if not isinstance(value, str) or value.lower() not in COMPRESSIONS:
        raise ValueError(f"unknown compression {value!r}; choose one of {', '.join(COMPRESSIONS)}")
    return value.lower()


def check_metadata(metadata: Mapping[str, str] | None) -> dict[str, str] | None:
    """A copy of ``metadata``. Raises ``TypeError``: not a mapping of str to str."""
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a dict of str to str, got {type(metadata).__name__}")
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"metadata must map str to str; entry {k!r}: {v!r} does not")
    return dict(metadata)


def check_run_id(run_id: object) -> None:
    """Raises ``TypeError``: ``run_id`` is neither a str nor ``None``."""
    if run_id is not None and not isinstance(run_id, str):
        raise TypeError(f"run_id must be a str or None, got {type(run_id).__name__}")


def _check_delta_log(store: Store, delta_log: object) -> bool:
    """Raises ``TypeError`` (not a bool) or :class:`CapabilityNotSupported` (the store cannot put-if-absent
    and list, which the Delta log needs)."""
    if not isinstance(delta_log, bool):
        raise TypeError(f"delta_log must be a bool, got {type(delta_log).__name__}")
    if delta_log and not (store.supports(Capability.CONDITIONAL_WRITE) and store.supports(Capability.LIST)):
        raise CapabilityNotSupported(f"{store!r} cannot keep a Delta log: it needs CONDITIONAL_WRITE and LIST")
    return delta_log
