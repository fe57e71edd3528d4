"""Randomized model test (issue 9): datasets under random operations and injected faults
behave like an in-memory model of their rows.

A hypothesis state machine runs write, overwrite, append (columns shuffled,
sometimes a non-nullable field), merge (upsert / insert / update), compact,
vacuum and delete on three datasets over a real store (memory, local disk,
moto S3), operations on keys that overlap them and external commits with a
hostile entry (``tests/_model_overlaps.py``: refused, nothing changed), and the external commits an engine such as Spark makes: parts
written by the test itself through the store, then ``begin_write`` /
``commit_write``, ``begin_append`` / ``commit_append``, ``plan_merge`` /
``commit_merge`` (the test finds the candidates holding matched keys and
rewrites them, as Spark's executors do), or ``abandon_write``:

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
- ``interrupt``: ``KeyboardInterrupt`` at the N-th store call, before it or after
  it took effect (``tests/_interrupts.py``); later calls go through, so clean-up
  runs. The dataset is at its old or its new state.

After every operation the dataset is read with a clean reader: it must be
readable (or absent) and equal to one of the states the model allows, which
collapses the set. Filtered reads, ``history`` and reads at retained versions
are compared as well.

Run longer by hand with ``PDS_MODEL_EXAMPLES`` (examples per test, default
per backend below) and ``PDS_MODEL_STEPS`` (operations per example); pick
fault classes with ``-k`` (ids ``none``, ``crash``, ``lost-cas``, ``lost-io``, ``interrupt``)
or ``PDS_MODEL_FAULTS=crash,lost-cas``. ``PDS_MODEL_SHUFFLE=0`` appends and merges
with the dataset's column order (to look past the reordered-append bug);
``PDS_MODEL_ALL_BUGS=1`` reports every distinct failure instead of the first;
``PDS_MODEL_SHRINK=1`` shrinks a failing example (off by default: minutes on a real store).
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
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, settings
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
from dagster_parquet_dataset.dataset.format import segments
from tests._external_writer import write_external_parts
from tests._faults import LOST_AS, Fault, FaultyStore, LostResponse
from tests._interrupts import MODES, InterruptingStore
from tests._model_overlaps import OverlapRules
from tests._stores import WrappingStore
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

FAULT_CLASSES = ("none", "crash", "lost-cas", "lost-io", "interrupt")
BACKENDS = ("memory", "local", "s3")
# Examples per (backend, fault class): a few hundred operations in all, well under a minute.
_DEFAULT_EXAMPLES = {"memory": 6, "local": 4, "s3": 2}
_STEPS = int(os.environ.get("PDS_MODEL_STEPS", "12"))
# "0" appends and merges with the dataset's column order and nullability, to look past a known append bug.
_SHUFFLE = os.environ.get("PDS_MODEL_SHUFFLE", "1") != "0"


def _examples(backend: str, fault_class: str) -> int:
    value = os.environ.get("PDS_MODEL_EXAMPLES")
    # Interrupts have two modes and the window that matters (after the commit landed) is one call wide.
    return int(value) if value else _DEFAULT_EXAMPLES[backend] * (5 if fault_class == "interrupt" else 1)


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


def _interrupt() -> st.SearchStrategy[Fault]:
    # ``op`` carries the mode: interrupted before the call, or after it took effect.
    # Most operations here make fewer than 12 store calls; the commit's compare-and-swap is among them.
    return st.builds(Fault, kind=st.just("interrupt"), at=st.integers(1, 12), op=st.sampled_from(MODES))


_FAULTS = {"crash": _crash, "lost-cas": _lost_cas, "lost-io": _lost_io, "interrupt": _interrupt}


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


class _DatasetModel(RuleBasedStateMachine, OverlapRules):
    """Datasets on a real store, faults injected, checked against the model after every operation.

    The rules come from :func:`_machine`, which binds the backend and the fault strategy.
    """

    backend: _Backend

    def __init__(self) -> None:
        super().__init__()
        self.inner = self.backend.make()
        self.interrupting = InterruptingStore(self.inner, 0, KeyboardInterrupt, "before")
        self.faulty = FaultyStore(self.interrupting)
        self.writers = {
            # retain_versions=1: these two keep no history (the model expects none); "hist" keeps some.
            "flat": ParquetDatasetStore(self.faulty, max_rows_per_file=4, max_workers=1, retain_versions=1),
            "parted": ParquetDatasetStore(self.faulty, max_workers=1, retain_versions=1),
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

    def _refused(self) -> Callable[[State], Outcome]:
        return lambda old: Outcome(old, Exception)

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
        interrupt = fault is not None and fault.kind == "interrupt"
        self.faulty.arm(None if interrupt else fault)
        self.interrupting.arm(fault.at if interrupt else 0, KeyboardInterrupt, fault.op if interrupt else "before")  # type: ignore[union-attr]
        error: BaseException | None = None
        try:
            call()
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - judged against the model below
            if isinstance(exc, KeyboardInterrupt) and not self.interrupting.fired:
                raise
            error = exc
        finally:
            crashed, lost, fired_on = self.faulty.crashed, self.faulty.lost, self.faulty.fired_on
            if self.interrupting.fired:
                crashed, fired_on = True, self.interrupting.fired_on
            self.faulty.disarm()
            self.interrupting.arm(0)
        shown = f"KeyboardInterrupt {fault.op} store call {fault.at}" if interrupt else str(fault)  # type: ignore[union-attr]
        where = f"{what} on {key!r}" + (f" with {shown} ({fired_on[0]} {fired_on[1]})" if fired_on else "")
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

    def _merge_source(self, key: str, picks: list[int], drawn: list[Any]) -> Rows:
        """Rows of a merge source: updates of existing ids (``picks``, same partition), then new rows."""
        known = sorted({r[0] for s in self.states[key] for r in (s.rows or ())})
        existing_ids = list(dict.fromkeys(known[i % len(known)] for i in picks)) if known else []
        updates = [
            (i, s, x, EPOCH + timedelta(minutes=m), self.partition_of[i])
            for i, (s, x, m, _p) in zip(existing_ids, drawn, strict=False)
        ]
        return _canon([*updates, *self._new_rows(drawn[len(updates) :])])

    def _merge_model(self, key: str, source: Rows, strategy: str) -> Callable[[State], Outcome]:
        def model(old: State) -> Outcome:
            if old.rows is None:
                if strategy == "update":
                    return Outcome(old, DatasetNotFound)
                return Outcome(State(source))
            merged = _merge_rows(old.rows, source, strategy)
            return Outcome(old if merged is None else _committed(key, old, merged))

        return model

    def _external(self, key: str, begin: Callable[[], Any], name: Callable[[Any], Callable[[int], str]]) -> None:
        """Begin an external write, write its parts through the (faulty) store as Spark would, and either
        commit them (``begin`` returns ``(pending, commit)``) or, when ``commit`` is ``None``, abandon them.
        A failure abandons the parts, as the Spark layer does."""
        w = self.writers[key]
        pending, commit, table = begin()
        written: list[str] = []
        try:
            schema = self._external_schema(pending)
            by = self._partition_by(key) or ()
            entries = write_external_parts(self.faulty, key, table, schema, by, name(pending), written)
            if commit is None:
                w.abandon_write(pending, written)
                return
            commit(entries)
        except Exception:
            w.abandon_write(pending, written)
            raise

    @staticmethod
    def _external_schema(pending: Any) -> pa.Schema:
        schema = getattr(pending, "schema", None)
        if schema is None:  # a PendingWrite: the rows' own schema
            return pa.schema([FIELDS[c] for c in COLUMNS])
        return schema

    def _rewrite_candidates(self, key: str, plan: Any, source: Rows) -> tuple[list[str], Rows, int, int]:
        """What an engine's merge does with a plan: read each candidate, rewrite those holding matched keys.

        Returns the rewritten candidates, the rows to write (their kept rows, updates, inserts) and the
        inserted and updated counts."""
        by_id = {r[0]: r for r in source}
        rewritten: list[str] = []
        rows: list[Row] = []
        matched: set[int] = set()
        for entry in plan.candidates:
            with self.faulty.open_input(f"{key}/{entry.path}") as f:
                part = pq.read_table(f)
            p_value = (entry.partition_values or {}).get("p")
            ids = part.column("id").to_pylist()
            hits = {i for i in ids if i in by_id}
            matched |= hits
            if not hits or plan.strategy == "insert":
                continue
            rewritten.append(entry.path)
            cols = {c: part.column(c).to_pylist() for c in COLUMNS if c in part.column_names}
            for index, i in enumerate(ids):
                if i in hits:
                    rows.append(by_id[i])
                else:
                    rows.append(tuple(cols[c][index] if c in cols else p_value for c in COLUMNS))
        inserts = [] if plan.strategy == "update" else [r for r in source if r[0] not in matched]
        updated = len(matched) if plan.strategy != "insert" else 0
        return rewritten, _canon([*rows, *inserts]), len(inserts), updated

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
            source = self._merge_source(key, picks, drawn)
            if not _SHUFFLE:
                order = list(COLUMNS)
            table = self._table(source, order)
            model = self._merge_model(key, source, strategy)

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

        @rule(key=st.sampled_from(KEYS), fault=faults)
        def compact(self, key: str, fault: Fault | None) -> None:
            plans = self.reader.dataset_exists(key) and self.reader.compact_dataset(key, dry_run=True).files_written

            # A crashed first write's leftovers (files, no manifest) read as "a write did not finish".
            leftovers = any(True for _f in self.inner.list_files(key))

            def model(old: State) -> Outcome:
                if old.rows is None:
                    return Outcome(old, DatasetIncomplete if leftovers else DatasetNotFound)
                return Outcome(_committed(key, old, old.rows) if plans else old)

            self._apply(key, "compact", fault, lambda: self.writers[key].compact_dataset(key), model)

        @rule(key=st.sampled_from(KEYS), drawn=_rows, fault=faults)
        def external_write(self, key: str, drawn: list[Any], fault: Fault | None) -> None:
            rows = self._new_rows(drawn)
            w = self.writers[key]

            def begin() -> tuple[Any, Any, pa.Table]:
                pending = w.begin_write(key, overwrite=True)
                schema = pa.schema([FIELDS[c] for c in COLUMNS])
                return (
                    pending,
                    lambda es: w.commit_write(pending, es, schema, partition_by=self._partition_by(key)),
                    self._table(rows),
                )

            self._apply(
                key,
                "begin_write/commit_write",
                fault,
                lambda: self._external(key, begin, lambda p: p.part_name),
                lambda old: Outcome(_committed(key, old, rows)),
            )

        @rule(key=st.sampled_from(KEYS), drawn=_rows, fault=faults)
        def external_append(self, key: str, drawn: list[Any], fault: Fault | None) -> None:
            rows = self._new_rows(drawn)
            w = self.writers[key]

            def begin() -> tuple[Any, Any, pa.Table]:
                pending = w.begin_append(key, self._table(rows).schema, partition_by=self._partition_by(key))
                return pending, lambda es: w.commit_append(pending, es), self._table(rows)

            self._apply(
                key,
                "begin_append/commit_append",
                fault,
                lambda: self._external(key, begin, lambda p: lambda i: f"part-{i:05d}-{p.txn}.parquet"),
                lambda old: Outcome(_committed(key, old, _canon([*(old.rows or ()), *rows]))),
            )

        @rule(
            key=st.sampled_from(["flat", "parted", "hist"]),
            picks=st.lists(st.integers(0, 10_000), max_size=4),
            drawn=_rows,
            strategy=st.sampled_from(["upsert", "insert", "update"]),
            fault=faults,
        )
        def external_merge(
            self, key: str, picks: list[int], drawn: list[Any], strategy: str, fault: Fault | None
        ) -> None:
            if any(s.rows is None for s in self.states[key]):
                return  # an engine writes a new dataset instead; write and overwrite cover that
            source = self._merge_source(key, picks, drawn)
            w = self.writers[key]
            schema = pa.schema([FIELDS[c] for c in COLUMNS])

            def run() -> None:
                ids = [r[0] for r in source]
                plan = w.plan_merge(
                    key,
                    source_schema=schema,
                    key_columns=["id"],
                    strategy=strategy,
                    key_ranges={"id": (min(ids), max(ids))} if ids else {},
                    partitions=sorted({(r[4],) for r in source}) if key == "parted" else None,
                    partition_by=self._partition_by(key),
                )
                rewritten, rows, inserted, updated = self._rewrite_candidates(key, plan, source)
                if not rows:  # nothing matched and nothing to insert: no parts, no new version
                    w.commit_merge(plan, rewritten=[], new_entries=[], inserted=0, updated=0)
                    return

                def begin() -> tuple[Any, Any, pa.Table]:
                    def commit(entries: list[Any]) -> None:
                        w.commit_merge(
                            plan,
                            rewritten=rewritten,
                            new_entries=entries,
                            inserted=inserted,
                            updated=updated,
                        )

                    return plan, commit, self._table(rows)

                self._external(key, begin, lambda p: p.part_name)

            self._apply(
                key, f"plan_merge/commit_merge {strategy}", fault, run, self._merge_model(key, source, strategy)
            )

        @rule(key=st.sampled_from(KEYS), drawn=_rows, append=st.booleans(), fault=faults)
        def abandon(self, key: str, drawn: list[Any], append: bool, fault: Fault | None) -> None:
            rows = self._new_rows(drawn)
            w = self.writers[key]

            def begin() -> tuple[Any, Any, pa.Table]:
                if append:
                    pending = w.begin_append(key, self._table(rows).schema, partition_by=self._partition_by(key))
                else:
                    pending = w.begin_write(key, overwrite=True)
                return pending, None, self._table(rows)

            def name(p: Any) -> Callable[[int], str]:
                return (lambda i: f"part-{i:05d}-{p.txn}.parquet") if append else p.part_name

            self._apply(
                key,
                f"begin_{'append' if append else 'write'}/abandon_write",
                fault,
                lambda: self._external(key, begin, name),
                lambda old: Outcome(old),
            )

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
            max_examples=_examples(backend, fault_class),
            stateful_step_count=_STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            # Stop at the first distinct bug (shrinking each one costs minutes); 1 hunts for all of them.
            report_multiple_bugs=os.environ.get("PDS_MODEL_ALL_BUGS") == "1",
            # Shrinking a failure over a real store takes minutes; the failure message already names the
            # operation, the fault and the store call. PDS_MODEL_SHRINK=1 shrinks.
            phases=[p for p in Phase if p is not Phase.shrink or os.environ.get("PDS_MODEL_SHRINK") == "1"],
        ),
    )


@pytest.mark.parametrize("fault_class", [c for c in FAULT_CLASSES if _enabled(c)])
@pytest.mark.parametrize("backend", BACKENDS)
def test_segmented_datasets_behave_like_the_model(
    backend: str, fault_class: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same model with format 2's entries always in segment files (none inline): segment
    writes, tail merges and consolidations under every fault class (issue 21)."""
    monkeypatch.setattr(segments, "INLINE_ENTRIES", 0)
    test_datasets_behave_like_the_model(backend, fault_class, request)


