"""The transaction's rules (issue 18 #1 #3 #5 #10 #12b), forced through the public API by wrapping the Store.

- #1: once the commit request is sent, nothing is deleted until its outcome is known: an interrupt
  right after the compare-and-swap landed, or while ``_SUCCESS`` is written, keeps the new version's
  parts; an interrupt inside the send keeps the parts (vacuum removes them) and the old version reads.
- #3: a failed external commit deletes only files the write created, never a live one.
- #5: external commits check every entry and refuse the whole commit, changing nothing.
- #10: a manifest's ``obsolete`` list never gets reserved names or a nested dataset's files deleted.
- #12b: ``commit_timeout`` must be a finite, non-negative number.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dagster_parquet_dataset import DatasetIncomplete, ParquetDatasetStore, Store
from dagster_parquet_dataset.dataset import FileEntry
from tests._stores import WrappingStore


class Interrupt(KeyboardInterrupt):
    """The injected interrupt (a ``KeyboardInterrupt``, so ``except Exception`` does not catch it)."""


class InterruptingStore(WrappingStore):
    """Raises :class:`Interrupt` once, at a chosen point of a chosen call.

    ``when``: ``"after"`` (the call was applied, then the interrupt arrives) or ``"before"``
    (inside the call, before it reaches the inner store). ``op``/``suffix`` pick the call.
    """

    def __init__(self, inner: Store, *, op: str, suffix: str, when: str) -> None:
        super().__init__(inner)
        self.op, self.suffix, self.when = op, suffix, when
        self.armed = False
        self.fired = False

    def _hit(self, op: str, path: str, when: str) -> bool:
        if self.armed and not self.fired and op == self.op and path.endswith(self.suffix) and when == self.when:
            self.fired = True
            return True
        return False

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        if self._hit("write_if", path, "before"):
            raise Interrupt(f"before write_if {path}")
        token = super().write_if(path, data, expected=expected)
        if self._hit("write_if", path, "after"):
            raise Interrupt(f"after write_if {path}")
        return token

    def write_bytes(self, path: str, data: bytes) -> None:
        if self._hit("write_bytes", path, "before"):
            raise Interrupt(f"before write_bytes {path}")
        super().write_bytes(path, data)
        if self._hit("write_bytes", path, "after"):
            raise Interrupt(f"after write_bytes {path}")


OLD = pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]})
NEW = pa.table({"k": [3, 4], "v": ["z", "d"]})

Operation = Callable[[ParquetDatasetStore, str], None]

OPERATIONS: dict[str, tuple[bool, Operation, list[tuple[int, str]]]] = {
    # name: (dataset exists before, operation, rows after)
    "create": (False, lambda ds, key: ds.write_dataset(NEW, key), [(3, "z"), (4, "d")]),
    "overwrite": (True, lambda ds, key: ds.write_dataset(NEW, key, overwrite=True), [(3, "z"), (4, "d")]),
    "append": (
        True,
        lambda ds, key: ds.append_dataset(NEW, key),
        [(1, "a"), (2, "b"), (3, "c"), (3, "z"), (4, "d")],
    ),
    "merge": (
        True,
        lambda ds, key: ds.merge_dataset(NEW, key, key_columns=["k"]),
        [(1, "a"), (2, "b"), (3, "z"), (4, "d")],
    ),
    "compact": (
        True,
        lambda ds, key: ds.compact_dataset(key, target_file_bytes=1 << 20),
        [(1, "a"), (2, "b"), (3, "c")],
    ),
}


def _rows(ds: ParquetDatasetStore, key: str) -> list[tuple[int, str]]:
    t = ds.read_dataset(key)
    return sorted(zip(t.column("k").to_pylist(), t.column("v").to_pylist(), strict=True))


def _setup(store: Store, key: str, exists: bool) -> None:
    if exists:
        ParquetDatasetStore(store, max_rows_per_file=1).write_dataset(OLD, key)


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_interrupt_after_the_commit_landed_keeps_the_new_version(store: Store, name: str) -> None:
    exists, operation, after = OPERATIONS[name]
    _setup(store, "t", exists)
    wrapped = InterruptingStore(store, op="write_if", suffix="t/manifest.json", when="after")
    wrapped.armed = True
    with pytest.raises(Interrupt):
        operation(ParquetDatasetStore(wrapped, max_rows_per_file=1), "t")
    assert wrapped.fired
    reader = ParquetDatasetStore(store)
    assert _rows(reader, "t") == after
    assert reader.verify_dataset("t").ok


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_interrupt_while_success_is_written_keeps_the_new_version(store: Store, name: str) -> None:
    exists, operation, after = OPERATIONS[name]
    _setup(store, "t", exists)
    # A commit on top of a version writes `_SUCCESS` only if it is missing (its writer died before writing it):
    # take it away, so this commit writes it.
    store.delete("t/_SUCCESS", missing_ok=True)
    wrapped = InterruptingStore(store, op="write_bytes", suffix="t/_SUCCESS", when="before")
    wrapped.armed = True
    with pytest.raises(Interrupt):
        operation(ParquetDatasetStore(wrapped, max_rows_per_file=1), "t")
    reader = ParquetDatasetStore(store)
    assert _rows(reader, "t") == after  # the reader writes the missing _SUCCESS of a committed version


def _interrupt_inside_the_send(store: Store, name: str, *, retain_versions: int | None = None) -> list[str]:
    """Run operation ``name`` with its manifest swap interrupted before it is sent; the files it left
    (``retain_versions=None`` is the store's default retention)."""
    exists, operation, _after = OPERATIONS[name]
    _setup(store, "t", exists)
    before = sorted(f.path for f in store.list_files("t"))
    wrapped = InterruptingStore(store, op="write_if", suffix="t/manifest.json", when="before")
    wrapped.armed = True
    with pytest.raises(Interrupt):
        operation(ParquetDatasetStore(wrapped, max_rows_per_file=1, retain_versions=retain_versions), "t")
    return sorted(f.path for f in store.list_files("t") if f.path not in before)


@pytest.mark.parametrize("name", ["overwrite", "append", "merge", "compact"])
def test_interrupt_inside_the_send_keeps_the_old_version_and_leaves_parts_for_vacuum(store: Store, name: str) -> None:
    # retain_versions=1 (written for the old default): no copy of the live version goes to _versions/.
    leftovers = _interrupt_inside_the_send(store, name, retain_versions=1)
    reader = ParquetDatasetStore(store)
    assert _rows(reader, "t") == [(1, "a"), (2, "b"), (3, "c")]
    # The outcome was unknown to the writer, so its parts stayed; vacuum removes them.
    assert leftovers
    assert sorted(reader.vacuum("t", grace_period=timedelta(0)).deleted) == leftovers


@pytest.mark.parametrize("name", sorted(n for n, (exists, _op, _after) in OPERATIONS.items() if exists))
def test_interrupt_inside_the_send_under_the_default_retention_keeps_the_live_versions_copy(
    store: Store, name: str
) -> None:
    """With the default retention the writer copied the version it meant to replace into ``_versions/`` just
    before the send. The send's outcome is unknown, so its parts stay for vacuum; the copy is the live version's
    own (byte for byte its ``manifest.json``), which vacuum keeps so a later commit replacing it finds it."""
    leftovers = _interrupt_inside_the_send(store, name)
    reader = ParquetDatasetStore(store)
    assert _rows(reader, "t") == [(1, "a"), (2, "b"), (3, "c")]
    copy = "t/_versions/00000000000000000001.json"
    assert copy in leftovers and len(leftovers) > 1
    assert store.read_bytes(copy) == store.read_bytes("t/manifest.json")
    assert sorted(reader.vacuum("t", grace_period=timedelta(0)).deleted) == [p for p in leftovers if p != copy]
    assert _rows(ParquetDatasetStore(store), "t") == [(1, "a"), (2, "b"), (3, "c")]


def test_interrupt_before_the_send_deletes_the_parts(store: Store) -> None:
    _setup(store, "t", True)
    before = sorted(f.path for f in store.list_files("t"))
    # retain_versions=2 copies the replaced manifest into _versions/ just before the send.
    wrapped = InterruptingStore(store, op="write_bytes", suffix=".json", when="before")
    wrapped.armed = True
    with pytest.raises(Interrupt):
        ParquetDatasetStore(wrapped, retain_versions=2).write_dataset(NEW, "t", overwrite=True)
    assert wrapped.fired
    assert sorted(f.path for f in store.list_files("t")) == before
    assert _rows(ParquetDatasetStore(store), "t") == [(1, "a"), (2, "b"), (3, "c")]


# ---------------------------------------------------------------- #3: clean-up of a failed external commit


def _part(store: Store, path: str, table: pa.Table) -> FileEntry:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    store.write_bytes(path, buf.getvalue())
    return FileEntry(path=path.split("/", 1)[1], row_count=table.num_rows, size_bytes=len(buf.getvalue()))


def test_failed_commit_write_never_deletes_a_live_file(store: Store) -> None:
    ds = ParquetDatasetStore(store, commit_timeout=0)
    ds.write_dataset(OLD, "t")
    pending = ds.begin_write("t", overwrite=True)
    ds.append_dataset(OLD, "t")  # lands meanwhile: the overwrite loses its race and gives up
    # The appended part is live but unknown to the version the overwrite began on, so only the
    # clean-up's own rule (delete what this write created, never a listed file) protects it.
    live = next(f for f in ds.read_manifest("t").files if f.path != "data.parquet")
    ours = _part(store, f"t/{pending.part_name(0)}", NEW)
    with pytest.raises(Exception, match="gave up committing"):
        ds.commit_write(pending, [live, ours], OLD.schema)
    assert store.exists(f"t/{live.path}")
    assert not store.exists(f"t/{ours.path}")
    assert len(_rows(ds, "t")) == 6


def test_commit_write_refuses_a_part_its_base_version_lists(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, "t")
    pending = ds.begin_write("t", overwrite=True)
    live = ds.read_manifest("t").files[0]
    ours = _part(store, f"t/{pending.part_name(0)}", NEW)
    with pytest.raises(ValueError, match="already listed"):
        ds.commit_write(pending, [live, ours], OLD.schema)
    assert ds.read_manifest("t").version == 1
    assert store.exists(f"t/{live.path}") and store.exists(f"t/{ours.path}")  # refused: nothing touched
    ds.abandon_write(pending, [ours.path, live.path])
    assert not store.exists(f"t/{ours.path}") and store.exists(f"t/{live.path}")
    assert _rows(ds, "t") == [(1, "a"), (2, "b"), (3, "c")]


# ------------------------------------------------------------------------- #5: hostile external entries


def test_commit_append_refuses_an_entry_the_live_version_lists(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, "t")
    pending = ds.begin_append("t", OLD.schema)
    live = ds.read_manifest("t").files[0]
    with pytest.raises(ValueError, match="already listed"):
        ds.commit_append(pending, [live])
    assert ds.read_manifest("t").version == 1
    assert _rows(ds, "t") == [(1, "a"), (2, "b"), (3, "c")]


@pytest.mark.parametrize("problem", ["missing", "rows", "size", "schema"])
def test_external_commits_refuse_entries_that_disagree_with_the_file(store: Store, problem: str) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, "t")
    pending = ds.begin_append("t", OLD.schema)
    name = f"part-00000-{pending.txn}.parquet"
    table = pa.table({"x": [1.5]}) if problem == "schema" else NEW
    entry = _part(store, f"t/{name}", table)
    if problem == "missing":
        store.delete(f"t/{name}")
    elif problem == "rows":
        entry = replace(entry, row_count=5)
    elif problem == "size":
        entry = replace(entry, size_bytes=(entry.size_bytes or 0) + 1)
    with pytest.raises(DatasetIncomplete, match=name):
        ds.commit_append(pending, [entry])
    assert ds.read_manifest("t").version == 1
    plan = ds.plan_merge("t", source_schema=OLD.schema, key_columns=["k"], key_ranges={"k": (9, 9)})
    with pytest.raises(DatasetIncomplete, match=name):
        ds.commit_merge(plan, rewritten=[], new_entries=[entry], inserted=1, updated=0)
    assert ds.read_manifest("t").version == 1
    assert _rows(ds, "t") == [(1, "a"), (2, "b"), (3, "c")]


