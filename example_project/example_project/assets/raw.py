"""Raw feeds, one dataset per day: ``raw/click_events/<day>`` and ``raw/customer_updates/<day>``."""

import dagster as dg
import pyarrow as pa

from .. import generate
from ..partitions import DAILY
from . import columns


@dg.asset(
    key_prefix="raw",
    name="click_events",
    partitions_def=DAILY,
    group_name="clickstream",
    kinds={"parquet", "pyarrow"},
    metadata={"dagster/column_schema": columns.RAW_EVENTS},
    description="One day of click-stream events as delivered: duplicates, missing customers, messy country codes.",
)
def raw_events(context: dg.AssetExecutionContext) -> pa.Table:
    """The day's raw events, generated deterministically from the partition date."""
    table = generate.raw_events(generate.parse_day(context.partition_key))
    context.log.info(f"generated {table.num_rows} raw events for {context.partition_key}")
    return table


@dg.asset(
    key_prefix="raw",
    name="customer_updates",
    partitions_def=DAILY,
    group_name="customers",
    kinds={"parquet", "pyarrow"},
    metadata={"dagster/column_schema": columns.CUSTOMERS},
    description="One day of the CRM change feed: a full row per new or changed customer.",
)
def raw_customer_updates(context: dg.AssetExecutionContext) -> pa.Table:
    """The day's customer sign-ups and profile changes, generated deterministically."""
    return generate.raw_customer_updates(generate.parse_day(context.partition_key))
