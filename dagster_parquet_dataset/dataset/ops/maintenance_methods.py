"""The facade's maintenance methods (``vacuum``, ``sync_delta_log``), mixed into
:class:`~dagster_parquet_dataset.dataset.ParquetDatasetStore`: like every facade method, each
validates its arguments and delegates to its operation module. Kept here so ``store.py`` stays
under the 700-line limit; it does not import the facade."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

from ...storage.base import validate_key
from .._dataset_options import UNSET, DatasetOptions
from . import delta_sync
from .vacuum import VacuumResult, vacuum


class MaintenanceMethods:
    """Methods of :class:`ParquetDatasetStore`, whose ``_options`` and ``retain_versions`` they use."""

    _options: DatasetOptions
    retain_versions: int | None

    @staticmethod
    def _key(key: str) -> str:
        return validate_key(key, what="dataset key")

    def vacuum(
        self,
        key: str,
        *,
        retain_versions: int | None = UNSET,  # type: ignore[assignment]
        older_than: timedelta | float | None = UNSET,  # type: ignore[assignment]
        grace_period: timedelta | float = timedelta(hours=1),
        dry_run: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> VacuumResult:
        """Delete files no retained version references.

        Drops the versions beyond ``retain_versions`` (and older than ``older_than``; the live version always
        stays), then deletes every file of the dataset no retained version lists, including leftovers of
        failed writes once they are older than ``grace_period`` (docs/datasets.md, "Versions and vacuum").

        Args:
            retain_versions: how many versions stay readable (default: the store's ``retain_versions``;
                ``None``: all).
            older_than: also drop retained versions replaced longer ago than this (a ``timedelta`` or
                seconds; default: the store's ``retain_for``; ``None``: no age limit).
            grace_period: files no version lists are kept until they are this old (a ``timedelta`` or seconds).
            dry_run: report what would be deleted, delete nothing.
            progress: called with ``(files deleted, files to delete)`` as it goes.


        Raises:
            NotFound / CapabilityNotSupported: the dataset has no manifest / the store cannot list or delete.
            ValueError / TypeError: ``retain_versions`` is not a positive int (or ``None``), or a bad key.
        """
        return vacuum(
            self._options,
            self._key(key),
            retain_versions=retain_versions,
            older_than=older_than,
            grace_period=grace_period,
            progress=progress,
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
        return delta_sync.sync_delta_log(self._options, self._key(key))

    def sync_asset_delta_log(
        self, folder: str, *, columns: Sequence[str] | None = None, partitions: Sequence[str] | None = None
    ) -> int:
        """Bring the one Delta table over the partition datasets under ``folder`` (a partitioned asset's
        folder: ``<folder>/_delta_log/``) up to their live manifests; return its Delta version now live
        (``-1``: no table, as no partition dataset exists yet).

        The table lists every partition dataset's live files, paths relative to ``folder``; its partition
        columns are ``columns`` (one per folder level of the partition datasets, a value being its folder
        name percent-decoded), then the datasets' own ``partition_by``. A column the data already holds is
        read from the files instead. A second call changes nothing. Works with ``delta_log`` off too
        (docs/delta.md, "One Delta table per partitioned asset").

        Args:
            folder: the asset's folder; the partition datasets are ``<folder>/<p>`` (``<folder>/<v1>/<v2>``).
            columns: the partition column names; unset: the ones the table was made with.
            partitions: the partition folders (relative to ``folder``) to bring up to date; unset: every
                dataset found under ``folder`` plus every folder the table lists (a deleted one leaves it).

        Raises:
            CapabilityNotSupported: the store cannot put-if-absent or list.
            ValueError: a bad ``folder``, ``columns`` (unset with no table yet, or other than the table's) or
                partition folder; partitions whose column types differ; a column Delta cannot hold.
            CommitConflict: other writers kept winning the table's next version (nothing of this call landed).
            OSError / ManifestCorrupted: the store failed or a manifest is unreadable; the table is as it was.
        """
        return delta_sync.sync_asset_delta_log(self._options, self._key(folder), columns=columns, partitions=partitions)
