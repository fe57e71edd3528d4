"""Issue 18 #5, #3 and #10: hostile entries and hostile ``obsolete`` lists change nothing.

External writers (Spark's executors) hand the driver a :class:`FileEntry` per part they wrote. An entry
that names a part the live version already lists, a file that does not exist, a wrong row count or size,
missing or malformed partition values, or a file whose schema is not the dataset's, would commit a
version every read then fails on. ``commit_append``, ``commit_merge`` and ``commit_write`` must refuse
the whole commit with an error naming the entry, and change nothing: same version, same rows, every file
of every retained version still there.

The parts are written by the test through the store, as Spark would (``tests/_external_writer.py``).
#3: a failed ``commit_write`` whose entry names a live file must not delete it. #10: a manifest written
by hand whose ``obsolete`` list names ``manifest.json``, ``_SUCCESS``, a retained ``_versions/`` copy or a
nested dataset's files: the next commit deletes none of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
import pytest

from dagster_parquet_dataset import ParquetDatasetStore, Store
from dagster_parquet_dataset.dataset.manifest import FileEntry
from tests._external_writer import write_part

KEY = "k"
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("p", pa.int64())])
WRONG_SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("p", pa.int64())])  # v is a string column
NEW = pa.table({"id": [100, 101], "v": ["x", "y"], "p": [1, 1]}, schema=SCHEMA)


def _writer(store: Store) -> ParquetDatasetStore:
    return ParquetDatasetStore(store, max_rows_per_file=2, retain_versions=2, max_workers=1)


def _setup(ds: ParquetDatasetStore, partitioned: bool) -> None:
    """Two versions (both retained), several parts each."""
    by = ["p"] if partitioned else None
    first = pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"], "p": [1, 1, 2]}, schema=SCHEMA)
    ds.write_dataset(first, KEY, partition_by=by)
    ds.append_dataset(pa.table({"id": [4], "v": ["d"], "p": [2]}, schema=SCHEMA), KEY, partition_by=by)


@dataclass
class _Begun:
    """An external commit begun on the live version: how to name its parts and how to commit them."""

    name: Callable[[int], str]
    commit: Callable[[Sequence[FileEntry]], object]


def _begin(ds: ParquetDatasetStore, kind: str, partition_by: tuple[str, ...]) -> _Begun:
    if kind == "commit_append":
        app = ds.begin_append(KEY, SCHEMA)
        return _Begun(lambda i: f"part-{i:05d}-{app.txn}.parquet", lambda es: ds.commit_append(app, es))
    if kind == "commit_merge":
        plan = ds.plan_merge(
            KEY,
            source_schema=SCHEMA,
            key_columns=["id"],
            key_ranges={"id": (100, 101)},
            partitions=[[1]] if partition_by else None,
        )
        assert plan.candidates == () and plan.elsewhere == ()  # ids 100..101 are new: the merge only inserts
        return _Begun(
            plan.part_name,
            lambda es: ds.commit_merge(plan, rewritten=[], new_entries=es, inserted=2, updated=0),
        )
    pending = ds.begin_write(KEY, overwrite=True)
    return _Begun(
        pending.part_name,
        lambda es: ds.commit_write(pending, es, SCHEMA, partition_by=list(partition_by) or None),
    )


def _good(store: Store, begun: _Begun, partition_by: tuple[str, ...], schema: pa.Schema = SCHEMA) -> FileEntry:
    """A correct part of ``NEW`` (partition ``p=1`` when partitioned), written through the store."""
    relative = f"p=1/{begun.name(0)}" if partition_by else begun.name(0)
    table = NEW if schema == SCHEMA else pa.table({"id": [100, 101], "v": [7, 8], "p": [1, 1]}, schema=schema)
    return write_part(store, KEY, relative, table, schema, partition_by, [1] if partition_by else None)


def _live_part(store: Store, ds: ParquetDatasetStore, begun: _Begun, by: tuple[str, ...]) -> FileEntry:
    return ds.read_manifest(KEY).files[0]


def _missing_file(store: Store, ds: ParquetDatasetStore, begun: _Begun, by: tuple[str, ...]) -> FileEntry:
    entry = _good(store, begun, by)
    store.delete(f"{KEY}/{entry.path}")
    return entry


def _wrong_rows(store: Store, ds: ParquetDatasetStore, begun: _Begun, by: tuple[str, ...]) -> FileEntry:
    entry = _good(store, begun, by)
    return replace(entry, row_count=(entry.row_count or 0) + 1)


def _wrong_size(store: Store, ds: ParquetDatasetStore, begun: _Begun, by: tuple[str, ...]) -> FileEntry:
    entry = _good(store, begun, by)
    return replace(entry, size_bytes=(entry.size_bytes or 0) + 1)


def _wrong_schema(store: Store, ds: ParquetDatasetStore, begun: _Begun, by: tuple[str, ...]) -> FileEntry:
    return _good(store, begun, by, WRONG_SCHEMA)


def _partition_values(values: object) -> Callable[[Store, ParquetDatasetStore, _Begun, tuple[str, ...]], FileEntry]:
    def make(store: Store, ds: ParquetDatasetStore, begun: _Begun, by: tuple[str, ...]) -> FileEntry:
        return replace(_good(store, begun, by), partition_values=values)  # type: ignore[arg-type]

    return make


def _in_folder(folder: str, value: int) -> Callable[[Store, ParquetDatasetStore, _Begun, tuple[str, ...]], FileEntry]:
    """A part of partition ``p = value`` written into ``folder`` (issue 26, #5: a Hive reader reads the folder)."""

    def make(store: Store, ds: ParquetDatasetStore, begun: _Begun, by: tuple[str, ...]) -> FileEntry:
        relative = f"{folder}/{begun.name(0)}" if folder else begun.name(0)
        table = NEW.set_column(2, "p", pa.array([value] * NEW.num_rows, pa.int64()))
        return write_part(store, KEY, relative, table, SCHEMA, by, [value])

    return make


COMMON = {
    "live-part": _live_part,
    "missing-file": _missing_file,
    "wrong-row-count": _wrong_rows,
    "wrong-size": _wrong_size,
    "wrong-schema": _wrong_schema,
}
PARTITIONED_ONLY = {
    "no-partition-values": _partition_values(None),
    "partition-value-wrong-type": _partition_values({"p": "one"}),
    "partition-value-unknown-column": _partition_values({"q": 1}),
    "partition-value-list": _partition_values({"p": [1]}),
    "partition-value-extra-key": _partition_values({"p": 1, "q": 2}),
    "folder-of-another-value": _in_folder("p=1", 2),
    "folder-at-the-root": _in_folder("", 1),
    "folder-of-another-column": _in_folder("q=1", 1),
    "folder-one-level-too-deep": _in_folder("p=1/q=z", 1),
}
KINDS = ("commit_append", "commit_merge", "commit_write")
CASES = [(name, False) for name in COMMON] + [(name, True) for name in [*COMMON, *PARTITIONED_ONLY]]


def _snapshot(ds: ParquetDatasetStore) -> tuple[int, list[tuple[object, ...]], set[str]]:
    """The live version, its rows and every file of every retained version."""
    versions = ds.history(KEY)
    files = {f"{KEY}/{p}" for m in versions for p in m.parts}
    rows = sorted(ds.read_dataset(KEY).select(["id", "v", "p"]).to_pylist(), key=lambda r: r["id"])
    return versions[0].version, [tuple(r.values()) for r in rows], files


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("case", "partitioned"), CASES, ids=[f"{c}-{'parted' if p else 'flat'}" for c, p in CASES])
def test_a_hostile_entry_is_refused_and_changes_nothing(store: Store, kind: str, case: str, partitioned: bool) -> None:
    ds = _writer(store)
    _setup(ds, partitioned)
    by = ("p",) if partitioned else ()
    version, rows, files = _snapshot(ds)
    begun = _begin(ds, kind, by)
    entry = {**COMMON, **PARTITIONED_ONLY}[case](store, ds, begun, by)
    try:
        begun.commit([entry])
    except Exception as exc:  # noqa: BLE001 - judged below
        refused: Exception | None = exc
    else:
        refused = None
    gone = sorted(p for p in files if not store.exists(p))
    assert not gone, f"{kind} with a {case} entry deleted files of retained versions: {gone}"
    assert refused is not None, f"{kind} committed an entry with {case} ({entry})"
    assert entry.path in str(refused), f"{kind} refused a {case} entry without naming {entry.path!r}: {refused!r}"
    assert _snapshot(ds)[:2] == (version, rows), f"{kind} with a {case} entry changed the dataset"