# ------------------------------------------------------------- segment-dropping commits racing (issue 26)


class _RaceFirstSegmentRead(WrappingStore):
    """Runs ``racer`` once, right before the operation's first read of a segment."""

    def __init__(self, inner: Store, racer: Callable[[], None]) -> None:
        super().__init__(inner)
        self.racer: Callable[[], None] | None = racer

    def _before(self, op: str, path: str) -> None:
        super()._before(op, path)
        if self.racer is not None and op == "read_bytes" and "/_segments/" in path:
            racer, self.racer = self.racer, None
            racer()

    def arrow_filesystem(self) -> Any:
        return self.inner.arrow_filesystem()


_RACE_OPS = ("append", "overwrite", "merge", "compact")
_VICTIM_OPS = ("read", "filtered read", "scan", "append", "merge", "compact")


def _ids_table(ids: Sequence[int]) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64())})


def _model_op(op: str, rows: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, ...]:
    """The rows after ``op`` with ``new`` ids (merge: upsert on ``id``; compact: unchanged)."""
    if op == "append":
        return tuple(sorted(rows + new))
    if op == "overwrite":
        return tuple(sorted(new))
    if op == "merge":
        return tuple(sorted(set(rows) | set(new)))
    return rows


def _run_op(ds: ParquetDatasetStore, op: str, new: tuple[int, ...]) -> tuple[int, ...] | None:
    """Do ``op``; a read's rows, else ``None``."""
    if op == "read":
        return tuple(sorted(ds.read_dataset("m").column("id").to_pylist()))
    if op == "filtered read":
        return tuple(sorted(ds.read_dataset("m", filters=[("id", ">=", 0)]).column("id").to_pylist()))
    if op == "scan":
        return tuple(sorted(ds.scan_dataset("m").to_table().column("id").to_pylist()))
    if op == "append":
        ds.append_dataset(_ids_table(new), "m")
    elif op == "overwrite":
        ds.write_dataset(_ids_table(new), "m", overwrite=True)
    elif op == "merge":
        ds.merge_dataset(_ids_table(new), "m", key_columns=["id"])
    else:
        ds.compact_dataset("m")
    return None


