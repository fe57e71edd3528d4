"""Issue 18 #1: an interrupt at any store call leaves the old version or the new one, complete.

Every operation (create, overwrite, append, merge, compact, delete, and the external commits
``commit_write`` / ``commit_append`` / ``commit_merge`` of parts the test wrote through the store as
Spark would) runs on a fresh dataset through :class:`tests._interrupts.InterruptingStore`, which raises
``KeyboardInterrupt`` (or ``SystemExit``) at store call N, ``before`` the call or ``after`` it took effect,
for every N until the operation completes without reaching call N. After each interrupt:

- a clean reader never gets ``DatasetIncomplete``: the dataset reads as exactly the old rows or exactly
  the new ones (absent counts as a state only where the operation starts or ends with no dataset);
- a later append succeeds and adds its rows to whichever state is live.

Memory and local disk run everything; moto S3 runs every operation with ``KeyboardInterrupt`` (each store
call there is a real HTTP round trip). Every test carries a pytest-timeout so a hang fails it.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pytest

from dagster_parquet_dataset import (
    DatasetIncomplete,
    DatasetNotFound,
    LocalStore,
    MemoryStore,
    ParquetDatasetStore,
    S3Store,
    Store,
)
from dagster_parquet_dataset.dataset.format import segments
from tests._external_writer import write_external_parts
from tests._interrupts import MODES, InterruptingStore
from tests.conftest import make_bucket

KEY = "k"
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
# Store calls a single operation may make here; reaching it means the operation never completes.
MAX_CALLS = 400

Rows = tuple[tuple[int, str], ...] | None


def _table(ids: range | list[int], tag: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def _rows(table: pa.Table) -> Rows:
    return tuple(sorted(zip(table.column("id").to_pylist(), table.column("v").to_pylist(), strict=True)))


def _writer(store: Store) -> ParquetDatasetStore:
    # Several parts per write (more call points), one encoding thread (a deterministic call order).
    return ParquetDatasetStore(store, max_rows_per_file=2, max_workers=1)


OLD = _table(range(5), "old")


@dataclass(frozen=True)
class Case:
    """One operation: ``setup`` runs on the real store and returns the interrupted ``run``."""

    setup: Callable[[ParquetDatasetStore], Callable[[ParquetDatasetStore], object]]
    old: Rows
    new: Rows


def _with_old(ds: ParquetDatasetStore) -> None:
    ds.write_dataset(OLD, KEY)


def _create(ds: ParquetDatasetStore) -> Callable[[ParquetDatasetStore], object]:
    return lambda w: w.write_dataset(_table(range(10, 15), "new"), KEY)


def _overwrite(ds: ParquetDatasetStore) -> Callable[[ParquetDatasetStore], object]:
    _with_old(ds)
    return lambda w: w.write_dataset(_table(range(10, 15), "new"), KEY, overwrite=True)


def _append(ds: ParquetDatasetStore) -> Callable[[ParquetDatasetStore], object]:
    _with_old(ds)
    return lambda w: w.append_dataset(_table(range(10, 13), "new"), KEY)


MERGE_SOURCE = _table([3, 4, 20], "merged")


def _merge(ds: ParquetDatasetStore) -> Callable[[ParquetDatasetStore], object]:
    _with_old(ds)
    return lambda w: w.merge_dataset(MERGE_SOURCE, KEY, key_columns=["id"], strategy="upsert")


def _compact(ds: ParquetDatasetStore) -> Callable[[ParquetDatasetStore], object]:
    ds.write_dataset(_table([0], "old"), KEY)
    for i in range(1, 5):
        ds.append_dataset(_table([i], "old"), KEY)
    return lambda w: w.compact_dataset(KEY)


def _delete(ds: ParquetDatasetStore) -> Callable[[ParquetDatasetStore], object]:
    _with_old(ds)
    return lambda w: w.delete_dataset(KEY)


def _commit_write(ds: ParquetDatasetStore) -> Callable[[ParquetDatasetStore], object]:
    _with_old(ds)
    pending = ds.begin_write(KEY, overwrite=True)
    table = _table(range(10, 15), "new")
    entries = write_external_parts(ds.store, KEY, table, SCHEMA, (), pending.part_name)
    return lambda w: w.commit_write(pending, entries, SCHEMA)


def _commit_append(ds: ParquetDatasetStore) -> Callable[[ParquetDatasetStore], object]:
    _with_old(ds)
    pending = ds.begin_append(KEY, SCHEMA)
    table = _table(range(10, 13), "new")
    entries = write_external_parts(ds.store, KEY, table, SCHEMA, (), lambda i: f"part-{i:05d}-{pending.txn}.parquet")
    return lambda w: w.commit_append(pending, entries)


def _commit_merge(ds: ParquetDatasetStore) -> Callable[[ParquetDatasetStore], object]:
    _with_old(ds)
    inserted = _table([20, 21], "merged")
    plan = ds.plan_merge(KEY, source_schema=SCHEMA, key_columns=["id"], key_ranges={"id": (20, 21)})
    assert plan.candidates == ()  # no file can hold ids 20..21: the merge only inserts
    entries = write_external_parts(ds.store, KEY, inserted, SCHEMA, (), plan.part_name)
    return lambda w: w.commit_merge(plan, rewritten=[], new_entries=entries, inserted=2, updated=0)


_OLD_ROWS = _rows(OLD)
CASES = {
    "create": Case(_create, None, _rows(_table(range(10, 15), "new"))),
    "overwrite": Case(_overwrite, _OLD_ROWS, _rows(_table(range(10, 15), "new"))),
    "append": Case(_append, _OLD_ROWS, tuple(sorted(_OLD_ROWS + _rows(_table(range(10, 13), "new"))))),
    "merge": Case(
        _merge,
        _OLD_ROWS,
        tuple(sorted([r for r in _OLD_ROWS if r[0] not in (3, 4)] + list(_rows(MERGE_SOURCE) or ()))),
    ),
    "compact": Case(_compact, _OLD_ROWS, _OLD_ROWS),
    "delete": Case(_delete, _OLD_ROWS, None),
    "commit_write": Case(_commit_write, _OLD_ROWS, _rows(_table(range(10, 15), "new"))),
    "commit_append": Case(_commit_append, _OLD_ROWS, tuple(sorted(_OLD_ROWS + _rows(_table(range(10, 13), "new"))))),
    "commit_merge": Case(_commit_merge, _OLD_ROWS, tuple(sorted(_OLD_ROWS + _rows(_table([20, 21], "merged"))))),
}
INTERRUPTS = {"KeyboardInterrupt": KeyboardInterrupt, "SystemExit": SystemExit}
# moto S3 (a real HTTP round trip per call): every operation, both modes, KeyboardInterrupt only
# (SystemExit takes the same path through the package; memory and local disk run both).
S3_CASES = tuple(CASES)


# ------------------------------------------------------------------ backends


@pytest.fixture
def fresh_store(request: pytest.FixtureRequest) -> Iterator[Callable[[], Store]]:
    """A factory of empty stores of the test's backend (one per interrupt point)."""
    backend = request.param
    made: list[str] = []
    if backend == "memory":
        yield MemoryStore
    elif backend == "local":

        def make_local() -> Store:
            made.append(tempfile.mkdtemp(prefix="pds-interrupt-"))
            return LocalStore(made[-1])

        yield make_local
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        bucket = make_bucket(endpoint)
        yield lambda: S3Store(bucket, prefix=f"int/{uuid.uuid4().hex[:10]}", endpoint_url=endpoint)
    for root in made:
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------- check


