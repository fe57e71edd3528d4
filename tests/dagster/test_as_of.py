"""Input metadata ``as_of``: an asset reads its upstream as it was at an instant (issue 19, item 2)."""

from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, NotFound, ParquetDatasetStore, S3Store, Store, VersionNotRetained
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager, S3StoreResource
from dagster_parquet_dataset.dagster_io.options import ReadOptions
from dagster_parquet_dataset.dagster_io.resources import StoreResource
from tests._stores import WrappingStore
from tests.conftest import make_bucket

WHAT = "input 'prices'"


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Any) -> tuple[RemoteStoreIOManager, ParquetDatasetStore]:
    """The IO manager (keeping every version) and an independent reader of the same store."""
    if request.param == "local":
        root = str(tmp_path / "store")
        return RemoteStoreIOManager(store=LocalStoreResource(root=root), retain_versions=None), ParquetDatasetStore(
            LocalStore(root), retain_versions=1
        )
    endpoint = request.getfixturevalue("moto_endpoint")
    bucket = make_bucket(endpoint)
    resource = S3StoreResource(bucket=bucket, prefix="lake", endpoint_url=endpoint)
    reader = ParquetDatasetStore(S3Store(bucket, prefix="lake", endpoint_url=endpoint), retain_versions=1)
    return RemoteStoreIOManager(store=resource, retain_versions=None), reader


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


def _prices_asset(price: float) -> dg.AssetsDefinition:
    @dg.asset(name="prices")
    def prices() -> pa.Table:
        return pa.table({"price": [price]})

    return prices


def _materialize_three(io: RemoteStoreIOManager, datasets: ParquetDatasetStore, instance: Any) -> list[datetime]:
    """Three materializations of ``prices`` (1.0, 2.0, 3.0); their commit times from the manifests."""
    for price in (1.0, 2.0, 3.0):
        assert dg.materialize([_prices_asset(price)], resources={"io_manager": io}, instance=instance).success
    times = [datetime.fromisoformat(m.created_at_utc) for m in reversed(datasets.history("prices"))]
    assert len(times) == 3 and times == sorted(times) and len(set(times)) == 3
    return times


def _load_with(io: RemoteStoreIOManager, instance: Any, metadata: dict[str, Any], annotation: Any = pa.Table) -> Any:
    seen: dict[str, Any] = {}

    @dg.asset(ins={"prices": dg.AssetIn(metadata=metadata)})
    def report(prices: annotation) -> None:  # type: ignore[valid-type]
        seen["prices"] = prices

    # Keep the last `prices` definition's upstream: only `report` runs.
    result = dg.materialize(
        [_prices_asset(0.0), report], selection=[report], resources={"io_manager": io}, instance=instance
    )
    assert result.success
    return seen["prices"]


