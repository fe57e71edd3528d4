"""Packaged maintenance: ``build_maintenance_jobs`` compacts and vacuums the datasets of assets or a key prefix.

One job per call, with one op that, for every dataset of the selection (each
partition of each asset, found with ``ParquetDatasetStore.list_datasets``
under the key the ``RemoteStoreIOManager`` stores the asset under):

1. compacts it (``compact_dataset``) when compaction is on, then
2. vacuums it (``vacuum``) when vacuum is on,

on a bounded pool of threads. Each dataset's outcome is logged and recorded
as an ``AssetObservation`` of the asset (and partition) whose output the
dataset holds, as its manifest records it, so it shows on the asset page; the
op's output metadata summarises the whole run. A dataset that fails does not
stop the others; the run fails at the end with a ``dagster.Failure`` listing
every failed dataset.

Vacuuming files younger than :data:`SAFETY_FLOOR` (one hour, the CLI's
floor) is refused unless ``allow_under_safety_floor`` is set: a file that
young may belong to a write in progress or to the version a reader is on.
"""

# No ``from __future__ import annotations``: Dagster reads the op's ``config`` annotation as a class.

from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from dagster import (
    AssetKey,
    AssetObservation,
    AssetsDefinition,
    AssetSpec,
    Config,
    Failure,
    JobDefinition,
    MetadataValue,
    OpExecutionContext,
    Out,
    Output,
    ScheduleDefinition,
    SourceAsset,
    job,
    op,
)
from dagster import Nothing as NothingType
from pydantic import Field

from ..dataset import DatasetListing, ParquetDatasetStore
from . import _ownership as _own
from ._handler_base import ASSET_KEY_KEY, PARTITION_KEY_KEY

#: Files younger than this are never vacuumed unless explicitly allowed (the CLI's ``--force`` floor).
SAFETY_FLOOR = timedelta(hours=1)
#: Failed datasets named in the run's failure description (all are in its metadata).
_FAILURES_SHOWN = 20


@dataclass(frozen=True)
class CompactOptions:
    """How the maintenance job compacts (``ParquetDatasetStore.compact_dataset``).

    Attributes:
        target_file_bytes: size the small files of each partition folder are packed up to.
    """

    target_file_bytes: int = 128 * 1024 * 1024


@dataclass(frozen=True)
class VacuumOptions:
    """How the maintenance job vacuums (``ParquetDatasetStore.vacuum``).

    Attributes:
        retain_versions: versions kept readable (the live one included); ``None`` keeps every version
            that ``older_than`` keeps.
        older_than: also drop retained versions older than this; ``None``: age does not drop versions.
        grace_period: files no version lists (leftovers of failed writes) go once older than this.
        allow_under_safety_floor: allow ``older_than`` or ``grace_period`` under :data:`SAFETY_FLOOR`.
    """

    retain_versions: int | None = 1
    older_than: timedelta | None = None
    grace_period: timedelta = SAFETY_FLOOR
    allow_under_safety_floor: bool = False


def _check_vacuum(options: VacuumOptions) -> None:
    """Raises ValueError: a bad ``retain_versions``, or an age under the floor without the override."""
    keep = options.retain_versions
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep <= 0):
        raise ValueError(f"VacuumOptions.retain_versions must be a positive int or None, got {keep!r}")
    for name, age in (("older_than", options.older_than), ("grace_period", options.grace_period)):
        if age is not None and age < SAFETY_FLOOR and not options.allow_under_safety_floor:
            raise ValueError(
                f"vacuum {name}={age} is under the {SAFETY_FLOOR} safety floor: files that young may belong to a "
                "write in progress or a reader's version; set allow_under_safety_floor=True to vacuum them anyway"
            )


def _check_compact(options: CompactOptions) -> None:
    size = options.target_file_bytes
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ValueError(f"CompactOptions.target_file_bytes must be a positive int, got {size!r}")


class MaintenanceConfig(Config):
    """Per-run overrides of a maintenance job's options (unset: what ``build_maintenance_jobs`` was given)."""

    compact: bool | None = Field(default=None, description="Run compaction (default: as built).")
    target_file_bytes: int | None = Field(default=None, description="Compaction target file size in bytes.")
    vacuum: bool | None = Field(default=None, description="Run vacuum (default: as built).")
    retain_versions: int | None = Field(default=None, description="Versions vacuum keeps readable.")
    older_than_hours: float | None = Field(default=None, description="Vacuum also drops versions older than this.")
    grace_period_hours: float | None = Field(default=None, description="Age at which unlisted files are vacuumed.")
    allow_under_safety_floor: bool = Field(
        default=False, description="Allow vacuum ages under the one-hour safety floor."
    )
    dry_run: bool = Field(default=False, description="Only plan: compact and vacuum nothing.")


