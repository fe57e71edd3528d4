"""The columns of each asset, with descriptions: the ``dagster/column_schema`` of their definitions.

The UI shows them on the asset page (the Description column), the IO manager
writes each description into the Parquet files as field metadata, and the
``schema_unchanged`` check compares every materialization with them. Types
are Arrow's names, as the materializations report them.
"""

from __future__ import annotations

import dagster as dg

#: What each column holds, wherever it appears (an asset may say more, see :func:`_schema`).
_DESCRIPTIONS = {
    "event_id": "Event id, unique after deduplication",
    "ts": "When the event happened (UTC)",
    "customer_id": "Customer number from the CRM",
    "event_type": "page_view, add_to_cart or purchase",
    "country": "ISO 3166 alpha-2 code",
    "amount": "Purchase amount (positive for purchases); empty for other events",
    "event_date": "The UTC day of the event",
    "events": "Number of events",
    "customers": "Distinct customers with such an event",
    "revenue": "Sum of purchase amounts, rounded to cents",
    "days": "Days with events from this country",
    "page_views": "Number of page views",
    "purchases": "Number of purchases",
    "conversion": "Purchases per page view; empty without page views",
    "name": "Full name",
    "email": "Contact e-mail address",
    "tier": "Subscription tier: free, plus or pro",
    "updated_at": "When the CRM last changed the profile (UTC)",
}


def _schema(columns: str, **descriptions: str) -> dg.TableSchema:
    """A ``TableSchema`` of ``"name:type name:type ..."`` (Arrow type names, written without spaces:
    ``timestamp[ms,tz=UTC]`` for ``timestamp[ms, tz=UTC]``); ``descriptions`` replace the shared ones by name."""
    pairs = [(name, typ.replace(",", ", ")) for name, typ in (c.split(":", 1) for c in columns.split())]
    return dg.TableSchema(
        columns=[
            dg.TableColumn(name, typ, description=descriptions.get(name, _DESCRIPTIONS[name])) for name, typ in pairs
        ]
    )


_EVENT = "event_id:string ts:timestamp[ms,tz=UTC] customer_id:int64 event_type:string country:string amount:double"

#: ``raw/click_events``: one row per event as delivered.
RAW_EVENTS = _schema(
    _EVENT,
    event_id="Event id; a redelivered event repeats it",
    customer_id="Customer number from the CRM; empty when the tracker lost it",
    country="Country code as the tracker sent it (untrimmed, any case)",
)
#: ``staging/clean_events``: the raw columns cleaned, plus the event's day.
CLEAN_EVENTS = _schema(_EVENT + " event_date:date32[day]")
#: ``marts/daily_event_stats``: one row per day, country and event type.
DAILY_EVENT_STATS = _schema(
    "event_date:date32[day] country:string event_type:string events:int64 customers:int64 revenue:double"
)
#: ``marts/event_summary``: one row per country over every materialized day.
EVENT_SUMMARY = _schema(
    "country:string days:int64 events:int64 page_views:int64 purchases:int64 revenue:double conversion:double",
    revenue="Sum of purchase amounts",
)
#: ``raw/customer_updates``, ``marts/dim_customers`` and ``marts/swiss_customers``: a customer's profile.
CUSTOMERS = _schema(
    "customer_id:int64 name:string email:string country:string tier:string updated_at:timestamp[ms,tz=UTC]"
)
