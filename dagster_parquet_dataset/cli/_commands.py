"""The subcommands. Each takes the parsed arguments and a dataset store, prints, and returns an exit status."""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from ..dataset import DatasetListing, DatasetManifest, FileEntry, ParquetDatasetStore
from ..errors import NotFound
from ._assets import asset_table, assets_of, dataset_table, prefix_summary
from ._filter_args import describe_filter
from ._format import age_seconds, human_age, human_bytes, human_count, parse_instant, plural, short_run_id, table
from ._head import cmd_head
from ._maintenance_commands import cmd_compact, cmd_sync_delta_log, cmd_vacuum, cmd_verify, parsed_filters
from ._output import OK, PROBLEMS, emit, indent
from ._targets import OP_OUTPUTS, list_under, not_found, require_dataset


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
    listings = list_under(ds, prefix)
    where = ds.store.uri(prefix)
    if not listings:
        if prefix:  # a prefix that names nothing is a mistake (a typo, the wrong store): say so, exit 1
            raise not_found(ds, prefix)
        emit(args, {"store": where, "datasets": [], "assets": []}, f"no datasets under {where}")
        return OK
    documents = [_listing(item) for item in listings]
    broken = any(item.manifest is None for item in listings)
    assets = assets_of(listings)
    # One layout whatever the store: the same keys in --json and the same columns in the table.
    document: dict[str, Any] = {"store": where, "datasets": documents, "assets": assets}
    if args.assets is False:  # --datasets: one line per dataset, partitions included
        text = dataset_table(documents)
    else:
        text = asset_table(assets)
    counted = plural(len(listings), "dataset")
    grouped_any = len(assets) != len(listings) or any(a["partitions"] is not None for a in assets)
    if args.assets is not False and grouped_any:  # partitions (or op outputs) were grouped
        named = [a for a in assets if a["asset"] != OP_OUTPUTS]
        grouped = plural(len(named), "asset") + (" and op outputs" if len(named) != len(assets) else "")
        counted = f"{grouped} ({counted})"
    text += f"\n{counted} under {where}"
    emit(args, document, text)
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
    as_of = parse_instant(args.as_of)
    try:
        manifest = ds.read_manifest(args.key, version=args.dataset_version, as_of=as_of)
    except NotFound:
        past = args.dataset_version is not None or as_of is not None
        if past and ds.store.exists(f"{args.key.strip('/')}/manifest.json"):
            raise  # the dataset exists; the version (or one live at as_of) does not
        return _show_prefix(args, ds)
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
        **({"as_of": as_of.isoformat()} if as_of is not None else {}),
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
                "nullable" if c["nullable"] else "not null",
                "partition" if c["name"] in partition else "",
            ]
            for c in columns
        ]
        text += "\n\nschema:\n" + indent(table(["COLUMN", "TYPE", "NULLS", ""], rows))
    else:
        text += f"\n\nschema: not recorded (Spec 042 manifest, schema hash {manifest.schema_hash})"
    emit(args, document, text)
    return OK


def _show_prefix(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    """``show`` of a key that is no dataset: a summary of the datasets under it (an asset's partitions, a group).

    Raises:
        KeyNotFound: no dataset under the key either.
    """
    prefix = args.key.strip("/")
    listings = list_under(ds, prefix)
    if not listings:
        raise not_found(ds, prefix)
    document, text = prefix_summary(prefix, ds.store.uri(prefix), listings)
    emit(args, document, text)
    return PROBLEMS if document["corrupt"] else OK


def _describe_sizes(count: int, distribution: dict[str, int] | None) -> str:
    if distribution is None:
        return f"{count} (sizes not recorded)"
    return (
        f"{count}, {human_bytes(distribution['total'])} "
        f"(min {human_bytes(distribution['min'])}, median {human_bytes(distribution['median'])}, "
        f"max {human_bytes(distribution['max'])})"
    )


# ------------------------------------------------------------------------ history


def cmd_history(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    as_of = parse_instant(args.as_of)
    key = require_dataset(ds, args.key, command="history")
    versions = ds.history(key)
    live_then = None
    if as_of is not None:  # the history as it stood then: up to the version live at as_of
        live_then = ds.version_at(key, as_of)
        versions = [m for m in versions if m.version <= live_then]
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
            short_run_id(d["run_id"]),
        ]
        for d in documents
    ]
    text = table(
        ["VERSION", "CREATED (UTC)", "AGE", "OPERATION", "ROWS", "FILES", "BYTES", "RUN ID"], rows, (0, 4, 5, 6)
    )
    document: dict[str, Any] = {"key": args.key, "versions": documents}
    if as_of is not None:
        document.update(as_of=as_of.isoformat(), live_version=live_then)
        text = f"as of {as_of.isoformat()}: version {live_then} was live\n{text}"
    emit(args, document, text)
    return OK


# --------------------------------------------------------------------------- plan


def _entry(entry: FileEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"path": entry.path, "rows": entry.row_count, "bytes": entry.size_bytes}
    if entry.partition_values is not None:
        out["partition_values"] = entry.partition_values
    return out


def _sum(values: list[int | None]) -> int | None:
    return None if None in values else sum(values)  # type: ignore[arg-type]


def cmd_plan(args: argparse.Namespace, ds: ParquetDatasetStore) -> int:
    require_dataset(ds, args.key, command="plan")
    terms = parsed_filters(args, ds, args.key)
    plan = ds.plan_read(args.key, filters=terms or None, version=args.dataset_version)
    selected, pruned = plan.selected, plan.pruned
    everything = [*selected, *pruned]
    document: dict[str, Any] = {
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
            f"{human_count(document['selected_rows'])} rows in them (of {human_count(document['total_rows'])}), "
            f"{human_bytes(document['selected_bytes'])} of {human_bytes(document['total_bytes'])}",
            f"pruned    {plural(len(pruned), 'file')}",
        ]
    )
    if selected:
        rows = [[e.path, human_count(e.row_count), human_bytes(e.size_bytes)] for e in selected]
        text += "\n\nselected files:\n" + indent(table(["PATH", "ROWS", "BYTES"], rows, right=(1, 2)))
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
    "sync-delta-log": cmd_sync_delta_log,
    "head": cmd_head,
}

__all__ = ["COMMANDS"]