@pytest.mark.parametrize(
    "values",
    [None, {"day": "1"}, {"day": 1, "other": 2}, {"other": 1}, {"day": [1]}, {"day": 1.5}],
    ids=["absent", "wrong-type", "extra-key", "unknown-column", "list", "float"],
)
def test_external_commits_refuse_bad_partition_values(store: Store, values: object) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(pa.table({"day": [1, 2], "v": ["a", "b"]}), "p", partition_by=["day"])
    pending = ds.begin_append("p", pa.schema([("day", pa.int64()), ("v", pa.string())]))
    entry = _part(store, f"p/day=1/part-00000-{pending.txn}.parquet", pa.table({"v": ["c"]}))
    with pytest.raises(ValueError, match="partition"):
        ds.commit_append(pending, [replace(entry, partition_values=values)])  # type: ignore[arg-type]
    assert ds.read_manifest("p").version == 1
    ds.commit_append(pending, [replace(entry, partition_values={"day": 1})])
    assert sorted(ds.read_dataset("p").column("v").to_pylist()) == ["a", "b", "c"]


# ------------------------------------------------------------------- #10: a hostile obsolete list


def test_obsolete_list_never_deletes_reserved_names_or_a_nested_dataset(store: Store) -> None:
    ds = ParquetDatasetStore(store)
    ds.write_dataset(OLD, "t")
    ds.write_dataset(NEW, "t/sub")
    manifest = ds.read_manifest("t")
    hostile = ("manifest.json", "_SUCCESS", "_claim", "sub/data.parquet", "sub/manifest.json", "../x")
    store.write_bytes("t/manifest.json", replace(manifest, obsolete=hostile).to_json().encode())
    ds.write_dataset(NEW, "t", overwrite=True)
    assert _rows(ds, "t") == [(3, "z"), (4, "d")]
    assert _rows(ds, "t/sub") == [(3, "z"), (4, "d")]
    assert ds.verify_dataset("t/sub").ok
    assert store.exists("t/_SUCCESS") and store.exists("t/manifest.json")


# ---------------------------------------------------------------------------- #12b: commit_timeout


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), -1.0, True, "5"])
def test_commit_timeout_must_be_finite_and_non_negative(timeout: object) -> None:
    from dagster_parquet_dataset import MemoryStore

    with pytest.raises(ValueError, match="commit_timeout"):
        ParquetDatasetStore(MemoryStore(), commit_timeout=timeout)  # type: ignore[arg-type]
