"""Randomized model test (issue 9): datasets under random operations and injected faults
behave like an in-memory model of their rows.

A hypothesis state machine runs write, overwrite, append (columns shuffled,
sometimes a non-nullable field), merge (upsert / insert / update), vacuum and
delete on three datasets over a real store (memory, local disk, moto S3):

- ``flat``: unpartitioned, split into parts of at most 4 rows;
- ``parted``: ``partition_by=["p"]``;
- ``hist``: one file, ``retain_versions=3``, so past versions stay readable.

The model keeps, per dataset, the set of states it may be in (rows as a
sorted multiset, or absent, plus the retained past versions' rows). Every
operation may carry one fault (``tests/_faults.py``):

- ``crash``: the process dies at the N-th store call. If the operation raised,
  the dataset is at its old or its new state; if it returned, at the new one.
- ``lost-cas``: the response of a compare-and-swap (``write_if``) is lost,
  surfacing as the 412 a client retry gets or as a timeout. A lost 412 must be
  recognised as the writer's own commit (success, new state, no duplicates);
  a timeout may surface, leaving the old or the new state.
- ``lost-io``: the response of a plain ``write_bytes`` / ``delete`` is lost
  (a timeout); the operation succeeds or raises it, leaving old or new state.

After every operation the dataset is read with a clean reader: it must be
readable (or absent) and equal to one of the states the model allows, which
collapses the set. Filtered reads, ``history`` and reads at retained versions
are compared as well.

Run longer by hand with ``PDS_MODEL_EXAMPLES`` (examples per test, default
per backend below) and ``PDS_MODEL_STEPS`` (operations per example); pick
fault classes with ``-k`` (ids ``none``, ``crash``, ``lost-cas``, ``lost-io``)
or ``PDS_MODEL_FAULTS=crash,lost-cas``. ``PDS_MODEL_SHUFFLE=0`` appends and merges
with the dataset's column order (to look past the reordered-append bug);
``PDS_MODEL_ALL_BUGS=1`` reports every distinct failure instead of the first.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from dagster_parquet_dataset import (
    AlreadyExists,
    DatasetIncomplete,
    DatasetNotFound,
    LocalStore,
    MemoryStore,
    NotFound,
    ParquetDatasetStore,
    S3Store,
    Store,
)
from tests._faults import LOST_AS, Fault, FaultyStore, LostResponse
from tests.conftest import make_bucket

COLUMNS = ("id", "s", "x", "ts", "p")
FIELDS = {
    "id": pa.field("id", pa.int64()),
    "s": pa.field("s", pa.string()),
    "x": pa.field("x", pa.float64()),
    "ts": pa.field("ts", pa.timestamp("ms")),
    "p": pa.field("p", pa.string()),
}
EPOCH = datetime(2024, 3, 1, 12, 0, 0)
KEYS = ("flat", "parted", "hist")
RETAIN = 3  # retain_versions of the "hist" dataset

Row = tuple[Any, ...]
Rows = tuple[Row, ...]

FAULT_CLASSES = ("none", "crash", "lost-cas", "lost-io")
BACKENDS = ("memory", "local", "s3")
# Examples per (backend, fault class): a few hundred operations in all, well under a minute.
_DEFAULT_EXAMPLES = {"memory": 6, "local": 4, "s3": 2}
_STEPS = int(os.environ.get("PDS_MODEL_STEPS", "12"))
# "0" appends and merges with the dataset's column order and nullability, to look past a known append bug.
_SHUFFLE = os.environ.get("PDS_MODEL_SHUFFLE", "1") != "0"


def _examples(backend: str) -> int:
    value = os.environ.get("PDS_MODEL_EXAMPLES")
    return int(value) if value else _DEFAULT_EXAMPLES[backend]


def _enabled(fault_class: str) -> bool:
    chosen = os.environ.get("PDS_MODEL_FAULTS")
    return chosen is None or fault_class == "none" or fault_class in chosen.split(",")


# ------------------------------------------------------------------- the model


def _sort_key(row: Row) -> tuple[Any, ...]:
    return tuple((v is not None, v) for v in row)


def _canon(rows: Sequence[Row]) -> Rows:
    return tuple(sorted(rows, key=_sort_key))


@dataclass(frozen=True)
class State:
    """One state a dataset may be in: its rows (``None``: absent) and the retained past versions' rows."""

    rows: Rows | None
    history: tuple[Rows, ...] = ()  # newest first; only the "hist" dataset retains any

    def describe(self) -> str:
        if self.rows is None:
            return "absent"
        return f"{len(self.rows)} rows {list(self.rows)}" + (
            f", history {[len(h) for h in self.history]}" if self.history else ""
        )


