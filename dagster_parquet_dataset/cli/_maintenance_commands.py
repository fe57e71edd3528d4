"""verify, vacuum and compact: one dataset, every dataset under a prefix, or ``--all``, in parallel."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ..dataset import CompactResult, ParquetDatasetStore, VerifyReport
from ._bulk import Outcome, run_each
from ._filter_args import describe_filter, parse_filter
from ._format import human_bytes, human_count, human_duration, one_line, parse_duration, parse_size, plural, table
from ._output import OK, PROBLEMS, emit, indent
from ._progress import progress_bar, spinner
from ._targets import KeyNotFound, expand, expand_all, keys_under
from ._usage_error import UsageError

#: Datasets verified at once by a bulk verify (each reads its footers in its own thread, so no nested pools).
VERIFY_THREADS = 16
#: Vacuum refuses a retention shorter than this without --force (a write or a reader may still need the files).
SAFETY_FLOOR_SECONDS = 3600.0


def _check_keys(args: argparse.Namespace, command: str) -> None:
    """Raises: UsageError: both keys and --all, or neither."""
    if args.all and args.keys:
        raise UsageError(f"{command} takes dataset keys (or prefixes) or --all, not both")
    if not args.all and not args.keys:
        raise UsageError(
            f"{command} needs at least one dataset key, or --all (a key may be a prefix: every dataset under it)"
        )


def _targets(args: argparse.Namespace, ds: ParquetDatasetStore, command: str) -> tuple[list[str], bool]:
    """The dataset keys to work on, and whether the user named exactly one dataset (not a prefix or --all).

    Raises:
        UsageError: both keys and --all, or neither.
        KeyNotFound: a key with nothing at or under it.
    """
    _check_keys(args, command)
    keys = expand_all(ds, args.keys, args.all)
    single = not args.all and len(args.keys) == 1 and keys == [args.keys[0].strip("/")]
    return keys, single


# ------------------------------------------------------------------------- verify


def cmd_verify(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    _check_keys(args, "verify")
    # A missing key is a failed dataset in the report (not an abort), so the others are still checked.
    keys: dict[str, str | None] = {}
    if args.all:  # the keys only: verify reads each manifest itself
        keys.update(dict.fromkeys(keys_under(ds, "")))
    for key in dict.fromkeys(args.keys):
        try:
            keys.update(dict.fromkeys(expand(ds, key)))
        except KeyNotFound as exc:
            keys[key.strip("/")] = one_line(exc)
    missing = {k: e for k, e in keys.items() if e is not None}
    present = [k for k, e in keys.items() if e is None]
    if len(present) == 1:  # one dataset: a bar over its files
        with progress_bar(f"verify {present[0]}", quiet=args.json) as update:
            outcomes = run_each(
                present,
                lambda k: ds.verify_dataset(k, version=args.dataset_version, progress=update),
                description="",
                quiet=True,
            )
    else:  # many: one bar over the datasets, one pool of threads (each dataset's footers read in its thread)
        outcomes = run_each(
            present,
            lambda k: ds.verify_dataset(k, version=args.dataset_version, threads=1),
            description=f"verify {plural(len(present), 'dataset')}",
            quiet=args.json,
            threads=VERIFY_THREADS,
        )
    by_key = {o.key: o for o in outcomes}
    documents: list[dict[str, Any]] = []
    lines: list[str] = []
    files = problems = 0
    for key in keys:
        outcome = by_key.get(key)
        error = missing.get(key) or (outcome.error if outcome else None)
        if error is not None or outcome is None or outcome.result is None:
            documents.append({"key": key, "ok": False, "error": error, "problems": []})
            lines.append(f"FAIL  {key}: {error}")
            problems += 1
            continue
        report = outcome.result
        documents.append(report.to_dict())
        files += report.files_checked
        problems += len(report.problems)
        lines.extend(_report_lines(report))
    if not keys:
        lines.append(f"no datasets in {ds.store.uri()}")
    lines.append(f"{plural(len(keys), 'dataset')}, {plural(files, 'file')} checked, {plural(problems, 'problem')}")
    ok = problems == 0
    emit(args, {"ok": ok, "datasets": documents}, "\n".join(lines))
    return OK if ok else PROBLEMS


def _report_lines(report: VerifyReport) -> list[str]:
    version = f"version {report.version}" if report.version is not None else "unreadable manifest"
    if report.ok:
        return [f"OK    {report.key} ({version}, {plural(report.files_checked, 'file')})"]
    lines = [
        f"FAIL  {report.key} ({version}, {plural(report.files_checked, 'file')}, "
        f"{plural(len(report.problems), 'problem')})"
    ]
    rows = [[p.path, p.kind, p.message] for p in report.problems]
    lines.append(indent(table(["PATH", "KIND", "PROBLEM"], rows)))
    return lines


# ------------------------------------------------------------------------- vacuum


def vacuum_ages(args: argparse.Namespace) -> tuple[float | None, float]:
    """``--older-than`` and ``--grace-period`` in seconds, refusing either under the safety floor without --force.

    Raises:
        UsageError: not a duration, no unit, or under the floor without ``--force``.
    """
    older_than = parse_duration(args.older_than, "--older-than") if args.older_than is not None else None
    grace = parse_duration(args.grace_period, "--grace-period")
    floor = human_duration(SAFETY_FLOOR_SECONDS)
    for option, value in (("--older-than", older_than), ("--grace-period", grace)):
        if value is not None and value < SAFETY_FLOOR_SECONDS and not args.force:
            raise UsageError(
                f"{option} {human_duration(value)} is under the {floor} safety floor: files that young may belong "
                "to a write in progress or a reader's version; pass --force to vacuum them anyway"
            )
    return older_than, grace


def cmd_vacuum(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    older_than, grace = vacuum_ages(args)
    if args.retain_versions is not None and args.retain_versions <= 0:
        raise UsageError(f"--retain-versions must be a positive number, got {args.retain_versions}")
    keys, single = _targets(args, ds, "vacuum")

    def vacuum(key: str, progress: Any = None) -> dict[str, Any]:
        result = ds.vacuum(
            key,
            retain_versions=args.retain_versions,
            older_than=older_than,
            grace_period=grace,
            dry_run=args.dry_run,
            progress=progress,
        )
        return {
            "key": key,
            "dry_run": result.dry_run,
            "deleted": [p[len(key) + 1 :] for p in result.deleted],
            "retained_versions": list(result.retained_versions),
        }

    verb = "would delete" if args.dry_run else "deleted"
    if single:
        with progress_bar(f"vacuum {keys[0]}", quiet=args.json) as update:
            document = vacuum(keys[0], update)
        text = _vacuum_line(document, verb)
        if document["deleted"]:
            text += "\n" + "\n".join(f"  {p}" for p in document["deleted"])
        emit(args, document, text)
        return OK
    outcomes = run_each(keys, vacuum, description=f"vacuum {plural(len(keys), 'dataset')}", quiet=args.json)
    deleted = sum(len(o.result["deleted"]) for o in outcomes if o.result)
    return _report_many(args, outcomes, lambda d: _vacuum_line(d, verb), f"{verb} {plural(deleted, 'file')}")


def _report_many(
    args: argparse.Namespace,
    outcomes: list[Outcome[dict[str, Any]]],
    line: Callable[[dict[str, Any]], str],
    done: str,
) -> int:
    """Print one line per dataset that changed or failed, and a total line; ``--json`` lists every dataset.

    Datasets with nothing to do get no line of their own (a year of partitions is 365 lines), only a count.
    """
    lines = [line(o.result) if o.result else f"FAIL  {o.key}: {o.error}" for o in outcomes if _busy(o)]
    failed = sum(1 for o in outcomes if o.error)
    idle = sum(1 for o in outcomes if not _busy(o))
    lines.append(
        f"{plural(len(outcomes), 'dataset')}: {done}"
        f"{f' ({idle:,} with nothing to do)' if idle else ''}, {plural(failed, 'failure')}"
    )
    documents = [o.result or {"key": o.key, "error": o.error} for o in outcomes]
    emit(args, {"ok": not failed, "dry_run": args.dry_run, "datasets": documents}, "\n".join(lines))
    return PROBLEMS if failed else OK


def _busy(outcome: Outcome[dict[str, Any]]) -> bool:
    """Whether a dataset's outcome is worth a line: it failed, or it deleted (or rewrote) files."""
    result = outcome.result
    return result is None or bool(result.get("deleted") or result.get("files_read"))


