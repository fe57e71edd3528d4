"""The real ``dagster-parquet-dataset`` command line, run in a subprocess against local folders and moto S3.

Every command's human output, ``--json`` output and exit status is checked
against what the dataset layer itself says about the same data.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import os
import pty
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import tomllib

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.dataset.format import segments

from ._cli import REPO, Target, one_line_error, run


def _orders(n: int = 400, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": ["eu" if i % 2 else "us" for i in ids],
            "day": pa.array([dt.date(2024, 5, 1) + dt.timedelta(days=i % 30) for i in ids], pa.date32()),
            "ts": pa.array(
                [dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc) + dt.timedelta(hours=i) for i in ids],
                pa.timestamp("us", tz="UTC"),
            ),
            "amount": pa.array([i * 1.25 for i in ids], pa.float64()),
            "flag": [i % 3 == 0 for i in ids],
            "name": [f"name {i:04d}" for i in ids],
        }
    )


def _populate(target: Target) -> None:
    ds = ParquetDatasetStore(target.store, max_rows_per_file=100)
    ds.write_dataset(_orders(), "sales/orders", run_id="run-a")
    ds.append_dataset(_orders(50, 400), "sales/orders", run_id="run-b")
    ds.write_dataset(_orders(), "sales/by_region", partition_by=["region"])
    ds.write_dataset(_orders(10), "events")


def _manifest_row(target: Target, key: str) -> dict[str, Any]:
    m = target.ds.read_manifest(key)
    return {
        "key": key,
        "version": m.version,
        "rows": m.row_count,
        "files": len(m.parts),
        "bytes": sum(f.size_bytes or 0 for f in m.files),
        "run_id": m.run_id,
    }


# ----------------------------------------------------------------------------- ls


def test_ls_lists_every_dataset_with_its_manifest_figures(target: Target) -> None:
    _populate(target)
    keys = ["events", "sales/by_region", "sales/orders"]

    result = target.cli("ls", "--json")
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)["datasets"]
    assert [d["key"] for d in listed] == keys
    for d in listed:
        assert {k: d[k] for k in ("key", "version", "rows", "files", "bytes", "run_id")} == _manifest_row(
            target, d["key"]
        )
        assert d["status"] == "ok" and d["complete"] is True
        assert 0 <= d["age_seconds"] < 600

    human = target.cli("ls")
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    # the single ls layout, the same as on a store of partitioned assets (issue 30 point 3)
    assert lines[0].split() == [
        "ASSET", "PARTITIONS", "VERSION", "ROWS", "FILES", "BYTES", "RUN", "ID", "AGE", "STATUS"
    ]  # fmt: skip
    orders = next(line for line in lines if line.startswith("sales/orders "))
    expected = _manifest_row(target, "sales/orders")
    assert orders.split()[:5] == [
        "sales/orders",
        "-",  # no partitions
        str(expected["version"]),
        f"{expected['rows']:,}",
        str(expected["files"]),
    ]
    assert "run-b" in orders
    assert lines[-1].startswith("3 datasets under ")

    under = json.loads(target.cli("ls", "sales", "--json").stdout)["datasets"]
    assert [d["key"] for d in under] == ["sales/by_region", "sales/orders"]


def test_ls_flags_a_corrupt_manifest_and_an_empty_store(target: Target) -> None:
    empty = target.cli("ls")
    assert empty.returncode == 0 and "no datasets under" in empty.stdout
    _populate(target)
    target.store.write_bytes("events/manifest.json", b"{ not json")
    result = target.cli("ls", "--json")
    assert result.returncode == 1
    events = json.loads(result.stdout)["datasets"][0]
    assert events["key"] == "events" and events["status"] == "corrupt manifest"
    assert "not valid JSON" in events["error"]


def test_ls_lists_every_dataset_when_one_misses_a_segment(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """One dataset whose manifest segment is gone is a row with its problem, not one error for the whole
    store (issue 26, #6); a truncated segment too."""
    _populate(target)
    monkeypatch.setattr(segments, "INLINE_ENTRIES", 32)  # so 40 files need a segment (the default inlines up to 256)
    many = ParquetDatasetStore(target.store, max_rows_per_file=1)
    many.write_dataset(_orders(40), "wide/lost")  # more than 32 files: its entries live in a segment
    many.write_dataset(_orders(40), "wide/short")
    (lost,) = many.read_manifest("wide/lost").segments
    (short,) = many.read_manifest("wide/short").segments
    target.store.delete(f"wide/lost/{lost.path}")
    target.store.write_bytes(f"wide/short/{short.path}", target.store.read_bytes(f"wide/short/{short.path}")[:-10])

    result = target.cli("ls", "--json")
    assert result.returncode == 1, result.stderr
    listed = {d["key"]: d for d in json.loads(result.stdout)["datasets"]}
    assert sorted(listed) == ["events", "sales/by_region", "sales/orders", "wide/lost", "wide/short"]
    assert all(listed[k]["status"] == "ok" for k in ("events", "sales/by_region", "sales/orders"))
    assert listed["wide/lost"]["status"] == "corrupt manifest"
    assert lost.path in listed["wide/lost"]["error"] and "missing" in listed["wide/lost"]["error"]
    assert listed["wide/short"]["status"] == "corrupt manifest"
    assert short.path in listed["wide/short"]["error"]
    human = target.cli("ls")
    assert human.returncode == 1
    assert "5 datasets under " in human.stdout
    assert any(line.startswith("wide/lost ") and "corrupt manifest" in line for line in human.stdout.splitlines())


@pytest.mark.parametrize(
    "argv",
    [
        ("compact", "/etc"),
        ("vacuum", "/sales/orders"),
        ("verify", "events", "/events"),
        ("show", "/events"),
        ("history", "/events"),
        ("head", "/events"),
        ("plan", "/events"),
        ("ls", "/sales"),
        ("compact", ""),
        ("show", ""),
        ("verify", "/"),
    ],
)
def test_an_absolute_or_empty_key_is_a_usage_error(tmp_path: Path, argv: tuple[str, ...]) -> None:
    """Issue 26, #11: ``compact /etc`` is not silently ``compact etc``, and an empty key is a usage error
    (exit 2), not "does not exist"; nothing is read or changed."""
    root = tmp_path / "store"
    ds = ParquetDatasetStore(LocalStore(str(root)))
    ds.write_dataset(_orders(10), "events")
    ds.write_dataset(_orders(10), "etc")
    before = sorted(f.path for f in ds.store.list_files(""))
    result = run("--store", str(root), *argv)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    line = one_line_error(result)
    assert "absolute path" in line or "empty key" in line, line
    assert sorted(f.path for f in ds.store.list_files("")) == before
    assert ds.read_manifest("etc").version == 1


# --------------------------------------------------------------------------- show


def test_show_summarizes_the_manifest(target: Target) -> None:
    _populate(target)
    result = target.cli("show", "sales/by_region", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    manifest = target.ds.read_manifest("sales/by_region")
    sizes = [f.size_bytes for f in manifest.files]
    assert doc["partition_by"] == ["region"]
    assert doc["rows"] == manifest.row_count and doc["files"] == len(manifest.parts)
    assert doc["file_sizes"]["total"] == sum(sizes) and doc["file_sizes"]["max"] == max(sizes)
    assert [(c["name"], c["type"]) for c in doc["schema"]] == [(f.name, str(f.type)) for f in manifest.schema]
    assert doc["operation"] == "write" and doc["complete"] is True

    human = target.cli("show", "sales/orders")
    assert human.returncode == 0
    text = human.stdout
    assert "run-b" in text and "append" in text and "450" in text
    assert "timestamp[us, tz=UTC]" in text and "date32[day]" in text


def test_show_of_a_missing_dataset_is_a_one_line_error(target: Target) -> None:
    result = target.cli("show", "nope/nothing")
    assert result.returncode == 1
    assert "nope/nothing" in one_line_error(result)
    assert result.stdout == ""


def test_history_lists_retained_versions(local: Target) -> None:
    ds = ParquetDatasetStore(local.store, retain_versions=3)
    ds.write_dataset(_orders(10), "t")
    ds.append_dataset(_orders(5, 10), "t", run_id="second")
    ds.write_dataset(_orders(7), "t", overwrite=True)
    doc = json.loads(local.cli("history", "t", "--json").stdout)
    assert [(v["version"], v["operation"], v["rows"]) for v in doc["versions"]] == [
        (m.version, m.operation, m.row_count) for m in ds.history("t")
    ]
    assert len(doc["versions"]) == 3
    human = local.cli("history", "t").stdout.splitlines()
    assert human[0].split()[:2] == ["VERSION", "CREATED"] and len(human) == 4
    assert "second" in human[2]


# ------------------------------------------------------------------------- verify


def test_verify_finds_a_deleted_part_a_truncated_part_and_a_corrupt_manifest(target: Target) -> None:
    _populate(target)
    ok = target.cli("verify", "--all")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    files = sum(len(target.ds.read_manifest(k).parts) for k in ("events", "sales/by_region", "sales/orders"))
    assert ok.stdout.splitlines()[-1] == f"3 datasets, {files} files checked, 0 problems"

    parts = target.ds.read_manifest("sales/orders").parts
    target.store.delete(f"sales/orders/{parts[1]}")
    data = target.store.read_bytes(f"sales/orders/{parts[2]}")
    target.store.write_bytes(f"sales/orders/{parts[2]}", data[:-100])
    target.store.write_bytes("events/manifest.json", b'{"dataset_key": 1}')

    human = target.cli("verify", "--all")
    assert human.returncode == 1
    out = human.stdout
    assert "FAIL  sales/orders" in out and "OK    sales/by_region" in out and "FAIL  events" in out
    assert f"{parts[1]}  missing" in out
    assert f"{parts[2]}  size" in out and f"{parts[2]}  footer" in out
    assert out.splitlines()[-1].endswith("4 problems")

    doc = json.loads(target.cli("verify", "sales/orders", "events", "--json").stdout)
    assert doc["ok"] is False
    by_key = {d["key"]: d for d in doc["datasets"]}
    assert [(p["path"], p["kind"]) for p in by_key["sales/orders"]["problems"]] == [
        (parts[1], "missing"),
        (parts[2], "size"),
        (parts[2], "footer"),
    ]
    assert by_key["sales/orders"]["files_checked"] == len(parts)
    assert [p["kind"] for p in by_key["events"]["problems"]] == ["manifest"]

    only_good = target.cli("verify", "sales/by_region")
    assert only_good.returncode == 0


def test_verify_of_a_missing_dataset_fails(local: Target) -> None:
    result = local.cli("verify", "not/there", "--json")
    assert result.returncode == 1
    (entry,) = json.loads(result.stdout)["datasets"]
    assert entry["ok"] is False and "does not exist" in entry["error"]


def test_verify_shows_a_progress_bar_on_a_terminal_only(local: Target) -> None:
    ParquetDatasetStore(local.store, max_rows_per_file=1).write_dataset(_orders(150), "many")
    piped = local.cli("verify", "many")
    assert piped.returncode == 0 and "verify many" not in piped.stderr and piped.stderr == ""
    primary, secondary = pty.openpty()
    try:
        result = local.cli("verify", "many", stderr=secondary)
        os.close(secondary)
        seen = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(primary)
    assert result.returncode == 0
    assert b"verify many" in seen  # the bar's description, drawn on the terminal
    assert result.stdout.splitlines()[-1] == "1 dataset, 150 files checked, 0 problems"


# --------------------------------------------------------------------------- plan


PLAN_CASES = [
    (["region == eu"], [("region", "==", "eu")]),
    (["day >= 2024-05-20"], [("day", ">=", dt.date(2024, 5, 20))]),
    (["ts < 2024-05-03T00:00:00"], [("ts", "<", dt.datetime(2024, 5, 3, tzinfo=dt.timezone.utc))]),
    (["amount > 400.5"], [("amount", ">", 400.5)]),
    (["id in (3, 150, 399)"], [("id", "in", [3, 150, 399])]),
    (["id not in (1)", "flag == true"], [("id", "not in", [1]), ("flag", "==", True)]),
    (["name == 'name 0042'"], [("name", "==", "name 0042")]),
    (['"name" >= name 0300', "id<=350"], [("name", ">=", "name 0300"), ("id", "<=", 350)]),
    (["id is not null", "region = us"], [("id", "is not null"), ("region", "==", "us")]),
]


@pytest.mark.parametrize(("texts", "terms"), PLAN_CASES, ids=[" & ".join(t) for t, _ in PLAN_CASES])
def test_plan_parses_filters_by_column_type(local: Target, texts: list[str], terms: list[tuple[Any, ...]]) -> None:
    ds = ParquetDatasetStore(local.store, max_rows_per_file=50)
    ds.write_dataset(_orders(), "sales/by_region", partition_by=["region"])
    args = [a for text in texts for a in ("--filter", text)]
    result = local.cli("plan", "sales/by_region", *args, "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    expected = ds.plan_read("sales/by_region", filters=terms)
    assert [f["path"] for f in doc["selected"]] == [e.path for e in expected.selected]
    assert [f["path"] for f in doc["pruned"]] == [e.path for e in expected.pruned]
    assert doc["selected_files"] + doc["pruned_files"] == doc["files"] == 8


def test_plan_human_output(target: Target) -> None:
    _populate(target)
    result = target.cli("plan", "sales/by_region", "--filter", "region == eu", "--filter", "id >= 200")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == "filter    region == 'eu' AND id >= 200"
    plan = target.ds.plan_read("sales/by_region", filters=[("region", "==", "eu"), ("id", ">=", 200)])
    total = len(plan.selected) + len(plan.pruned)
    assert plan.pruned and plan.selected
    assert lines[2].startswith(f"selected  {len(plan.selected)} of {total} files")
    assert lines[3] == f"pruned    {len(plan.pruned)} file{'s' if len(plan.pruned) != 1 else ''}"
    assert any(line.strip().startswith("region=eu/") for line in lines[5:])


# ------------------------------------------------------------------------- vacuum


def test_vacuum_dry_run_then_for_real(local: Target) -> None:
    ds = ParquetDatasetStore(local.store, retain_versions=None)
    for n in (10, 20, 30):
        ds.write_dataset(_orders(n), "t", overwrite=True)
    old_parts = {p for m in ds.history("t")[1:] for p in m.parts}
    assert old_parts

    dry = local.cli("vacuum", "t", "--retain-versions", "1", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    doc = json.loads(dry.stdout)
    assert doc["dry_run"] is True and doc["retained_versions"] == [3]
    assert old_parts <= set(doc["deleted"])
    assert all(local.store.exists(f"t/{p}") for p in doc["deleted"])

    real = local.cli("vacuum", "t", "--retain-versions", "1")
    assert real.returncode == 0, real.stderr
    assert real.stdout.startswith(f"t: deleted {len(doc['deleted'])} files; retained version 3")
    assert not any(local.store.exists(f"t/{p}") for p in doc["deleted"])
    assert [m.version for m in ds.history("t")] == [3]
    assert ds.read_dataset("t").num_rows == 30

    default = json.loads(local.cli("vacuum", "t", "--json").stdout)
    assert default["deleted"] == [] and default["retained_versions"] == [3]


# -------------------------------------------------------------- errors and options


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["ls"], "no store given"),
        (["--store", "{root}", "frobnicate"], "invalid choice: 'frobnicate'"),
        (["--store", "{root}", "plan", "t", "--filter", "id"], "expected an operator"),
        (["--store", "{root}", "plan", "t", "--filter", "nope > 1"], "unknown column 'nope'"),
        (["--store", "{root}", "plan", "t", "--filter", "id > ten"], "'ten' is not an integer"),
        (["--store", "{root}", "plan", "t", "--filter", "day < 2024-13-01"], "is not a date"),
        (["--store", "{root}", "plan", "t", "--filter", "flag == maybe"], "is not a boolean"),
        (["--store", "{root}", "plan", "t", "--filter", "id == null"], "is null"),
        (["--store", "{root}", "verify"], "at least one dataset key, or --all"),
        (["--store", "{root}", "verify", "t", "--all"], "not both"),
        (["--store", "{root}", "show", "a/../b"], "'..'"),
        (["--store", "{root}", "compact", "t", "--target-size", "big"], "is not a size"),
        (["--store", "{root}", "vacuum", "t", "--grace-period", "soon"], "is not a duration"),
        (["--store", "ftp://host/x", "ls"], "unsupported scheme 'ftp'"),
        (["--store", "{root}/missing", "ls"], "does not exist"),
        (["--store", "s3://", "ls"], "names no bucket"),
        (["--store", "{root}", "show"], "required: KEY"),
        (["--store", "{root}", "ls", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_usage_errors_exit_2_with_one_line(local: Target, args: list[str], needle: str) -> None:
    ParquetDatasetStore(local.store).write_dataset(_orders(20), "t")
    root = local.args[1]
    result = run(*[a.replace("{root}", root) for a in args])
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert needle in one_line_error(result)
    assert result.stdout == ""


def test_global_options_go_before_or_after_the_subcommand(local: Target, tmp_path: Path) -> None:
    ParquetDatasetStore(local.store).write_dataset(_orders(20), "t")
    root = local.args[1]
    before = run("--store", root, "--json", "show", "t")
    after = run("show", "t", "--store", root, "--json")
    mixed = run("--json", "show", "--store", root, "t")
    docs = [json.loads(r.stdout) for r in (before, after, mixed)]
    assert all(r.returncode == 0 for r in (before, after, mixed))
    assert {d["key"] for d in docs} == {"t"} and docs[0]["rows"] == docs[1]["rows"] == 20
    # An option after the subcommand wins over the same option before it.
    other = tmp_path / "other"
    other.mkdir()
    assert run("--store", str(other), "ls", "--store", root, "--json").stdout.count('"key"') == 1
    # The environment variable and file:// URLs name the store too.
    env = run("ls", "--json", env={"DAGSTER_PARQUET_DATASET_STORE": root})
    assert [d["key"] for d in json.loads(env.stdout)["datasets"]] == ["t"]
    url = run("--store", Path(root).as_uri(), "ls", "--json")
    assert [d["key"] for d in json.loads(url.stdout)["datasets"]] == ["t"]


def test_unreachable_s3_endpoint_is_a_one_line_error() -> None:
    result = run("--store", "s3://bucket/prefix", "--endpoint-url", "http://127.0.0.1:9", "ls")
    assert result.returncode == 1
    assert "127.0.0.1:9" in one_line_error(result)


def test_missing_bucket_is_a_one_line_error(moto_endpoint: str) -> None:
    result = run("--store", "s3://no-such-bucket-here/x", "--endpoint-url", moto_endpoint, "verify", "--all")
    assert result.returncode == 1
    assert "no-such-bucket-here" in one_line_error(result)


def test_help_and_version() -> None:
    result = run("--help")
    assert result.returncode == 0
    for command in ("ls", "show", "history", "verify", "plan", "vacuum", "compact"):
        assert command in result.stdout
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("dagster-parquet-dataset ")


def test_console_script_entry_point(local: Target, capsys: pytest.CaptureFixture[str]) -> None:
    """The function pyproject.toml's console script names is the same command line."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module_name, _, attr = scripts["dagster-parquet-dataset"].partition(":")
    main = getattr(importlib.import_module(module_name), attr)
    ParquetDatasetStore(local.store).write_dataset(_orders(20), "t")
    assert main([*local.args, "ls", "--json"]) == 0
    assert [d["key"] for d in json.loads(capsys.readouterr().out)["datasets"]] == ["t"]
    assert main(["ls"]) == 2
    assert "no store given" in capsys.readouterr().err
    local.store.delete(f"t/{ParquetDatasetStore(local.store).read_manifest('t').parts[0]}")
    assert main([*local.args, "verify", "t"]) == 1
    assert "missing" in capsys.readouterr().out


# ------------------------------------------------------------------------ compact


def test_compact_dry_run_then_for_real(target: Target) -> None:
    ds = target.ds
    for i in range(12):
        ds.append_dataset(_orders(25, i * 25), "appends", partition_by=["region"] if i == 0 else None)
    before = ds.read_manifest("appends")
    rows_before = ds.read_dataset("appends").sort_by("id")

    dry = target.cli("compact", "appends", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["dry_run"] is True and plan["version"] is None
    assert plan["files_read"] == len(before.parts) == 24 and plan["files_written"] == 2  # one per region folder
    assert plan["rows"] == before.row_count
    assert ds.read_manifest("appends") == before  # nothing written

    only_eu = target.cli("compact", "appends", "--filter", "region == eu", "--json")
    assert only_eu.returncode == 0, only_eu.stderr
    eu = json.loads(only_eu.stdout)
    assert eu["files_read"] == 12 and eu["files_written"] == 1
    assert all(p.startswith("region=eu/") for p in eu["read"])
    after_eu = ds.read_manifest("appends")
    assert after_eu.version == eu["version"] == before.version + 1
    assert len(after_eu.parts) == 13

    human = target.cli("compact", "appends", "--target-size", "64MiB")
    assert human.returncode == 0, human.stderr
    assert human.stdout.startswith("appends: rewrote 12 files (")
    assert "as 1 file (" in human.stdout and f"new version {before.version + 2}" in human.stdout
    after = ds.read_manifest("appends")
    assert len(after.parts) == 2
    assert ds.read_dataset("appends").sort_by("id").equals(rows_before)
    assert target.cli("verify", "appends").returncode == 0

    again = target.cli("compact", "appends")
    assert again.returncode == 0 and "nothing to compact" in again.stdout
    assert ds.read_manifest("appends").version == after.version


def test_compact_of_a_missing_dataset_fails(local: Target) -> None:
    result = local.cli("compact", "not/there")
    assert result.returncode == 1
    assert "not/there" in one_line_error(result)


def test_compact_keeps_history_unless_told(local: Target) -> None:
    ds = ParquetDatasetStore(local.store, retain_versions=3)
    for i in range(4):
        ds.append_dataset(_orders(10, i * 10), "t")
    versions = [m.version for m in ds.history("t")]
    assert versions == [4, 3, 2]
    assert local.cli("compact", "t").returncode == 0
    assert [m.version for m in ds.history("t")] == [5, *versions]  # nothing dropped
    assert all(ds.read_dataset("t", version=v).num_rows == 10 * v for v in versions)
    vacuum = local.cli("vacuum", "t", "--retain-versions", "1")
    assert vacuum.returncode == 0, vacuum.stderr
    assert [m.version for m in ds.history("t")] == [5]
    assert ds.read_dataset("t").num_rows == 40
