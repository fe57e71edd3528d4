"""Maintenance: compact ``marts/dim_customers`` every week.

The customer dimension is upserted once a day (``write_mode="merge"``); each
merge adds small files, so the dataset accumulates them. ``compact_dim_customers``
rewrites runs of small files into files near ``target_file_bytes`` as one
atomic new version (``ParquetDatasetStore.compact_dataset``): readers see the
old or the new version, and rows committed meanwhile are kept.
"""

import dagster as dg

from dagster_parquet_dataset import RemoteStoreIOManager

#: The dataset of the ``marts/dim_customers`` asset.
DIM_CUSTOMERS = dg.AssetKey(["marts", "dim_customers"])


class CompactConfig(dg.Config):
    """How large the compacted files should be, and whether only to plan."""

    target_file_bytes: int = 128 * 1024 * 1024
    dry_run: bool = False


@dg.op(required_resource_keys={"io_manager"}, description="Compact the files of marts/dim_customers.")
def compact_dim_customers(context: dg.OpExecutionContext, config: CompactConfig) -> None:
    """``compact_dataset`` on the dimension's dataset (the key the IO manager stores the asset under)."""
    io: RemoteStoreIOManager = context.resources.io_manager
    key = io.dataset_key_for(DIM_CUSTOMERS)
    result = io.datasets.compact_dataset(
        key, target_file_bytes=config.target_file_bytes, dry_run=config.dry_run, run_id=context.run_id
    )
    context.log.info(
        f"{key}: {result.files_read} files ({result.bytes_before} bytes) -> {result.files_written} files"
        + ("" if result.version is None else f", committed as version {result.version}")
    )
    # Shown on the asset page of marts/dim_customers, next to its materializations.
    context.log_event(
        dg.AssetObservation(
            asset_key=DIM_CUSTOMERS,
            metadata={
                "compaction_dataset_key": key,
                "compaction_files_read": result.files_read,
                "compaction_files_written": result.files_written,
                "compaction_bytes_before": result.bytes_before,
                "compaction_dry_run": result.dry_run,
            },
        )
    )


@dg.job(description="Compact marts/dim_customers (merge-heavy: one merge a day adds small files).")
def compact_dim_customers_job() -> None:
    """One op: :func:`compact_dim_customers`."""
    compact_dim_customers()


#: Sundays at 03:00 UTC; stopped until turned on in the UI (or with ``dagster schedule start``).
compact_dim_customers_schedule = dg.ScheduleDefinition(
    name="compact_dim_customers_schedule",
    job=compact_dim_customers_job,
    cron_schedule="0 3 * * 0",
    execution_timezone="UTC",
    description="Weekly compaction of the customer dimension's small files.",
)
