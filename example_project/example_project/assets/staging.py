"""``staging/clean_events``: the day's events cleaned with pandas."""

import dagster as dg
import pandas as pd

from ..partitions import DAILY
from . import columns


def clean(raw: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """Deduplicate and validate raw events; returns the clean rows and how many were dropped, by reason.

    * a repeated ``event_id`` keeps its first delivery;
    * events without a customer are dropped;
    * country codes are trimmed and upper-cased;
    * purchases without a positive amount are dropped.

    The result has an ``event_date`` column (the UTC day of ``ts``) and a fresh index.
    """
    total = len(raw)
    deduplicated = raw.drop_duplicates(subset="event_id", keep="first")
    with_customer = deduplicated.dropna(subset=["customer_id"])
    is_purchase = with_customer["event_type"] == "purchase"
    valid = with_customer[~is_purchase | (with_customer["amount"] > 0)].copy()
    valid["customer_id"] = valid["customer_id"].astype("int64")
    valid["country"] = valid["country"].str.strip().str.upper()
    valid["event_date"] = valid["ts"].dt.tz_convert("UTC").dt.date
    dropped = {
        "duplicates": total - len(deduplicated),
        "missing_customer": len(deduplicated) - len(with_customer),
        "invalid_amount": len(with_customer) - len(valid),
    }
    return valid.reset_index(drop=True), dropped


@dg.asset(
    key_prefix="staging",
    name="clean_events",
    partitions_def=DAILY,
    group_name="clickstream",
    kinds={"parquet", "pandas"},
    metadata={"dagster/column_schema": columns.CLEAN_EVENTS},
    ins={"raw": dg.AssetIn(key=["raw", "click_events"])},
    description="The day's events, deduplicated and validated (pandas).",
)
def clean_events(context: dg.AssetExecutionContext, raw: pd.DataFrame) -> pd.DataFrame:
    """Clean one day of raw events (see :func:`clean`); records the dropped counts as metadata."""
    cleaned, dropped = clean(raw)
    context.add_output_metadata({f"dropped_{reason}": count for reason, count in dropped.items()})
    return cleaned
