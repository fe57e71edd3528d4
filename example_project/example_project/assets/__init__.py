"""The example's assets, by layer: raw feeds, staging, marts, the customer dimension.

The asset and op modules do not use ``from __future__ import annotations``:
Dagster reads the annotations (the context class, the input and output types
that pick the IO manager's type handler) as objects when the definitions load.
"""

from __future__ import annotations

from .customers import dim_customers, swiss_customers
from .marts import daily_event_stats, event_summary
from .raw import raw_customer_updates, raw_events
from .staging import clean_events

#: Every asset, in pipeline order.
ALL_ASSETS = [
    raw_events,
    raw_customer_updates,
    clean_events,
    daily_event_stats,
    event_summary,
    dim_customers,
    swiss_customers,
]

__all__ = [
    "ALL_ASSETS",
    "clean_events",
    "daily_event_stats",
    "dim_customers",
    "event_summary",
    "raw_customer_updates",
    "raw_events",
    "swiss_customers",
]
