"""Segments under racing commits (issue 26, defects 1, 2, 4, 7 and 13).

A writer or reader that read ``manifest.json`` and then finds a segment gone lost a race: a commit
replaced that version and (with ``retain_versions=1``) deleted its segments. It must build again on
the new version / read again, never raise ``ManifestCorrupted``. With the default retention the
replaced version's segments stay, so nothing is lost at all. A segment damaged while the live
manifest lists it stays ``ManifestCorrupted``, and nothing commits on top of it. The race is forced
at an exact store call: the first read of a segment by the operation under test.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from dagster_parquet_dataset import ManifestCorrupted, ParquetDatasetStore
from dagster_parquet_dataset.dataset import pin_manifests, read_committed_manifests
from dagster_parquet_dataset.dataset.format import segments
from dagster_parquet_dataset.storage.base import Store

from ._stores import WrappingStore

FILES = 40  # more than the 32 entries a root holds inline: they live in a segment


@pytest.fixture(autouse=True)
def _inline_32(monkeypatch: pytest.MonkeyPatch) -> None:
    """At most 32 entries inline (the byte budget would keep these small entries inline): segments are used."""
    monkeypatch.setattr(segments, "INLINE_ENTRIES", 32)


RETENTION = {"retain_versions=1": {"retain_versions": 1}, "default": {}}


class RaceStore(WrappingStore):
    """Runs ``race`` once, just before the first read of a path containing ``trigger``."""

    def __init__(self, inner: Store, trigger: str, race: Callable[[], None]) -> None:
        super().__init__(inner)
        self.trigger, self.race, self.fired = trigger, race, False

    def _before(self, op: str, path: str) -> None:
        super()._before(op, path)
        if not self.fired and op in ("read_bytes", "open_input") and self.trigger in path:
            self.fired = True
            self.race()

    def arrow_filesystem(self) -> Any:
        return self.inner.arrow_filesystem()  # scans read parts through it; segments go through read_bytes


def _table(start: int, n: int) -> pa.Table:
    return pa.table(
        {"id": pa.array(range(start, start + n), pa.int64()), "v": [f"r{i}" for i in range(start, start + n)]}
    )


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def _segmented(store: Store, key: str = "t") -> None:
    ParquetDatasetStore(store, max_rows_per_file=1, retain_versions=1).write_dataset(_table(0, FILES), key)


def _root(store: Store, key: str = "t") -> dict[str, Any]:
    return json.loads(store.read_bytes(f"{key}/manifest.json"))


def _snapshot(store: Store) -> dict[str, bytes]:
    return {f.path: store.read_bytes(f.path) for f in store.list_files("t")}


RACERS: dict[str, Callable[[ParquetDatasetStore], None]] = {
    # An append of more than 32 files merges the trailing segment into a new one.
    "append-merging-the-segment": lambda ds: ds.append_dataset(_table(1000, FILES), "t"),
    # An overwrite drops every segment.
    "overwrite": lambda ds: ds.write_dataset(_table(1000, 3), "t", overwrite=True),
}


def _expected_after(racer: str) -> list[int]:
    return (
        list(range(FILES)) + list(range(1000, 1000 + FILES)) if racer.startswith("append") else list(range(1000, 1003))
    )


# ---------------------------------------------------------------------- writers


WRITERS: dict[str, Callable[[ParquetDatasetStore], object]] = {
    "append-of-more-than-32": lambda ds: ds.append_dataset(_table(5000, FILES), "t"),
    "merge": lambda ds: ds.merge_dataset(_table(5000, 3), "t", key_columns=["id"]),
    "compact": lambda ds: ds.compact_dataset("t"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("retention", list(RETENTION))
@pytest.mark.parametrize("racer", list(RACERS))
@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_writer_whose_segment_went_builds_again_on_the_new_version(
    store: Store, writer: str, racer: str, retention: str
) -> None:
    _segmented(store)
    options = {"max_rows_per_file": 1, **RETENTION[retention]}
    rival = ParquetDatasetStore(store, **options)  # type: ignore[arg-type]
    racing = RaceStore(store, "/_segments/", lambda: RACERS[racer](rival))
    WRITERS[writer](ParquetDatasetStore(racing, **options))  # type: ignore[arg-type]
    assert racing.fired
    ids = _ids(ParquetDatasetStore(WrappingStore(store)).read_dataset("t"))
    expected = _expected_after(racer)
    if writer != "compact":  # the writer's rows are there exactly once, on top of the rival's
        expected = sorted(set(expected) | set(range(5000, 5000 + (FILES if writer.startswith("append") else 3))))
    assert ids == expected
    assert ParquetDatasetStore(WrappingStore(store)).verify_dataset("t").ok


# ---------------------------------------------------------------------- readers


READERS: dict[str, Callable[[ParquetDatasetStore], pa.Table]] = {
    "read_dataset": lambda ds: ds.read_dataset("t"),
    "filtered read": lambda ds: ds.read_dataset("t", filters=[("id", ">=", 0)]),
    "scan_dataset": lambda ds: ds.scan_dataset("t").to_table(),
    "scan_datasets": lambda ds: ds.scan_datasets(["t", "u"]).to_table(),
    "plan_read": lambda ds: ds.read_dataset("t", version=ds.plan_read("t", filters=[("id", ">=", 0)]).version),
    # What Dagster inputs do: the manifests fetched once, then planned on.
    "pinned plan_read": lambda ds: ds.read_dataset(
        "t", version=pin_manifests(ds, read_committed_manifests(ds, ["t"])).plan_read("t").version
    ),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("retention", list(RETENTION))
@pytest.mark.parametrize("racer", list(RACERS))
@pytest.mark.parametrize("reader", list(READERS))
def test_a_reader_whose_segment_went_reads_again(store: Store, reader: str, racer: str, retention: str) -> None:
    _segmented(store)
    ParquetDatasetStore(store).write_dataset(_table(9000, 2), "u")
    rival = ParquetDatasetStore(store, max_rows_per_file=1, **RETENTION[retention])  # type: ignore[arg-type]
    racing = RaceStore(store, "t/_segments/", lambda: RACERS[racer](rival))
    ids = [i for i in _ids(READERS[reader](ParquetDatasetStore(racing))) if i < 9000]
    assert racing.fired
    # retain_versions=1: the version read first is gone, the reader reads the new one; by default the
    # replaced version's segment stays, and the reader returns the version it started on, whole.
    assert ids == (_expected_after(racer) if retention == "retain_versions=1" else list(range(FILES)))


# ---------------------------------------------------------------------- damage while live


def _damage(store: Store, how: str) -> str:
    path = "t/" + _root(store)["segments"][0]["path"]
    data = store.read_bytes(path)
    if how == "missing":
        store.delete(path)
    elif how == "truncated":
        store.write_bytes(path, data[: len(data) // 2])
    else:
        store.write_bytes(path, data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    return path


DAMAGED_WRITERS: dict[str, Callable[[ParquetDatasetStore], object]] = {
    "append-of-32-or-fewer": lambda ds: ds.append_dataset(_table(5000, 3), "t"),
    **WRITERS,
}


@pytest.mark.parametrize("how", ["missing", "truncated", "corrupt"])
@pytest.mark.parametrize("writer", list(DAMAGED_WRITERS))
def test_nothing_commits_on_top_of_a_damaged_segment(store: Store, writer: str, how: str) -> None:
    _segmented(store)
    path = _damage(store, how)
    before = _snapshot(store)
    with pytest.raises(ManifestCorrupted, match=path.split("/", 1)[1]):
        DAMAGED_WRITERS[writer](ParquetDatasetStore(WrappingStore(store), max_rows_per_file=1))
    assert _snapshot(store) == before


@pytest.mark.parametrize("how", ["missing", "truncated", "corrupt"])
def test_a_reader_of_a_damaged_segment_gets_manifest_corrupted(store: Store, how: str) -> None:
    _segmented(store)
    _damage(store, how)
    with pytest.raises(ManifestCorrupted) as info:
        ParquetDatasetStore(WrappingStore(store)).read_dataset("t")
    assert how in info.value.reason
    with pytest.raises(ManifestCorrupted):
        ParquetDatasetStore(RaceStore(store, "no race", lambda: None)).scan_dataset("t")


# ---------------------------------------------------------------------- segment paths (defect 7)


@pytest.mark.parametrize(
    "bad", ["_segments/./{name}", "_segments//{name}", "_segments/{name}/", "_segments\\{name}", "_segments/"]
)
def test_an_unsafe_segment_path_is_manifest_corrupted_reported_and_never_vacuumed(store: Store, bad: str) -> None:
    _segmented(store)
    raw = _root(store)
    real = raw["segments"][0]["path"]
    raw["segments"][0]["path"] = bad.format(name=real.split("/", 1)[1])
    store.write_bytes("t/manifest.json", json.dumps(raw, sort_keys=True, indent=2).encode())
    cold = ParquetDatasetStore(WrappingStore(store), retain_versions=1)
    with pytest.raises(ManifestCorrupted, match="segment"):
        cold.read_dataset("t")
    report = cold.verify_dataset("t")
    assert not report.ok and "segment" in str(report.problems[0])
    with pytest.raises(ManifestCorrupted):
        cold.vacuum("t", grace_period=0)
    assert store.exists(f"t/{real}")