@dataclass(frozen=True)
class _Plan:
    compact: CompactOptions | None
    vacuum: VacuumOptions | None
    dry_run: bool


def _plan_for(config: MaintenanceConfig, compact: CompactOptions | None, vacuum: VacuumOptions | None) -> _Plan:
    """The built options with the run's overrides applied.

    Raises:
        ValueError: an override is invalid or under the safety floor without its override.
    """
    run_compact = compact if config.compact is None else (compact or CompactOptions()) if config.compact else None
    if run_compact is not None and config.target_file_bytes is not None:
        run_compact = CompactOptions(config.target_file_bytes)
    run_vacuum = vacuum if config.vacuum is None else (vacuum or VacuumOptions()) if config.vacuum else None
    if run_vacuum is not None:
        changes: dict[str, Any] = {}
        if config.retain_versions is not None:
            changes["retain_versions"] = config.retain_versions
        if config.older_than_hours is not None:
            changes["older_than"] = timedelta(hours=config.older_than_hours)
        if config.grace_period_hours is not None:
            changes["grace_period"] = timedelta(hours=config.grace_period_hours)
        if config.allow_under_safety_floor:
            changes["allow_under_safety_floor"] = True
        run_vacuum = replace(run_vacuum, **changes)
        _check_vacuum(run_vacuum)
    if run_compact is not None:
        _check_compact(run_compact)
    return _Plan(run_compact, run_vacuum, config.dry_run)


# ---------------------------------------------------------------------- selection


def _asset_keys(assets: Iterable[Any]) -> list[AssetKey]:
    keys: list[AssetKey] = []
    for item in assets:
        if isinstance(item, AssetsDefinition):
            keys.extend(item.keys if item.is_materializable else [])
        elif isinstance(item, (AssetSpec, SourceAsset)):
            keys.append(item.key)
        elif isinstance(item, (AssetKey, str)) or (
            isinstance(item, Sequence) and all(isinstance(p, str) for p in item)
        ):
            keys.append(AssetKey.from_coercible(item))
        else:
            raise TypeError(
                "build_maintenance_jobs takes assets (AssetsDefinition, AssetSpec, SourceAsset) or asset keys, "
                f"got {type(item).__name__}: {item!r}"
            )
    return list(dict.fromkeys(keys))


@dataclass(frozen=True)
class _Dataset:
    key: str
    asset_key: AssetKey | None
    partition: str | None


def _owner(listing: DatasetListing) -> tuple[AssetKey | None, str | None]:
    record = _own.owner(listing.manifest.metadata if listing.manifest is not None else None)
    if ASSET_KEY_KEY not in record:
        return None, None
    return AssetKey.from_user_string(record[ASSET_KEY_KEY]), record.get(PARTITION_KEY_KEY)


def _select(io: Any, asset_keys: list[AssetKey], prefix: str | None) -> list[_Dataset]:
    """The datasets to maintain, each with the asset and partition its manifest records (if any)."""
    datasets: ParquetDatasetStore = io.datasets
    found: dict[str, _Dataset] = {}
    if prefix is not None:
        base = io.dataset_key_for(prefix) if prefix.strip("/") else ""
        for listing in datasets.list_datasets(base):
            found[listing.key] = _Dataset(listing.key, *_owner(listing))
    for asset_key in asset_keys:
        for listing in datasets.list_datasets(io.dataset_key_for(asset_key)):
            owner, partition = _owner(listing)
            if owner is not None and owner != asset_key:
                continue  # another asset's dataset nested under this one's folder
            found[listing.key] = _Dataset(listing.key, asset_key, partition)
    return [found[k] for k in sorted(found)]


# ---------------------------------------------------------------------- running


@dataclass(frozen=True)
class _Outcome:
    dataset: _Dataset
    metadata: dict[str, Any]
    summary: str
    error: str | None = None


