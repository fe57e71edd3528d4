"""Store protocol conformance on every backend, plus backend-specific guarantees."""

from __future__ import annotations

import os
import pickle
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dagster_parquet_dataset import CommitConflict, LocalStore, MemoryStore, NotFound, S3Store, Store

UNSAFE_KEYS = ["", "/abs", "a/../b", "..", "a/./b", "a//b", "a/", "nul\x00byte", "back\\slash"]


def test_write_read_exists_size(store: Store) -> None:
    assert not store.exists("a/b.bin")
    store.write_bytes("a/b.bin", b"hello")
    assert store.exists("a/b.bin")
    assert store.read_bytes("a/b.bin") == b"hello"
    assert store.size("a/b.bin") == 5
    with store.open_input("a/b.bin") as f:
        assert f.size() == 5
        f.seek(1)
        assert f.read(3) == b"ell"


def test_missing_objects_raise_not_found(store: Store) -> None:
    for call in (store.read_bytes, store.open_input, store.size, store.read_versioned, store.delete):
        with pytest.raises(NotFound):
            call("missing/x")
    store.delete("missing/x", missing_ok=True)
    with pytest.raises(NotFound):
        store.delete_folder("missing")


def test_open_output_is_atomic_and_abandoned_on_error(store: Store) -> None:
    store.write_bytes("k/obj", b"old")
    with pytest.raises(RuntimeError, match="boom"):
        with store.open_output("k/obj") as out:
            out.write(b"new-partial")
            raise RuntimeError("boom")
    assert store.read_bytes("k/obj") == b"old"
    with pytest.raises(RuntimeError):
        with store.open_output("k/fresh") as out:
            out.write(b"x" * 1000)
            raise RuntimeError("boom")
    assert not store.exists("k/fresh")
    assert [f.path for f in store.list_files("k")] == ["k/obj"]
    with store.open_output("k/obj") as out:
        out.write(b"new")
    assert store.read_bytes("k/obj") == b"new"


def test_list_and_delete_folder(store: Store) -> None:
    for p in ("d/x", "d/sub/y", "d2/z", "dd"):
        store.write_bytes(p, p.encode())
    listed = {(f.path, f.size) for f in store.list_files("d")}
    assert listed == {("d/x", 3), ("d/sub/y", 7)}
    assert list(store.list_files("nothing-here")) == []
    store.delete_folder("d")
    assert list(store.list_files("d")) == []
    assert store.read_bytes("d2/z") == b"d2/z"
    assert store.read_bytes("dd") == b"dd"


def test_write_if_is_compare_and_swap(store: Store) -> None:
    token = store.write_if("m/manifest.json", b"v1", expected=None)
    with pytest.raises(CommitConflict):
        store.write_if("m/manifest.json", b"again", expected=None)
    data, read_token = store.read_versioned("m/manifest.json")
    assert (data, read_token) == (b"v1", token)
    token2 = store.write_if("m/manifest.json", b"v2", expected=token)
    assert token2 != token
    with pytest.raises(CommitConflict):
        store.write_if("m/manifest.json", b"stale", expected=token)
    assert store.read_bytes("m/manifest.json") == b"v2"


