"""Deterministic raw data: the same partition date always yields the same rows.

Nothing is downloaded. Each day's data comes from a random generator seeded by
a hash of the feed name and the date, so a re-materialization reproduces the
partition exactly and different days differ.

The raw events are deliberately dirty the way real click streams are: events
delivered twice, events without a customer, country codes in mixed case with
stray spaces, purchases without an amount or with a negative one.
"""

from __future__ import annotations

import datetime as dt
import hashlib

import numpy as np
import pyarrow as pa

#: First and (exclusive) last day of the example's daily partitions.
FIRST_DAY = dt.date(2024, 6, 1)
END_DAY = dt.date(2024, 6, 8)

#: Customers who sign up each day; events on day ``k`` (0-based) come from customers ``1 .. 25 * (k + 1)``.
NEW_CUSTOMERS_PER_DAY = 25
#: Existing customers whose profile changes each day (tier upgrade, sometimes a move to another country).
PROFILE_CHANGES_PER_DAY = 10

COUNTRIES = ("CH", "DE", "FR", "IT", "AT", "NL", "GB", "US")
_COUNTRY_WEIGHTS = np.array([0.18, 0.22, 0.14, 0.1, 0.08, 0.08, 0.1, 0.1])
EVENT_TYPES = ("page_view", "add_to_cart", "purchase")
_EVENT_WEIGHTS = np.array([0.75, 0.17, 0.08])
TIERS = ("free", "plus", "pro")
_FIRST_NAMES = ("Ada", "Grace", "Linus", "Margaret", "Alan", "Barbara", "Ken", "Frances", "Edsger", "Radia")
_LAST_NAMES = ("Lovelace", "Hopper", "Torvalds", "Hamilton", "Turing", "Liskov", "Thompson", "Allen", "Dijkstra")

