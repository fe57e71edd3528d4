"""Asset checks of the example: every asset's dataset is verified against its manifest after each run.

``build_dataset_checks`` gives each asset ``dataset_integrity`` (the parts
exist with the manifest's sizes, row counts, schema and statistics; ERROR),
``schema_unchanged`` and ``row_count_change`` (WARN); Dagster runs them right
after the asset materializes and shows them on the asset page. They read
manifests and Parquet footers only, through the ``io_manager`` resource.
"""

from __future__ import annotations

from dagster_parquet_dataset import build_dataset_checks

from .assets import ALL_ASSETS

#: Three checks per asset (partitioned assets check the partition just written).
DATASET_CHECKS = build_dataset_checks(ALL_ASSETS)
