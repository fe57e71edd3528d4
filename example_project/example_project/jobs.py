"""Jobs: the daily asset job, the marts job, and ``spark_orders_job`` built from plain PySpark ops.

``spark_orders_job`` has no assets: each op's output goes through the IO
manager all the same, as the dataset ``<run_id>/<step_key>/result``.
"""

import warnings

import dagster as dg
import pandas as pd
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .assets import (
    clean_events,
    daily_event_stats,
    dim_customers,
    event_summary,
    raw_customer_updates,
    raw_events,
    swiss_customers,
)
from .generate import COUNTRIES

# The job mixes the daily assets (one run per partition) with marts/daily_event_stats (single-run
# backfills), so a backfill of the whole job runs once per day: the strictest policy wins, as
# docs/example-project.md says. Dagster warns about exactly that whenever the job is resolved.
warnings.filterwarnings(
    "ignore",
    message="Asset job daily_events_job materializes assets with varying BackfillPolicies",
    category=UserWarning,
)

#: Materializes one day (the partitioning comes from the assets): both raw feeds, the clean events
#: and the Spark aggregate.
daily_events_job = dg.define_asset_job(
    "daily_events_job",
    selection=dg.AssetSelection.assets(raw_events, raw_customer_updates, clean_events, daily_event_stats),
    description="One day of the pipeline: raw feeds, cleaning (pandas), aggregation (PySpark).",
)

#: Rebuilds the unpartitioned marts from whatever days are stored.
marts_job = dg.define_asset_job(
    "marts_job",
    selection=dg.AssetSelection.assets(event_summary, dim_customers, swiss_customers),
    description="The unpartitioned marts: summary over all days, customer dimension (merge), Swiss extract.",
)


class OrdersConfig(dg.Config):
    """How many synthetic orders ``extract_orders`` makes, over how many customers."""

    orders: int = 200_000
    customers: int = 5_000


@dg.op(description="Synthetic orders, computed on Spark (deterministic: a function of the order id).")
def extract_orders(config: OrdersConfig, pyspark: PySparkResource) -> DataFrame:
    """``config.orders`` orders: id, customer, country and amount, spread over the Spark partitions."""
    countries = F.array(*[F.lit(c) for c in COUNTRIES])
    return (
        pyspark.spark_session.range(config.orders, numPartitions=4)
        .withColumnRenamed("id", "order_id")
        .withColumn("customer_id", (F.col("order_id") * 7919) % config.customers + 1)
        .withColumn("country", countries[(F.col("customer_id") % len(COUNTRIES)).cast("int")])
        .withColumn("amount", ((F.col("order_id") * 37) % 10_000 + 1) / F.lit(100.0))
    )


@dg.op(description="Orders, customers and revenue per country (Spark).")
def revenue_by_country(pyspark: PySparkResource, orders: DataFrame) -> DataFrame:
    """Aggregate ``orders`` per country; the input is read back from its dataset by the executors."""
    pyspark.spark_context.setJobDescription("revenue_by_country")
    return orders.groupBy("country").agg(
        F.count(F.lit(1)).alias("orders"),
        F.countDistinct("customer_id").alias("customers"),
        F.round(F.sum("amount"), 2).alias("revenue"),
    )


@dg.op(description="The three countries with the highest revenue (pandas, from the Spark-written dataset).")
def top_countries(revenue: pd.DataFrame) -> pd.DataFrame:
    """Top three countries by revenue; ``revenue`` was written by Spark and loads as pandas."""
    return revenue.sort_values(["revenue", "country"], ascending=[False, True]).head(3).reset_index(drop=True)


@dg.job(
    # One process, so the three ops share one Spark session (one JVM) instead of starting one per step.
    executor_def=dg.in_process_executor,
    description="Plain PySpark ops (no assets); every op output is a dataset <run_id>/<step_key>/result.",
)
def spark_orders_job() -> None:
    """extract_orders -> revenue_by_country -> top_countries."""
    top_countries(revenue_by_country(extract_orders()))
