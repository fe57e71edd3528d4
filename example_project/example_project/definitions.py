"""The code location: ``dagster dev`` (run from ``example_project/``) loads :data:`defs`.

Every output is a Parquet dataset written by ``RemoteStoreIOManager``: on a
local folder (``example_project/data`` unless ``PDS_DATA_ROOT`` says
otherwise) by default, on S3 with ``PDS_STORE=s3`` (see :mod:`.resources`).
Each asset has the dataset checks of :mod:`.checks`; :mod:`.maintenance`
compacts and vacuums the customer dimension on a weekly schedule
(``build_maintenance_jobs``).
"""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg

from .assets import ALL_ASSETS
from .checks import DATASET_CHECKS
from .jobs import daily_events_job, marts_job, spark_orders_job
from .maintenance import MAINTENANCE_JOBS, MAINTENANCE_SCHEDULES
from .resources import build_resources


def build_definitions(environ: Mapping[str, str] | None = None) -> dg.Definitions:
    """The example's definitions, with resources chosen by ``environ`` (default: ``os.environ``).

    Raises:
        ValueError: the store variables are inconsistent (see :func:`.resources.store_from_env`).
    """
    return dg.Definitions(
        assets=ALL_ASSETS,
        asset_checks=DATASET_CHECKS,
        jobs=[daily_events_job, marts_job, spark_orders_job, *MAINTENANCE_JOBS],
        schedules=MAINTENANCE_SCHEDULES,
        resources=build_resources(environ),
    )


defs = build_definitions()
