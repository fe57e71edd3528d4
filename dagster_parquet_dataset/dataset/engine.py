"""Public dataset-layer hooks for engines that write or read parts themselves (the Spark layer).

The Spark and Dagster layers import dataset internals only from here (or from
:mod:`dagster_parquet_dataset.dataset`): part encoding and names, statistics of
a written part, partition helpers, the part check, filter types, the row locator of single-run backfills. Everything
here is safe to pickle to an executor and needs only pyarrow there.
"""

from __future__ import annotations

from ._keys import check_folder_fits
from ._locate import OUTSIDE, Dimension, RowLocator
from ._partition import add_partition_columns, check_partition_by, encode_partition_values, partition_folder
from ._pruning import DNF, Predicate, discrete_bounds
from ._read import _check_identity as check_part_identity
from ._read import check_columns
from ._stats import file_column_stats, type_kind
from ._write import PartOptions, encode_part
from .manifest import schema_hash

__all__ = [
    "DNF",
    "OUTSIDE",
    "Dimension",
    "PartOptions",
    "Predicate",
    "RowLocator",
    "add_partition_columns",
    "check_columns",
    "check_folder_fits",
    "check_part_identity",
    "check_partition_by",
    "discrete_bounds",
    "encode_part",
    "encode_partition_values",
    "file_column_stats",
    "partition_folder",
    "schema_hash",
    "type_kind",
]
