"""Public dataset-layer hooks for engines that write or read parts themselves (the Spark layer).

The Spark and Dagster layers import dataset internals only from here (or from
:mod:`dagster_parquet_dataset.dataset`): part encoding and names, statistics of
a written part, partition helpers, the part check, filter types, part names, the
row locator of single-run backfills, and the one retry policy of commits and
re-plans (:class:`Backoff`, :func:`retry_replans`). Everything
here is safe to pickle to an executor and needs only pyarrow there.
"""

from __future__ import annotations

from .commit.retry import Backoff, retry_replans
from .expressions.filters import DNF, Predicate, discrete_bounds
from .expressions.merge_keys import check_key_columns
from .expressions.row_locator import OUTSIDE, Dimension, RowLocator
from .format.layout import is_reserved_segment, is_spec_name, part_name, single_name
from .format.partition import add_partition_columns, check_partition_by, encode_partition_values, partition_folder
from .format.stats import file_column_stats
from .format.values import type_kind
from .io.encode import PartOptions, encode_part
from .io.key_checks import check_folder_fits
from .io.part_check import PartCheck, PartsVanished
from .io.read_parts import check_columns
from .manifest import schema_hash

__all__ = [
    "DNF",
    "OUTSIDE",
    "Backoff",
    "Dimension",
    "PartCheck",
    "PartOptions",
    "PartsVanished",
    "Predicate",
    "RowLocator",
    "add_partition_columns",
    "check_columns",
    "check_folder_fits",
    "check_key_columns",
    "check_partition_by",
    "discrete_bounds",
    "encode_part",
    "encode_partition_values",
    "file_column_stats",
    "is_reserved_segment",
    "is_spec_name",
    "part_name",
    "partition_folder",
    "retry_replans",
    "schema_hash",
    "single_name",
    "type_kind",
]