def test_concurrent_compare_and_swap_loses_no_update(store: Store) -> None:
    store.write_if("c/counter", b"0", expected=None)
    per_thread, threads = 15, 4

    def bump() -> None:
        done = 0
        while done < per_thread:
            data, token = store.read_versioned("c/counter")
            try:
                store.write_if("c/counter", str(int(data) + 1).encode(), expected=token)
                done += 1
            except CommitConflict:
                continue

    workers = [threading.Thread(target=bump) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert int(store.read_bytes("c/counter")) == per_thread * threads


@pytest.mark.parametrize("key", UNSAFE_KEYS)
def test_unsafe_keys_are_rejected(store: Store, key: str) -> None:
    with pytest.raises(ValueError):
        store.write_bytes(key, b"x")
    with pytest.raises(ValueError):
        store.exists(key)


def test_store_pickles_and_sees_same_objects(store: Store) -> None:
    store.write_bytes("p/obj", b"data")
    clone = pickle.loads(pickle.dumps(store))
    assert clone.read_bytes("p/obj") == b"data"
    if not isinstance(store, MemoryStore):  # a MemoryStore copy is a snapshot, by design
        clone.write_bytes("p/other", b"from clone")
        assert store.read_bytes("p/other") == b"from clone"


def test_local_store_files_get_umask_permissions(tmp_path) -> None:
    old = os.umask(0o022)
    try:
        store = LocalStore(tmp_path / "root")
        store.write_bytes("a/file", b"x")
        store.write_if("a/manifest", b"x", expected=None)
    finally:
        os.umask(old)
    for name in ("file", "manifest"):
        mode = stat.S_IMODE(os.stat(tmp_path / "root" / "a" / name).st_mode)
        assert mode == 0o644, oct(mode)


def test_local_store_never_leaves_root(tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "escape")
    store = LocalStore(root)
    with pytest.raises(ValueError, match="outside the store root"):
        store.write_bytes("escape/x", b"x")
    assert list(outside.iterdir()) == []


def test_local_read_bytes_never_reads_outside_root(tmp_path) -> None:
    """``read_bytes`` opens the file itself with ``O_NOFOLLOW``: a symbolic link there (or in a folder) that
    leads outside the root is refused, one that stays inside is followed; a folder or nothing is ``NotFound``."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"secret")
    root = tmp_path / "root"
    store = LocalStore(root)
    store.write_bytes("d/real", b"inside")
    os.symlink(outside / "secret", root / "d" / "leak")
    os.symlink(root / "d" / "real", root / "d" / "alias")
    os.symlink(outside, root / "escape")
    for key in ("d/leak", "escape/secret"):
        with pytest.raises(ValueError, match="outside the store root"):
            store.read_bytes(key)
    assert store.read_bytes("d/alias") == b"inside"
    for key in ("d", "d/none", "none/x", "d/real/x"):
        with pytest.raises(NotFound):
            store.read_bytes(key)
    big = os.urandom(3 << 20)  # more than one read of the loop past the recorded size
    store.write_bytes("d/big", big)
    assert store.read_bytes("d/big") == big


def test_local_read_bytes_checks_only_the_folders_with_lstat(tmp_path, monkeypatch) -> None:
    """Reading ``a/b/c`` costs two ``lstat`` calls (its folders ``a`` and ``a/b``), not three: the kernel
    refuses a symbolic link at the file itself (``O_NOFOLLOW``), so 365 manifest reads save 365 calls."""
    store = LocalStore(tmp_path)
    store.write_bytes("a/b/c", b"x")
    calls: list[str] = []
    real_lstat = os.lstat

    def counting(path, *args, **kwargs):
        calls.append(os.fspath(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", counting)
    assert store.read_bytes("a/b/c") == b"x"
    assert [os.path.relpath(c, tmp_path) for c in calls] == ["a", os.path.join("a", "b")]


def test_local_store_leaves_no_temp_files(tmp_path) -> None:
    store = LocalStore(tmp_path)
    with pytest.raises(RuntimeError):
        with store.open_output("d/f") as out:
            out.write(b"partial")
            raise RuntimeError("crash")
    store.write_bytes("d/g", b"ok")
    assert sorted(os.listdir(tmp_path / "d")) == ["g"]


def test_local_lock_is_released_when_holder_dies(tmp_path) -> None:
    """A process killed while holding the commit lock must not block later commits."""
    store = LocalStore(tmp_path)
    store.write_if("d/manifest.json", b"v1", expected=None)
    lock_path = tmp_path / "d" / ".manifest.json.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(lock_path)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    _, token = store.read_versioned("d/manifest.json")
    blocked = threading.Thread(target=store.write_if, args=("d/manifest.json", b"v2"), kwargs={"expected": token})
    blocked.start()
    time.sleep(0.3)
    assert blocked.is_alive(), "write_if must wait while another process holds the lock"
    holder.kill()
    holder.wait()
    blocked.join(timeout=10)
    assert not blocked.is_alive()
    assert store.read_bytes("d/manifest.json") == b"v2"


def test_s3_store_prefix_and_uri(s3_store: S3Store, moto_endpoint: str) -> None:
    import boto3

    s3_store.write_bytes("x/y", b"1")
    client = boto3.client("s3", endpoint_url=moto_endpoint)
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=s3_store.bucket)["Contents"]]
    assert keys == ["root/dir/x/y"]
    assert s3_store.uri("x") == f"s3://{s3_store.bucket}/root/dir/x"
    assert [f.path for f in s3_store.list_files("x")] == ["x/y"]


def test_s3_store_rejects_bad_bucket() -> None:
    with pytest.raises(ValueError):
        S3Store("bucket/with/slash")


@pytest.mark.parametrize(
    ("credentials", "message"),
    [
        ({"aws_access_key_id": "AKIA"}, "got aws_access_key_id but no aws_secret_access_key"),
        ({"aws_access_key_id": "AKIA", "aws_secret_access_key": ""}, "got aws_access_key_id but no aws_secret"),
        ({"aws_secret_access_key": "secret"}, "got aws_secret_access_key but no aws_access_key_id"),
        ({"aws_session_token": "token"}, "aws_session_token without aws_access_key_id and aws_secret_access_key"),
    ],
)
def test_s3_store_rejects_partial_credentials(credentials: dict[str, str], message: str) -> None:
    # Issue 18, #12: half a key pair would sign reads with the environment's credentials and writes with these.
    with pytest.raises(ValueError, match=message):
        S3Store("bucket", **credentials)


def test_s3_store_accepts_whole_credentials_or_none() -> None:
    full = S3Store("bucket", aws_access_key_id="AKIA", aws_secret_access_key="secret", aws_session_token="token")
    assert (full.aws_access_key_id, full.aws_secret_access_key, full.aws_session_token) == ("AKIA", "secret", "token")
    assert S3Store("bucket", aws_access_key_id="AKIA", aws_secret_access_key="secret").aws_session_token is None
    assert S3Store("bucket").aws_access_key_id is None


def test_s3_multipart_stream_completes_or_aborts(moto_endpoint: str) -> None:
    import boto3

    from tests.conftest import make_bucket

    store = S3Store(make_bucket(moto_endpoint), endpoint_url=moto_endpoint, part_size=5 * 1024 * 1024)
    payload = os.urandom(12 * 1024 * 1024 + 123)
    with store.open_output("big/obj") as out:
        for start in range(0, len(payload), 1 << 20):
            out.write(payload[start : start + (1 << 20)])
    assert store.read_bytes("big/obj") == payload

    with pytest.raises(RuntimeError):
        with store.open_output("big/obj") as out:
            out.write(os.urandom(11 * 1024 * 1024))
            raise RuntimeError("crash mid-upload")
    assert store.read_bytes("big/obj") == payload
    client = boto3.client("s3", endpoint_url=moto_endpoint)
    assert client.list_multipart_uploads(Bucket=store.bucket).get("Uploads", []) == []


def test_open_input_with_known_size_checks_the_real_object(store: Store) -> None:
    store.write_bytes("s/obj", b"0123456789")
    with store.open_input("s/obj", size=10) as f:
        f.seek(3)
        assert f.read(4) == b"3456"
        f.seek(-2, 2)
        assert f.read() == b"89"
    with pytest.raises(OSError):
        with store.open_input("s/obj", size=11) as f:
            f.read(4)
    with pytest.raises((OSError, NotFound)):
        with store.open_input("s/missing", size=10) as f:
            f.read(4)


def test_list_files_reports_modification_time(store: Store) -> None:
    before = time.time() - 5
    store.write_bytes("t/obj", b"x")
    (info,) = list(store.list_files("t"))
    assert info.modified is not None and before <= info.modified <= time.time() + 5


def test_local_delete_folder_of_empty_folders_removes_them_and_says_nothing_was_stored(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    store.write_bytes("d/kept", b"x")
    os.makedirs(tmp_path / "d" / "staging" / "sub")  # folders whose files were all renamed away
    with pytest.raises(NotFound):
        store.delete_folder("d/staging")
    assert sorted(os.listdir(tmp_path / "d")) == ["kept"]
    assert store.read_bytes("d/kept") == b"x"
