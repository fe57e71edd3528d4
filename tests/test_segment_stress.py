"""Stress (issue 26): 6 threads x 12 appends, with merges and compactions racing them and readers
reading all along, on local disk and moto S3. The 73 files overflow the 32 entries a root holds
inline, so segments are written, merged and (with ``retain_versions=1``) deleted under the others'
feet. Every append must commit exactly once, and every read must be a whole version."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore
from dagster_parquet_dataset.dataset.format import segments
from dagster_parquet_dataset.storage.base import Store

THREADS, APPENDS, ROWS = 6, 12, 3
MERGES, COMPACTIONS = 3, 3


@pytest.fixture(autouse=True)
def _inline_32(monkeypatch: pytest.MonkeyPatch) -> None:
    """At most 32 entries inline (the byte budget would keep these small entries inline): segments are used."""
    monkeypatch.setattr(segments, "INLINE_ENTRIES", 32)


def _batch(first: int) -> pa.Table:
    return pa.table({"id": pa.array(range(first, first + ROWS), pa.int64())})


def _check_whole(ids: list[int]) -> None:
    """Each batch (ids ``first .. first + ROWS - 1``, ``first`` a multiple of 10) is all there or absent."""
    counts = Counter(ids)
    assert all(n == 1 for n in counts.values()), "a row read twice"
    batches = Counter(i // 10 for i in ids)
    assert all(n == ROWS for n in batches.values()), f"a partial batch: {batches}"


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("backend", "retention"),
    [("local", "retain_versions=1"), ("local", "default"), ("s3", "retain_versions=1"), ("s3", "default")],
)
def test_appends_merges_and_compactions_racing_commit_exactly_once(
    request: pytest.FixtureRequest, tmp_path: object, backend: str, retention: str
) -> None:
    from dagster_parquet_dataset import LocalStore

    store: Store = LocalStore(str(tmp_path)) if backend == "local" else request.getfixturevalue("s3_store")
    options: dict[str, object] = {"commit_timeout": 120.0}
    if retention == "retain_versions=1":
        options["retain_versions"] = 1
    ParquetDatasetStore(store, **options).write_dataset(_batch(10_000_000), "t")  # type: ignore[arg-type]
    done = threading.Event()
    reads: list[int] = []
    errors: list[BaseException] = []

    def append(thread: int) -> None:
        ds = ParquetDatasetStore(store, **options)  # type: ignore[arg-type]
        for i in range(APPENDS):
            ds.append_dataset(_batch((thread * 100 + i) * 10), "t")

    def merge(n: int) -> None:
        ParquetDatasetStore(store, **options).merge_dataset(_batch(20_000_000 + 10 * n), "t", key_columns=["id"])  # type: ignore[arg-type]

    def compact(_n: int) -> None:
        ParquetDatasetStore(store, **options).compact_dataset("t")  # type: ignore[arg-type]

    def read() -> None:
        ds = ParquetDatasetStore(store)
        while not done.is_set():
            try:
                _check_whole(ds.read_dataset("t").column("id").to_pylist())
                reads.append(1)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                return

    readers = [threading.Thread(target=read) for _ in range(2)]
    for r in readers:
        r.start()
    try:
        with ThreadPoolExecutor(THREADS + 2) as pool:
            jobs = [pool.submit(append, t) for t in range(THREADS)]
            jobs += [pool.submit(merge, n) for n in range(MERGES)]
            jobs += [pool.submit(compact, n) for n in range(COMPACTIONS)]
            for job in jobs:
                job.result()
    finally:
        done.set()
        for r in readers:
            r.join()
    assert not errors, errors[0]
    assert reads, "the readers read nothing"
    ids = ParquetDatasetStore(store).read_dataset("t").column("id").to_pylist()
    _check_whole(ids)
    appended = {(t * 100 + i) * 10 + k for t in range(THREADS) for i in range(APPENDS) for k in range(ROWS)}
    merged = {20_000_000 + 10 * n + k for n in range(MERGES) for k in range(ROWS)}
    assert sorted(ids) == sorted(appended | merged | set(range(10_000_000, 10_000_000 + ROWS)))
    assert ParquetDatasetStore(store).verify_dataset("t").ok
