"""A large segmented dataset written directly through the package's format functions (no data files).

``bench_manifest_scale`` builds its datasets through ``begin_append``/``commit_append``: at a million
files on a loaded machine that takes many minutes. The metadata-only fixture here writes the same
entries (5 columns with statistics, one id range per file) as segments laid out the way the commit's
merge policy lays them out (halving sizes, then as many inline as the root's budget takes), and the root
``manifest.json`` that lists them, in seconds. Its data files do not exist: it serves plans and appends
(which never open existing parts), not reads. Cached under ``/tmp/scale_fix/<files>``.
"""

from __future__ import annotations

import os
import shutil
import uuid
from datetime import datetime, timezone

import pyarrow as pa

from dagster_parquet_dataset.dataset.format import segments as seg
from dagster_parquet_dataset.dataset.manifest import (
    FORMAT_VERSION,
    PARTS_IN_ROOT,
    ROOTLESS_FORMAT,
    DatasetManifest,
    FileEntry,
    encode_schema,
    schema_hash,
)
from dagster_parquet_dataset.storage.local import LocalStore

KEY = "events"
ROWS_PER_FILE = 10
CACHE = "/tmp/scale_fix"
_T0 = 1_767_225_600_000_000  # 2026-01-01T00:00:00 in microseconds


def _entry(i: int, token: str) -> FileEntry:
    first, last = i * ROWS_PER_FILE, i * ROWS_PER_FILE + ROWS_PER_FILE - 1
    stats = {
        "amount": {"max": (last % 997) / 7, "min": 0.0, "null_count": 0},
        "customer": {"max": f"customer-{last % 50_000:06d}", "min": f"customer-{first % 50_000:06d}", "null_count": 0},
        "id": {"max": last, "min": first, "null_count": 0},
        "qty": {"max": last % 1000, "min": 0, "null_count": 0},
        "ts": {"max": _T0 + last * 1_000_000, "min": _T0 + first * 1_000_000, "null_count": 0},
    }
    return FileEntry(f"part-{i:07d}-{token}.parquet", ROWS_PER_FILE, 1950, None, stats, (), f"sha256:{i:064x}")


def inline_entries() -> int:
    """How many of the fixture's entries fit the root's inline budget (``INLINE_ENTRIES`` and
    ``INLINE_BYTES`` of compact JSON)."""
    sample = [_entry(i, "0" * 16) for i in range(500_000, 500_000 + seg.INLINE_ENTRIES)]
    fit = 0
    while fit < len(sample) and seg.fits_inline(sample[: fit + 1]):
        fit += 1
    return fit


def chunk_sizes(files: int, inline: int) -> list[int]:
    """Segment sizes as the merge policy leaves them (full segments of ``SEGMENT_ROWS``, then a halving
    tail), then at most ``inline`` entries inline (the last item)."""
    sizes, rest = [], files
    while rest > seg.SEGMENT_ROWS + inline:
        sizes.append(seg.SEGMENT_ROWS)
        rest -= seg.SEGMENT_ROWS
    while rest > inline:
        size = max(rest // 2, inline) if rest > 2 * inline else rest - inline // 2
        sizes.append(size)
        rest -= size
    return [*sizes, rest]


def build_fixture(files: int, schema: pa.Schema, *, fresh: bool = False) -> str:
    """The store root of a ``files``-file dataset ``events`` (cached); returns the root folder."""
    inline = inline_entries()
    root = os.path.join(CACHE, f"{files}-{'rootless' if files > PARTS_IN_ROOT else 'listed'}-{inline}-inline")
    if os.path.exists(os.path.join(root, KEY, "manifest.json")) and not fresh:
        return root
    shutil.rmtree(root, ignore_errors=True)
    store = LocalStore(root, durable=False)
    token = uuid.uuid4().hex[:16]
    entries = [_entry(i, token) for i in range(files)]
    *segment_sizes, _tail = chunk_sizes(files, inline)
    refs, start = [], 0
    for size in segment_sizes:
        table = seg.entries_table(entries[start : start + size], schema)
        refs.append(seg.write_segment(store, KEY, f"{seg.SEGMENTS_DIR}/{uuid.uuid4().hex[:16]}-0.parquet", table))
        start += size
    manifest = DatasetManifest(
        dataset_key=KEY,
        parts=[e.path for e in entries],
        row_count=files * ROWS_PER_FILE,
        schema_hash=schema_hash(schema),
        compression="zstd",
        created_at_utc=datetime.now(timezone.utc).isoformat(),
        format_version=ROOTLESS_FORMAT if files > PARTS_IN_ROOT else FORMAT_VERSION,
        version=1,
        arrow_schema=encode_schema(schema),
        operation="append",
        txn=token,
        txns=(token,),
        segments=tuple(refs),
        added=tuple(entries[start:]),
    )
    store.write_bytes(f"{KEY}/manifest.json", manifest.to_json().encode("utf-8"))
    store.write_bytes(f"{KEY}/_SUCCESS", b"")
    return root


def copy_fixture(files: int, schema: pa.Schema, target: str) -> str:
    """A private copy of the cached fixture (appends change it), hard-linking the immutable segments."""
    source = build_fixture(files, schema)
    shutil.copytree(source, target, copy_function=os.link)
    manifest = os.path.join(target, KEY, "manifest.json")
    data = open(manifest, "rb").read()
    os.unlink(manifest)
    with open(manifest, "wb") as out:
        out.write(data)
    return target


def build_delta_fixture(files: int, schema: pa.Schema) -> str:
    """A Delta table whose log adds the same ``files`` entries (with statistics), checkpointed (cached;
    no data files: like the dataset fixture, it serves table loads, file lists and appends)."""
    import deltalake

    from dagster_parquet_dataset.dataset.delta.actions import add_action, dumps, metadata_action

    root = os.path.join(CACHE, f"{files}-delta")
    if os.path.exists(os.path.join(root, "_delta_log", "_last_checkpoint")):
        return root
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "_delta_log"))
    now = int(datetime.now(timezone.utc).timestamp() * 1000)
    head = [  # the protocol convert_to_deltalake writes (deltalake cannot append with inCommitTimestamp)
        {"commitInfo": {"timestamp": now, "operation": "CONVERT"}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        metadata_action(schema, [], id=str(uuid.uuid4()), created_time=now),
    ]
    token = uuid.uuid4().hex[:16]
    with open(os.path.join(root, "_delta_log", f"{0:020d}.json"), "wb") as out:
        out.write(dumps(head))
        for start in range(0, files, 10_000):
            entries = [_entry(i, token) for i in range(start, min(files, start + 10_000))]
            adds = [add_action(e, schema, [], size=1950, modification_time=now, data_change=True) for e in entries]
            out.write(dumps(adds))
    deltalake.DeltaTable(root).create_checkpoint()
    return root


def copy_delta_fixture(files: int, schema: pa.Schema, target: str) -> str:
    """A private copy of the cached Delta fixture (appends add to it), hard-linking the log files."""
    source = build_delta_fixture(files, schema)
    shutil.copytree(source, target, copy_function=os.link)
    last = os.path.join(target, "_delta_log", "_last_checkpoint")
    data = open(last, "rb").read()
    os.unlink(last)
    with open(last, "wb") as out:
        out.write(data)
    return target
