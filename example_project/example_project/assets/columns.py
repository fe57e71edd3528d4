"""The columns of each asset, with descriptions: the ``dagster/column_schema`` of their definitions.

The UI shows them on the asset page (the Description column), the IO manager
writes each description into the Parquet files as field metadata, and the
``schema_unchanged`` check compares every materialization with them. Types
are Arrow's names, as the materializations report them.
"""

from __future__ import annotations

import dagster as dg

_C = dg.TableColumn

_CUSTOMER_ID = "Customer number from the CRM"
_COUNTRY = "ISO 3166 alpha-2 code of the customer's country"

#: ``raw/click_events``: one row per event as delivered.
RAW_EVENTS = dg.TableSchema(
    columns=[
        _C("event_id", "string", description="Event id; a redelivered event repeats it"),
        _C("ts", "timestamp[ms, tz=UTC]", description="When the event happened (UTC)"),
        _C("customer_id", "int64", description=_CUSTOMER_ID + "; empty when the tracker lost it"),
        _C("event_type", "string", description="page_view, add_to_cart or purchase"),
        _C("country", "string", description="Country code as the tracker sent it (untrimmed, any case)"),
        _C("amount", "double", description="Purchase amount; empty for other events"),
    ]
)

#: ``staging/clean_events``: the raw columns cleaned, plus the event's day.
CLEAN_EVENTS = dg.TableSchema(
    columns=[
        _C("event_id", "string", description="Event id, unique after deduplication"),
        _C("ts", "timestamp[ms, tz=UTC]", description="When the event happened (UTC)"),
        _C("customer_id", "int64", description=_CUSTOMER_ID),
        _C("event_type", "string", description="page_view, add_to_cart or purchase"),
        _C("country", "string", description="ISO 3166 alpha-2 code, trimmed and upper-cased"),
        _C("amount", "double", description="Purchase amount (positive for purchases); empty for other events"),
        _C("event_date", "date32[day]", description="The UTC day of ts"),
    ]
)

#: ``marts/daily_event_stats``: one row per day, country and event type.
DAILY_EVENT_STATS = dg.TableSchema(
    columns=[
        _C("event_date", "date32[day]", description="The UTC day"),
        _C("country", "string", description="ISO 3166 alpha-2 code"),
        _C("event_type", "string", description="page_view, add_to_cart or purchase"),
        _C("events", "int64", description="Number of events"),
        _C("customers", "int64", description="Distinct customers with such an event"),
        _C("revenue", "double", description="Sum of purchase amounts, rounded to cents"),
    ]
)

#: ``marts/event_summary``: one row per country over every materialized day.
EVENT_SUMMARY = dg.TableSchema(
    columns=[
        _C("country", "string", description="ISO 3166 alpha-2 code"),
        _C("days", "int64", description="Days with events from this country"),
        _C("events", "int64", description="Number of events over those days"),
        _C("page_views", "int64", description="Number of page views"),
        _C("purchases", "int64", description="Number of purchases"),
        _C("revenue", "double", description="Sum of purchase amounts"),
        _C("conversion", "double", description="Purchases per page view; empty without page views"),
    ]
)

#: ``raw/customer_updates``, ``marts/dim_customers`` and ``marts/swiss_customers``: a customer's profile.
CUSTOMERS = dg.TableSchema(
    columns=[
        _C("customer_id", "int64", description=_CUSTOMER_ID),
        _C("name", "string", description="Full name"),
        _C("email", "string", description="Contact e-mail address"),
        _C("country", "string", description=_COUNTRY),
        _C("tier", "string", description="Subscription tier: free, plus or pro"),
        _C("updated_at", "timestamp[ms, tz=UTC]", description="When the CRM last changed the profile (UTC)"),
    ]
)
