"""The customer dimension, maintained by upsert, and a filtered extract of it.

``marts/dim_customers`` uses ``write_mode="merge"`` keyed on ``customer_id``:
each materialization upserts the newest profile of every customer in the raw
feed days that are still stored (matched customers are replaced whole, new
ones inserted) and keeps every other customer as it was. Raw feed days can
therefore be dropped after their retention period without losing customers
from the dimension, which an overwrite would.

``marts/swiss_customers`` loads only the dimension's rows with
``country == "CH"``: the filter goes down to the dataset layer, which skips
files whose statistics rule them out and filters the rest.
"""

import dagster as dg
import pandas as pd
import pyarrow as pa

from ..generate import CUSTOMER_UPDATES_SCHEMA
from . import columns

#: The filter ``swiss_customers`` loads ``dim_customers`` with (DNF, as ``read_dataset(filters=...)``).
SWISS_FILTER = [("country", "==", "CH")]


def latest_profiles(updates: pa.Table) -> pa.Table:
    """The newest row per ``customer_id`` (by ``updated_at``), sorted by ``customer_id``.

    A merge source must hold each key once; the feed can hold a customer once per day.
    """
    frame = updates.to_pandas()
    latest = (
        frame.sort_values(["customer_id", "updated_at"], kind="stable")
        .drop_duplicates(subset="customer_id", keep="last")
        .reset_index(drop=True)
    )
    return pa.Table.from_pandas(latest, schema=CUSTOMER_UPDATES_SCHEMA, preserve_index=False)


@dg.asset(
    key_prefix="marts",
    name="dim_customers",
    group_name="customers",
    kinds={"parquet", "pyarrow"},
    metadata={"write_mode": "merge", "key_columns": ["customer_id"], "dagster/column_schema": columns.CUSTOMERS},
    ins={
        "customer_updates": dg.AssetIn(
            key=["raw", "customer_updates"],
            # Every stored day of the feed; days never materialized (or already dropped) are skipped.
            metadata={"allow_missing_partitions": True},
        )
    },
    description="One row per customer, upserted from the CRM feed (write_mode=merge on customer_id).",
)
def dim_customers(context: dg.AssetExecutionContext, customer_updates: pa.Table) -> pa.Table:
    """The newest profile per customer in the stored feed days; the IO manager merges it into the dimension."""
    latest = latest_profiles(customer_updates)
    context.log.info(f"upserting {latest.num_rows} customers from {customer_updates.num_rows} feed rows")
    return latest


@dg.asset(
    key_prefix="marts",
    name="swiss_customers",
    group_name="customers",
    kinds={"parquet", "pandas"},
    metadata={"dagster/column_schema": columns.CUSTOMERS},
    ins={"dim_customers": dg.AssetIn(key=["marts", "dim_customers"], metadata={"filters": SWISS_FILTER})},
    description="Customers located in Switzerland, for the Swiss sales team (loaded with filters).",
)
def swiss_customers(context: dg.AssetExecutionContext, dim_customers: pd.DataFrame) -> pd.DataFrame:
    """The Swiss customers by id; the input already holds only ``country == "CH"`` rows."""
    extract = dim_customers.sort_values("customer_id").reset_index(drop=True)
    context.add_output_metadata({f"tier_{tier}": int(n) for tier, n in extract["tier"].value_counts().items()})
    return extract
