"""Datasets seen as Dagster assets: one line per asset (its partitions together), and a prefix's summary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..dataset import DatasetListing, DatasetManifest
from ._format import age_seconds, human_age, human_bytes, human_count, plural, short_run_id, table
from ._targets import Asset, group_assets


def _bytes(manifest: DatasetManifest) -> int | None:
    sizes = [f.size_bytes for f in manifest.file_entries()]
    return None if None in sizes else sum(sizes)  # type: ignore[arg-type]


def _sum(values: Sequence[int | None]) -> int | None:
    return None if None in values else sum(values)  # type: ignore[arg-type]


def _span(values: Sequence[int]) -> str:
    if not values:
        return "-"
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}-{high}"


def asset_document(asset: Asset) -> dict[str, Any]:
    """An asset's figures summed over its datasets (partitions), with the last run among them."""
    broken = [item.key for item in asset.listings if item.manifest is None]
    incomplete = [item.key for item in asset.listings if item.manifest is not None and not item.complete]
    partitions = sorted(asset.partitions)
    return {
        "asset": asset.key,
        "datasets": len(asset.listings),
        "partitions": len(partitions) if asset.partitioned else None,
        "first_partition": partitions[0] if partitions else None,
        "last_partition": partitions[-1] if partitions else None,
        **_totals(asset.listings),
        "corrupt": broken,
        "incomplete": incomplete,
        "status": _status(broken, incomplete),
    }


def _totals(listings: Sequence[DatasetListing]) -> dict[str, Any]:
    """Version range, summed rows, files and bytes, and the newest run, over the readable manifests."""
    manifests = [item.manifest for item in listings if item.manifest is not None]
    latest = max(manifests, key=lambda m: m.created_at_utc or "", default=None)
    return {
        "versions": _span([m.version for m in manifests]),
        "rows": _sum([m.row_count for m in manifests]),
        "files": sum(len(m.parts) for m in manifests),
        "bytes": _sum([_bytes(m) for m in manifests]),
        "last_run_id": latest.run_id if latest else None,
        "last_created_at_utc": latest.created_at_utc if latest else None,
        "age_seconds": age_seconds(latest.created_at_utc) if latest else None,
    }


def _status(broken: list[str], incomplete: list[str]) -> str:
    parts = []
    if broken:
        parts.append(f"{plural(len(broken), 'corrupt manifest')}")
    if incomplete:
        parts.append(f"{len(incomplete):,} without _SUCCESS")
    return ", ".join(parts) or "ok"


#: The columns of ``ls`` (whatever the store, and with ``--datasets``) and of ``show PREFIX``'s asset lines; the
#: first is ``ASSET`` (``KEY`` with ``--datasets``). RUN ID is the newest run among an asset's partitions.
COLUMNS = ("PARTITIONS", "VERSION", "ROWS", "FILES", "BYTES", "RUN ID", "AGE", "STATUS")
_RIGHT = (1, 3, 4, 5)


def asset_table(documents: Sequence[dict[str, Any]]) -> str:
    """One aligned line per asset, under ``ASSET`` and :data:`COLUMNS`."""
    rows = []
    for d in documents:
        if d["versions"] == "-":  # no readable manifest: only the key and the status are known
            rows.append([d["asset"], *["-"] * (len(COLUMNS) - 1), d["status"]])
            continue
        rows.append(
            [
                d["asset"],
                "-" if d["partitions"] is None else human_count(d["partitions"]),
                d["versions"],
                human_count(d["rows"]),
                human_count(d["files"]),
                human_bytes(d["bytes"]),
                short_run_id(d["last_run_id"]),
                human_age(d["age_seconds"]),
                d["status"],
            ]
        )
    return table(["ASSET", *COLUMNS], rows, right=_RIGHT)


def dataset_table(documents: Sequence[dict[str, Any]]) -> str:
    """``ls --datasets``: one aligned line per dataset (``PARTITIONS`` is ``-``), the same columns as
    :func:`asset_table` under ``KEY``."""
    rows = []
    for d in documents:
        if "version" not in d:  # a corrupt manifest: only its key and status are known
            rows.append([d["key"], *["-"] * (len(COLUMNS) - 1), d["status"]])
            continue
        figures = [str(d["version"]), human_count(d["rows"]), human_count(d["files"]), human_bytes(d["bytes"])]
        rows.append([d["key"], "-", *figures, short_run_id(d["run_id"]), human_age(d["age_seconds"]), d["status"]])
    return table(["KEY", *COLUMNS], rows, right=_RIGHT)


def assets_of(listings: Sequence[DatasetListing]) -> list[dict[str, Any]]:
    """The asset documents of ``listings``, in asset key order."""
    return [asset_document(a) for a in group_assets(listings)]


def prefix_summary(prefix: str, where: str, listings: Sequence[DatasetListing]) -> tuple[dict[str, Any], str]:
    """``show PREFIX``: totals over every dataset under ``prefix`` and one line per asset."""
    assets = assets_of(listings)
    partitions = sum(d["partitions"] or 0 for d in assets)
    document = {
        "prefix": prefix,
        "store": where,
        "datasets": len(listings),
        "assets": assets,
        "partitions": partitions,
        **_totals(listings),
        "corrupt": [k for d in assets for k in d["corrupt"]],
        "incomplete": [k for d in assets for k in d["incomplete"]],
    }
    last = "-"
    if document["last_created_at_utc"] is not None:
        last = (
            f"{document['last_run_id'] or '-'} ({document['last_created_at_utc']}, "
            f"{human_age(document['age_seconds'])} ago)"
        )
    span = ""
    firsts = [d["first_partition"] for d in assets if d["first_partition"]]
    lasts = [d["last_partition"] for d in assets if d["last_partition"]]
    if firsts:
        span = f" ({min(firsts)} .. {max(lasts)})"
    lines = [
        ("prefix", f"{prefix or '(whole store)'} ({plural(len(listings), 'dataset')}, {plural(len(assets), 'asset')})"),
        ("partitions", f"{partitions:,}{span}"),
        ("versions", document["versions"]),
        ("rows", human_count(document["rows"])),
        ("files", f"{document['files']:,}, {human_bytes(document['bytes'])}"),
        ("last run", last),
        ("status", _status(document["corrupt"], document["incomplete"])),
    ]
    width = max(len(name) for name, _ in lines)
    text = "\n".join(f"{name.ljust(width)}  {value}" for name, value in lines)
    text += "\n\n" + asset_table(assets)
    return document, text