@dataclass(frozen=True)
class Outcome:
    """What the model says an operation does to one state: the new state, or the error it raises."""

    new: State
    error: type[BaseException] | None = None


def _committed(key: str, old: State, rows: Rows) -> State:
    """The state after a commit of ``rows`` on top of ``old``."""
    if old.rows is None:
        return State(rows)
    history = (old.rows, *old.history)[: RETAIN - 1] if key == "hist" else ()
    return State(rows, history)


def _merge_rows(old: Rows, source: Rows, strategy: str) -> Rows | None:
    """The rows after merging ``source`` into ``old`` by ``id``; ``None`` if nothing changes (no commit)."""
    by_id = {r[0]: r for r in source}
    existing = {r[0] for r in old}
    updates = [] if strategy == "insert" else [r for r in source if r[0] in existing]
    inserts = [] if strategy == "update" else [r for r in source if r[0] not in existing]
    if not updates and not inserts:
        return None
    replaced = {r[0] for r in updates}
    kept = [r for r in old if r[0] not in replaced]
    return _canon([*kept, *(by_id[i] for i in replaced), *inserts])


def _matches(row: Row, filters: list[tuple[str, str, Any]]) -> bool:
    for column, op, value in filters:
        v = row[COLUMNS.index(column)]
        if v is None:
            return False
        ok = {"==": v == value, ">=": v >= value, "<": v < value}[op]
        if not ok:
            return False
    return True


# ---------------------------------------------------------------- generation

_row_fields = st.tuples(
    st.sampled_from(["a", "bb", "", "ü"]),
    st.sampled_from([None, 0.5, -1.25, 3.0]),
    st.integers(0, 5),  # minutes after EPOCH
    st.sampled_from(["p1", "p2", "p3"]),
)
_rows = st.lists(_row_fields, min_size=0, max_size=6)


def _crash() -> st.SearchStrategy[Fault]:
    return st.builds(Fault, kind=st.just("crash"), at=st.integers(1, 30))


def _lost_cas() -> st.SearchStrategy[Fault]:
    return st.builds(
        Fault,
        kind=st.just("lost"),
        at=st.just(1),
        op=st.just("write_if"),
        suffix=st.sampled_from(["manifest.json", "_claim"]),
        lost_as=st.sampled_from(LOST_AS),
    )


def _lost_io() -> st.SearchStrategy[Fault]:
    return st.builds(
        Fault,
        kind=st.just("lost"),
        at=st.integers(1, 3),
        op=st.sampled_from(["write_bytes", "delete"]),
        suffix=st.sampled_from(["", "_SUCCESS", ".parquet"]),
        lost_as=st.just("timeout"),
    )


_FAULTS = {"crash": _crash, "lost-cas": _lost_cas, "lost-io": _lost_io}


# ------------------------------------------------------------------ backends


@dataclass
class _Backend:
    make: Callable[[], Store]
    cleanup: Callable[[Store], None]


def _backend(name: str, request: pytest.FixtureRequest) -> _Backend:
    if name == "memory":
        return _Backend(MemoryStore, lambda _s: None)
    if name == "local":

        def make_local() -> Store:
            return LocalStore(tempfile.mkdtemp(prefix="pds-model-"))

        return _Backend(make_local, lambda s: shutil.rmtree(s.root, ignore_errors=True))  # type: ignore[attr-defined]
    endpoint = request.getfixturevalue("moto_endpoint")
    bucket = make_bucket(endpoint)
    return _Backend(
        lambda: S3Store(bucket, prefix=f"model/{uuid.uuid4().hex[:10]}", endpoint_url=endpoint),
        lambda _s: None,
    )


# ------------------------------------------------------------- state machine


