"""Rules of the model test (``tests/test_model.py``) for keys that overlap a dataset and hostile external entries.

- ``overlapping``: a write, append, merge, delete, vacuum or ``begin_write`` on a key inside one of the
  model's datasets (a partition folder of ``parted``, ``_versions``, ``_claim``, ``manifest.json``,
  ``_SUCCESS``) is refused with a ``ValueError``, and not one file of the dataset changes.
- ``hostile_commit``: an external ``commit_append`` whose entries include one hostile entry (a missing
  file, a wrong row count, a part the live version lists, a partitioned entry without partition values)
  is refused whole and changes nothing, under the machine's faults (interrupts included).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import rule

from dagster_parquet_dataset import NotFound, Store

MODEL_KEYS = ("flat", "parted", "hist")
OVERLAPS = ("p=p1", "p=p2/sub", "_versions", "_claim", "manifest.json", "_SUCCESS")
OVERLAP_OPS = ("write", "append", "merge", "delete", "vacuum", "begin_write")
HOSTILE = ("missing-file", "wrong-rows", "live-part", "no-partition-values")
_few_rows = st.lists(
    st.tuples(st.just("h"), st.just(None), st.integers(0, 5), st.sampled_from(["p1", "p2"])), min_size=1, max_size=3
)


def _files(store: Store, key: str) -> dict[str, bytes]:
    return {f.path: store.read_bytes(f.path) for f in store.list_files(key)}


class OverlapRules:
    """Mixed into the model's state machine; uses its writers, helpers and ``_apply``."""

    writers: dict[str, Any]
    states: dict[str, set[Any]]
    inner: Store
    reader: Any

    if TYPE_CHECKING:  # provided by the machine

        def _new_rows(self, drawn: list[Any]) -> Any: ...
        def _table(self, rows: Any) -> pa.Table: ...
        def _partition_by(self, key: str) -> list[str] | None: ...
        def _external(
            self, key: str, begin: Callable[[], Any], name: Callable[[Any], Callable[[int], str]]
        ) -> None: ...
        def _apply(self, key: str, what: str, fault: Any, call: Callable[[], object], model: Any) -> None: ...
        def _refused(self) -> Callable[[Any], Any]: ...

    @rule(
        key=st.sampled_from(MODEL_KEYS),
        inside=st.sampled_from(OVERLAPS),
        op=st.sampled_from(OVERLAP_OPS),
        drawn=_few_rows,
    )
    def overlapping(self, key: str, inside: str, op: str, drawn: list[Any]) -> None:
        if inside.startswith("p=") and (key != "parted" or any(s.rows is None for s in self.states[key])):
            return  # a partition folder is refused only while its dataset exists
        other = f"{key}/{inside}"
        table = self._table(self._new_rows(drawn))
        w = self.writers[key]
        calls: dict[str, Callable[[], object]] = {
            "write": lambda: w.write_dataset(table, other, overwrite=True),
            "append": lambda: w.append_dataset(table, other),
            "merge": lambda: w.merge_dataset(table, other, key_columns=["id"]),
            "delete": lambda: w.delete_dataset(other),
            "vacuum": lambda: w.vacuum(other),
            "begin_write": lambda: w.begin_write(other, overwrite=True),
        }
        before = _files(self.inner, key)
        with pytest.raises(ValueError, match="inside the"):
            calls[op]()
        assert _files(self.inner, key) == before, f"{op} on {other!r} changed files of dataset {key!r}"

    @rule(key=st.sampled_from(MODEL_KEYS), drawn=_few_rows, hostile=st.sampled_from(HOSTILE))
    def hostile_commit(self, key: str, drawn: list[Any], hostile: str) -> None:
        rows = self._new_rows(drawn)
        w = self.writers[key]

        def spoil(entry: Any) -> Any:
            try:
                live = list(self.reader.read_manifest(key).parts)
            except NotFound:
                live = []
            if hostile == "wrong-rows":
                return replace(entry, row_count=(entry.row_count or 0) + 1)
            if hostile == "live-part" and live:
                return replace(entry, path=live[0])
            if hostile == "no-partition-values" and key == "parted":
                return replace(entry, partition_values=None)
            return replace(entry, path=entry.path.replace(".parquet", "-never-written.parquet"))

        def begin() -> tuple[Any, Any, pa.Table]:
            pending = w.begin_append(key, self._table(rows).schema, partition_by=self._partition_by(key))
            return pending, lambda es: w.commit_append(pending, [spoil(es[0]), *es[1:]]), self._table(rows)

        before = _files(self.inner, key)
        self._apply(
            key,
            f"commit_append with a hostile entry ({hostile})",
            None,
            lambda: self._external(key, begin, lambda p: lambda i: f"part-{i:05d}-{p.txn}.parquet"),
            self._refused(),
        )
        after = _files(self.inner, key)
        changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
        assert not changed, f"a refused hostile commit to {key!r} changed {sorted(changed)}"
