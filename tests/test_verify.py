"""``ParquetDatasetStore.verify_dataset``: every part checked against the manifest, every problem reported."""

from __future__ import annotations

import json
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dagster_parquet_dataset import (
    DatasetNotFound,
    MemoryStore,
    ParquetDatasetStore,
    Store,
    VerifyProblem,
    VerifyReport,
    VersionNotRetained,
)
from dagster_parquet_dataset.dataset.io.verify_parts import PROBLEM_KINDS

from ._stores import WrappingStore

KEY = "sales/orders"


def _table(n: int = 100, start: int = 0) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "name": [f"n{i:05d}" for i in range(start, start + n)],
            "x": pa.array([i * 0.5 for i in range(start, start + n)], pa.float64()),
        }
    )


def _parts(ds: ParquetDatasetStore, key: str = KEY) -> list[str]:
    return list(ds.read_manifest(key).parts)


def _kinds(report: VerifyReport) -> list[tuple[str, str]]:
    return [(p.path, p.kind) for p in report.problems]


def test_healthy_dataset_is_ok(store: Store) -> None:
    ds = ParquetDatasetStore(store, max_rows_per_file=25)
    ds.write_dataset(_table(), KEY)
    report = ds.verify_dataset(KEY)
    assert report == VerifyReport(KEY, 1, 4, ())
    assert report.ok
    assert report.to_dict() == {"key": KEY, "version": 1, "files_checked": 4, "ok": True, "problems": []}


