"""Time planning a filtered read over a synthetic 10,000-file manifest (issue 5: <= 50 ms).

Run: ``python benchmarks/bench_planning.py [--files N] [--repeat R]``.

The manifest is built the way the dataset layer stores it: per file a row
count, partition values (``day``) and ``file_column_stats`` output for eight
columns (the stats of one real Parquet file, shifted per file so that files
cover disjoint ``id`` ranges). It goes through ``json.dumps``/``json.loads``
once, like a manifest read; that parse is timed separately, since it is the
manifest read, not planning.

Two ways of planning are timed, best of ``--repeat`` runs, in milliseconds,
each including ``normalize_filters`` and all decoding of statistics and
partition values:

* ``plan_files``: the fast path for the dataset layer (partition values
  decoded and substituted once per distinct partition; a file's statistics
  decoded lazily, only for the terms that evaluation reaches, with no
  ``ColumnStats`` objects built);
* ``per-file``: the primitives one file at a time (``decode_value`` of the
  partition values, ``residual_filters``, ``decode_stats`` of the filter's
  columns, ``partition_stats``, ``might_match``).
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq

from dagster_parquet_dataset.dataset.expressions.pruning import (
    filter_columns,
    might_match,
    normalize_filters,
    partition_stats,
    plan_files,
    residual_filters,
)
from dagster_parquet_dataset.dataset.format.stats import decode_stats, decode_value, encode_value, file_column_stats

ROWS_PER_FILE = 1_000
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("amount", pa.float64()),
        ("customer", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("qty", pa.int32()),
        ("price", pa.decimal128(12, 2)),
        ("shipped", pa.date32()),
        ("flag", pa.bool_()),
        ("day", pa.date32()),  # the partition column
    ]
)


def build_manifest(files: int) -> str:
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    sample = pa.table(
        {
            "id": pa.array(range(ROWS_PER_FILE), pa.int64()),
            "amount": [i * 0.5 for i in range(ROWS_PER_FILE)],
            "customer": [f"customer-{i % 97:06d}" for i in range(ROWS_PER_FILE)],
            "ts": pa.array([base + timedelta(seconds=i) for i in range(ROWS_PER_FILE)], pa.timestamp("us", tz="UTC")),
            "qty": pa.array([i % 50 if i % 10 else None for i in range(ROWS_PER_FILE)], pa.int32()),
            "price": pa.array([Decimal(i) / 4 for i in range(ROWS_PER_FILE)], pa.decimal128(12, 2)),
            "shipped": [date(2026, 1, 1) + timedelta(days=i % 30) for i in range(ROWS_PER_FILE)],
            "flag": [i % 2 == 0 for i in range(ROWS_PER_FILE)],
            "day": [date(2026, 1, 1)] * ROWS_PER_FILE,
        },
        schema=SCHEMA,
    )
    data = sample.drop_columns(["day"])  # partition columns are not stored in the files
    sink = pa.BufferOutputStream()
    writer = pq.ParquetWriter(sink, data.schema)
    writer.write_table(data, row_group_size=256)
    writer.close()
    template = file_column_stats(writer.writer.metadata, data.schema)
    entries = []
    for k in range(files):
        stats = json.loads(json.dumps(template))
        stats["id"]["min"] += k * ROWS_PER_FILE
        stats["id"]["max"] += k * ROWS_PER_FILE
        day = date(2026, 1, 1) + timedelta(days=k // 100)
        entries.append(
            {
                "path": f"day={day.isoformat()}/part-{k:05d}.parquet",
                "row_count": ROWS_PER_FILE,
                "size_bytes": 123_456,
                "partition_values": {"day": encode_value(day, pa.date32())},
                "column_stats": stats,
            }
        )
    return json.dumps({"files": entries})


def plan_fast(files: list[dict], filters: list) -> tuple[int, int]:
    dnf = normalize_filters(filters, SCHEMA)
    answers = plan_files(dnf, SCHEMA, [(f["column_stats"], f["partition_values"], f["row_count"]) for f in files])
    pruned = answers.count(False)
    return len(answers) - pruned, pruned


def plan_per_file(files: list[dict], filters: list) -> tuple[int, int]:
    dnf = normalize_filters(filters, SCHEMA)
    columns = filter_columns(dnf)
    day_type = SCHEMA.field("day").type
    kept = pruned = 0
    for entry in files:
        rows = entry["row_count"]
        constants = {name: decode_value(raw, day_type) for name, raw in entry["partition_values"].items()}
        residual = residual_filters(dnf, constants)
        if residual is False:
            pruned += 1
            continue
        stats = decode_stats(entry["column_stats"], SCHEMA, columns=columns)
        for name, value in constants.items():
            stats[name] = partition_stats(value, rows)
        if might_match(residual if residual is not True else None, stats, rows):
            kept += 1
        else:
            pruned += 1
    return kept, pruned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    text = build_manifest(args.files)
    start = time.perf_counter()
    files = json.loads(text)["files"]
    parse_ms = (time.perf_counter() - start) * 1000
    print(f"manifest: {args.files} files, {len(text) / 1e6:.1f} MB JSON, json.loads {parse_ms:.1f} ms")

    x = 4_321_000
    scenarios = {
        "id BETWEEN x AND x+50_000 (2 predicates)": [("id", ">=", x), ("id", "<=", x + 50_000)],
        "id == x OR customer == 'nobody'": [[("id", "==", x)], [("customer", "==", "nobody")]],
        "day == 2026-02-01 AND ts >= ...": [
            ("day", "==", "2026-02-01"),
            ("ts", ">=", datetime(2026, 1, 1, 0, 10, tzinfo=timezone.utc)),
        ],
        "price in 3 values AND qty is null": [("price", "in", [1, 2.5, "3.75"]), ("qty", "is null")],
    }
    print(f"{'filter':45s} {'plan_files':>10s} {'per-file':>10s}   kept / pruned files")
    for name, filters in scenarios.items():
        times = []
        answers = set()
        for planner in (plan_fast, plan_per_file):
            best = float("inf")
            for _ in range(args.repeat):
                start = time.perf_counter()
                answer = planner(files, filters)
                best = min(best, time.perf_counter() - start)
            times.append(best * 1000)
            answers.add(answer)
        assert len(answers) == 1, answers  # both planners agree
        kept, pruned = answers.pop()
        print(f"{name:45s} {times[0]:7.2f} ms {times[1]:7.2f} ms   {kept:5d} / {pruned:5d}")


if __name__ == "__main__":
    main()
