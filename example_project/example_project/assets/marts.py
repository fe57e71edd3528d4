"""``marts/daily_event_stats`` (PySpark, per day) and ``marts/event_summary`` (all days)."""

import warnings

import dagster as dg
import pandas as pd
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..partitions import DAILY
from . import columns

# ``backfill_policy`` is a beta parameter of ``@dg.asset``: Dagster warns each time a process loads this module
# (several per ``dagster asset materialize``). The example uses it on purpose; silence that one warning only.
warnings.filterwarnings("ignore", message=r"Parameter `backfill_policy` of function `asset`", category=dg.BetaWarning)


def aggregate_events(events: DataFrame) -> DataFrame:
    """Per day, country and event type: event count, distinct customers and revenue (2 decimals)."""
    return (
        events.groupBy("event_date", "country", "event_type")
        .agg(
            F.count(F.lit(1)).alias("events"),
            F.countDistinct("customer_id").alias("customers"),
            F.round(F.coalesce(F.sum("amount"), F.lit(0.0)), 2).alias("revenue"),
        )
        .orderBy("country", "event_type")
    )


@dg.asset(
    key_prefix="marts",
    name="daily_event_stats",
    partitions_def=DAILY,
    group_name="clickstream",
    kinds={"parquet", "spark"},
    ins={"events": dg.AssetIn(key=["staging", "clean_events"])},
    # A backfill of many days is one run and one Spark job: the IO manager splits the output by
    # event_date and commits each day's dataset on its own (see docs/dagster.md, single-run backfills).
    backfill_policy=dg.BackfillPolicy.single_run(),
    metadata={"partition_expr": "event_date", "dagster/column_schema": columns.DAILY_EVENT_STATS},
    description="Events, customers and revenue per country and event type per day (PySpark).",
)
def daily_event_stats(context: dg.AssetExecutionContext, pyspark: PySparkResource, events: DataFrame) -> DataFrame:
    """Aggregate the run's days of clean events on Spark.

    A run covers one day, or a range of days in a single-run backfill;
    ``events`` arrives as one Spark DataFrame over the range's partitions,
    read by the executors. The result holds a row per day, country and event
    type; the executors write each day's rows into that day's dataset.
    """
    days = context.partition_key_range
    pyspark.spark_context.setJobDescription(f"daily_event_stats {days.start}..{days.end}")
    return aggregate_events(events).coalesce(1)


def summarize(stats: pd.DataFrame) -> pd.DataFrame:
    """Per country over every day in ``stats``: days, events, purchases, revenue, conversion.

    ``conversion`` is purchases per page view. Sorted by revenue, highest first.
    """
    by_type = stats.pivot_table(
        index="country", columns="event_type", values="events", aggfunc="sum", fill_value=0
    ).reindex(columns=["page_view", "add_to_cart", "purchase"], fill_value=0)
    summary = pd.DataFrame(
        {
            "days": stats.groupby("country")["event_date"].nunique(),
            "events": stats.groupby("country")["events"].sum(),
            "page_views": by_type["page_view"],
            "purchases": by_type["purchase"],
            "revenue": stats.groupby("country")["revenue"].sum().round(2),
        }
    )
    summary["conversion"] = (summary["purchases"] / summary["page_views"].where(summary["page_views"] > 0)).round(4)
    summary = summary.reset_index().sort_values(["revenue", "country"], ascending=[False, True])
    return summary.reset_index(drop=True)


@dg.asset(
    key_prefix="marts",
    name="event_summary",
    group_name="clickstream",
    kinds={"parquet", "pandas"},
    metadata={"dagster/column_schema": columns.EVENT_SUMMARY},
    ins={
        "daily_event_stats": dg.AssetIn(
            key=["marts", "daily_event_stats"],
            # Every day of the partitions definition is requested; days not materialized yet are skipped.
            metadata={"allow_missing_partitions": True},
        )
    },
    description="Per-country totals over every materialized day (loads all partitions of daily_event_stats).",
)
def event_summary(context: dg.AssetExecutionContext, daily_event_stats: pd.DataFrame) -> pd.DataFrame:
    """Summarize all days of ``daily_event_stats`` (loaded as one pandas DataFrame)."""
    summary = summarize(daily_event_stats)
    days = sorted(str(d) for d in daily_event_stats["event_date"].unique())
    context.add_output_metadata({"days_included": ", ".join(days)})
    return summary