def test_a_failed_commit_write_naming_a_live_file_deletes_nothing(store: Store) -> None:
    """#3 exactly: overwrite begun, an append lands, then commit_write names the live data.parquet."""
    ds = ParquetDatasetStore(store)
    ds.write_dataset(pa.table({"id": [1, 2]}), KEY)
    writer = ParquetDatasetStore(store, commit_timeout=0)
    pending = writer.begin_write(KEY, overwrite=True)
    ds.append_dataset(pa.table({"id": [3]}), KEY)
    live = ds.read_manifest(KEY)
    assert "data.parquet" in live.parts
    retained = {f"{KEY}/{p}" for m in ds.history(KEY) for p in m.parts}
    entry = next(e for e in live.files if e.path == "data.parquet")
    with pytest.raises(Exception) as refused:  # noqa: PT011 - only that it fails matters here; #5 says which
        writer.commit_write(pending, [entry], pa.schema([("id", pa.int64())]))
    gone = sorted(p for p in retained if not store.exists(p))
    assert not gone, f"the failed commit_write ({refused.value!r}) deleted files of retained versions: {gone}"
    assert sorted(ds.read_dataset(KEY).column("id").to_pylist()) == [1, 2, 3]


# ----------------------------------------------------------------- #10: obsolete lists


def _reserved(store: Store) -> dict[str, str]:
    """Files a hostile ``obsolete`` list of ``a`` may name, relative to ``a``, by description."""
    copies = sorted(f.path for f in store.list_files("a/_versions"))
    return {
        "manifest.json": "manifest.json",
        "_SUCCESS": "_SUCCESS",
        "a retained _versions copy": copies[-1].removeprefix("a/"),
        "a nested dataset's part": "nested/data.parquet",
        "a nested dataset's manifest": "nested/manifest.json",
        "a nested dataset's _SUCCESS": "nested/_SUCCESS",
    }