class _DatasetModel(RuleBasedStateMachine):
    """Datasets on a real store, faults injected, checked against the model after every operation.

    The rules come from :func:`_machine`, which binds the backend and the fault strategy.
    """

    backend: _Backend

    def __init__(self) -> None:
        super().__init__()
        self.inner = self.backend.make()
        self.faulty = FaultyStore(self.inner)
        self.writers = {
            "flat": ParquetDatasetStore(self.faulty, max_rows_per_file=4, max_workers=1),
            "parted": ParquetDatasetStore(self.faulty, max_workers=1),
            "hist": ParquetDatasetStore(self.faulty, retain_versions=RETAIN, max_workers=1),
        }
        self.reader = ParquetDatasetStore(self.inner, retain_versions=RETAIN)
        self.states: dict[str, set[State]] = {k: {State(None)} for k in KEYS}
        self.next_id = 0
        self.partition_of: dict[int, str] = {}

    def teardown(self) -> None:
        self.backend.cleanup(self.inner)

    # ---------------------------------------------------------- helpers

    def _new_rows(self, drawn: list[tuple[str, float | None, int, str]]) -> Rows:
        rows = []
        for s, x, minutes, p in drawn:
            self.partition_of[self.next_id] = p
            rows.append((self.next_id, s, x, EPOCH + timedelta(minutes=minutes), p))
            self.next_id += 1
        return _canon(rows)

    @staticmethod
    def _table(rows: Rows, order: Sequence[str] = COLUMNS, non_nullable: frozenset[str] = frozenset()) -> pa.Table:
        fields = [FIELDS[c].with_nullable(c not in non_nullable) for c in order]
        columns = [pa.array([r[COLUMNS.index(c)] for r in rows], f.type) for c, f in zip(order, fields, strict=True)]
        return pa.Table.from_arrays(columns, schema=pa.schema(fields))

    def _partition_by(self, key: str) -> list[str] | None:
        return ["p"] if key == "parted" else None

    def _apply(
        self,
        key: str,
        what: str,
        fault: Fault | None,
        call: Callable[[], object],
        model: Callable[[State], Outcome],
    ) -> None:
        """Run ``call`` with ``fault`` armed, then narrow the model's states to what is allowed and read back."""
        outcomes = [(old, model(old)) for old in self.states[key]]
        self.faulty.arm(fault)
        error: BaseException | None = None
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - judged against the model below
            error = exc
        finally:
            crashed, lost, fired_on = self.faulty.crashed, self.faulty.lost, self.faulty.fired_on
            self.faulty.disarm()
        where = f"{what} on {key!r}" + (f" with {fault} ({fired_on[0]} {fired_on[1]})" if fired_on else "")
        allowed: set[State] = set()
        if crashed:
            for old, out in outcomes:
                allowed |= {out.new} if error is None else {old, out.new}
        elif lost and fault is not None and fault.lost_as == "conflict" and error is not None:
            raise AssertionError(
                f"{where}: the commit was applied but its response was lost (a 412 on retry); "
                f"the writer must recognise its own commit and succeed, but it raised {error!r}"
            )
        elif lost and error is not None:
            if not _caused_by(error, LostResponse):
                raise AssertionError(f"{where}: a lost response surfaced as {error!r}, not as the timeout")
            for old, out in outcomes:
                allowed |= {old, out.new}
        else:
            for old, out in outcomes:
                if (error is None and out.error is None) or (
                    error is not None and out.error is not None and isinstance(error, out.error)
                ):
                    allowed.add(out.new)
                elif what == "delete_dataset" and error is None and old.rows is None:
                    allowed.add(old)  # it cleaned up the leftovers of a first write that crashed
            if not allowed:
                expected = sorted({o.error.__name__ if o.error else "success" for _s, o in outcomes})
                raise AssertionError(f"{where}: got {error!r}; the model expected {' or '.join(expected)}") from error
        self._observe(key, allowed, where)

    def _read_rows(self, key: str, **kwargs: Any) -> Rows | None:
        try:
            table = self.reader.read_dataset(key, **kwargs)
        except DatasetNotFound:
            return None
        except DatasetIncomplete:
            # Leftovers of a first write that crashed before committing (no manifest) read as
            # "a write did not finish": absent, as the crash tests in test_commits.py accept.
            # A committed manifest with damaged parts stays an error.
            if self.reader.store.exists(f"{key}/manifest.json"):
                raise
            return None
        return _canon(list(zip(*(table.column(c).to_pylist() for c in COLUMNS), strict=True)))

    def _observe(self, key: str, allowed: set[State], where: str) -> None:
        """Read ``key`` back; keep the allowed states that match what is stored."""
        try:
            rows = self._read_rows(key)
        except Exception as exc:
            raise AssertionError(
                f"after {where}: the dataset is unreadable: {exc!r}; the model allows {[s.describe() for s in allowed]}"
            ) from exc
        matching = {s for s in allowed if s.rows == rows}
        assert matching, (
            f"after {where}: read {'absent' if rows is None else f'{len(rows)} rows {list(rows)}'}; "
            f"the model allows {[s.describe() for s in allowed]}"
        )
        exists = self.reader.dataset_exists(key)
        assert exists == (rows is not None), f"after {where}: dataset_exists is {exists} but the read gave {rows}"
        if key == "hist" and len({s.history for s in matching}) > 1:
            matching = self._check_history(key, matching, where)
        self.states[key] = matching

    def _check_history(self, key: str, allowed: set[State], where: str) -> set[State]:
        """Compare ``history`` and reads at retained versions with the model; keep the matching states."""
        rows = next(iter(allowed)).rows
        if rows is None:
            return allowed
        try:
            versions = [m.version for m in self.reader.history(key)]
            past = tuple(self._read_rows(key, version=v) for v in versions[1:])
        except Exception as exc:
            raise AssertionError(f"after {where}: history or a retained version is unreadable: {exc!r}") from exc
        assert versions == list(range(versions[0], versions[0] - len(versions), -1)), (
            f"after {where}: history lists versions {versions}, not consecutive"
        )
        # A writer that dies after its commit leaves the dropped version's files for the next
        # commit (or vacuum) to delete, so versions older than all RETAIN may still be listed.
        matching = {
            s
            for s in allowed
            if past[: len(s.history)] == s.history and (len(past) == len(s.history) or len(s.history) == RETAIN - 1)
        }
        assert matching, (
            f"after {where}: retained versions {versions[1:]} hold {[len(p or ()) for p in past]} rows; "
            f"the model allows histories {[[len(h) for h in s.history] for s in allowed]}"
        )
        return matching

    @invariant()
    def collapsed(self) -> None:
        for key, states in self.states.items():
            assert len(states) == 1 or len({s.rows for s in states}) == 1, f"{key}: model did not collapse"


