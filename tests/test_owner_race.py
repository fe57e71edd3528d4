"""The owner check is part of the commit (issue 18, #13): ``expect_owner``.

Two writers with different owners (the Dagster IO manager: two assets whose
dataset keys collide) race to one key. The race is forced at an exact point:
the losing writer's store lets the other writer commit right before its own
swap of ``manifest.json``. The loser must get :class:`OwnerMismatch`, commit
nothing, and leave none of its parts; the winner's data stays as it was.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

from dagster_parquet_dataset import OwnerMismatch, ParquetDatasetStore, Store
from tests._stores import WrappingStore

KEY = "sales/eu"
A = {"owner": "a", "part": None}
B = {"owner": "b", "part": None}
RECORD_A = {"owner": "a"}
RECORD_B = {"owner": "b"}


class OtherCommitsFirst(WrappingStore):
    """Runs ``other`` (another writer, on the inner store) right before this writer's first manifest swap."""

    def __init__(self, inner: Store, other: Callable[[], object]) -> None:
        super().__init__(inner)
        self.other: Callable[[], object] | None = other
        self.swaps = 0

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        if path == f"{KEY}/manifest.json":
            self.swaps += 1
            if self.other is not None:
                other, self.other = self.other, None
                other()
        return super().write_if(path, data, expected=expected)


def _table(source: str, ids: list[int]) -> pa.Table:
    return pa.table({"id": ids, "source": [source] * len(ids)})


def _winner(store: Store, ids: list[int] = [1, 2]) -> Callable[[], object]:  # noqa: B006 - never mutated
    """Owner B replaces (or creates) the dataset through its own store object."""
    other = ParquetDatasetStore(store, retain_versions=1)
    return lambda: other.write_dataset(_table("b", ids), KEY, overwrite=True, metadata=RECORD_B, expect_owner=B)


def _parquet_files(store: Store) -> set[str]:
    return {f.path[len(KEY) + 1 :] for f in store.list_files(KEY) if f.path.endswith(".parquet")}


def _assert_b_intact(store: Store, ids: list[int] = [1, 2]) -> None:  # noqa: B006 - never mutated
    datasets = ParquetDatasetStore(store, retain_versions=1)
    live = datasets.read_manifest(KEY)
    assert live.metadata == RECORD_B
    assert datasets.read_dataset(KEY).to_pydict() == _table("b", ids).to_pydict()
    assert _parquet_files(store) == set(live.parts), "the loser's parts must be deleted"


WRITES: dict[str, Callable[[ParquetDatasetStore], object]] = {
    "overwrite": lambda ds: ds.write_dataset(_table("a", [7]), KEY, overwrite=True, metadata=RECORD_A, expect_owner=A),
    "append": lambda ds: ds.append_dataset(_table("a", [7]), KEY, metadata=RECORD_A, expect_owner=A),
    "merge": lambda ds: ds.merge_dataset(_table("a", [7]), KEY, key_columns=["id"], metadata=RECORD_A, expect_owner=A),
}


@pytest.mark.parametrize("operation", sorted(WRITES))
def test_both_create_the_dataset_the_loser_gets_owner_mismatch(store: Store, operation: str) -> None:
    racing = OtherCommitsFirst(store, _winner(store))
    with pytest.raises(OwnerMismatch) as caught:
        WRITES[operation](ParquetDatasetStore(racing, retain_versions=1))
    assert racing.other is None, "the other writer must have committed inside the race window"
    assert caught.value.key == KEY
    assert caught.value.recorded == RECORD_B and caught.value.expected == RECORD_A
    assert "'owner': 'b'" in str(caught.value) and "'owner': 'a'" in str(caught.value)
    _assert_b_intact(store)


@pytest.mark.parametrize("operation", sorted(WRITES))
def test_another_owner_replaces_the_dataset_before_the_commit(store: Store, operation: str) -> None:
    # A dataset without a recorded owner is accepted (written before owners, or outside Dagster) ...
    ParquetDatasetStore(store, retain_versions=1).write_dataset(_table("old", [1, 5]), KEY)
    racing = OtherCommitsFirst(store, _winner(store, [1, 3]))
    # ... but the version the commit would replace is owner B's: the retry refuses it.
    with pytest.raises(OwnerMismatch):
        WRITES[operation](ParquetDatasetStore(racing, retain_versions=1))
    assert racing.other is None and racing.swaps == 1, "refused on the retry, before a second swap"
    _assert_b_intact(store, [1, 3])


