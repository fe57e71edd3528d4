"""``observable_dataset``: a dataset written outside Dagster, as an observable source asset.

A Spark job elsewhere (or any writer using :class:`ParquetDatasetStore`)
commits new versions of a dataset; Dagster learns about them by observing the
asset. The observed data version is derived from the version's content (see
:mod:`._asset_data_version`: the same one the IO manager records when it writes that
content), so Dagster's staleness and declarative automation react to each commit
that changes the data, and downstream assets load it through the same
``RemoteStoreIOManager``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from dagster import (
    AssetKey,
    BetaWarning,
    MetadataValue,
    ObserveResult,
    SourceAsset,
    observable_source_asset,
)

from ..dataset import DatasetManifest, ParquetDatasetStore
from ..errors import DatasetNotFound, NotFound
from ._asset_data_version import data_version_of
from ._presentation import column_schema
from ._wording import version_metadata
from .resources import StoreResource


def observation_metadata(datasets: ParquetDatasetStore, key: str, manifest: DatasetManifest) -> dict[str, Any]:
    """What an observation records: row count, files, bytes, run id, commit time, schema, uri."""
    entries = manifest.file_entries()
    metadata: dict[str, Any] = {
        "dagster/row_count": MetadataValue.int(manifest.row_count),
        "dagster/uri": MetadataValue.url(datasets.store.uri(key)),
        "dataset_key": MetadataValue.text(key),
        "manifest_version": version_metadata(manifest.version),
        "part_count": MetadataValue.int(len(entries)),
        "bytes": MetadataValue.int(sum(e.size_bytes or 0 for e in entries)),
        "committed_at_utc": MetadataValue.text(manifest.created_at_utc),
    }
    if manifest.run_id is not None:
        metadata["writer_run_id"] = MetadataValue.text(manifest.run_id)
    if manifest.operation is not None:
        metadata["operation"] = MetadataValue.text(manifest.operation)
    schema = manifest.schema
    if schema is not None:
        metadata["dagster/column_schema"] = MetadataValue.table_schema(column_schema(schema))
    return metadata


def _datasets_and_key(resource: Any, asset_key: AssetKey, dataset_key: str | None, resource_key: str) -> tuple:
    from .io_manager import RemoteStoreIOManager

    if isinstance(resource, RemoteStoreIOManager):
        return resource.datasets, dataset_key or resource.dataset_key_for(asset_key)
    if isinstance(resource, StoreResource):
        if dataset_key is None:
            raise ValueError(
                f"observable_dataset {asset_key.to_user_string()}: resource {resource_key!r} is a store resource, "
                "so dataset_key= must say which dataset to observe"
            )
        return ParquetDatasetStore(resource.get_store()), dataset_key
    raise TypeError(
        f"observable_dataset {asset_key.to_user_string()}: resource {resource_key!r} must be a RemoteStoreIOManager "
        f"or a store resource (LocalStoreResource, S3StoreResource, ...), got {type(resource).__name__}"
    )


def observable_dataset(
    key: AssetKey | str | Sequence[str],
    *,
    dataset_key: str | None = None,
    resource_key: str = "io_manager",
    description: str | None = None,
    group_name: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    io_manager_key: str | None = None,
) -> SourceAsset:
    """An observable source asset for a dataset that something outside Dagster writes.

    Each observation reads the dataset's manifest (nothing else) and records
    the data version of its content (the one the IO manager records when it
    writes equal content), with the row count, part count,
    bytes, the writer's run id, the commit time and the column schema as
    metadata. Observe it on a schedule or with automation
    (``AutomationCondition``), or from the UI.

    Args:
        key: the asset key.
        dataset_key: the dataset to observe, as a full key in the store. Unset:
            the key the ``RemoteStoreIOManager`` under ``resource_key`` maps the
            asset key to (its ``prefix`` included), so downstream assets load the
            dataset through that IO manager.
        resource_key: the resource that gives the store: a ``RemoteStoreIOManager``
            (default ``"io_manager"``) or a store resource (``LocalStoreResource``,
            ``S3StoreResource``, ...; then ``dataset_key`` is required).
        description: the asset's description.
        group_name: the asset's group.
        metadata: the asset's definition metadata.
        io_manager_key: the IO manager downstream assets load it with (Dagster's
            ``"io_manager"`` when unset).

    Returns:
        A ``SourceAsset`` whose observation fails with ``DatasetNotFound`` while
        the dataset does not exist, and with ``ManifestCorrupted`` when its
        manifest cannot be read.

    Raises:
        ValueError: ``dataset_key`` is not a safe dataset key.
    """
    asset_key = AssetKey.from_coercible(key)
    if dataset_key is not None:
        from ..storage.base import validate_key

        dataset_key = validate_key(dataset_key, what="dataset key")

    def observe(context) -> ObserveResult:  # type: ignore[no-untyped-def]  # Dagster reads the annotation
        datasets, target = _datasets_and_key(
            getattr(context.resources, resource_key), asset_key, dataset_key, resource_key
        )
        try:
            manifest = datasets.read_manifest(target)
        except NotFound:
            raise DatasetNotFound(
                f"cannot observe {asset_key.to_user_string()}: dataset {target!r} does not exist "
                f"(nothing at {datasets.store.uri(target)})"
            ) from None
        return ObserveResult(
            data_version=data_version_of(manifest), metadata=observation_metadata(datasets, target, manifest)
        )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BetaWarning)
        return observable_source_asset(
            key=asset_key,
            description=description,
            group_name=group_name,
            metadata=dict(metadata or {}),
            io_manager_key=io_manager_key,
            required_resource_keys={resource_key},
        )(observe)
