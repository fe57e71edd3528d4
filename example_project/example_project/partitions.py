"""The example's partitions: one per day, for one bounded week of June 2024."""

from __future__ import annotations

import dagster as dg

from .generate import END_DAY, FIRST_DAY

#: ``2024-06-01`` .. ``2024-06-07``; bounded so the demo data never grows and the
#: summary of "all days" is a fixed set.
DAILY = dg.DailyPartitionsDefinition(start_date=FIRST_DAY.isoformat(), end_date=END_DAY.isoformat())