def test_partitioned_and_appended_dataset_is_ok(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    table = _table(60).append_column("region", pa.array(["eu", "us", "ap"] * 20))
    ds.write_dataset(table, KEY, partition_by=["region"])
    ds.append_dataset(table.slice(0, 10), KEY)
    ds.append_dataset(
        table.slice(0, 5).append_column("extra", pa.array([1] * 5, pa.int32())), KEY, allow_new_columns=True
    )
    manifest = ds.read_manifest(KEY)
    report = ds.verify_dataset(KEY)
    assert report.ok, report.problems
    assert report.files_checked == len(manifest.parts) > 3


def test_deleted_parts_are_each_reported(store: Store) -> None:
    ds = ParquetDatasetStore(store, max_rows_per_file=20)
    ds.write_dataset(_table(), KEY)
    parts = _parts(ds)
    store.delete(f"{KEY}/{parts[1]}")
    store.delete(f"{KEY}/{parts[3]}")
    report = ds.verify_dataset(KEY)
    assert not report.ok
    assert report.files_checked == 5
    assert _kinds(report) == [(parts[1], "missing"), (parts[3], "missing")]
    assert all(parts[i] in p.message for i, p in zip((1, 3), report.problems, strict=True))


def test_truncated_part_is_reported_with_its_sizes(store: Store) -> None:
    ds = ParquetDatasetStore(store, max_rows_per_file=50)
    ds.write_dataset(_table(), KEY)
    parts = _parts(ds)
    recorded = ds.read_manifest(KEY).files[0].size_bytes
    data = store.read_bytes(f"{KEY}/{parts[0]}")
    store.write_bytes(f"{KEY}/{parts[0]}", data[: len(data) // 2])
    report = ds.verify_dataset(KEY)
    assert _kinds(report) == [(parts[0], "size"), (parts[0], "footer")]
    assert f"is {len(data) // 2} bytes; the manifest records {recorded}" in report.problems[0].message


def test_part_swapped_with_a_sibling_is_caught_by_its_footer(store: Store) -> None:
    ds = ParquetDatasetStore(store, max_rows_per_file=50)
    ds.write_dataset(_table(), KEY)
    a, b = _parts(ds)
    data_a, data_b = store.read_bytes(f"{KEY}/{a}"), store.read_bytes(f"{KEY}/{b}")
    store.write_bytes(f"{KEY}/{a}", data_b)
    store.write_bytes(f"{KEY}/{b}", data_a)
    report = ds.verify_dataset(KEY)
    kinds = _kinds(report)
    # Same row count and schema: the path tag and the statistics give the swap away, on both parts.
    assert (a, "path") in kinds and (b, "path") in kinds
    assert (a, "statistics") in kinds and (b, "statistics") in kinds
    assert not any(k in ("rows", "schema", "missing", "footer") for _, k in kinds)


def test_part_replaced_by_a_foreign_file(store: Store) -> None:
    ds = ParquetDatasetStore(store, max_rows_per_file=50)
    ds.write_dataset(_table(), KEY)
    a, b = _parts(ds)
    other = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})  # no "x", 3 rows
    sink = pa.BufferOutputStream()
    pq.write_table(other, sink)
    store.write_bytes(f"{KEY}/{b}", sink.getvalue().to_pybytes())
    report = ds.verify_dataset(KEY)
    assert {k for p, k in _kinds(report) if p == b} == {"size", "rows", "schema"}
    assert all(p.path == b for p in report.problems)
    schema_problem = next(p for p in report.problems if p.kind == "schema")
    assert "x: double" in schema_problem.message


def test_not_parquet_at_all(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(_table(), KEY)
    (part,) = _parts(ds)
    size = ds.read_manifest(KEY).files[0].size_bytes
    assert size is not None
    store.write_bytes(f"{KEY}/{part}", b"x" * size)  # same size, garbage
    report = ds.verify_dataset(KEY)
    assert _kinds(report) == [(part, "footer")]


def test_manifest_edited_to_disagree_with_the_files(store: Store) -> None:
    ds = ParquetDatasetStore(store, max_rows_per_file=50)
    ds.write_dataset(_table(), KEY)
    raw = json.loads(store.read_bytes(f"{KEY}/manifest.json"))
    first, second = raw["files"]
    first["row_count"] += 1
    raw["row_count"] += 1
    second["stats"]["id"]["max"] = 10_000
    second["size_bytes"] += 7
    store.write_bytes(f"{KEY}/manifest.json", json.dumps(raw).encode())
    report = ds.verify_dataset(KEY)
    assert _kinds(report) == [
        (first["path"], "rows"),
        (second["path"], "size"),
        (second["path"], "statistics"),
    ]
    assert "max 99 (manifest 10000)" in report.problems[2].message


def test_partition_values_that_disagree_with_their_folder_are_reported(store: Store) -> None:
    """A Hive reader takes partition values from the folder, this package from the entry (issue 26, #5)."""
    ds = ParquetDatasetStore(store)
    ds.write_dataset(pa.table({"p": [1, 2, 3], "v": [1, 2, 3]}), KEY, partition_by=["p"])
    raw = json.loads(store.read_bytes(f"{KEY}/manifest.json"))
    first, second, third = raw["files"]
    first["partition_values"] = {"p": 9}
    assert third["path"].startswith("p=3/")
    ds_ok = ParquetDatasetStore(store).verify_dataset(KEY)
    assert ds_ok.ok, ds_ok
    store.write_bytes(f"{KEY}/manifest.json", json.dumps(raw).encode())
    report = ds.verify_dataset(KEY)
    assert _kinds(report) == [(first["path"], "partition")]
    assert "p=9" in report.problems[0].message and "p=1/" in report.problems[0].message


@pytest.mark.parametrize(
    "content",
    [b"{not json", b'{"dataset_key": "sales/orders"}', b"", json.dumps({"parts": "no"}).encode()],
    ids=["invalid-json", "missing-fields", "empty", "bad-types"],
)
def test_corrupt_manifest_is_a_problem_not_an_exception(store: Store, content: bytes) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(_table(), KEY)
    store.write_bytes(f"{KEY}/manifest.json", content)
    report = ds.verify_dataset(KEY)
    assert report.version is None and report.files_checked == 0
    assert _kinds(report) == [("manifest.json", "manifest")]
    assert KEY in report.problems[0].message
    assert "\n" not in report.problems[0].message


def test_missing_manifest_with_files_left_is_a_problem(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(_table(), KEY)
    store.delete(f"{KEY}/manifest.json")
    report = ds.verify_dataset(KEY)
    assert _kinds(report) == [("manifest.json", "manifest")]


def test_no_dataset_at_all_raises(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    with pytest.raises(DatasetNotFound, match="does not exist"):
        ds.verify_dataset("nothing/here")
    ds.write_dataset(_table(5), "outer/inner")
    with pytest.raises(DatasetNotFound, match="nested"):
        ds.verify_dataset("outer")


def test_bad_key_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="'..'"):
        ParquetDatasetStore(MemoryStore()).verify_dataset("a/../b")


def test_past_versions(store: Store) -> None:
    ds = ParquetDatasetStore(store, retain_versions=2)
    ds.write_dataset(_table(10), KEY)
    ds.write_dataset(_table(20), KEY, overwrite=True)
    ds.write_dataset(_table(30), KEY, overwrite=True)
    old = ds.read_manifest(KEY, version=2)
    assert ds.verify_dataset(KEY, version=2) == VerifyReport(KEY, 2, len(old.parts), ())
    store.delete(f"{KEY}/{old.parts[0]}")
    assert _kinds(ds.verify_dataset(KEY, version=2)) == [(old.parts[0], "missing")]
    assert ds.verify_dataset(KEY).ok  # the live version does not share that part
    with pytest.raises(VersionNotRetained):
        ds.verify_dataset(KEY, version=1)


def test_reads_footers_only_and_reports_progress() -> None:
    inner = MemoryStore()
    ds = ParquetDatasetStore(inner, max_rows_per_file=20_000, compression="none")
    ds.write_dataset(_table(100_000), KEY)
    total = sum(f.size_bytes or 0 for f in ds.read_manifest(KEY).files)
    counting = WrappingStore(inner)
    calls: list[tuple[int, int]] = []
    report = ParquetDatasetStore(counting).verify_dataset(KEY, progress=lambda done, n: calls.append((done, n)))
    assert report.ok and report.files_checked == 5
    # pyarrow fetches a footer with one read of the file's last 64 KiB at most; data pages are never read.
    assert counting.bytes_read <= 5 * 64 * 1024 < total / 5, (counting.bytes_read, total)
    assert counting.calls["open_input"] == 5 and counting.calls["list_files"] == 1
    assert sorted(calls) == [(i, 5) for i in range(1, 6)]


def test_one_thread_checks_in_the_calling_thread_and_finds_the_same_problems(store: Store) -> None:
    ds = ParquetDatasetStore(store, max_rows_per_file=20)
    ds.write_dataset(_table(), KEY)
    parts = _parts(ds)
    store.delete(f"{KEY}/{parts[2]}")
    threads: set[str] = set()
    serial = ds.verify_dataset(KEY, threads=1, progress=lambda done, n: threads.add(threading.current_thread().name))
    assert serial == ds.verify_dataset(KEY)
    assert _kinds(serial) == [(parts[2], "missing")] and serial.files_checked == 5
    assert threads == {threading.current_thread().name}


@pytest.mark.parametrize(("threads", "error"), [(0, ValueError), (-2, ValueError), (True, TypeError), (2.0, TypeError)])
def test_bad_thread_count_is_refused(threads: object, error: type[Exception]) -> None:
    ds = ParquetDatasetStore(MemoryStore())
    ds.write_dataset(_table(10), KEY)
    with pytest.raises(error, match="threads"):
        ds.verify_dataset(KEY, threads=threads)  # type: ignore[arg-type]


def test_problem_kinds_are_documented() -> None:
    assert set(PROBLEM_KINDS) == {
        "manifest",
        "missing",
        "size",
        "footer",
        "rows",
        "schema",
        "statistics",
        "path",
        "partition",
    }
    problem = VerifyProblem("p", "size", "m")
    with pytest.raises(AttributeError):
        problem.kind = "rows"  # type: ignore[misc]


def test_footer_stats_equal_file_column_stats_for_every_type() -> None:
    """The per-schema-cached statistics reader verify uses agrees with the writer's own, type by type."""
    import datetime as dt
    from decimal import Decimal

    import pyarrow.parquet as pq

    from dagster_parquet_dataset.dataset.format.stats import FooterStats, file_column_stats

    n = 50
    table = pa.table(
        {
            "i8": pa.array([None if i % 7 == 0 else i - 25 for i in range(n)], pa.int8()),
            "u64": pa.array([2**63 + i for i in range(n)], pa.uint64()),
            "f32": pa.array([i / 3 for i in range(n)], pa.float32()),
            "f64": pa.array([float("inf") if i == 3 else -i * 1.5 for i in range(n)], pa.float64()),
            "b": pa.array([i % 2 == 0 for i in range(n)]),
            "s": pa.array([None if i % 5 == 0 else f"é{i:03d}" for i in range(n)]),
            "ls": pa.array([f"x{i}" for i in range(n)], pa.large_string()),
            "d": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=i) for i in range(n)], pa.date32()),
            "ts": pa.array([dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i) for i in range(n)], pa.timestamp("ms")),
            "tz": pa.array(
                [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=i) for i in range(n)],
                pa.timestamp("ns", tz="Europe/Paris"),
            ),
            "dec": pa.array([Decimal(i) / 100 for i in range(n)], pa.decimal128(9, 2)),
            "allnull": pa.nulls(n, pa.int32()),
            "lst": pa.array([[i] for i in range(n)]),
        }
    )
    store = MemoryStore()
    ds = ParquetDatasetStore(store, row_group_size=7, max_rows_per_file=20)
    ds.write_dataset(table, KEY)
    manifest = ds.read_manifest(KEY)
    schema = manifest.schema
    assert schema is not None
    reader = FooterStats(schema)
    checked = 0
    for entry in manifest.files:
        metadata = pq.read_metadata(pa.BufferReader(store.read_bytes(f"{KEY}/{entry.path}")))
        assert metadata.num_row_groups > 1
        for columns in (schema.names, ["s", "tz"], ["dec"]):
            expected = file_column_stats(metadata, pa.schema([schema.field(c) for c in columns]))
            assert reader(metadata, columns) == expected
            checked += 1
        assert reader(metadata, list(entry.stats or {})) == entry.stats
    assert checked == 9
    assert ds.verify_dataset(KEY).ok
