"""Example Dagster code location for ``dagster-parquet-dataset``.

A small e-commerce pipeline, every output stored as a committed Parquet
dataset by ``RemoteStoreIOManager``:

* ``raw/click_events`` and ``raw/customer_updates``: daily-partitioned raw feeds,
  generated deterministically from the partition date (:mod:`.generate`).
* ``staging/clean_events``: the day's events cleaned with pandas.
* ``marts/daily_event_stats``: a PySpark aggregation per day.
* ``marts/event_summary``: an unpartitioned summary over all days.
* ``marts/dim_customers``: a customer dimension maintained by upsert
  (``write_mode="merge"``), and ``marts/swiss_customers``, which loads only
  its Swiss rows (input ``filters``).
* ``spark_orders_job``: plain PySpark ops, no assets.

The store is chosen by environment variables (:mod:`.resources`).
"""