EVENTS_SCHEMA = pa.schema(
    [
        pa.field("event_id", pa.string(), nullable=False),
        pa.field("ts", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("customer_id", pa.int64()),
        pa.field("event_type", pa.string(), nullable=False),
        pa.field("country", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)

CUSTOMER_UPDATES_SCHEMA = pa.schema(
    [
        pa.field("customer_id", pa.int64(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("email", pa.string(), nullable=False),
        pa.field("country", pa.string(), nullable=False),
        pa.field("tier", pa.string(), nullable=False),
        pa.field("updated_at", pa.timestamp("ms", tz="UTC"), nullable=False),
    ]
)


def parse_day(partition_key: str) -> dt.date:
    """The date of a daily partition key (``YYYY-MM-DD``).

    Raises:
        ValueError: the key is not an ISO date.
    """
    return dt.date.fromisoformat(partition_key)


def day_index(day: dt.date) -> int:
    """Days since :data:`FIRST_DAY` (0 for the first partition, never negative)."""
    return max(0, (day - FIRST_DAY).days)


def _rng(feed: str, day: dt.date) -> np.random.Generator:
    digest = hashlib.sha256(f"{feed}:{day.isoformat()}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _day_start_ms(day: dt.date) -> int:
    return int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc).timestamp() * 1000)


def raw_events(day: dt.date) -> pa.Table:
    """One day of click-stream events, duplicates and bad values included.

    About 2,000 to 2,500 events; about 2% are delivered twice (same
    ``event_id``), 1% have no customer, 5% have a badly formatted country, and
    some purchases have no amount or a negative one.
    """
    rng = _rng("events", day)
    n = int(rng.integers(2_000, 2_500))
    known_customers = NEW_CUSTOMERS_PER_DAY * (day_index(day) + 1)

    event_ids = np.array([f"{day:%Y%m%d}-{i:06d}" for i in range(n)], dtype=object)
    ts = _day_start_ms(day) + np.sort(rng.integers(0, 86_400_000, n))
    customer_id = rng.integers(1, known_customers + 1, n)
    no_customer = rng.random(n) < 0.01
    event_type = rng.choice(np.array(EVENT_TYPES, dtype=object), size=n, p=_EVENT_WEIGHTS)
    country = rng.choice(np.array(COUNTRIES, dtype=object), size=n, p=_COUNTRY_WEIGHTS)
    badly_formatted = rng.random(n) < 0.05
    country[badly_formatted] = [f" {c.lower()} " for c in country[badly_formatted]]

    is_purchase = event_type == "purchase"
    amount = np.round(rng.gamma(2.0, 30.0, n), 2)
    amount_missing = ~is_purchase | (rng.random(n) < 0.02)
    negative = is_purchase & (rng.random(n) < 0.02)
    amount[negative] = -amount[negative]

    table = pa.table(
        {
            "event_id": pa.array(event_ids, pa.string()),
            "ts": pa.array(ts, pa.timestamp("ms", tz="UTC")),
            "customer_id": pa.array(customer_id, pa.int64(), mask=no_customer),
            "event_type": pa.array(event_type, pa.string()),
            "country": pa.array(country, pa.string()),
            "amount": pa.array(amount, pa.float64(), mask=amount_missing),
        },
        schema=EVENTS_SCHEMA,
    )
    # At-least-once delivery: about 2% of the events arrive a second time.
    duplicated = np.flatnonzero(rng.random(n) < 0.02)
    return pa.concat_tables([table, table.take(duplicated)])


def _base_profile(customer_id: int) -> tuple[str, str, str]:
    """``(name, email, home country)`` of a customer, fixed for life."""
    rng = np.random.default_rng(customer_id)
    first = _FIRST_NAMES[int(rng.integers(len(_FIRST_NAMES)))]
    last = _LAST_NAMES[int(rng.integers(len(_LAST_NAMES)))]
    country = COUNTRIES[int(rng.choice(len(COUNTRIES), p=_COUNTRY_WEIGHTS))]
    return f"{first} {last}", f"{first}.{last}.{customer_id}@example.com".lower(), country


def raw_customer_updates(day: dt.date) -> pa.Table:
    """One day of the CRM change feed: full rows for new and changed customers.

    Day ``k`` brings the sign-ups ``25k+1 .. 25(k+1)`` (tier ``free``) and, from
    the second day on, :data:`PROFILE_CHANGES_PER_DAY` existing customers whose
    tier changed, a quarter of them also moving to another country. A customer
    appears at most once per day.
    """
    rng = _rng("customer_updates", day)
    k = day_index(day)
    day_ms = _day_start_ms(day)
    rows: dict[str, list[object]] = {name: [] for name in CUSTOMER_UPDATES_SCHEMA.names}

    def add(customer_id: int, country: str, tier: str) -> None:
        name, email, _home = _base_profile(customer_id)
        rows["customer_id"].append(customer_id)
        rows["name"].append(name)
        rows["email"].append(email)
        rows["country"].append(country)
        rows["tier"].append(tier)
        rows["updated_at"].append(day_ms + int(rng.integers(0, 86_400_000)))

    for customer_id in range(NEW_CUSTOMERS_PER_DAY * k + 1, NEW_CUSTOMERS_PER_DAY * (k + 1) + 1):
        add(customer_id, _base_profile(customer_id)[2], "free")
    if k > 0:
        existing = NEW_CUSTOMERS_PER_DAY * k
        changed = rng.choice(np.arange(1, existing + 1), size=min(PROFILE_CHANGES_PER_DAY, existing), replace=False)
        for customer_id in sorted(int(c) for c in changed):
            home = _base_profile(customer_id)[2]
            moved = rng.random() < 0.25
            country = COUNTRIES[int(rng.integers(len(COUNTRIES)))] if moved else home
            add(customer_id, country, TIERS[int(rng.integers(1, len(TIERS)))])
    return pa.table(rows, schema=CUSTOMER_UPDATES_SCHEMA)
