"""Issue 9 item 4 on the wire: a conditional PUT of ``manifest.json`` reaches the
moto S3 server and is applied, its response is lost, botocore retries it and
gets 412. The writer must recognise its own commit: no duplicated rows, no
``AlreadyExists`` for its own create, no deleted parts under a live manifest.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dagster_parquet_dataset import ParquetDatasetStore, S3Store
from tests._s3_proxy import LossyProxy
from tests.conftest import make_bucket


@pytest.fixture
def proxy(moto_endpoint: str) -> Iterator[LossyProxy]:
    lossy = LossyProxy(moto_endpoint)
    yield lossy
    lossy.close()


@pytest.fixture
def bucket(moto_endpoint: str) -> str:
    return make_bucket(moto_endpoint)


def rows(start: int, n: int, tag: str = "x") -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "tag": pa.array([tag] * n, pa.string())})


def direct(bucket: str, endpoint: str) -> ParquetDatasetStore:
    return ParquetDatasetStore(S3Store(bucket, prefix="lake", endpoint_url=endpoint))


def through(bucket: str, proxy: LossyProxy, **options: object) -> ParquetDatasetStore:
    return ParquetDatasetStore(S3Store(bucket, prefix="lake", endpoint_url=proxy.url), **options)  # type: ignore[arg-type]


def manifest_puts(proxy: LossyProxy) -> list[int]:
    return [status for method, path, status in proxy.seen if method == "PUT" and path.endswith("/manifest.json")]


def test_lost_append_response_commits_rows_once(bucket: str, moto_endpoint: str, proxy: LossyProxy) -> None:
    direct(bucket, moto_endpoint).write_dataset(rows(0, 5), "t")
    proxy.drop_next("PUT", "/t/manifest.json")
    manifest = through(bucket, proxy).append_dataset(rows(5, 3), "t")
    assert proxy.dropped, "the proxy never lost a response: the test did not test anything"
    # The request was applied, then retried by botocore and refused with 412.
    assert manifest_puts(proxy)[:2] == [200, 412]
    got = direct(bucket, moto_endpoint).read_dataset("t")
    assert sorted(got["id"].to_pylist()) == list(range(8))
    assert manifest.version == 2


def test_lost_create_response_is_not_already_exists(bucket: str, moto_endpoint: str, proxy: LossyProxy) -> None:
    proxy.drop_next("PUT", "/new/manifest.json")
    manifest = through(bucket, proxy, max_rows_per_file=2).write_dataset(rows(0, 5), "new")
    assert proxy.dropped
    assert manifest.parts == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert sorted(direct(bucket, moto_endpoint).read_dataset("new")["id"].to_pylist()) == list(range(5))


def test_lost_merge_response_keeps_rewritten_files(bucket: str, moto_endpoint: str, proxy: LossyProxy) -> None:
    ParquetDatasetStore(S3Store(bucket, prefix="lake", endpoint_url=moto_endpoint), max_rows_per_file=5).write_dataset(
        rows(0, 10), "m"
    )
    proxy.drop_next("PUT", "/m/manifest.json")
    result = through(bucket, proxy).merge_dataset(rows(3, 4, tag="new"), "m", key_columns=["id"])
    assert proxy.dropped
    got = direct(bucket, moto_endpoint).read_dataset("m")
    assert sorted(got["id"].to_pylist()) == list(range(10))
    assert sorted(got.filter(pc.equal(got["tag"], "new"))["id"].to_pylist()) == [3, 4, 5, 6]
    assert result.updated == 4


def test_overwrite_with_every_commit_response_lost(bucket: str, moto_endpoint: str, proxy: LossyProxy) -> None:
    direct(bucket, moto_endpoint).write_dataset(rows(0, 6), "o")
    proxy.drop_next("PUT", "/o/manifest.json", count=1000)
    through(bucket, proxy).write_dataset(rows(100, 2), "o", overwrite=True)
    assert len(proxy.dropped) >= 2  # botocore's retry lost its answer too
    assert sorted(direct(bucket, moto_endpoint).read_dataset("o")["id"].to_pylist()) == [100, 101]


# ---------------------------------------------------- 5xx answers to applied conditional writes (issue 18, #1)


def test_write_if_answered_500_after_applying_is_no_answer(bucket: str, moto_endpoint: str, proxy: LossyProxy) -> None:
    store = S3Store(bucket, prefix="lake", endpoint_url=proxy.url)
    store.check_conditional_writes()
    proxy.fail_next("PUT", "/k/manifest.json", count=1000)
    with pytest.raises(ConnectionError, match="no answer from S3"):
        store.write_if("k/manifest.json", b"first", expected=None)
    assert proxy.failed, "the proxy never answered 500: the test did not test anything"
    # Applied by the server (then botocore's retries were refused with 412, also answered 500).
    assert manifest_puts(proxy)[:2] == [200, 412]
    assert S3Store(bucket, prefix="lake", endpoint_url=moto_endpoint).read_bytes("k/manifest.json") == b"first"


@pytest.mark.parametrize("status", [500, 503])
def test_append_answered_5xx_commits_rows_once(bucket: str, moto_endpoint: str, proxy: LossyProxy, status: int) -> None:
    direct(bucket, moto_endpoint).write_dataset(rows(0, 5), "t")
    proxy.fail_next("PUT", "/t/manifest.json", count=1000, status=status)
    manifest = through(bucket, proxy).append_dataset(rows(5, 3), "t")
    assert proxy.failed
    assert manifest_puts(proxy)[0] == 200  # the first request was applied
    assert manifest.version == 2
    assert sorted(direct(bucket, moto_endpoint).read_dataset("t")["id"].to_pylist()) == list(range(8))


def test_create_answered_500_keeps_its_parts(bucket: str, moto_endpoint: str, proxy: LossyProxy) -> None:
    proxy.fail_next("PUT", "/new/manifest.json", count=1000)
    manifest = through(bucket, proxy, max_rows_per_file=2).write_dataset(rows(0, 5), "new")
    assert proxy.failed
    assert manifest.parts == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert sorted(direct(bucket, moto_endpoint).read_dataset("new")["id"].to_pylist()) == list(range(5))


def test_overwrite_answered_500_deletes_only_replaced_parts(bucket: str, moto_endpoint: str, proxy: LossyProxy) -> None:
    direct(bucket, moto_endpoint).write_dataset(rows(0, 6), "o")
    proxy.fail_next("PUT", "/o/manifest.json", count=1000)
    manifest = through(bucket, proxy).write_dataset(rows(100, 2), "o", overwrite=True)
    assert proxy.failed
    assert manifest.version == 2
    assert sorted(direct(bucket, moto_endpoint).read_dataset("o")["id"].to_pylist()) == [100, 101]


def test_lost_conditional_delete_response_finishes_the_delete(
    bucket: str, moto_endpoint: str, proxy: LossyProxy
) -> None:
    """The delete's last step (``DeleteObject`` of the tombstone with ``If-Match``) is applied and its response
    lost: botocore's retry finds no object. That is the delete's own success, not an error or a leftover."""
    direct(bucket, moto_endpoint).write_dataset(rows(0, 5), "d")
    proxy.drop_next("DELETE", "/d/manifest.json")
    through(bucket, proxy).delete_dataset("d")
    assert proxy.dropped, "the proxy never lost a response: the test did not test anything"
    after = direct(bucket, moto_endpoint)
    assert not after.dataset_exists("d")
    assert list(after.store.list_files("d")) == []


def test_delete_if_answered_500_after_applying_is_no_answer(bucket: str, moto_endpoint: str, proxy: LossyProxy) -> None:
    store = S3Store(bucket, prefix="lake", endpoint_url=proxy.url)
    token = store.write_if("k/manifest.json", b"first", expected=None)
    proxy.fail_next("DELETE", "/k/manifest.json", count=1000)
    with pytest.raises(ConnectionError, match="no answer from S3"):
        store.delete_if("k/manifest.json", expected=token)
    assert proxy.failed, "the proxy never answered 500: the test did not test anything"
    assert not S3Store(bucket, prefix="lake", endpoint_url=moto_endpoint).exists("k/manifest.json")
