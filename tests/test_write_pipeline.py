"""The one write pipeline (issue 25, item 1): each write reads the live version once and decides its schema once.

Requests are counted through a wrapping ``Store`` (every call reaches the real store underneath).
That the schema is decided once is a structural check: the schema rules of
``dagster_parquet_dataset.dataset.format.schema`` (``evolve_schema``, ``check_column_names``) are replaced,
in every package module that imported them, by counting wrappers that still call the real functions.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pytest

from dagster_parquet_dataset import ManifestCorrupted, ParquetDatasetStore, Store
from dagster_parquet_dataset.dataset.format import schema as schema_rules
from dagster_parquet_dataset.dataset.format import segments

from ._stores import InjectedCrash, WrappingStore

COUNTED = ("evolve_schema", "check_column_names")


@contextmanager
def counting_schema_rules() -> Iterator[Counter[str]]:
    """Count calls of the schema rules in :data:`COUNTED`, wherever the package imported them."""
    counts: Counter[str] = Counter()
    patched: list[tuple[Any, str, Any]] = []
    for name in COUNTED:
        real = getattr(schema_rules, name)

        def counted(*args: Any, _real: Callable[..., Any] = real, _name: str = name, **kwargs: Any) -> Any:
            counts[_name] += 1
            return _real(*args, **kwargs)

        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("dagster_parquet_dataset") and (
                getattr(module, name, None) is real
            ):
                patched.append((module, name, real))
                setattr(module, name, counted)
    try:
        yield counts
    finally:
        for module, name, real in patched:
            setattr(module, name, real)


class RacingStore(WrappingStore):
    """Runs ``before_swap`` (another writer's commit) right before the next ``manifest.json`` swap, once."""

    before_swap: Callable[[], None] | None = None

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        if path.endswith("/manifest.json") and self.before_swap is not None:
            race, self.before_swap = self.before_swap, None
            race()
        return super().write_if(path, data, expected=expected)


def _uncounted(counts: Counter[str], write: Callable[[], object]) -> Callable[[], None]:
    """``write`` (the other writer's commit), its schema-rule calls left out of ``counts``."""

    def run() -> None:
        before = counts.copy()
        write()
        counts.clear()
        counts.update(before)

    return run


def _manifest_reads(store: WrappingStore) -> int:
    return sum(
        1 for op, path in store.log if path.endswith("/manifest.json") and op in ("read_bytes", "read_versioned")
    )


def _segment_reads(store: WrappingStore) -> int:
    return sum(1 for op, path in store.log if "/_segments/" in path and op in ("read_bytes", "open_input"))


def _table(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": [f"r{i}" for i in range(n)]})


def test_append_reads_the_live_version_once_and_decides_its_schema_once(store: Store) -> None:
    ParquetDatasetStore(store).write_dataset(_table(0, 3), "t")
    counting = WrappingStore(store)
    datasets = ParquetDatasetStore(counting)
    with counting_schema_rules() as counts:
        committed = datasets.append_dataset(_table(3, 2).cast(pa.schema([("id", pa.int32()), ("v", pa.string())])), "t")
    assert committed.row_count == 5 and committed.schema is not None
    assert committed.schema.field("id").type == pa.int64()  # the int32 column was cast to the dataset's type
    assert _manifest_reads(counting) == 1
    assert counts["evolve_schema"] == 1, "the append's schema is decided once, not again at its commit"
    assert counts["check_column_names"] == 1


def test_append_rebased_on_a_new_schema_decides_again_once(store: Store) -> None:
    """A concurrent append adds the column this append adds too, between this append's begin and its
    swap: the commit reads the new version and decides the schema once more (the live schema moved), no more."""
    ParquetDatasetStore(store).write_dataset(_table(0, 3), "t")
    racing = RacingStore(store)
    other = ParquetDatasetStore(store)
    ours = _table(3, 2).append_column("w", pa.array([2.5, None]))
    with counting_schema_rules() as counts:
        racing.before_swap = _uncounted(
            counts,
            lambda: other.append_dataset(
                _table(10, 1).append_column("w", pa.array([1.5])), "t", allow_new_columns=True
            ),
        )
        committed = ParquetDatasetStore(racing).append_dataset(ours, "t", allow_new_columns=True)
    assert committed.row_count == 6 and committed.schema is not None and committed.schema.names == ["id", "v", "w"]
    assert counts["evolve_schema"] == 2, "decided at the begin, and again only because the live schema moved"
    assert _manifest_reads(racing) == 2  # the begin, and the re-read after the lost race
    assert ParquetDatasetStore(store).read_dataset("t").num_rows == 6


def test_append_rebased_on_the_same_schema_does_not_decide_again(store: Store) -> None:
    ParquetDatasetStore(store).write_dataset(_table(0, 3), "t")
    racing = RacingStore(store)
    other = ParquetDatasetStore(store)
    with counting_schema_rules() as counts:
        racing.before_swap = _uncounted(counts, lambda: other.append_dataset(_table(10, 1), "t"))
        committed = ParquetDatasetStore(racing).append_dataset(_table(3, 2), "t")
    assert committed.row_count == 6
    assert counts["evolve_schema"] == 1, "the live schema did not move: the decision stands"


def test_append_on_a_segmented_dataset_reads_each_segment_once_per_commit_attempt(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segments, "INLINE_ENTRIES", 4)
    ParquetDatasetStore(store, max_rows_per_file=1, retain_versions=1).write_dataset(_table(0, 8), "t")
    counting = WrappingStore(store)  # a fresh store object: no segment is cached for it
    with counting_schema_rules() as counts:
        committed = ParquetDatasetStore(counting, retain_versions=1).append_dataset(_table(8, 1), "t")
    assert committed.row_count == 9 and len(committed.segments) == 1
    assert _manifest_reads(counting) == 1
    assert _segment_reads(counting) <= 1
    assert counts["evolve_schema"] == 1


def test_merge_into_a_new_dataset_reads_and_checks_once(store: Store) -> None:
    """A merge into a dataset that does not exist yet writes it through the same pipeline,
    from the version the merge read: no second read of ``manifest.json``, no second check."""
    counting = WrappingStore(store)
    with counting_schema_rules() as counts:
        result = ParquetDatasetStore(counting).merge_dataset(_table(0, 3), "t", key_columns=["id"])
    assert result.inserted == 3 and result.manifest is not None and result.manifest.row_count == 3
    assert _manifest_reads(counting) == 1
    assert counts["check_column_names"] == 1
    assert ParquetDatasetStore(store).read_dataset("t").sort_by("id").equals(_table(0, 3))


class _DeleteDiesAfterItsTombstone(WrappingStore):
    def _before(self, op: str, path: str) -> None:
        super()._before(op, path)
        if op == "delete" and path.endswith(".parquet"):
            raise InjectedCrash(f"crash at {op} {path}")


_WRITES = ("open_output", "write_bytes", "delete", "delete_folder", "write_if", "rename")


def _writes(store: WrappingStore) -> list[tuple[str, str]]:
    return [(op, path) for op, path in store.log if op in _WRITES]


def test_plan_merge_begins_as_every_write_does(store: Store) -> None:
    """``plan_merge`` begins through the pipeline's ``begin``: one read of ``manifest.json``, nothing
    written, a bad ``run_id`` refused there (it used to be committed, making the dataset unreadable),
    a corrupt manifest refused, a delete's tombstone read as no dataset."""
    ParquetDatasetStore(store).write_dataset(_table(0, 3), "t")
    counting = WrappingStore(store)
    datasets = ParquetDatasetStore(counting)
    schema = _table(0, 1).schema
    plan = datasets.plan_merge("t", source_schema=schema, key_columns=["id"], key_ranges={"id": (1, 1)})
    assert plan.exists and plan.version == 1 and plan.manifest is not None and plan.manifest.version == 1
    assert plan.write.txn == plan.txn and plan.write.current is plan.manifest and not plan.write.spec_names
    assert [e.path for e in plan.candidates] == ["data.parquet"]
    assert _manifest_reads(counting) == 1 and _writes(counting) == []

    counting.log.clear()
    with pytest.raises(TypeError, match="run_id must be a str or None, got int"):
        datasets.plan_merge(
            "t",
            source_schema=schema,
            key_columns=["id"],
            key_ranges={"id": (1, 1)},
            run_id=5,  # type: ignore[arg-type]
        )
    assert _writes(counting) == []
    assert ParquetDatasetStore(store).read_dataset("t").num_rows == 3

    store.write_bytes("c/manifest.json", b"{ not json")
    counting.log.clear()
    with pytest.raises(ManifestCorrupted):
        datasets.plan_merge("c", source_schema=schema, key_columns=["id"], key_ranges={"id": (1, 1)})
    assert _manifest_reads(counting) == 2 and _writes(counting) == []  # the begin, and the read that names the reason

    with pytest.raises(InjectedCrash):
        ParquetDatasetStore(_DeleteDiesAfterItsTombstone(store)).delete_dataset("t")
    counting.log.clear()
    plan = datasets.plan_merge("t", source_schema=schema, key_columns=["id"], key_ranges={"id": (1, 1)})
    assert not plan.exists and plan.version is None and plan.manifest is None and plan.candidates == ()
    assert _manifest_reads(counting) == 1 and _writes(counting) == []
