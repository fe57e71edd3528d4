"""The CLI on a partitioned asset and on op outputs (issue 30 points 3 and 6): ``head``, ``history`` and
``plan`` on an asset name its partitions; ``ls`` shows short run ids, narrow lines, and op outputs last."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pyarrow as pa

from dagster_parquet_dataset import LocalStore

from ._cli import Target, one_line_error

DAYS = [f"2024-06-0{d}" for d in range(1, 6)]


def _populate(local: Target) -> dict[str, str]:
    """Asset ``orders`` with 5 daily partitions, an unpartitioned asset and two op outputs, written by
    Dagster-like runs (36-character run ids); the run id of each key."""
    runs: dict[str, str] = {}
    for day in DAYS:
        runs[f"orders/{day}"] = str(uuid.uuid4())
        local.ds.write_dataset(
            pa.table({"id": [1, 2]}),
            f"orders/{day}",
            run_id=runs[f"orders/{day}"],
            metadata={"dagster.asset_key": "orders", "dagster.partition_key": day},
        )
    runs["customers"] = str(uuid.uuid4())
    local.ds.write_dataset(
        pa.table({"id": [1]}), "customers", run_id=runs["customers"], metadata={"dagster.asset_key": "customers"}
    )
    for _ in range(2):
        run = str(uuid.uuid4())
        runs[f"{run}/clean/result"] = run
        local.ds.write_dataset(
            pa.table({"x": [1]}),
            f"{run}/clean/result",
            run_id=run,
            metadata={"dagster.step_key": "clean", "dagster.output_name": "result"},
        )
    return runs


def test_head_history_and_plan_on_an_asset_name_its_partitions(local: Target) -> None:
    _populate(local)
    for command in ("head", "history", "plan"):
        result = local.cli(command, "orders")
        assert result.returncode == 1
        message = one_line_error(result)
        assert "'orders' is an asset with 5 partitions, each its own dataset" in message
        assert f"'{command} orders/2024-06-05'" in message and "'show orders'" in message
        assert local.cli(command, "orders/2024-06-05").returncode == 0


def test_a_folder_of_several_assets_is_named_as_such(local: Target) -> None:
    _populate(local)
    local.ds.write_dataset(pa.table({"id": [1]}), "marts/a")
    local.ds.write_dataset(pa.table({"id": [1]}), "marts/b")
    message = one_line_error(local.cli("history", "marts"))
    assert "'marts' is a folder with 2 datasets" in message and "'history marts/b'" in message


def test_ls_shows_short_run_ids_narrow_lines_and_op_outputs_last(local: Target) -> None:
    runs = _populate(local)
    for args in (["ls"], ["ls", "--datasets"]):
        result = local.cli(*args)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert max(len(line) for line in lines) < 120, result.stdout
        assert not any(run in result.stdout for key, run in runs.items() if run not in key)
    lines = local.cli("ls").stdout.splitlines()
    assert [line.split()[0] for line in lines[1:-1]] == ["customers", "orders", "(op"]
    orders = next(line for line in lines if line.startswith("orders "))
    newest = runs[f"orders/{DAYS[-1]}"]
    assert f" {newest[:8]} " in orders


def test_ls_prints_one_layout_whatever_the_store(tmp_path: Path) -> None:
    """Issue 30 point 3: a store of plain datasets and a store of partitioned Dagster assets print the same
    header and columns (``--datasets`` too, under ``KEY``); ``--json`` has the same keys on both."""
    plain = Target(["--store", str(tmp_path / "plain")], LocalStore(tmp_path / "plain"))
    plain.ds.write_dataset(pa.table({"id": [1, 2, 3]}), "sales/orders", run_id=str(uuid.uuid4()))
    plain.ds.write_dataset(pa.table({"id": [1]}), "events")
    assets = Target(["--store", str(tmp_path / "assets")], LocalStore(tmp_path / "assets"))
    _populate(assets)

    outputs = {}
    for name, target in (("plain", plain), ("assets", assets)):
        for flag in ("", "--assets", "--datasets"):
            result = target.cli("ls", *([flag] if flag else []))
            assert result.returncode == 0, result.stderr
            outputs[name, flag] = result.stdout.splitlines()
    columns = ["PARTITIONS", "VERSION", "ROWS", "FILES", "BYTES", "RUN", "ID", "AGE", "STATUS"]
    for flag, first in (("", "ASSET"), ("--assets", "ASSET"), ("--datasets", "KEY")):
        assert outputs["plain", flag][0].split() == outputs["assets", flag][0].split() == [first, *columns]
    for lines in outputs.values():
        assert max(len(line) for line in lines) < 120, lines
        run_ids = [line.split()[7] for line in lines[1:-1] if not line.startswith("(op outputs)")]
        assert all(len(r) == 8 or r == "-" for r in run_ids), lines  # BYTES is two words: "1.0 KiB"

    events = next(line for line in plain.cli("ls").stdout.splitlines() if line.startswith("events "))
    assert events.split()[1:5] == ["-", "1", "1", "1"]  # a plain dataset: no partitions, version 1, 1 row, 1 file
    docs = [json.loads(t.cli("ls", "--json").stdout) for t in (plain, assets)]
    assert [sorted(d) for d in docs] == [["assets", "datasets", "store"]] * 2
    assert [a["asset"] for a in docs[0]["assets"]] == ["events", "sales/orders"]


def test_history_shows_short_run_ids_as_ls_does_and_json_the_whole_id(local: Target) -> None:
    runs = _populate(local)
    run = runs[f"orders/{DAYS[0]}"]
    result = local.cli("history", f"orders/{DAYS[0]}")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[-2:] == ["RUN", "ID"] and lines[1].split()[-1] == run[:8], result.stdout
    assert run not in result.stdout and max(len(line) for line in lines) < 100, result.stdout
    document = json.loads(local.cli("history", f"orders/{DAYS[0]}", "--json").stdout)
    assert document["versions"][0]["run_id"] == run


def test_ls_counts_op_outputs_apart_from_the_assets(local: Target) -> None:
    _populate(local)  # assets orders (5 partitions) and customers, and two op outputs: 8 datasets
    last = local.cli("ls").stdout.splitlines()[-1]
    assert last.startswith("2 assets and op outputs (8 datasets) under "), last


def test_ls_counts_assets_whose_one_partition_is_stored(local: Target) -> None:
    for asset in ("clicks", "orders"):  # one day stored of each daily asset: as many assets as datasets
        local.ds.write_dataset(pa.table({"id": [1]}), f"{asset}/2024-06-01")
    last = local.cli("ls").stdout.splitlines()[-1]
    assert last.startswith("2 assets (2 datasets) under "), last
