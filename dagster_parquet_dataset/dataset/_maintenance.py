"""The maintenance methods of :class:`ParquetDatasetStore` (``vacuum``, ``sync_delta_log``), kept
apart so the facade stays thin; like every facade method, each validates and delegates."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from ..storage.base import validate_key
from ._ops import delta_sync
from ._ops.vacuum import VacuumResult, vacuum
from ._options import DatasetOptions

_DEFAULT: Any = object()


class MaintenanceMethods:
    """Mixed into :class:`ParquetDatasetStore`, whose ``_options`` and ``retain_versions`` they use."""

    _options: DatasetOptions
    retain_versions: int | None

    def vacuum(
        self,
        key: str,
        *,
        retain_versions: int | None = _DEFAULT,  # type: ignore[assignment]
        older_than: timedelta | float | None = None,
        grace_period: timedelta | float = timedelta(hours=1),
        dry_run: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> VacuumResult:
        """Delete files no retained version references.

        Raises:
            NotFound / CapabilityNotSupported: the dataset has no manifest / the store cannot list or delete.
        """
        keep = self.retain_versions if retain_versions is _DEFAULT else retain_versions
        return vacuum(
            self._options,
            validate_key(key, what="dataset key"),
            keep,
            older_than,
            grace_period,
            progress,
            dry_run=dry_run,
        )

    def sync_delta_log(self, key: str) -> int:
        """Write whatever the Delta log of ``key`` lacks (a dataset written before ``delta_log`` was on,
        or a log left behind by a failed log write), in order; return the Delta version now live, which
        is the dataset's live version. A second call changes nothing. Works with ``delta_log`` off too.

        Raises:
            DatasetNotFound / DatasetIncomplete / ManifestCorrupted: as :meth:`read_manifest`.
            CapabilityNotSupported: the store cannot put-if-absent or list.
            ValueError: a column Delta cannot hold without column mapping (nothing is written).
        """
        return delta_sync.sync_delta_log(self._options, validate_key(key, what="dataset key"))
