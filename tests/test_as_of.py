"""Time travel by timestamp: ``as_of`` picks the version live at an instant, from the manifests' commit times."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

from dagster_parquet_dataset import (
    DatasetNotFound,
    MemoryStore,
    NotFound,
    ParquetDatasetStore,
    Store,
    VersionNotRetained,
)
from dagster_parquet_dataset.dataset import pin_manifests, read_committed_manifests
from tests._stores import WrappingStore

KEY = "sales/orders"


def _table(n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64()), "v": pa.array([float(n)] * n)})


def _committed(ds: ParquetDatasetStore) -> list[datetime]:
    """Commit times of the retained versions, oldest first, from their manifests."""
    times = [datetime.fromisoformat(m.created_at_utc) for m in reversed(ds.history(KEY))]
    assert times == sorted(times) and len(set(times)) == len(times), times  # distinct, for "between" instants
    return times


def _three_versions(store: Store, retain_versions: int | None = None) -> ParquetDatasetStore:
    ds = ParquetDatasetStore(store, retain_versions=retain_versions)
    ds.write_dataset(_table(1), KEY)
    ds.write_dataset(_table(2), KEY, overwrite=True)
    ds.append_dataset(_table(3), KEY)
    return ds


def _between(a: datetime, b: datetime) -> datetime:
    return a + (b - a) / 2


def test_as_of_reads_the_version_live_at_the_instant(store: Store) -> None:
    ds = _three_versions(store)
    t1, t2, t3 = _committed(ds)
    cases = [
        (t1, 1, 1),  # exactly the commit time: that version
        (_between(t1, t2), 1, 1),
        (t2 - timedelta(microseconds=1), 1, 1),
        (t2, 2, 2),
        (_between(t2, t3), 2, 2),
        (t3, 3, 5),
        (t3 + timedelta(days=365), 3, 5),
    ]
    for as_of, version, rows in cases:
        assert ds.read_dataset(KEY, as_of=as_of).num_rows == rows, as_of
        assert ds.version_at(KEY, as_of) == version
        assert ds.read_manifest(KEY, as_of=as_of).version == version
        assert ds.plan_read(KEY, as_of=as_of).version == version
        assert ds.scan_dataset(KEY, as_of=as_of).to_table().num_rows == rows
        assert ds.read_dataset(KEY, as_of=as_of).equals(ds.read_dataset(KEY, version=version))
    # An instant in another time zone is the same instant.
    plus_two = timezone(timedelta(hours=2))
    assert ds.read_dataset(KEY, as_of=_between(t1, t2).astimezone(plus_two)).num_rows == 1


def test_as_of_before_the_first_version_is_not_found(store: Store) -> None:
    ds = _three_versions(store)
    t1 = _committed(ds)[0]
    with pytest.raises(NotFound, match="did not exist as of .*its first version was committed at") as info:
        ds.read_dataset(KEY, as_of=t1 - timedelta(microseconds=1))
    assert not isinstance(info.value, (VersionNotRetained, DatasetNotFound))


def test_as_of_a_vacuumed_version_is_not_retained(store: Store) -> None:
    ds = _three_versions(store)
    t1, t2, t3 = _committed(ds)
    result = ds.vacuum(KEY, retain_versions=2, grace_period=0)
    assert list(result.retained_versions) == [3, 2]
    with pytest.raises(VersionNotRetained, match=r"version 1 or older\) is no longer retained.*version 2"):
        ds.read_dataset(KEY, as_of=_between(t1, t2))
    with pytest.raises(VersionNotRetained):
        ds.scan_dataset(KEY, as_of=t1)
    assert ds.read_dataset(KEY, as_of=t2).num_rows == 2


def test_as_of_with_only_the_live_version_kept(store: Store) -> None:
    ds = _three_versions(store, retain_versions=1)
    live = ds.read_manifest(KEY)
    committed = datetime.fromisoformat(live.created_at_utc)
    assert ds.read_dataset(KEY, as_of=committed).num_rows == 5
    with pytest.raises(VersionNotRetained, match="version 2 or older"):
        ds.read_dataset(KEY, as_of=committed - timedelta(microseconds=1))


def test_bad_as_of_is_refused_before_any_request() -> None:
    counting = WrappingStore(MemoryStore())
    ds = ParquetDatasetStore(counting)
    with pytest.raises(ValueError, match="has no time zone"):
        ds.read_dataset(KEY, as_of=datetime(2026, 1, 1))  # noqa: DTZ001 - naive on purpose
    with pytest.raises(TypeError, match="timezone-aware datetime"):
        ds.read_dataset(KEY, as_of="2026-01-01T00:00:00+00:00")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not both"):
        ds.read_dataset(KEY, version=1, as_of=datetime.now(timezone.utc))
    with pytest.raises(ValueError, match="not both"):
        ds.plan_read(KEY, version=1, as_of=datetime.now(timezone.utc))
    assert sum(counting.calls.values()) == 0


def test_as_of_on_a_missing_dataset_is_dataset_not_found(store: Store) -> None:
    with pytest.raises(DatasetNotFound):
        ParquetDatasetStore(store).read_dataset("nothing/here", as_of=datetime.now(timezone.utc))


def test_requests_an_as_of_read_adds() -> None:
    """Resolving ``as_of`` costs the live manifest (one GET: it proves its own commit, no ``_SUCCESS``
    check) plus one GET per version committed after the one it finds; nothing is listed."""
    counting = WrappingStore(MemoryStore())
    ds = _three_versions(counting)
    t1, t2, t3 = _committed(ds)

    def calls(**kwargs: object) -> dict[str, int]:
        counting.calls.clear()
        ds.read_dataset(KEY, **kwargs)  # type: ignore[arg-type]
        return dict(counting.calls)

    def added(version: int, as_of: datetime) -> dict[str, int]:
        by_version, by_time = calls(version=version), calls(as_of=as_of)
        diff = {op: by_time.get(op, 0) - by_version.get(op, 0) for op in {*by_time, *by_version}}
        return {op: n for op, n in diff.items() if n}

    assert added(3, t3) == {"read_bytes": 1}
    assert added(2, t2) == {"read_bytes": 2}
    assert added(1, t1) == {"read_bytes": 3}
    counting.calls.clear()
    ds.version_at(KEY, _between(t1, t2))
    assert dict(counting.calls) == {"read_bytes": 3}


def test_a_pinned_view_reads_and_plans_as_of(store: Store) -> None:
    """``pin_manifests``' view serves the pinned latest version, and ``as_of`` still travels in time."""
    ds = _three_versions(store)
    t1, t2, _t3 = _committed(ds)
    pinned = pin_manifests(ds, read_committed_manifests(ds, [KEY]))
    assert pinned.read_manifest(KEY).version == 3
    assert pinned.read_manifest(KEY, as_of=_between(t1, t2)).version == 1
    assert pinned.read_manifest(KEY, as_of=t2).version == 2
    assert pinned.plan_read(KEY).version == 3
    assert pinned.plan_read(KEY, as_of=_between(t1, t2)).version == 1
    assert pinned.plan_read(KEY, as_of=t2).version == 2
    with pytest.raises(ValueError, match="not both"):
        pinned.read_manifest(KEY, version=1, as_of=t2)
    with pytest.raises(ValueError, match="not both"):
        pinned.plan_read(KEY, version=1, as_of=t2)