@pytest.mark.timeout(300)
@pytest.mark.parametrize("retention", ["retain_versions=1", "default"])
@pytest.mark.parametrize("backend", ["memory", "local"])
def test_segment_dropping_commits_racing_readers_and_writers_behave_like_the_model(
    backend: str, retention: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that drops or merges segments (an append of up to 40 one-row files, an overwrite, a merge,
    a compaction) lands right before a reader's or writer's first segment read: the reader returns the
    version before or after it, whole; the writer's change lands on top of it, exactly once."""
    from hypothesis import given

    monkeypatch.setattr(segments, "INLINE_ENTRIES", 32)  # the byte budget would keep 40 small entries inline
    options: dict[str, Any] = {"max_rows_per_file": 1, **({"retain_versions": 1} if retention != "default" else {})}
    made = _backend(backend, request)
    counter = iter(range(10**6))

    @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(
        steps=st.lists(
            st.tuples(st.sampled_from(_RACE_OPS), st.integers(1, 40), st.sampled_from(_VICTIM_OPS), st.integers(1, 5)),
            min_size=1,
            max_size=4,
        )
    )
    def run(steps: list[tuple[str, int, str, int]]) -> None:
        store = made.make()
        try:
            rows = tuple(range(40))  # 40 one-row files: their entries live in a segment
            ParquetDatasetStore(store, **options).write_dataset(_ids_table(rows), "m")
            for race_op, race_n, victim_op, victim_n in steps:
                race_new = tuple(1000 + next(counter) for _ in range(race_n))
                victim_new = tuple(1000 + next(counter) for _ in range(victim_n))
                rival = ParquetDatasetStore(store, **options)
                raced = _RaceFirstSegmentRead(store, lambda: _run_op(rival, race_op, race_new))  # noqa: B023
                read = _run_op(ParquetDatasetStore(raced, **options), victim_op, victim_new)
                if raced.racer is not None:  # the victim read no segment: the rival commits after it
                    raced.racer()
                    before, after = rows, _model_op(race_op, _model_op(victim_op, rows, victim_new), race_new)
                else:
                    before, after = rows, _model_op(victim_op, _model_op(race_op, rows, race_new), victim_new)
                if read is not None:
                    assert read in (before, _model_op(race_op, rows, race_new)), (race_op, victim_op)
                    after = _model_op(race_op, rows, race_new)
                got = tuple(sorted(ParquetDatasetStore(store).read_dataset("m").column("id").to_pylist()))
                assert got == after, (race_op, victim_op, retention)
                rows = after
            assert ParquetDatasetStore(store).verify_dataset("m").ok
        finally:
            made.cleanup(store)

    run()