def _machine(backend: _Backend, faults: st.SearchStrategy[Fault | None]) -> type[_DatasetModel]:
    """The state machine's rules over ``backend``, each operation with a fault drawn from ``faults``."""

    class DatasetModel(_DatasetModel):
        @rule(key=st.sampled_from(KEYS), drawn=_rows, fault=faults)
        def write(self, key: str, drawn: list[Any], fault: Fault | None) -> None:
            rows = self._new_rows(drawn)
            table = self._table(rows)

            def model(old: State) -> Outcome:
                return Outcome(old, AlreadyExists) if old.rows is not None else Outcome(State(rows))

            self._apply(
                key,
                "write",
                fault,
                lambda: self.writers[key].write_dataset(table, key, partition_by=self._partition_by(key)),
                model,
            )

        @rule(key=st.sampled_from(KEYS), drawn=_rows, fault=faults)
        def overwrite(self, key: str, drawn: list[Any], fault: Fault | None) -> None:
            rows = self._new_rows(drawn)
            table = self._table(rows)
            self._apply(
                key,
                "overwrite",
                fault,
                lambda: self.writers[key].write_dataset(
                    table, key, overwrite=True, partition_by=self._partition_by(key)
                ),
                lambda old: Outcome(_committed(key, old, rows)),
            )

        @rule(
            key=st.sampled_from(KEYS),
            drawn=_rows,
            order=st.permutations(COLUMNS),
            non_nullable=st.sets(st.sampled_from(["id", "s", "ts"]), max_size=2),
            fault=faults,
        )
        def append(
            self, key: str, drawn: list[Any], order: list[str], non_nullable: set[str], fault: Fault | None
        ) -> None:
            rows = self._new_rows(drawn)
            if not _SHUFFLE:
                order, non_nullable = list(COLUMNS), set()
            table = self._table(rows, order, frozenset(non_nullable))
            self._apply(
                key,
                f"append (columns {list(order)}, non-nullable {sorted(non_nullable)})",
                fault,
                lambda: self.writers[key].append_dataset(table, key, partition_by=self._partition_by(key)),
                lambda old: Outcome(_committed(key, old, _canon([*(old.rows or ()), *rows]))),
            )

        @rule(
            key=st.sampled_from(KEYS),
            picks=st.lists(st.integers(0, 10_000), max_size=4),
            drawn=_rows,
            strategy=st.sampled_from(["upsert", "insert", "update"]),
            order=st.permutations(COLUMNS),
            fault=faults,
        )
        def merge(
            self,
            key: str,
            picks: list[int],
            drawn: list[Any],
            strategy: str,
            order: list[str],
            fault: Fault | None,
        ) -> None:
            known = sorted({r[0] for s in self.states[key] for r in (s.rows or ())})
            existing_ids = list(dict.fromkeys(known[i % len(known)] for i in picks)) if known else []
            updates = [
                (i, s, x, EPOCH + timedelta(minutes=m), self.partition_of[i])
                for i, (s, x, m, _p) in zip(existing_ids, drawn, strict=False)
            ]
            source = _canon([*updates, *self._new_rows(drawn[len(updates) :])])
            if not _SHUFFLE:
                order = list(COLUMNS)
            table = self._table(source, order)

            def model(old: State) -> Outcome:
                if old.rows is None:
                    if strategy == "update":
                        return Outcome(old, DatasetNotFound)
                    return Outcome(State(source))
                merged = _merge_rows(old.rows, source, strategy)
                return Outcome(old if merged is None else _committed(key, old, merged))

            self._apply(
                key,
                f"merge {strategy} (columns {list(order)})",
                fault,
                lambda: self.writers[key].merge_dataset(
                    table, key, key_columns=["id"], strategy=strategy, partition_by=self._partition_by(key)
                ),
                model,
            )

        @rule(
            key=st.sampled_from(KEYS),
            retain=st.sampled_from([None, 1, 2]),
            grace=st.sampled_from([None, 0.0]),
            fault=faults,
        )
        def vacuum(self, key: str, retain: int | None, grace: float | None, fault: Fault | None) -> None:
            kwargs: dict[str, Any] = {}
            if retain is not None:
                kwargs["retain_versions"] = retain
            if grace is not None:
                kwargs["grace_period"] = grace

            def model(old: State) -> Outcome:
                if old.rows is None:
                    return Outcome(old, NotFound)
                return Outcome(replace(old, history=old.history[: retain - 1] if retain else old.history))

            self._apply(key, f"vacuum {kwargs}", fault, lambda: self.writers[key].vacuum(key, **kwargs), model)

        @rule(key=st.sampled_from(KEYS), fault=faults)
        def delete(self, key: str, fault: Fault | None) -> None:
            def model(old: State) -> Outcome:
                return Outcome(old, NotFound) if old.rows is None else Outcome(State(None))

            self._apply(key, "delete_dataset", fault, lambda: self.writers[key].delete_dataset(key), model)

        @rule(
            key=st.sampled_from(KEYS),
            column=st.sampled_from(["id", "p", "ts"]),
            pick=st.integers(0, 10_000),
            op=st.sampled_from(["==", ">=", "<"]),
            project=st.booleans(),
        )
        def filtered_read(self, key: str, column: str, pick: int, op: str, project: bool) -> None:
            rows = next(iter(self.states[key])).rows  # every state left has the same rows
            values = sorted({r[COLUMNS.index(column)] for r in rows or ()})
            if not values:
                return
            filters = [(column, op, values[pick % len(values)])]
            columns = (["id", column] if column != "id" else ["id"]) if project else None
            got = self.reader.read_dataset(key, filters=filters, columns=columns)
            names = columns or list(COLUMNS)
            expected = sorted(tuple(r[COLUMNS.index(c)] for c in names) for r in rows or () if _matches(r, filters))
            actual = sorted(zip(*(got.column(c).to_pylist() for c in names), strict=True))
            assert actual == expected, (
                f"read {key!r} with filters {filters}, columns {columns}: got {actual}, expected {expected}"
            )

        @precondition(lambda self: any(s.rows is not None for s in self.states["hist"]))
        @rule()
        def history(self) -> None:
            self.states["hist"] = self._check_history("hist", self.states["hist"], "history check")

    DatasetModel.backend = backend
    return DatasetModel


def _caused_by(error: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@pytest.mark.parametrize("fault_class", [c for c in FAULT_CLASSES if _enabled(c)])
@pytest.mark.parametrize("backend", BACKENDS)
def test_datasets_behave_like_the_model(backend: str, fault_class: str, request: pytest.FixtureRequest) -> None:
    faults: st.SearchStrategy[Fault | None] = st.none()
    if fault_class != "none":
        faults = st.one_of(st.none(), _FAULTS[fault_class]())
    run_state_machine_as_test(
        _machine(_backend(backend, request), faults),
        settings=settings(
            max_examples=_examples(backend),
            stateful_step_count=_STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            # Stop at the first distinct bug (shrinking each one costs minutes); 1 hunts for all of them.
            report_multiple_bugs=os.environ.get("PDS_MODEL_ALL_BUGS") == "1",
        ),
    )
