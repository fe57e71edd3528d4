"""The ``DataVersion`` Dagster records for a committed dataset version, derived from its content.

A materialization written through the IO manager and an observation of the same dataset
version (``observable_dataset``) carry the same data version: a hash of the parts' content
hashes in part order (:func:`dagster_parquet_dataset.dataset.data_version`). Writing equal data
again gives the same data version, so Dagster does not mark downstream assets stale.
"""

from __future__ import annotations

from dagster import DataVersion, OutputContext

from ..dataset import DatasetManifest, data_version
from . import _context as _ctx


def data_version_of(manifest: DatasetManifest) -> DataVersion:
    """The content's data version; for a version whose parts record no content hash (written by
    a writer that does not hash, or Spec-only) ``"<version>-<write token>"`` (or ``"<version>"``)."""
    content = data_version(manifest)
    if content is not None:
        return DataVersion(content)
    return DataVersion(str(manifest.version) if manifest.txn is None else f"{manifest.version}-{manifest.txn}")


def set_output_data_version(context: OutputContext, manifest: DatasetManifest) -> None:
    """Make ``manifest``'s data version the one Dagster records for this asset output.

    Dagster keeps one data version per asset on the step context and tags the output's
    materialization with it (the asset's own ``Output(data_version=...)`` or
    ``context.set_data_version`` wins, so it is set only when the step has none yet).
    Op outputs and contexts built by hand have none to set.
    """
    step = _ctx.step_context_of(context)
    if step is None or not context.has_asset_key or step.has_data_version(context.asset_key):
        return
    step.set_data_version(context.asset_key, data_version_of(manifest))
