"""Maintenance: compact and vacuum ``marts/dim_customers`` every week, with the package's maintenance job.

The customer dimension is upserted once a day (``write_mode="merge"``); each
merge adds small files, so the dataset accumulates them.
``build_maintenance_jobs`` builds ``compact_dim_customers_job``, whose one op
compacts the dataset (``ParquetDatasetStore.compact_dataset``: runs of small
files become files near ``target_file_bytes``, as one atomic new version) and
vacuums it (files no retained version lists, at least an hour old), and
records the numbers as an observation on the asset page. The run config can
override the options, e.g. ``{"dry_run": true}`` to only plan.
"""

import dagster as dg

from dagster_parquet_dataset import CompactOptions, VacuumOptions, build_maintenance_jobs

#: The dataset of the ``marts/dim_customers`` asset.
DIM_CUSTOMERS = dg.AssetKey(["marts", "dim_customers"])

#: ``compact_dim_customers_job`` and its schedule, Sundays at 03:00 UTC (stopped until turned on in the UI,
#: or with ``dagster schedule start``).
MAINTENANCE_JOBS, MAINTENANCE_SCHEDULES = build_maintenance_jobs(
    [DIM_CUSTOMERS],
    compact=CompactOptions(target_file_bytes=128 * 1024 * 1024),
    vacuum=VacuumOptions(retain_versions=1),
    cron_schedule="0 3 * * 0",
    name="compact_dim_customers",
)
[compact_dim_customers_job] = MAINTENANCE_JOBS
[compact_dim_customers_schedule] = MAINTENANCE_SCHEDULES