def test_same_owner_racing_is_not_refused(store: Store) -> None:
    ParquetDatasetStore(store, retain_versions=1).write_dataset(
        _table("a", [1]), KEY, metadata=RECORD_A, expect_owner=A
    )
    other = ParquetDatasetStore(store, retain_versions=1)
    racing = OtherCommitsFirst(
        store, lambda: other.append_dataset(_table("a", [2]), KEY, metadata=RECORD_A, expect_owner=A)
    )
    ParquetDatasetStore(racing, retain_versions=1).append_dataset(
        _table("a", [3]), KEY, metadata=RECORD_A, expect_owner=A
    )
    assert sorted(ParquetDatasetStore(store, retain_versions=1).read_dataset(KEY).column("id").to_pylist()) == [1, 2, 3]


def test_a_mismatch_found_when_beginning_writes_nothing(store: Store) -> None:
    _winner(store)()
    before = {f.path for f in store.list_files(KEY)}
    datasets = ParquetDatasetStore(store, retain_versions=1)
    for operation in sorted(WRITES):
        with pytest.raises(OwnerMismatch):
            WRITES[operation](datasets)
    with pytest.raises(OwnerMismatch):
        datasets.begin_write(KEY, overwrite=True, metadata=RECORD_A, expect_owner=A)
    with pytest.raises(OwnerMismatch):
        datasets.begin_append(KEY, _table("a", [7]).schema, metadata=RECORD_A, expect_owner=A)
    with pytest.raises(OwnerMismatch):
        datasets.plan_merge(
            KEY, source_schema=_table("a", [7]).schema, key_columns=["id"], key_ranges={"id": (7, 7)}, expect_owner=A
        )
    assert {f.path for f in store.list_files(KEY)} == before
    _assert_b_intact(store)


def _write_part(datasets: ParquetDatasetStore, relative: str, table: pa.Table) -> int:
    import pyarrow.parquet as pq

    with datasets.store.open_output(f"{KEY}/{relative}") as sink:
        pq.write_table(table, sink)
    return datasets.store.size(f"{KEY}/{relative}")


def test_external_writes_check_the_owner_when_they_commit(store: Store) -> None:
    """``begin_write``/``begin_append``/``plan_merge`` carry the owner to their commits (the Spark layer's route)."""
    from dagster_parquet_dataset import FileEntry

    datasets = ParquetDatasetStore(store, retain_versions=1)
    datasets.write_dataset(_table("old", [1]), KEY)  # no owner recorded: every begin passes
    table = _table("a", [1])
    pending_write = datasets.begin_write(KEY, overwrite=True, metadata=RECORD_A, expect_owner=A)
    pending_append = datasets.begin_append(KEY, table.schema, metadata=RECORD_A, expect_owner=A)
    plan = datasets.plan_merge(
        KEY, source_schema=table.schema, key_columns=["id"], key_ranges={"id": (1, 1)}, expect_owner=A
    )
    assert [e.path for e in plan.candidates]
    _winner(store, [1, 2])()  # owner B replaces the dataset before any of them commits

    name = pending_write.part_name(0)
    entry = FileEntry(path=name, size_bytes=_write_part(datasets, name, table), row_count=1)
    with pytest.raises(OwnerMismatch):
        datasets.commit_write(pending_write, [entry], table.schema)

    name = pending_append.write.part_name(0)
    entry = FileEntry(path=name, size_bytes=_write_part(datasets, name, table), row_count=1)
    with pytest.raises(OwnerMismatch):
        datasets.commit_append(pending_append, [entry])

    name = plan.part_name(0)
    entry = FileEntry(path=name, size_bytes=_write_part(datasets, name, table), row_count=1)
    with pytest.raises(OwnerMismatch):
        datasets.commit_merge(plan, rewritten=[plan.candidates[0].path], new_entries=[entry], inserted=0, updated=1)
    _assert_b_intact(store, [1, 2])


@pytest.mark.parametrize(
    "bad", [["owner"], {"owner": 1}, {1: "a"}], ids=["not-a-mapping", "non-str-value", "non-str-key"]
)
def test_a_bad_expect_owner_is_refused_before_anything_is_written(store: Store, bad: object) -> None:
    datasets = ParquetDatasetStore(store, retain_versions=1)
    with pytest.raises(TypeError, match="expect_owner"):
        datasets.write_dataset(_table("a", [1]), KEY, expect_owner=bad)  # type: ignore[arg-type]
    assert not list(store.list_files(KEY))
