"""``show --as-of`` and ``history --as-of`` through the real command line (a subprocess), local and moto S3."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pyarrow as pa

from dagster_parquet_dataset import ParquetDatasetStore

from ._cli import Target, one_line_error


def _three_versions(target: Target) -> list[datetime]:
    ds = ParquetDatasetStore(target.store, retain_versions=None)
    ds.write_dataset(pa.table({"id": [1]}), "t", run_id="first")
    ds.append_dataset(pa.table({"id": [2, 3]}), "t", run_id="second")
    ds.write_dataset(pa.table({"id": [4, 5, 6, 7]}), "t", overwrite=True, run_id="third")
    times = [datetime.fromisoformat(m.created_at_utc) for m in reversed(ds.history("t"))]
    assert times == sorted(times) and len(set(times)) == 3
    return times


def test_show_and_history_as_of(target: Target) -> None:
    t1, t2, _t3 = _three_versions(target)
    between = (t1 + (t2 - t1) / 2).isoformat()
    doc = json.loads(target.cli("show", "t", "--as-of", between, "--json").stdout)
    assert (doc["version"], doc["rows"], doc["run_id"], doc["as_of"]) == (1, 1, "first", between)
    exact = json.loads(target.cli("show", "t", "--as-of", t2.isoformat(), "--json").stdout)
    assert (exact["version"], exact["rows"]) == (2, 3)
    human = target.cli("show", "t", "--as-of", t2.isoformat().replace("+00:00", "Z")).stdout
    assert "version         2 (append" in human, human

    history = json.loads(target.cli("history", "t", "--as-of", t2.isoformat(), "--json").stdout)
    assert [v["version"] for v in history["versions"]] == [2, 1] and history["live_version"] == 2
    text = target.cli("history", "t", "--as-of", between).stdout.splitlines()
    assert text[0] == f"as of {between}: version 1 was live" and len(text) == 3  # the line, the header, version 1


def test_as_of_errors(target: Target) -> None:
    t1 = _three_versions(target)[0]
    before = target.cli("show", "t", "--as-of", (t1 - timedelta(seconds=1)).isoformat())
    assert before.returncode == 1 and "did not exist as of" in one_line_error(before)
    naive = target.cli("history", "t", "--as-of", "2026-03-01T12:00:00")
    assert naive.returncode == 2 and "has no time zone" in one_line_error(naive) and naive.stdout == ""
    garbage = target.cli("show", "t", "--as-of", "yesterday")
    assert garbage.returncode == 2 and "is not an ISO-8601 timestamp" in one_line_error(garbage)
    both = target.cli("show", "t", "--as-of", t1.isoformat(), "--version", "1")
    assert both.returncode == 2 and "not both" in one_line_error(both)


def test_as_of_a_vacuumed_version(target: Target) -> None:
    t1, t2, _t3 = _three_versions(target)
    ParquetDatasetStore(target.store).vacuum("t", retain_versions=2, grace_period=0)
    gone = target.cli("history", "t", "--as-of", (t1 + (t2 - t1) / 2).isoformat())
    assert gone.returncode == 1 and "is no longer retained" in one_line_error(gone)
