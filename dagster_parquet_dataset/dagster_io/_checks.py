"""Dagster asset checks computed from a dataset's manifest: ``build_dataset_checks``.

Three checks per asset, run by Dagster after each materialization (and on
their own, from the UI or a checks-only run) and shown on the asset page:

``dataset_integrity``
    ``ParquetDatasetStore.verify_dataset`` of the live version: every part the
    manifest lists exists with the manifest's size, and its Parquet footer holds
    the manifest's row count, schema and statistics. Every problem is listed.
    Severity ERROR.
``schema_unchanged``
    The columns and their types equal the asset's declared
    ``dagster/column_schema`` when it has one, otherwise those of the previous
    version: the previous retained version (``ParquetDatasetStore.history``),
    or, when ``retain_versions`` keeps only the newest, the previous
    materialization's ``dagster/column_schema`` recorded in the Dagster
    instance. The first version passes. Severity WARN by default.
``row_count_change``
    The row count changed from the previous version (found as above) by a
    ratio within ``[row_count_min_ratio, row_count_max_ratio]``. The first
    version passes, and so does a previous version with no rows. Severity WARN
    by default.

A partitioned asset's checks are partitioned like the asset: they check the
dataset of the run's partition (every partition of a range); Dagster runs
partitioned checks only in a partitioned run.

The checks read manifests and Parquet footers only, never data pages, and
need no resource but the asset's ``RemoteStoreIOManager``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    AssetRecordsFilter,
    AssetsDefinition,
    AssetSpec,
    MetadataValue,
    PartitionsDefinition,
    PreviewWarning,
    SourceAsset,
    multi_asset_check,
)

from ..dataset import DatasetManifest, ParquetDatasetStore
from ..errors import DatasetNotFound, ManifestCorrupted, NotFound
from ._presentation import declared_column_schema
from ._wording import plural, version_metadata, version_of

#: Names of the checks, as Dagster shows them.
INTEGRITY = "dataset_integrity"
SCHEMA = "schema_unchanged"
ROW_COUNT = "row_count_change"
CHECK_NAMES = (INTEGRITY, SCHEMA, ROW_COUNT)

#: Past materializations looked at to find the previous version's schema and row count.
_MATERIALIZATIONS_SCANNED = 20
#: Problems listed in a check's description (all are counted in its metadata).
_PROBLEMS_SHOWN = 20

_Columns = list[tuple[str, str]]


@dataclass(frozen=True)
class _Target:
    """One asset the checks cover."""

    key: AssetKey
    partitions_def: PartitionsDefinition | None
    metadata: dict[str, Any]
    io_manager_key: str


@dataclass(frozen=True)
class _Previous:
    """The version a new one is compared with."""

    source: str
    version: int | None
    columns: _Columns | None
    row_count: int | None


@dataclass(frozen=True)
class _Outcome:
    passed: bool
    description: str
    metadata: dict[str, Any]


def _targets(assets: Iterable[Any], io_manager_key: str | None) -> list[_Target]:
    out: list[_Target] = []
    for item in assets:
        if isinstance(item, AssetsDefinition):
            if not item.is_materializable:
                continue
            for spec in item.specs:
                key = io_manager_key or item.get_io_manager_key_for_asset_key(spec.key)
                out.append(_Target(spec.key, spec.partitions_def, dict(spec.metadata or {}), key))
        elif isinstance(item, AssetSpec):
            out.append(
                _Target(item.key, item.partitions_def, dict(item.metadata or {}), io_manager_key or "io_manager")
            )
        elif isinstance(item, SourceAsset):
            key = io_manager_key or item.get_io_manager_key()
            out.append(_Target(item.key, item.partitions_def, dict(item.metadata or {}), key))
        elif isinstance(item, (AssetKey, str)) or (
            isinstance(item, Sequence) and all(isinstance(p, str) for p in item)
        ):
            out.append(_Target(AssetKey.from_coercible(item), None, {}, io_manager_key or "io_manager"))
        else:
            raise TypeError(
                "build_dataset_checks takes assets (AssetsDefinition, AssetSpec, SourceAsset) or asset keys, "
                f"got {type(item).__name__}: {item!r}"
            )
    keys = [t.key for t in out]
    repeated = sorted({k.to_user_string() for k in keys if keys.count(k) > 1})
    if repeated:
        raise ValueError(f"build_dataset_checks got the asset(s) {repeated} more than once; pass each once")
    return out


def _check_ratio(name: str, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a positive number or None, got {value!r}")


def build_dataset_checks(
    assets: Iterable[AssetsDefinition | AssetSpec | SourceAsset | AssetKey | str | Sequence[str]],
    *,
    io_manager_key: str | None = None,
    schema_severity: AssetCheckSeverity = AssetCheckSeverity.WARN,
    row_count_severity: AssetCheckSeverity = AssetCheckSeverity.WARN,
    row_count_min_ratio: float | None = 0.5,
    row_count_max_ratio: float | None = 10.0,
    blocking: bool = False,
) -> list[AssetChecksDefinition]:
    """Asset checks ``dataset_integrity``, ``schema_unchanged`` and ``row_count_change`` for each asset.

    Returns ``AssetChecksDefinition`` objects (pass them to
    ``Definitions(asset_checks=...)``): the assets that share an IO manager key
    and a partitions definition are checked in one step, which runs after the
    assets of the run it checks; each check can also be run alone.

    Args:
        assets: the assets stored by a ``RemoteStoreIOManager`` (each key of a
            multi-asset is checked; observable source assets are skipped), or
            asset keys of unpartitioned assets.
        io_manager_key: the resource key of the ``RemoteStoreIOManager``; ``None``
            uses each asset's own ``io_manager_key`` (``"io_manager"`` unless set).
        schema_severity: severity of a failed ``schema_unchanged``.
        row_count_severity: severity of a failed ``row_count_change``.
        row_count_min_ratio: fail when ``rows / previous rows`` is below this
            (default 0.5: the rows shrank by more than half); ``None``: no lower bound.
        row_count_max_ratio: fail when the ratio is above this (default 10:
            more than tenfold growth); ``None``: no upper bound.
        blocking: make ``dataset_integrity`` blocking (a failure stops downstream
            assets of the same run). Off by default.

    Raises:
        TypeError: an item of ``assets`` is neither an asset nor an asset key.
        ValueError: an asset is given twice, a ratio is not positive, or
            ``row_count_min_ratio`` exceeds ``row_count_max_ratio``.
    """
    _check_ratio("row_count_min_ratio", row_count_min_ratio)
    _check_ratio("row_count_max_ratio", row_count_max_ratio)
    if (
        row_count_min_ratio is not None
        and row_count_max_ratio is not None
        and row_count_min_ratio > row_count_max_ratio
    ):
        raise ValueError(
            f"row_count_min_ratio ({row_count_min_ratio}) must not exceed row_count_max_ratio ({row_count_max_ratio})"
        )
    for name, severity in (("schema_severity", schema_severity), ("row_count_severity", row_count_severity)):
        if not isinstance(severity, AssetCheckSeverity):
            raise TypeError(f"{name} must be an AssetCheckSeverity, got {severity!r}")
    settings = _Settings(schema_severity, row_count_severity, row_count_min_ratio, row_count_max_ratio)
    groups: list[list[_Target]] = []
    for target in _targets(assets, io_manager_key):
        for group in groups:
            first = group[0]
            if first.io_manager_key == target.io_manager_key and first.partitions_def == target.partitions_def:
                group.append(target)
                break
        else:
            groups.append([target])
    return [_checks_for(group, settings, blocking) for group in groups]


@dataclass(frozen=True)
class _Settings:
    schema_severity: AssetCheckSeverity
    row_count_severity: AssetCheckSeverity
    min_ratio: float | None
    max_ratio: float | None


def _describe_ratios(settings: _Settings) -> str:
    bounds = []
    if settings.min_ratio is not None:
        bounds.append(f"at least {settings.min_ratio:g}x")
    if settings.max_ratio is not None:
        bounds.append(f"at most {settings.max_ratio:g}x")
    return " and ".join(bounds) or "any ratio"


def _specs(target: _Target, settings: _Settings, blocking: bool) -> list[AssetCheckSpec]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreviewWarning)  # partitioned check specs are a preview feature
        return [
            AssetCheckSpec(
                INTEGRITY,
                asset=target.key,
                description=(
                    "Every part in the manifest exists with its recorded size; its footer holds the recorded "
                    "row count, schema and statistics."
                ),
                blocking=blocking,
                partitions_def=target.partitions_def,
            ),
            AssetCheckSpec(
                SCHEMA,
                asset=target.key,
                description=(
                    "Columns and types equal the declared dagster/column_schema, or else the previous version's."
                ),
                partitions_def=target.partitions_def,
            ),
            AssetCheckSpec(
                ROW_COUNT,
                asset=target.key,
                description=f"Rows compared with the previous version: {_describe_ratios(settings)}.",
                partitions_def=target.partitions_def,
            ),
        ]


def _checks_for(group: list[_Target], settings: _Settings, blocking: bool) -> AssetChecksDefinition:
    """One step checking every asset of ``group`` (same IO manager key and partitions) that the run selects."""
    first = group[0]
    name = first.key.to_python_identifier() + (f"_and_{len(group) - 1}_more" if len(group) > 1 else "")
    names = ", ".join(t.key.to_user_string() for t in group)

    @multi_asset_check(
        name=f"{name}_dataset_checks",
        specs=[spec for target in group for spec in _specs(target, settings, blocking)],
        can_subset=True,
        required_resource_keys={first.io_manager_key},
        description=f"Manifest checks of {names} (dagster-parquet-dataset).",
    )
    def _dataset_checks(context):  # type: ignore[no-untyped-def]  # Dagster reads the annotation; leave it blank
        selected = {k.asset_key for k in context.selected_asset_check_keys}
        for target in group:
            if target.key in selected:
                yield from _run(context, target, settings)

    return _dataset_checks


# ---------------------------------------------------------------------- running


def _io_manager(context: AssetCheckExecutionContext, target: _Target) -> Any:
    from .io_manager import RemoteStoreIOManager

    io = getattr(context.resources, target.io_manager_key)
    if not isinstance(io, RemoteStoreIOManager):
        raise TypeError(
            f"the dataset checks of {target.key.to_user_string()} need a RemoteStoreIOManager under resource key "
            f"{target.io_manager_key!r}, but it holds a {type(io).__name__}; pass io_manager_key= to "
            "build_dataset_checks"
        )
    return io


def _partition_keys(context: AssetCheckExecutionContext, target: _Target) -> list[str | None]:
    if target.partitions_def is None:
        return [None]
    if context.has_partition_key:
        return [context.partition_key]
    if context.has_partition_key_range:
        return list(context.partition_keys)
    raise ValueError(
        f"the dataset checks of the partitioned asset {target.key.to_user_string()} ran without a partition; "
        "run them for one partition (or a range), e.g. with the run tag dagster/partition"
    )


def _run(context: AssetCheckExecutionContext, target: _Target, settings: _Settings) -> Iterator[AssetCheckResult]:
    selected = {k.name for k in context.selected_asset_check_keys if k.asset_key == target.key}
    io = _io_manager(context, target)
    datasets: ParquetDatasetStore = io.datasets
    partitions = _partition_keys(context, target)
    outcomes: dict[str, list[tuple[str | None, _Outcome]]] = {name: [] for name in CHECK_NAMES}
    for partition in partitions:
        key = io.dataset_key_for(target.key, partition, target.partitions_def)
        for name, outcome in _evaluate(
            context, target, settings, datasets, key, partition=partition, selected=selected
        ).items():
            outcomes[name].append((partition, outcome))
    severities = {
        INTEGRITY: AssetCheckSeverity.ERROR,
        SCHEMA: settings.schema_severity,
        ROW_COUNT: settings.row_count_severity,
    }
    for name in CHECK_NAMES:
        if name not in selected:
            continue
        passed, description, metadata = _combine(outcomes[name])
        yield AssetCheckResult(
            asset_key=target.key,
            check_name=name,
            passed=passed,
            severity=severities[name],
            description=description,
            metadata=metadata,
        )


def _combine(results: list[tuple[str | None, _Outcome]]) -> tuple[bool, str, dict[str, Any]]:
    if len(results) == 1:
        _partition, outcome = results[0]
        return outcome.passed, outcome.description, outcome.metadata
    failed = [(p, o) for p, o in results if not o.passed]
    lines = [f"{p}: {o.description}" for p, o in failed[:_PROBLEMS_SHOWN]]
    description = (
        f"{len(failed)} of {plural(len(results), 'partition')} failed:\n" + "\n".join(lines)
        if failed
        else f"all {len(results):,} partitions passed"
    )
    metadata = {
        "partitions_checked": MetadataValue.int(len(results)),
        "partitions_failed": MetadataValue.json([str(p) for p, _o in failed]),
    }
    return not failed, description, metadata


def _evaluate(
    context: AssetCheckExecutionContext,
    target: _Target,
    settings: _Settings,
    datasets: ParquetDatasetStore,
    key: str,
    *,
    partition: str | None,
    selected: set[str],
) -> dict[str, _Outcome]:
    base = {"dataset_key": MetadataValue.text(key)}
    try:
        live = datasets.read_manifest(key)
    except ManifestCorrupted as exc:
        return dict.fromkeys(selected, _Outcome(False, f"the manifest cannot be read: {exc}", base))
    except NotFound:
        text = f"dataset {key!r} does not exist (nothing at {datasets.store.uri(key)})"
        return dict.fromkeys(selected, _Outcome(False, text, base))
    base["manifest_version"] = version_metadata(live.version)
    out: dict[str, _Outcome] = {}
    if INTEGRITY in selected:
        out[INTEGRITY] = _integrity(datasets, key, base)
    if selected & {SCHEMA, ROW_COUNT}:
        declared = declared_column_schema(target.metadata)
        needs_previous = ROW_COUNT in selected or declared is None
        previous = _previous(context, target, datasets, key, partition, live=live) if needs_previous else None
        if SCHEMA in selected:
            out[SCHEMA] = _schema(live, declared, previous, base)
        if ROW_COUNT in selected:
            out[ROW_COUNT] = _row_count(live, previous, settings, base)
    return out


# ---------------------------------------------------------------------- integrity


def _integrity(datasets: ParquetDatasetStore, key: str, base: dict[str, Any]) -> _Outcome:
    """``ParquetDatasetStore.verify_dataset`` of the live version, as a check outcome."""
    try:
        report = datasets.verify_dataset(key)
    except DatasetNotFound as exc:
        return _Outcome(False, str(exc), base)
    kinds = sorted({p.kind for p in report.problems})
    metadata = {
        **base,
        "files_checked": MetadataValue.int(report.files_checked),
        "problems": MetadataValue.int(len(report.problems)),
    }
    if report.version is not None:
        metadata["manifest_version"] = version_metadata(report.version)
    if report.ok:
        if report.files_checked == 0:
            return _Outcome(True, f"the manifest (version {report.version}) lists no parts: nothing to check", metadata)
        checked = "the part matches" if report.files_checked == 1 else f"all {report.files_checked:,} parts match"
        return _Outcome(True, f"{checked} the manifest (version {report.version})", metadata)
    metadata["problem_kinds"] = MetadataValue.json(kinds)
    shown = [f"{p.path}: {p.kind}: {p.message}" for p in report.problems[:_PROBLEMS_SHOWN]]
    more = " ..." if len(report.problems) > _PROBLEMS_SHOWN else ""
    text = f"{plural(len(report.problems), 'problem')} in version {report.version}:\n" + "\n".join(shown) + more
    return _Outcome(False, text, metadata)


# ---------------------------------------------------------------------- previous version


def _columns(schema: pa.Schema | None) -> _Columns | None:
    return None if schema is None else [(f.name, str(f.type)) for f in schema]


def _previous(
    context: AssetCheckExecutionContext,
    target: _Target,
    datasets: ParquetDatasetStore,
    key: str,
    partition: str | None,
    *,
    live: DatasetManifest,
) -> _Previous | None:
    """The newest retained version before ``live``, else what the previous materialization recorded."""
    try:
        older = [m for m in datasets.history(key) if m.version < live.version]
    except (NotFound, ManifestCorrupted):
        older = []
    if older:
        m = older[0]
        return _Previous(f"retained version {m.version}", m.version, _columns(m.schema), m.row_count)
    records = context.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=target.key, asset_partitions=[partition] if partition is not None else None),
        limit=_MATERIALIZATIONS_SCANNED,
    ).records
    for record in records:
        materialization = record.asset_materialization
        if materialization is None:
            continue
        md = materialization.metadata
        dataset_key, version = md.get("dataset_key"), version_of(md.get("manifest_version"))
        if dataset_key is None or version is None or dataset_key.value != key or version >= live.version:
            continue
        schema_value = md.get("dagster/column_schema")
        columns = [(c.name, c.type) for c in schema_value.schema.columns] if schema_value is not None else None
        rows_value = md.get("dagster/partition_row_count") or md.get("dagster/row_count")
        rows = rows_value.value if rows_value is not None else None
        source = f"version {version} (materialized by run {record.event_log_entry.run_id[:8]})"
        return _Previous(source, version, columns, int(rows) if rows is not None else None)
    return None


# ---------------------------------------------------------------------- schema


def _type_matches(declared: str, actual: pa.DataType) -> bool:
    declared = declared.strip()
    if not declared or declared.lower() == str(actual).lower():
        return True
    try:
        return pa.type_for_alias(declared.lower()).equals(actual)
    except (ValueError, KeyError):
        return False


def _schema_differences(expected: _Columns, actual: pa.Schema, *, loose_types: bool) -> list[str]:
    have = {f.name: f.type for f in actual}
    want = dict(expected)
    problems = [f"column {n!r} is missing" for n in want if n not in have]
    problems += [f"column {n!r} is new" for n in have if n not in want]
    for name, typ in want.items():
        if name not in have:
            continue
        same = _type_matches(typ, have[name]) if loose_types else typ == str(have[name])
        if not same:
            problems.append(f"column {name!r} is {have[name]}, was {typ}")
    return problems


def _schema(live: DatasetManifest, declared: Any, previous: _Previous | None, base: dict[str, Any]) -> _Outcome:
    schema = live.schema
    if schema is None:
        return _Outcome(False, "the manifest records no schema (a Spec 042-only manifest)", base)
    metadata = dict(base)
    if declared is not None:
        expected: _Columns = [(c.name, c.type) for c in declared.columns]
        against = "the declared dagster/column_schema"
        problems = _schema_differences(expected, schema, loose_types=True)
    elif previous is None or previous.columns is None:
        return _Outcome(True, f"version {live.version} is the first one recorded: nothing to compare", metadata)
    else:
        against = previous.source
        metadata["compared_with"] = MetadataValue.text(previous.source)
        problems = _schema_differences(previous.columns, schema, loose_types=False)
    if not problems:
        return _Outcome(True, f"the columns of version {live.version} match {against}", metadata)
    metadata["differences"] = MetadataValue.json(problems)
    return _Outcome(False, f"version {live.version} differs from {against}: " + "; ".join(problems), metadata)


# ---------------------------------------------------------------------- row count


def _row_count(
    live: DatasetManifest, previous: _Previous | None, settings: _Settings, base: dict[str, Any]
) -> _Outcome:
    metadata = {**base, "rows": MetadataValue.int(live.row_count)}
    if previous is None or previous.row_count is None:
        return _Outcome(True, f"version {live.version} is the first one recorded: nothing to compare", metadata)
    metadata["previous_rows"] = MetadataValue.int(previous.row_count)
    metadata["compared_with"] = MetadataValue.text(previous.source)
    if previous.row_count == 0:
        return _Outcome(True, f"{live.row_count} rows; the previous version ({previous.source}) had none", metadata)
    ratio = live.row_count / previous.row_count
    metadata["ratio"] = MetadataValue.float(ratio)
    change = f"{previous.row_count} -> {live.row_count} rows ({ratio:.3g}x, {previous.source})"
    if settings.min_ratio is not None and ratio < settings.min_ratio:
        return _Outcome(False, f"{change}: shrank below {settings.min_ratio:g}x", metadata)
    if settings.max_ratio is not None and ratio > settings.max_ratio:
        return _Outcome(False, f"{change}: grew above {settings.max_ratio:g}x", metadata)
    return _Outcome(True, change, metadata)