def _maintain(datasets: ParquetDatasetStore, target: _Dataset, plan: _Plan, run_id: str) -> _Outcome:
    md: dict[str, Any] = {"dataset_key": target.key, "maintenance_dry_run": plan.dry_run}
    said: list[str] = []
    try:
        if plan.compact is not None:
            files_before = len(datasets.read_manifest(target.key).parts)
            c = datasets.compact_dataset(
                target.key, target_file_bytes=plan.compact.target_file_bytes, dry_run=plan.dry_run, run_id=run_id
            )
            md.update(
                compaction_files_before=files_before,
                compaction_files_after=files_before - c.files_read + c.files_written,
            )
            md["compaction_bytes_before"] = MetadataValue.text(_size(c.bytes_before))
            if c.bytes_after is not None:
                md["compaction_bytes_after"] = MetadataValue.text(_size(c.bytes_after))
            verb = "would compact" if plan.dry_run else "compacted"
            said.append(
                f"{verb} {c.files_read} of {_files(files_before)} into {c.files_written}"
                if c.files_read
                else f"nothing to compact ({_files(files_before)})"
            )
        if plan.vacuum is not None:
            v = plan.vacuum
            versions_before = len(datasets.history(target.key))
            result = datasets.vacuum(
                target.key,
                retain_versions=v.retain_versions,
                older_than=v.older_than,
                grace_period=v.grace_period,
                dry_run=plan.dry_run,
            )
            dropped = versions_before - len(result.retained_versions)
            md.update(vacuum_files_deleted=len(result.deleted), vacuum_versions_deleted=dropped)
            verb = "would delete" if plan.dry_run else "deleted"
            said.append(f"vacuum {verb} {_files(len(result.deleted))} (versions dropped: {dropped})")
    except Exception as exc:  # noqa: BLE001 - one dataset's failure is reported; the others go on
        md["error"] = MetadataValue.text(f"{type(exc).__name__}: {exc}")
        return _Outcome(target, md, "; ".join(said), f"{type(exc).__name__}: {exc}")
    return _Outcome(target, md, "; ".join(said))


def _files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # unreachable


def _run(
    context: OpExecutionContext,
    io_manager_key: str,
    asset_keys: list[AssetKey],
    prefix: str | None,
    plan: _Plan,
    *,
    max_workers: int,
) -> Iterator[Any]:
    from .io_manager import RemoteStoreIOManager

    io = getattr(context.resources, io_manager_key)
    if not isinstance(io, RemoteStoreIOManager):
        raise Failure(
            f"maintenance needs a RemoteStoreIOManager under resource key {io_manager_key!r}, but it holds a "
            f"{type(io).__name__}; pass io_manager_key= to build_maintenance_jobs"
        )
    targets = _select(io, asset_keys, prefix)
    context.log.info(f"maintaining {len(targets)} dataset(s) on {max_workers} thread(s)")
    failed: list[_Outcome] = []
    rows: list[str] = []
    with ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="pds-maintenance") as pool:
        outcomes = pool.map(lambda t: _maintain(io.datasets, t, plan, context.run_id), targets)
        for outcome in outcomes:  # logged and reported from this thread, as each finishes in order
            t = outcome.dataset
            if outcome.error is None:
                context.log.info(f"{t.key}: {outcome.summary}")
            else:
                failed.append(outcome)
                context.log.error(f"{t.key}: failed: {outcome.error}")
            rows.append(f"| {t.key} | {outcome.summary or '-'} | {outcome.error or 'ok'} |")
            if t.asset_key is not None:
                yield AssetObservation(asset_key=t.asset_key, partition=t.partition, metadata=outcome.metadata)
    summary = {
        "datasets": MetadataValue.int(len(targets)),
        "datasets_failed": MetadataValue.int(len(failed)),
        "report": MetadataValue.md("| dataset | done | outcome |\n|---|---|---|\n" + "\n".join(rows)),
    }
    if failed:
        listed = "\n".join(f"{o.dataset.key}: {o.error}" for o in failed[:_FAILURES_SHOWN])
        more = f"\n... and {len(failed) - _FAILURES_SHOWN} more" if len(failed) > _FAILURES_SHOWN else ""
        raise Failure(
            description=f"maintenance failed for {len(failed)} of {len(targets)} datasets:\n{listed}{more}",
            metadata={**summary, "failed": MetadataValue.json([o.dataset.key for o in failed])},
        )
    yield Output(None, metadata=summary)


