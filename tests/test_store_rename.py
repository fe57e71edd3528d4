"""``Store.rename``: atomic, never replaces an existing object, only where ``Capability.RENAME`` says so."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from dagster_parquet_dataset import AlreadyExists, Capability, LocalStore, NotFound, Store
from dagster_parquet_dataset.errors import CapabilityNotSupported


def test_rename_moves_the_object(store: Store) -> None:
    if not store.supports(Capability.RENAME):
        with pytest.raises(Exception, match="cannot rename"):
            store.rename("a/src.bin", "a/dst.bin")
        return
    store.write_bytes("a/staging/src.bin", b"payload")
    store.rename("a/staging/src.bin", "a/dst.bin")
    assert store.read_bytes("a/dst.bin") == b"payload"
    assert not store.exists("a/staging/src.bin")
    assert sorted(f.path for f in store.list_files("a")) == ["a/dst.bin"]


def test_rename_never_replaces_an_existing_object(store: Store) -> None:
    if not store.supports(Capability.RENAME):
        return  # test_only_backends_with_a_cheap_rename_claim_it covers these backends
    store.write_bytes("b/src.bin", b"new")
    store.write_bytes("b/dst.bin", b"old")
    with pytest.raises(AlreadyExists, match="already exists"):
        store.rename("b/src.bin", "b/dst.bin")
    assert store.read_bytes("b/dst.bin") == b"old"
    assert store.read_bytes("b/src.bin") == b"new"


def test_rename_of_a_missing_object_is_not_found(store: Store) -> None:
    if not store.supports(Capability.RENAME):
        return
    with pytest.raises(NotFound):
        store.rename("c/missing.bin", "c/dst.bin")
    assert not store.exists("c/dst.bin")


def test_only_backends_with_a_cheap_rename_claim_it(store: Store) -> None:
    from dagster_parquet_dataset import LocalStore, MemoryStore, S3Store

    expected = isinstance(store, (LocalStore, MemoryStore))
    assert store.supports(Capability.RENAME) == expected
    if isinstance(store, S3Store):
        from dagster_parquet_dataset.errors import CapabilityNotSupported

        with pytest.raises(CapabilityNotSupported, match="cannot rename"):
            store.rename("d/a", "d/b")


# ------------------------------------------------------------------ LocalStore: two renames of one source at once


@pytest.mark.timeout(60)
@pytest.mark.parametrize("step", ["link", "unlink"])
def test_local_rename_racing_a_rename_of_the_same_source_moves_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """A second rename of the same source between the first one's steps (issue 26, #10): the object ends
    at exactly one target, the loser gets ``NotFound`` (never a raw ``FileNotFoundError``)."""
    store = LocalStore(str(tmp_path / "store"))
    store.write_bytes("s/src.bin", b"payload")
    real = getattr(os, step)
    nested: list[BaseException | None] = []

    def hooked(*args: object, **kwargs: object) -> object:
        if not nested:  # the first call inside the first rename: a second rename runs right there
            monkeypatch.setattr(os, step, real)
            try:
                store.rename("s/src.bin", "s/second.bin")
                nested.append(None)
            except BaseException as exc:  # noqa: BLE001 - recorded and asserted below
                nested.append(exc)
        return real(*args, **kwargs)

    monkeypatch.setattr(os, step, hooked)
    try:
        store.rename("s/src.bin", "s/first.bin")
        first: BaseException | None = None
    except BaseException as exc:  # noqa: BLE001 - asserted below
        first = exc
    assert nested, f"os.{step} was never called"
    outcomes = [first, nested[0]]
    assert sum(o is None for o in outcomes) == 1, outcomes
    loser = next(o for o in outcomes if o is not None)
    assert isinstance(loser, NotFound), repr(loser)
    files = sorted(f.path for f in store.list_files("s"))
    assert files == (["s/first.bin"] if first is None else ["s/second.bin"])
    assert store.read_bytes(files[0]) == b"payload"
    assert sorted(os.listdir(tmp_path / "store" / "s")) == [files[0].rpartition("/")[2]]  # no hidden leftovers


def test_local_rename_across_devices_is_a_store_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A target on another device (``EXDEV``) is ``CapabilityNotSupported``, and the object stays at ``src``."""
    store = LocalStore(str(tmp_path / "store"))
    store.write_bytes("x/src.bin", b"payload")

    real = {name: getattr(os, name) for name in ("link", "rename", "replace")}

    def cross_device(name: str) -> object:
        def call(src: str, dst: str, *args: object, **kwargs: object) -> object:
            if os.path.dirname(src) != os.path.dirname(dst):  # folder ``y`` is on another device
                raise OSError(errno.EXDEV, "Invalid cross-device link", src, None, dst)
            return real[name](src, dst, *args, **kwargs)

        return call

    for name in real:
        monkeypatch.setattr(os, name, cross_device(name))
    with pytest.raises(CapabilityNotSupported, match="another device"):
        store.rename("x/src.bin", "y/dst.bin")
    monkeypatch.undo()
    assert store.read_bytes("x/src.bin") == b"payload"
    assert not store.exists("y/dst.bin")
    assert sorted(os.listdir(tmp_path / "store" / "x")) == ["src.bin"]
