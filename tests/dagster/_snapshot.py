"""Every object of a store with its bytes: a refusal must leave this unchanged."""

from __future__ import annotations

from dagster_parquet_dataset import Store


def snapshot(store: Store) -> dict[str, bytes]:
    """Every file in ``store`` with its content."""
    return {f.path: store.read_bytes(f.path) for f in store.list_files("")}
