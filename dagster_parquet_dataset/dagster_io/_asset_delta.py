"""One Delta table per partitioned asset (``RemoteStoreIOManager(delta_log=True)``, docs/delta.md).

After a partitioned asset's output has been handled (one partition, or every partition of a single-run
backfill), the IO manager brings the asset's table, ``<asset>/_delta_log/``, up to those partitions'
live versions with :meth:`ParquetDatasetStore.sync_asset_delta_log`. The partition commits stand
whatever happens here: a failure is logged as a warning and the table lags until the asset's next
partition output, or ``sync_asset_delta_log`` / ``dagster-parquet-dataset sync-delta-log --asset``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dagster import MultiPartitionsDefinition, OutputContext

from ..dataset import ParquetDatasetStore
from . import _backfill_split as _bf
from . import _context as _ctx
from . import keys as keys_mod

#: The asset table's column for a one-dimension asset without ``partition_expr`` metadata.
DEFAULT_COLUMN = "partition"


def dimension_columns(context: OutputContext) -> list[str]:
    """The asset table's partition column names, in folder order (dimensions sorted by name): the
    column ``partition_expr`` names where given, else ``partition`` (one dimension) or the dimension's name.

    Raises:
        TypeError / ValueError: a malformed ``partition_expr`` (as a single-run backfill refuses it).
    """
    partitions_def = _ctx.partitions_def_of(context)
    expr = _bf.parse_partition_expr(context.definition_metadata, partitions_def, _ctx.describe_output(context))
    if isinstance(partitions_def, MultiPartitionsDefinition):
        names = sorted(d.name for d in partitions_def.partitions_defs)
        return [(expr or {}).get(n, n) if isinstance(expr, dict) else n for n in names]
    return [expr if isinstance(expr, str) else DEFAULT_COLUMN]


def update_asset_table(
    context: OutputContext,
    datasets: ParquetDatasetStore,
    *,
    prefix: str,
    key_for: Callable[[Sequence[str], Any, str], str],
) -> None:
    """Bring the asset's Delta table up to the output's partitions. Never raises an ``Exception``."""
    path = list(context.asset_key.path)
    try:
        folder = keys_mod.asset_dataset_key(prefix, path)
        partitions_def = _ctx.partitions_def_of(context)
        keys = [key_for(path, partitions_def, pk) for pk in context.asset_partition_keys]
        folders = [k[len(folder) + 1 :] for k in keys]
        version = datasets.sync_asset_delta_log(folder, columns=dimension_columns(context), partitions=folders)
        context.log.debug(f"asset Delta table {folder!r} is at version {version}")
    except Exception as exc:  # noqa: BLE001 - the partitions are committed; the asset table lags and heals later
        context.log.warning(
            f"asset {context.asset_key.to_user_string()}: the partition output is committed, but the asset's "
            f"Delta table could not be updated ({type(exc).__name__}: {exc}); it lags until the asset's next "
            "partition output or `dagster-parquet-dataset sync-delta-log --asset`"
        )