def build_maintenance_jobs(
    assets: Iterable[AssetsDefinition | AssetSpec | SourceAsset | AssetKey | str | Sequence[str]] = (),
    *,
    prefix: str | None = None,
    io_manager_key: str = "io_manager",
    compact: CompactOptions | None = CompactOptions(),
    vacuum: VacuumOptions | None = VacuumOptions(),
    cron_schedule: str | None = None,
    execution_timezone: str = "UTC",
    name: str = "dataset_maintenance",
    max_workers: int = 4,
) -> tuple[list[JobDefinition], list[ScheduleDefinition]]:
    """A job (``<name>_job``) that compacts and vacuums the datasets of ``assets`` and/or ``prefix``.

    Returns ``(jobs, schedules)``: one job, and one schedule (``<name>_schedule``,
    stopped until turned on) when ``cron_schedule`` is given. Lists, not a
    ``Definitions``, so they concatenate with a project's own jobs and schedules
    in its single ``Definitions(jobs=[...] + jobs, schedules=[...] + schedules)``
    and take the project's resources, with no ``Definitions.merge``.

    Each run maintains every dataset found when it starts: for each asset, every
    dataset at or under the key the IO manager stores it under (every partition),
    whose manifest records that asset (or records no owner); under ``prefix``
    (a key below the IO manager's own prefix; ``""``: everything), every dataset.
    Per dataset it logs a line and records an ``AssetObservation`` (files before
    and after, bytes, files deleted, versions retained) on the asset and partition
    the manifest records. The run config (:class:`MaintenanceConfig`) overrides
    the options per run, or makes it a ``dry_run``.

    Args:
        assets: assets (each key of a multi-asset) or asset keys.
        prefix: also (or only) every dataset under this key.
        io_manager_key: resource key of the ``RemoteStoreIOManager`` the datasets are stored by.
        compact: compaction options; ``None`` turns compaction off.
        vacuum: vacuum options; ``None`` turns vacuum off.
        cron_schedule: when to run it (e.g. ``"0 3 * * 0"``); ``None``: no schedule.
        execution_timezone: the schedule's time zone.
        name: the job is ``<name>_job``, its op ``<name>``, the schedule ``<name>_schedule``.
        max_workers: datasets maintained at once (threads).

    Raises:
        TypeError: an item of ``assets`` is neither an asset nor an asset key.
        ValueError: nothing selected, both ``compact`` and ``vacuum`` off, a bad option, a vacuum
            age under :data:`SAFETY_FLOOR` without ``allow_under_safety_floor``, or ``max_workers`` < 1.
    """
    asset_keys = _asset_keys(assets)
    if not asset_keys and prefix is None:
        raise ValueError("build_maintenance_jobs needs assets or a prefix to maintain")
    if compact is None and vacuum is None:
        raise ValueError("build_maintenance_jobs: compact and vacuum are both None, so the job would do nothing")
    if compact is not None:
        _check_compact(compact)
    if vacuum is not None:
        _check_vacuum(vacuum)
    if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
        raise ValueError(f"max_workers must be a positive int, got {max_workers!r}")
    selection = ", ".join([k.to_user_string() for k in asset_keys] + ([f"prefix {prefix!r}"] if prefix else []))
    doing = " and ".join(w for w, o in (("compact", compact), ("vacuum", vacuum)) if o is not None)

    @op(
        name=name,
        required_resource_keys={io_manager_key},
        out=Out(NothingType),
        description=f"{doing.capitalize()} the datasets of {selection} (dagster-parquet-dataset).",
    )
    def _maintenance_op(context: OpExecutionContext, config: MaintenanceConfig) -> Iterator[Any]:
        try:
            plan = _plan_for(config, compact, vacuum)
        except ValueError as exc:
            raise Failure(f"maintenance refused its run config, nothing was changed: {exc}") from None
        yield from _run(context, io_manager_key, asset_keys, prefix, plan, max_workers=max_workers)

    @job(name=f"{name}_job", description=f"{doing.capitalize()} the datasets of {selection}.")
    def _maintenance_job() -> None:
        _maintenance_op()

    schedules = []
    if cron_schedule is not None:
        schedules.append(
            ScheduleDefinition(
                name=f"{name}_schedule",
                job=_maintenance_job,
                cron_schedule=cron_schedule,
                execution_timezone=execution_timezone,
                description=f"Scheduled {doing} of {selection}.",
            )
        )
    return [_maintenance_job], schedules