def _read(store: Store) -> Rows:
    """The rows a clean reader sees; ``DatasetIncomplete`` propagates (it is the failure)."""
    try:
        return _rows(ParquetDatasetStore(store).read_dataset(KEY))
    except DatasetNotFound:
        return None


def _show(rows: Rows) -> str:
    return "absent" if rows is None else f"{len(rows)} rows (ids {[r[0] for r in rows]})"


def _unknown_first_commit(case: Case, wrapped: InterruptingStore, inner: Store, raised: BaseException | None) -> bool:
    """Whether the interrupt hit a first write's own compare-and-swap and nothing was committed.

    Once the manifest's conditional write may have been sent, its parts must stay until the outcome is
    known; an interrupt there leaves them with no manifest, which Spec 042 reads as ``DatasetIncomplete``
    (files but no ``_SUCCESS``: a write did not finish), not as absent. Only that call, and only while
    no manifest exists, may read so; the later append must still succeed.
    """
    return (
        case.old is None
        and raised is not None
        and wrapped.fired_on == ("write_if", f"{KEY}/manifest.json")
        and not inner.exists(f"{KEY}/manifest.json")
    )


def _one_point(make: Callable[[], Store], case: Case, at: int, exc: type[BaseException], mode: str) -> str | None:
    """Interrupt ``case`` at store call ``at``; ``"done"`` if it completed first, a failure, or ``None``."""
    inner = make()
    run = case.setup(_writer(inner))
    wrapped = InterruptingStore(inner, at, exc, mode)
    raised: BaseException | None = None
    try:
        run(_writer(wrapped))
    except (KeyboardInterrupt, SystemExit) as caught:
        if not isinstance(caught, exc):
            raise
        raised = caught
    if not wrapped.fired:
        return "done"
    where = f"{exc.__name__} {mode} call {at} ({wrapped.fired_on[0]} {wrapped.fired_on[1]})"  # type: ignore[index]
    try:
        rows = _read(inner)
    except DatasetIncomplete as error:
        if not _unknown_first_commit(case, wrapped, inner, raised):
            return f"{where}: read raised DatasetIncomplete: {error}"
        rows = None  # the first commit's outcome could not be learned: its parts stay, nothing was committed
    allowed = [case.new] if raised is None else [case.old, case.new]
    if rows not in allowed:
        return f"{where}: read {_show(rows)}; allowed {' or '.join(_show(a) for a in allowed)}"
    extra = _table(range(100, 102), "later")
    try:
        ParquetDatasetStore(inner).append_dataset(extra, KEY)
        after = _read(inner)
    except Exception as error:  # noqa: BLE001 - reported as the failure
        return f"{where}: a later append failed: {error!r}"
    expected = tuple(sorted((rows or ()) + (_rows(extra) or ())))
    if after != expected:
        return f"{where}: after a later append read {_show(after)}; expected {_show(expected)}"
    return None