@pytest.mark.parametrize(
    "named",
    [
        "manifest.json",
        "_SUCCESS",
        "a retained _versions copy",
        "a nested dataset's part",
        "a nested dataset's manifest",
        "a nested dataset's _SUCCESS",
    ],
)
def test_an_obsolete_list_naming_reserved_files_deletes_none_of_them(store: Store, named: str) -> None:
    ds = ParquetDatasetStore(store, retain_versions=3)
    for i in range(3):
        ds.write_dataset(pa.table({"id": [i]}), "a", overwrite=True)
    ds.write_dataset(pa.table({"id": [9]}), "a/nested")
    path = _reserved(store)[named]
    assert store.exists(f"a/{path}")
    raw, token = store.read_versioned("a/manifest.json")
    manifest = json.loads(raw)
    manifest["obsolete"] = [path]
    store.write_if("a/manifest.json", json.dumps(manifest).encode("utf-8"), expected=token)
    retained = [m.version for m in ds.history("a")]
    try:
        ds.append_dataset(pa.table({"id": [5]}), "a")  # the next commit
    except Exception as exc:  # noqa: BLE001 - refusing the hostile manifest is fine; deleting is not
        outcome = f"the append raised {exc!r}"
    else:
        outcome = "the append committed"
    assert store.exists(f"a/{path}"), f"{outcome} and deleted {named} ({path}) named by the obsolete list"
    assert ds.read_dataset("a/nested").column("id").to_pylist() == [9], outcome
    assert ds.read_dataset("a").num_rows >= 1, outcome
    for version in retained[:2]:  # the live one and the newest retained copy stay readable after one more commit
        ds.read_dataset("a", version=version)
