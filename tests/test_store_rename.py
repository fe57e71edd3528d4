"""``Store.rename``: atomic, never replaces an existing object, only where ``Capability.RENAME`` says so."""

from __future__ import annotations

import pytest

from dagster_parquet_dataset import AlreadyExists, Capability, NotFound, Store


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