def _every_point(make: Callable[[], Store], case: Case, exc: type[BaseException], mode: str) -> None:
    failures: list[str] = []
    for at in range(1, MAX_CALLS + 1):
        outcome = _one_point(make, case, at, exc, mode)
        if outcome == "done":
            break
        if outcome is not None:
            failures.append(outcome)
    else:
        raise AssertionError(f"the operation still made store calls after {MAX_CALLS}")
    assert not failures, f"{len(failures)} of {at - 1} interrupt points broke the dataset:\n" + "\n".join(failures)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("interrupt", list(INTERRUPTS))
@pytest.mark.parametrize("operation", list(CASES))
@pytest.mark.parametrize("fresh_store", ["memory", "local"], indirect=True)
def test_an_interrupt_at_any_store_call_leaves_old_or_new(
    fresh_store: Callable[[], Store], operation: str, interrupt: str, mode: str
) -> None:
    _every_point(fresh_store, CASES[operation], INTERRUPTS[interrupt], mode)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("operation", S3_CASES)
@pytest.mark.parametrize("fresh_store", ["s3"], indirect=True)
def test_an_interrupt_at_any_s3_call_leaves_old_or_new(
    fresh_store: Callable[[], Store], operation: str, mode: str
) -> None:
    _every_point(fresh_store, CASES[operation], KeyboardInterrupt, mode)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("operation", list(CASES))
@pytest.mark.parametrize("fresh_store", ["memory"], indirect=True)
def test_an_interrupt_at_any_store_call_leaves_old_or_new_with_segments(
    fresh_store: Callable[[], Store], operation: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same with format 2's entries always in segment files (none inline): an interrupt at the
    segment write or anywhere around it leaves the old or the new version (issue 21)."""
    monkeypatch.setattr(segments, "INLINE_ENTRIES", 0)
    _every_point(fresh_store, CASES[operation], KeyboardInterrupt, mode)