def _vacuum_line(document: dict[str, Any], verb: str) -> str:
    retained = document["retained_versions"]
    noun = "version" if len(retained) == 1 else "versions"
    return (
        f"{document['key']}: {verb} {plural(len(document['deleted']), 'file')}; "
        f"retained {noun} {', '.join(map(str, retained))}"
    )


# ------------------------------------------------------------------------ compact


def parsed_filters(args: argparse.Namespace, ds: ParquetDatasetStore, key: str) -> list[tuple[Any, ...]]:
    """The ``--filter`` options as DNF terms, parsed by the types of ``key``'s columns.

    Raises:
        UsageError: a malformed filter, or a dataset with no recorded schema.
        NotFound: no such dataset.
    """
    if not args.filter:
        return []
    schema = ds.read_manifest(key, version=getattr(args, "dataset_version", None)).schema
    if schema is None:
        raise UsageError(f"dataset {key!r} records no schema (a Spec 042 manifest), so it cannot be filtered")
    return [parse_filter(text, schema) for text in args.filter]


def cmd_compact(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    target = parse_size(args.target_size)
    keys, single = _targets(args, ds, "compact")

    def compact(key: str) -> dict[str, Any]:
        terms = parsed_filters(args, ds, key)
        result = ds.compact_dataset(key, target_file_bytes=target, filters=terms or None, dry_run=args.dry_run)
        return _compact_document(key, target, terms, result)

    if single:
        with spinner(f"compacting {keys[0]}", quiet=args.json):
            document = compact(keys[0])
        emit(args, document, _compact_line(document))
        return OK
    outcomes = run_each(keys, compact, description=f"compact {plural(len(keys), 'dataset')}", quiet=args.json)
    read = sum(o.result["files_read"] for o in outcomes if o.result)
    written = sum(o.result["files_written"] for o in outcomes if o.result)
    verb = "would rewrite" if args.dry_run else "rewrote"
    return _report_many(args, outcomes, _compact_line, f"{verb} {plural(read, 'file')} as {plural(written, 'file')}")


def _compact_document(key: str, target: int, terms: list[tuple[Any, ...]], result: CompactResult) -> dict[str, Any]:
    return {
        "key": key,
        "dry_run": result.dry_run,
        "target_file_bytes": target,
        "filters": [describe_filter(t) for t in terms],
        "files_read": result.files_read,
        "files_written": result.files_written,
        "bytes_before": result.bytes_before,
        "bytes_after": result.bytes_after,
        "rows": result.rows,
        "version": result.version,
        "read": list(result.read_paths),
        "written": list(result.written_paths),
    }


def _compact_line(d: dict[str, Any]) -> str:
    key, target = d["key"], d["target_file_bytes"]
    if d["files_read"] == 0:
        return f"{key}: nothing to compact (no run of files smaller than half of {human_bytes(target)})"
    read = f"{plural(d['files_read'], 'file')} ({human_bytes(d['bytes_before'])}"
    if d["dry_run"]:
        # The new files hold the same rows, so their size is about the size read, spread over the new files.
        each = min(target, d["bytes_before"] // max(1, d["files_written"]))
        size = f"at most about {human_bytes(each)}" + (" each" if d["files_written"] != 1 else "")
        return (
            f"{key}: would rewrite {read}, {human_count(d['rows'])} rows) as "
            f"{plural(d['files_written'], 'file')} ({size})"
        )
    return (
        f"{key}: rewrote {read}) as {plural(d['files_written'], 'file')} ({human_bytes(d['bytes_after'])}), "
        f"{human_count(d['rows'])} rows; new version {d['version']}"
    )


def cmd_sync_delta_log(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    """Write what each dataset's Delta log lacks (``ParquetDatasetStore.sync_delta_log``), or with ``--asset``
    repair partitioned assets' one Delta table (``sync_asset_delta_log``); print the Delta version now live."""
    if args.asset:
        return _sync_asset_tables(args, ds)
    if args.partition_column:
        raise UsageError("sync-delta-log: --partition-column goes with --asset")
    keys, single = _targets(args, ds, "sync-delta-log")

    def sync(key: str) -> dict[str, Any]:
        return {"key": key, "delta_version": ds.sync_delta_log(key)}

    if single:
        document = sync(keys[0])
        emit(args, document, f"{keys[0]}: Delta version {document['delta_version']}")
        return OK
    outcomes = run_each(
        keys, sync, description=f"sync the Delta log of {plural(len(keys), 'dataset')}", quiet=args.json
    )
    lines = [
        f"{o.key}: Delta version {o.result['delta_version']}" if o.result else f"FAIL  {o.key}: {o.error}"
        for o in outcomes
    ]
    # A prefix that is a partitioned asset's folder with its one Delta table: that table is repaired too.
    prefixes = [k.strip("/") for k in dict.fromkeys(args.keys)]
    tables = [p for p in prefixes if ds.store.exists(f"{p}/_delta_log/{0:020d}.json")]
    assets = run_each(
        tables, lambda f: {"asset": f, "delta_version": ds.sync_asset_delta_log(f)}, description="", quiet=True
    )
    lines += [
        f"{o.key}: asset Delta version {o.result['delta_version']}" if o.result else f"FAIL  {o.key}: {o.error}"
        for o in assets
    ]
    failed = sum(1 for o in [*outcomes, *assets] if o.error)
    lines.append(f"{plural(len(outcomes), 'dataset')}: Delta logs in sync, {plural(failed, 'failure')}")
    documents = [o.result or {"key": o.key, "error": o.error} for o in outcomes]
    report: dict[str, Any] = {"ok": not failed, "datasets": documents}
    if assets:
        report["assets"] = [o.result or {"asset": o.key, "error": o.error} for o in assets]
    emit(args, report, "\n".join(lines))
    return PROBLEMS if failed else OK


def _sync_asset_tables(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    if args.keys or args.all:
        raise UsageError("sync-delta-log takes dataset keys (or --all), or --asset, not both")
    folders = list(dict.fromkeys(args.asset))

    def sync(folder: str) -> dict[str, Any]:
        return {"asset": folder, "delta_version": ds.sync_asset_delta_log(folder, columns=args.partition_column)}

    outcomes = run_each(folders, sync, description=f"sync {plural(len(folders), 'asset table')}", quiet=True)
    lines = [
        f"{o.key}: asset Delta version {o.result['delta_version']}" if o.result else f"FAIL  {o.key}: {o.error}"
        for o in outcomes
    ]
    failed = sum(1 for o in outcomes if o.error)
    documents = [o.result or {"asset": o.key, "error": o.error} for o in outcomes]
    emit(args, {"ok": not failed, "assets": documents}, "\n".join(lines))
    return PROBLEMS if failed else OK