def test_as_of_between_two_materializations_gets_the_older_rows(
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    io, datasets = backend
    t1, t2, t3 = _materialize_three(io, datasets, instance)
    between = t1 + (t2 - t1) / 2
    assert _load_with(io, instance, {"as_of": dg.MetadataValue.timestamp(between)})["price"].to_pylist() == [1.0]
    iso = (t2 + (t3 - t2) / 2).astimezone(timezone(timedelta(hours=-5))).isoformat()
    assert _load_with(io, instance, {"as_of": iso})["price"].to_pylist() == [2.0]
    assert _load_with(io, instance, {"as_of": t3.timestamp() + 60})["price"].to_pylist() == [3.0]
    assert _load_with(io, instance, {})["price"].to_pylist() == [3.0]  # without as_of: the latest


def test_as_of_before_the_upstream_existed(
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    io, datasets = backend
    t1 = _materialize_three(io, datasets, instance)[0]
    before = {"as_of": dg.MetadataValue.timestamp(t1 - timedelta(seconds=1))}
    assert _load_with(io, instance, before, pa.Table | None) is None  # it held nothing then
    context = dg.build_input_context(
        name="prices", asset_key=dg.AssetKey(["prices"]), definition_metadata=before,
        dagster_type=dg.PythonObjectDagsterType(pa.Table),
    )  # fmt: skip
    with pytest.raises(NotFound, match=r"cannot load .*as of .*did not exist as of"):
        io.load_input(context)


def test_as_of_a_vacuumed_version_is_version_not_retained(
    backend: tuple[RemoteStoreIOManager, ParquetDatasetStore], instance: dg.DagsterInstance
) -> None:
    io, datasets = backend
    t1, t2, _t3 = _materialize_three(io, datasets, instance)
    datasets.vacuum("prices", retain_versions=2, grace_period=0)
    context = dg.build_input_context(
        name="prices", asset_key=dg.AssetKey(["prices"]),
        definition_metadata={"as_of": dg.MetadataValue.timestamp(t1 + (t2 - t1) / 2)},
        dagster_type=dg.PythonObjectDagsterType(pa.Table),
    )  # fmt: skip
    with pytest.raises(VersionNotRetained, match="no longer retained.*Set retain_versions"):
        io.load_input(context)


def test_as_of_metadata_is_checked() -> None:
    def parse(value: Any, **more: Any) -> ReadOptions:
        return ReadOptions.from_metadata({"as_of": value, **more}, WHAT)

    instant = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
    assert parse(dg.MetadataValue.timestamp(instant)).as_of == instant
    assert parse(instant.timestamp()).as_of == instant
    assert parse("2026-03-01T13:00:00+01:00").as_of == instant
    assert parse("2026-03-01T12:00:00Z").as_of == instant
    with pytest.raises(ValueError, match="'as_of' 2026-03-01T12:00:00 has no time zone"):
        parse("2026-03-01T12:00:00")
    with pytest.raises(ValueError, match="not an ISO-8601 timestamp"):
        parse("yesterday")
    with pytest.raises(TypeError, match="must name an instant"):
        parse([2026])
    with pytest.raises(ValueError, match="'version' \\(2\\) and 'as_of'.*keep one"):
        parse(instant.timestamp(), version=2)
    assert ReadOptions.from_metadata({}, WHAT).as_of is None


letters = dg.StaticPartitionsDefinition(["a", "b"])


def _letters_asset(price: float) -> dg.AssetsDefinition:
    @dg.asset(name="quotes", partitions_def=letters)
    def quotes(context: dg.AssetExecutionContext) -> pa.Table:
        return pa.table({"letter": [context.partition_key], "price": [price]})

    return quotes


def test_as_of_over_partitions_per_partition_or_refused(tmp_path: Any, instance: dg.DagsterInstance) -> None:
    """Each partition is its own dataset with its own versions: a dict input reads each as of the instant;
    several partitions as one value are refused."""
    io = RemoteStoreIOManager(store=LocalStoreResource(root=str(tmp_path / "store")), retain_versions=None)
    reader = ParquetDatasetStore(LocalStore(str(tmp_path / "store")), retain_versions=1)
    for price in (1.0, 2.0):
        for letter in ("a", "b"):
            assert dg.materialize(
                [_letters_asset(price)], partition_key=letter, resources={"io_manager": io}, instance=instance
            ).success
    first_b = datetime.fromisoformat(reader.history("quotes/b")[-1].created_at_utc)
    second_a = datetime.fromisoformat(reader.history("quotes/a")[0].created_at_utc)
    assert first_b < second_a
    metadata = {"as_of": dg.MetadataValue.timestamp(first_b + (second_a - first_b) / 2)}
    seen: dict[str, Any] = {}

    @dg.asset(ins={"quotes": dg.AssetIn(metadata=metadata)})
    def per_letter(quotes: dict[str, pa.Table]) -> None:
        seen.update(quotes)

    @dg.asset(ins={"quotes": dg.AssetIn(metadata=metadata)})
    def together(quotes: pa.Table) -> None:
        seen["together"] = quotes

    resources = {"io_manager": io}
    assets = [_letters_asset(0.0), per_letter, together]
    assert dg.materialize(assets, selection=[per_letter], resources=resources, instance=instance).success
    assert {k: t["price"].to_pylist() for k, t in seen.items()} == {"a": [1.0], "b": [1.0]}
    with pytest.raises(ValueError, match="'as_of' reads each partition at its own version.*dict"):
        dg.materialize(assets, selection=[together], resources=resources, instance=instance)


_COUNTS: dict[str, Counter[str]] = {}


class CountingLocalStoreResource(StoreResource):
    """A LocalStore whose calls are counted in ``_COUNTS[root]`` (shared by every store it builds)."""

    root: str

    def get_store(self) -> Store:
        store = WrappingStore(LocalStore(self.root))
        store.calls = _COUNTS.setdefault(self.root, Counter())
        return store


def test_requests_an_as_of_input_adds(tmp_path: Any, instance: dg.DagsterInstance) -> None:
    """Measured through ``load_input``: ``as_of`` adds the live manifest (one GET: it proves its commit, no
    ``_SUCCESS`` check) and one GET per version committed after the one it loads, over the same input with
    ``version``."""
    root = str(tmp_path / "store")
    io = RemoteStoreIOManager(store=CountingLocalStoreResource(root=root), retain_versions=None)
    times = _materialize_three(io, ParquetDatasetStore(LocalStore(root), retain_versions=1), instance)
    counts = _COUNTS[root]

    def calls(metadata: dict[str, Any]) -> Counter[str]:
        context = dg.build_input_context(
            name="prices", asset_key=dg.AssetKey(["prices"]), definition_metadata=metadata,
            dagster_type=dg.PythonObjectDagsterType(pa.Table),
        )  # fmt: skip
        counts.clear()
        assert io.load_input(context).num_rows == 1
        return Counter(counts)

    added = {}
    for version, committed in enumerate(times, start=1):
        by_time = calls({"as_of": committed.isoformat()})
        by_time.subtract(calls({"version": version}))
        added[version] = {op: n for op, n in by_time.items() if n}
    assert added == {
        3: {"read_bytes": 1},
        2: {"read_bytes": 2},
        1: {"read_bytes": 3},
    }
