"""The subcommands. Each takes the parsed arguments and a dataset store, prints, and returns an exit status."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

from ..dataset import DatasetListing, DatasetManifest, FileEntry, ParquetDatasetStore, VerifyReport
from ..errors import NotFound
from ._errors import UsageError
from ._filters import describe_filter, parse_filter
from ._format import (
    age_seconds,
    human_age,
    human_bytes,
    human_count,
    one_line,
    parse_duration,
    parse_size,
    table,
)
from ._progress import progress_bar, spinner

OK, PROBLEMS = 0, 1


def emit(args: argparse.Namespace, document: Any, text: str) -> None:
    """Print ``document`` as JSON with ``--json``, else ``text``."""
    if args.json:
        print(json.dumps(document, indent=2, default=str))
    elif text:
        print(text)


def _total_bytes(manifest: DatasetManifest) -> int | None:
    sizes = [f.size_bytes for f in manifest.file_entries()]
    return None if None in sizes else sum(sizes)  # type: ignore[arg-type]


def _summary(manifest: DatasetManifest) -> dict[str, Any]:
    return {
        "version": manifest.version,
        "rows": manifest.row_count,
        "files": len(manifest.parts),
        "bytes": _total_bytes(manifest),
        "run_id": manifest.run_id,
        "operation": manifest.operation,
        "created_at_utc": manifest.created_at_utc,
        "age_seconds": age_seconds(manifest.created_at_utc),
    }


# ----------------------------------------------------------------------------- ls


def cmd_ls(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    prefix = (args.prefix or "").strip("/")
    listings = ds.list_datasets(prefix)
    documents = [_listing(item) for item in listings]
    broken = [item for item in listings if item.manifest is None]
    where = ds.store.uri(prefix)
    if not listings:
        text = f"no datasets under {where}"
    else:
        rows = [
            [
                d["key"],
                str(d.get("version", "-")),
                human_count(d.get("rows")),
                human_count(d.get("files")),
                human_bytes(d.get("bytes")),
                d.get("run_id") or "-",
                human_age(d.get("age_seconds")),
                d["status"],
            ]
            for d in documents
        ]
        text = table(["KEY", "VERSION", "ROWS", "FILES", "BYTES", "RUN ID", "AGE", "STATUS"], rows, right=(1, 2, 3, 4))
        text += f"\n{len(listings)} dataset{'s' if len(listings) != 1 else ''} under {where}"
    emit(args, {"store": where, "datasets": documents}, text)
    return PROBLEMS if broken else OK


def _listing(item: DatasetListing) -> dict[str, Any]:
    out: dict[str, Any] = {"key": item.key, "complete": item.complete}
    if item.manifest is None:
        out["status"] = "corrupt manifest"
        out["error"] = item.error
        return out
    out.update(_summary(item.manifest))
    out["status"] = "ok" if item.complete else "no _SUCCESS"
    return out


# --------------------------------------------------------------------------- show


def cmd_show(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    manifest = ds.read_manifest(args.key, version=args.dataset_version)
    complete = ds.store.exists(f"{args.key}/_SUCCESS")
    sizes = [f.size_bytes for f in manifest.file_entries() if f.size_bytes is not None]
    schema = manifest.schema
    columns = (
        [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema] if schema is not None else None
    )
    distribution = (
        {
            "total": sum(sizes),
            "min": min(sizes),
            "median": int(statistics.median(sizes)),
            "max": max(sizes),
        }
        if sizes
        else None
    )
    document = {
        "key": args.key,
        **_summary(manifest),
        "complete": complete,
        "compression": manifest.compression,
        "partition_by": list(manifest.partition_by),
        "file_sizes": distribution,
        "metadata": manifest.metadata,
        "schema_hash": manifest.schema_hash,
        "schema": columns,
    }
    lines = [
        ("dataset", args.key),
        (
            "version",
            f"{manifest.version} ({manifest.operation or 'write'}, {manifest.created_at_utc}, "
            f"{human_age(document['age_seconds'])} ago)",
        ),
        ("run id", manifest.run_id or "-"),
        ("rows", human_count(manifest.row_count)),
        ("files", _describe_sizes(len(manifest.parts), distribution)),
        ("partitioned by", ", ".join(manifest.partition_by) or "-"),
        ("compression", manifest.compression),
        ("complete", "yes" if complete else "no (_SUCCESS is missing)"),
    ]
    if manifest.metadata:
        lines.append(("metadata", ", ".join(f"{k}={v}" for k, v in sorted(manifest.metadata.items()))))
    width = max(len(name) for name, _ in lines)
    text = "\n".join(f"{name.ljust(width)}  {value}" for name, value in lines)
    if columns is not None:
        partition = set(manifest.partition_by)
        rows = [
            [
                c["name"],
                c["type"],
                "" if c["nullable"] else "not null",
                "partition" if c["name"] in partition else "",
            ]
            for c in columns
        ]
        text += "\n\nschema:\n" + _indent(table(["COLUMN", "TYPE", "NULLS", ""], rows))
    else:
        text += f"\n\nschema: not recorded (Spec 042 manifest, schema hash {manifest.schema_hash})"
    emit(args, document, text)
    return OK


def _describe_sizes(count: int, distribution: dict[str, int] | None) -> str:
    if distribution is None:
        return f"{count} (sizes not recorded)"
    return (
        f"{count}, {human_bytes(distribution['total'])} "
        f"(min {human_bytes(distribution['min'])}, median {human_bytes(distribution['median'])}, "
        f"max {human_bytes(distribution['max'])})"
    )


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


# ------------------------------------------------------------------------ history


def cmd_history(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    versions = ds.history(args.key)
    documents = [_summary(m) for m in versions]
    rows = [
        [
            str(d["version"]),
            d["created_at_utc"],
            human_age(d["age_seconds"]),
            d["operation"] or "-",
            human_count(d["rows"]),
            human_count(d["files"]),
            human_bytes(d["bytes"]),
            d["run_id"] or "-",
        ]
        for d in documents
    ]
    text = table(
        ["VERSION", "CREATED (UTC)", "AGE", "OPERATION", "ROWS", "FILES", "BYTES", "RUN ID"], rows, (0, 4, 5, 6)
    )
    emit(args, {"key": args.key, "versions": documents}, text)
    return OK


# ------------------------------------------------------------------------- verify


def cmd_verify(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    if args.all and args.keys:
        raise UsageError("verify takes dataset keys or --all, not both")
    if not args.all and not args.keys:
        raise UsageError("verify needs at least one dataset key, or --all")
    keys = [item.key for item in ds.list_datasets("")] if args.all else list(dict.fromkeys(args.keys))
    documents: list[dict[str, Any]] = []
    lines: list[str] = []
    files = problems = 0
    for key in keys:
        try:
            with progress_bar(f"verify {key}", quiet=args.json) as update:
                report = ds.verify_dataset(key, version=args.dataset_version, progress=update)
        except NotFound as exc:  # no such dataset, or no such version
            documents.append({"key": key, "ok": False, "error": one_line(exc), "problems": []})
            lines.append(f"FAIL  {key}: {one_line(exc)}")
            problems += 1
            continue
        documents.append(report.to_dict())
        files += report.files_checked
        problems += len(report.problems)
        lines.extend(_report_lines(report))
    ok = problems == 0
    count = len(keys)
    if count == 0:
        lines.append("no datasets found")
    lines.append(
        f"{count} dataset{'s' if count != 1 else ''}, {files} file{'s' if files != 1 else ''} checked, "
        f"{problems} problem{'s' if problems != 1 else ''}"
    )
    emit(args, {"ok": ok, "datasets": documents}, "\n".join(lines))
    return OK if ok else PROBLEMS


def _report_lines(report: VerifyReport) -> list[str]:
    version = f"version {report.version}" if report.version is not None else "unreadable manifest"
    noun = "file" if report.files_checked == 1 else "files"
    if report.ok:
        return [f"OK    {report.key} ({version}, {report.files_checked} {noun})"]
    count = len(report.problems)
    lines = [
        f"FAIL  {report.key} ({version}, {report.files_checked} {noun}, {count} problem{'s' if count != 1 else ''})"
    ]
    rows = [[p.path, p.kind, p.message] for p in report.problems]
    lines.append(_indent(table(["PATH", "KIND", "PROBLEM"], rows)))
    return lines


# --------------------------------------------------------------------------- plan


def _entry(entry: FileEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"path": entry.path, "rows": entry.row_count, "bytes": entry.size_bytes}
    if entry.partition_values is not None:
        out["partition_values"] = entry.partition_values
    return out


def _sum(values: list[int | None]) -> int | None:
    return None if None in values else sum(values)  # type: ignore[arg-type]


def cmd_plan(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    filters = args.filter or []
    terms: list[tuple[Any, ...]] = []
    if filters:
        manifest = ds.read_manifest(args.key, version=args.dataset_version)
        schema = manifest.schema
        if schema is None:
            raise UsageError(f"dataset {args.key!r} records no schema (a Spec 042 manifest), so it cannot be filtered")
        terms = [parse_filter(text, schema) for text in filters]
    plan = ds.plan_read(args.key, filters=terms or None, version=args.dataset_version)
    selected, pruned = plan.selected, plan.pruned
    everything = [*selected, *pruned]
    document = {
        "key": plan.dataset_key,
        "version": plan.version,
        "filters": [describe_filter(t) for t in terms],
        "files": len(everything),
        "selected_files": len(selected),
        "pruned_files": len(pruned),
        "selected_rows": _sum([e.row_count for e in selected]),
        "total_rows": _sum([e.row_count for e in everything]),
        "selected_bytes": _sum([e.size_bytes for e in selected]),
        "total_bytes": _sum([e.size_bytes for e in everything]),
        "selected": [_entry(e) for e in selected],
        "pruned": [_entry(e) for e in pruned],
    }
    text = "\n".join(
        [
            f"dataset   {plan.dataset_key} (version {plan.version})",
            f"filter    {' AND '.join(document['filters']) or '(none)'}",
            f"selected  {len(selected)} of {len(everything)} files, "
            f"{human_count(document['selected_rows'])} of {human_count(document['total_rows'])} rows, "
            f"{human_bytes(document['selected_bytes'])} of {human_bytes(document['total_bytes'])}",
            f"pruned    {len(pruned)} files",
        ]
    )
    if selected:
        rows = [[e.path, human_count(e.row_count), human_bytes(e.size_bytes)] for e in selected]
        text += "\n\nselected files:\n" + _indent(table(["PATH", "ROWS", "BYTES"], rows, right=(1, 2)))
    emit(args, document, text)
    return OK


# ------------------------------------------------------------------------- vacuum


def cmd_vacuum(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    older_than = parse_duration(args.older_than) if args.older_than is not None else None
    grace = parse_duration(args.grace_period)
    if args.retain_versions is not None and args.retain_versions <= 0:
        raise UsageError(f"--retain-versions must be a positive number, got {args.retain_versions}")
    with progress_bar(f"vacuum {args.key}", quiet=args.json) as update:
        result = ds.vacuum(
            args.key,
            retain_versions=args.retain_versions,
            older_than=older_than,
            grace_period=grace,
            dry_run=args.dry_run,
            progress=update,
        )
    prefix = len(args.key) + 1
    deleted = [p[prefix:] for p in result.deleted]
    document = {
        "key": args.key,
        "dry_run": result.dry_run,
        "deleted": deleted,
        "retained_versions": list(result.retained_versions),
    }
    verb = "would delete" if result.dry_run else "deleted"
    text = (
        f"{args.key}: {verb} {len(deleted)} file{'s' if len(deleted) != 1 else ''}; "
        f"retained version{'s' if len(result.retained_versions) != 1 else ''} "
        f"{', '.join(map(str, result.retained_versions))}"
    )
    if deleted:
        text += "\n" + "\n".join(f"  {p}" for p in deleted)
    emit(args, document, text)
    return OK


# ------------------------------------------------------------------------ compact


def cmd_compact(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    target = parse_size(args.target_size)
    compact = getattr(ds, "compact_dataset", None)
    if compact is None:
        print(
            "dagster-parquet-dataset: error: compact is not available: this install's ParquetDatasetStore "
            "has no compact_dataset",
            file=sys.stderr,
        )
        return PROBLEMS
    with spinner(f"compacting {args.key}", quiet=args.json):
        result = compact(args.key, target_file_bytes=target, dry_run=args.dry_run)
    document = {
        "key": args.key,
        "dry_run": args.dry_run,
        "target_file_bytes": target,
        "files_read": result.files_read,
        "files_written": result.files_written,
        "bytes_before": result.bytes_before,
        "bytes_after": result.bytes_after,
        "rows": result.rows,
        "version": result.version,
    }
    verb = "would rewrite" if args.dry_run else "rewrote"
    if result.files_read == 0:
        text = f"{args.key}: nothing to compact (target {human_bytes(target)} per file)"
    else:
        text = (
            f"{args.key}: {verb} {result.files_read} files ({human_bytes(result.bytes_before)}) as "
            f"{result.files_written} ({human_bytes(result.bytes_after)}), {human_count(result.rows)} rows"
        )
        if not args.dry_run:
            text += f"; new version {result.version}"
    emit(args, document, text)
    return OK


COMMANDS = {
    "ls": cmd_ls,
    "show": cmd_show,
    "history": cmd_history,
    "verify": cmd_verify,
    "plan": cmd_plan,
    "vacuum": cmd_vacuum,
    "compact": cmd_compact,
}

__all__ = ["COMMANDS"]
