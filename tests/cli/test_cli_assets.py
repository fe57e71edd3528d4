"""The asset-aware command line (issue 20), run for real in a subprocess against local folders and moto S3.

A store holds a daily asset of 120 partition datasets (``raw/clicks/<day>``)
and an unpartitioned one (``marts/dim_customers``); the tests check ls/show by
asset, verify/vacuum/compact over prefixes and ``--all``, ``head``, the "did you
mean" suggestions, and the duration and safety-floor rules.
"""

from __future__ import annotations

import datetime as dt
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore, S3Store

from ..conftest import make_bucket
from ._cli import Target, one_line_error, run

DAYS = 120
ROWS = 5
FIRST = dt.date(2024, 1, 1)
ALL = DAYS + 1  # the partitions and dim_customers


def _day(i: int) -> str:
    return (FIRST + dt.timedelta(days=i)).isoformat()


def _clicks(i: int) -> pa.Table:
    return pa.table({"user_id": pa.array(range(i * ROWS, (i + 1) * ROWS), pa.int64()), "page": ["home"] * ROWS})


@pytest.fixture(scope="module", params=["local", "s3"])
def assets(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Target:
    """120 daily partitions of raw/clicks and marts/dim_customers, written on threads (read-only for the tests)."""
    if request.param == "local":
        root = tmp_path_factory.mktemp("assets")
        target = Target(["--store", str(root)], LocalStore(root))
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        bucket = make_bucket(endpoint)
        target = Target(
            ["--store", f"s3://{bucket}/lake", "--endpoint-url", endpoint],
            S3Store(bucket, "lake", endpoint_url=endpoint),
        )
    ds = target.ds

    def write(i: int) -> None:
        ds.write_dataset(_clicks(i), f"raw/clicks/{_day(i)}", run_id=f"run-{i:03d}")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(write, range(DAYS)))
    ds.write_dataset(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}), "marts/dim_customers", run_id="dims")
    return target


def _partition_keys() -> list[str]:
    return [f"raw/clicks/{_day(i)}" for i in range(DAYS)]


# ------------------------------------------------------------------------ ls, show


def test_ls_groups_partition_datasets_by_asset(assets: Target) -> None:
    human = assets.cli("ls")
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    assert lines[0].split()[:3] == ["ASSET", "PARTITIONS", "VERSION"]
    clicks = next(line for line in lines if line.startswith("raw/clicks "))
    assert clicks.split()[1:5] == [str(DAYS), "1", f"{DAYS * ROWS:,}", str(DAYS)]
    dims = next(line for line in lines if line.startswith("marts/dim_customers "))
    assert dims.split()[1:5] == ["-", "1", "3", "1"]
    assert lines[-1].startswith(f"2 assets ({ALL} datasets) under ")
    assert len(lines) == 4

    doc = json.loads(assets.cli("ls", "--json").stdout)
    assert [d["key"] for d in doc["datasets"]] == ["marts/dim_customers", *_partition_keys()]
    (clicks_doc,) = [a for a in doc["assets"] if a["asset"] == "raw/clicks"]
    manifests = [assets.ds.read_manifest(k) for k in _partition_keys()]
    assert clicks_doc["partitions"] == DAYS and clicks_doc["datasets"] == DAYS
    assert (clicks_doc["first_partition"], clicks_doc["last_partition"]) == (_day(0), _day(DAYS - 1))
    assert clicks_doc["rows"] == sum(m.row_count for m in manifests)
    assert clicks_doc["bytes"] == sum(f.size_bytes for m in manifests for f in m.files)
    latest = max(manifests, key=lambda m: m.created_at_utc)
    assert clicks_doc["last_run_id"] == latest.run_id

    flat = assets.cli("ls", "raw", "--datasets").stdout.splitlines()
    assert flat[0].split()[0] == "KEY" and len(flat) == DAYS + 2
    assert flat[1].startswith(f"raw/clicks/{_day(0)} ")
    assert assets.cli("ls", "marts", "--assets").stdout.splitlines()[0].startswith("ASSET")


def test_ls_of_a_prefix_with_no_match_exits_1_and_suggests(assets: Target) -> None:
    result = assets.cli("ls", "mart")
    assert result.returncode == 1
    error = one_line_error(result)
    assert "dataset 'mart' does not exist: nothing at or under 'mart'" in error
    assert "did you mean 'marts'?" in error
    assert result.stdout == ""


def test_show_of_an_asset_summarises_its_partitions(assets: Target) -> None:
    result = assets.cli("show", "raw/clicks", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    manifests = [assets.ds.read_manifest(k) for k in _partition_keys()]
    assert doc["prefix"] == "raw/clicks" and doc["datasets"] == DAYS and doc["partitions"] == DAYS
    assert doc["rows"] == DAYS * ROWS and doc["files"] == sum(len(m.parts) for m in manifests)
    assert doc["bytes"] == sum(f.size_bytes for m in manifests for f in m.files)
    assert doc["versions"] == "1" and doc["corrupt"] == [] and doc["incomplete"] == []
    assert doc["last_run_id"] == max(manifests, key=lambda m: m.created_at_utc).run_id

    human = assets.cli("show", "raw/clicks").stdout.splitlines()
    assert human[0] == f"prefix      raw/clicks ({DAYS} datasets, 1 asset)"
    assert human[1] == f"partitions  {DAYS} ({_day(0)} .. {_day(DAYS - 1)})"
    assert human[3] == f"rows        {DAYS * ROWS:,}"
    # A dataset key still shows its manifest.
    one = json.loads(assets.cli("show", f"raw/clicks/{_day(3)}", "--json").stdout)
    assert one["key"] == f"raw/clicks/{_day(3)}" and one["rows"] == ROWS


@pytest.mark.parametrize(
    "command",
    [["show"], ["verify"], ["vacuum", "--dry-run"], ["compact", "--dry-run"], ["head"], ["history"], ["plan"]],
)
def test_a_typo_gets_one_not_found_wording_and_a_suggestion(tmp_path: Path, command: list[str]) -> None:
    store = LocalStore(tmp_path)
    ParquetDatasetStore(store).write_dataset(pa.table({"id": [1]}), "marts/dim_customers")
    result = run("--store", str(tmp_path), command[0], "marts/dim_customer", *command[1:])
    assert result.returncode == 1, (result.stdout, result.stderr)
    if command[0] == "verify":  # verify reports each key and goes on with the others
        assert result.stdout.splitlines()[0].startswith("FAIL  marts/dim_customer: dataset 'marts/dim_customer'")
        assert "did you mean 'marts/dim_customers'?" in result.stdout
        return
    error = one_line_error(result)
    assert "dataset 'marts/dim_customer' does not exist" in error
    assert "did you mean 'marts/dim_customers'?" in error


# -------------------------------------------------------------------------- verify


def test_verify_all_reports_exactly_the_dataset_with_a_deleted_part(assets: Target) -> None:
    broken = f"raw/clicks/{_day(42)}"
    part = assets.ds.read_manifest(broken).parts[0]
    data = assets.store.read_bytes(f"{broken}/{part}")
    files = sum(len(assets.ds.read_manifest(k).parts) for k in [*_partition_keys(), "marts/dim_customers"])
    assets.store.delete(f"{broken}/{part}")
    try:
        result = assets.cli("verify", "--all")
        assert result.returncode == 1
        lines = result.stdout.splitlines()
        failed = [line for line in lines if line.startswith("FAIL")]
        assert failed == [f"FAIL  {broken} (version 1, 1 file, 1 problem)"]
        assert sum(line.startswith("OK    ") for line in lines) == ALL - 1
        assert f"{part}  missing" in result.stdout
        assert lines[-1] == f"{ALL} datasets, {files} files checked, 1 problem"

        doc = json.loads(assets.cli("verify", "raw/clicks", "--json").stdout)
        assert doc["ok"] is False and len(doc["datasets"]) == DAYS
        bad = [d for d in doc["datasets"] if not d["ok"]]
        assert [(d["key"], [(p["path"], p["kind"]) for p in d["problems"]]) for d in bad] == [
            (broken, [(part, "missing")])
        ]
        assert [d["key"] for d in doc["datasets"]] == _partition_keys()
        assert assets.cli("verify", "marts", f"raw/clicks/{_day(41)}").returncode == 0
    finally:
        assets.store.write_bytes(f"{broken}/{part}", data)
    assert assets.cli("verify", "raw").returncode == 0


# ------------------------------------------------------------------ vacuum, compact


def _appended(target: Target, keys: list[str], appends: int = 3) -> None:
    ds = ParquetDatasetStore(target.store, retain_versions=None)
    for key in keys:
        for i in range(appends):
            ds.append_dataset(_clicks(i), key, run_id=f"append-{i}")


def test_compact_and_vacuum_a_prefix_in_one_command(target: Target) -> None:
    keys = [f"ops/t/{_day(i)}" for i in range(3)]
    _appended(target, keys)
    ds = target.ds
    before = {k: ds.read_dataset(k).sort_by("user_id") for k in keys}
    old_parts = {k: set(ds.read_manifest(k).parts) for k in keys}

    dry = target.cli("compact", "ops", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    doc = json.loads(dry.stdout)
    assert doc["ok"] is True and doc["dry_run"] is True
    assert [(d["key"], d["files_read"], d["files_written"]) for d in doc["datasets"]] == [(k, 3, 1) for k in keys]
    human = target.cli("compact", "ops/t", "--dry-run").stdout.splitlines()
    size = doc["datasets"][0]["bytes_before"]
    each = f"{size} B" if size < 1024 else f"{size / 1024:.1f} KiB"
    assert human[0] == f"{keys[0]}: would rewrite 3 files ({each}, {3 * ROWS} rows) as 1 file (at most about {each})"
    assert human[-1] == "3 datasets: would rewrite 9 files as 3 files, 0 failures"

    real = target.cli("compact", "ops")
    assert real.returncode == 0, real.stderr
    assert all(f"{k}: rewrote 3 files (" in real.stdout for k in keys)
    assert [ds.read_manifest(k).version for k in keys] == [4, 4, 4]

    vacuum = target.cli("vacuum", "ops", "--retain-versions", "1", "--json")
    assert vacuum.returncode == 0, vacuum.stderr
    vdoc = json.loads(vacuum.stdout)
    assert [(d["key"], d["retained_versions"]) for d in vdoc["datasets"]] == [(k, [4]) for k in keys]
    for d in vdoc["datasets"]:  # the three small parts and the copies of versions 1-3
        parts = {p for p in d["deleted"] if not p.startswith("_versions/")}
        assert parts == old_parts[d["key"]] and len(d["deleted"]) == 6
    for key in keys:
        assert [m.version for m in ds.history(key)] == [4]
        assert ds.read_dataset(key).sort_by("user_id").equals(before[key])
    assert target.cli("verify", "ops").returncode == 0


def test_vacuum_all_reports_each_dataset(local: Target) -> None:
    _appended(local, ["a", "b/c"], appends=2)
    _appended(local, ["d"], appends=1)  # nothing to delete: counted, not listed
    result = local.cli("vacuum", "--all", "--retain-versions", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "a: deleted 1 file; retained version 2",
        "b/c: deleted 1 file; retained version 2",
        "3 datasets: deleted 2 files (1 with nothing to do), 0 failures",
    ]
    doc = json.loads(local.cli("vacuum", "--all", "--json").stdout)
    assert [(d["key"], d["deleted"]) for d in doc["datasets"]] == [("a", []), ("b/c", []), ("d", [])]


# ---------------------------------------------------------------- durations, floor


@pytest.mark.parametrize(
    ("option", "value"), [("--older-than", "7"), ("--grace-period", "30"), ("--older-than", "1.5")]
)
def test_a_bare_number_duration_is_refused(local: Target, option: str, value: str) -> None:
    _appended(local, ["t"], appends=2)
    result = local.cli("vacuum", "t", option, value, "--retain-versions", "1")
    assert result.returncode == 2
    error = one_line_error(result)
    assert f"{option} '{value}' has no unit; add one: {value}s, {value}m, {value}h or {value}d" in error
    assert len(ParquetDatasetStore(local.store).history("t")) == 2  # nothing dropped


def test_vacuum_under_the_safety_floor_needs_force(local: Target) -> None:
    _appended(local, ["t"], appends=1)
    local.store.write_bytes("t/part-leftover.parquet", b"left by a crashed write")
    for option, value in (("--grace-period", "0s"), ("--older-than", "59m")):
        refused = local.cli("vacuum", "t", option, value)
        assert refused.returncode == 2
        assert f"{option} {value} is under the 1h safety floor" in one_line_error(refused)
        assert "--force" in refused.stderr
    assert local.store.exists("t/part-leftover.parquet")
    assert local.cli("vacuum", "t", "--grace-period", "1h").stdout.startswith("t: deleted 0 files")
    forced = local.cli("vacuum", "t", "--grace-period", "0s", "--force")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.splitlines() == ["t: deleted 1 file; retained version 1", "  part-leftover.parquet"]
    assert not local.store.exists("t/part-leftover.parquet")


# --------------------------------------------------------------------------- head


def test_head_prints_the_first_rows(target: Target) -> None:
    ds = ParquetDatasetStore(target.store, max_rows_per_file=10)
    table = pa.table({"id": pa.array(range(100), pa.int64()), "name": [f"n{i:03d}" for i in range(100)]})
    ds.write_dataset(table, "big")

    human = target.cli("head", "big", "-n", "3")
    assert human.returncode == 0, human.stderr
    assert human.stdout.splitlines() == ["id  name", "0   n000", "1   n001", "2   n002", "(3 rows)"]

    doc = json.loads(target.cli("head", "big", "--json").stdout)
    assert doc["columns"] == ["id", "name"] and doc["rows"] == table.slice(0, 10).to_pylist()

    picked = json.loads(
        target.cli("head", "big", "-n", "4", "--columns", "name", "--filter", "id >= 55", "--json").stdout
    )
    assert picked["columns"] == ["name"]
    assert picked["rows"] == [{"name": f"n{i:03d}"} for i in range(55, 59)]

    more = json.loads(target.cli("head", "big", "-n", "500", "--json").stdout)
    assert more["rows"] == table.to_pylist()
    none = target.cli("head", "big", "--filter", "id > 1000")
    assert none.returncode == 0 and none.stdout.splitlines()[-1] == "(0 rows)"
    bad = target.cli("head", "big", "--columns", "nope")
    assert bad.returncode == 2 and "nope" in one_line_error(bad)


def test_verify_all_on_s3_reads_each_manifest_once_and_lists_once_per_dataset(moto_endpoint: str) -> None:
    """``verify --all``: one listing of the store finds the datasets, then each dataset costs one GET of its
    manifest, one LIST of its folder and its footers (no manifest read twice)."""
    from .._s3_proxy import LossyProxy

    bucket = make_bucket(moto_endpoint)
    ds = ParquetDatasetStore(S3Store(bucket, "lake", endpoint_url=moto_endpoint), max_rows_per_file=5)
    keys = [f"raw/clicks/{_day(i)}" for i in range(6)]
    for i, key in enumerate(keys):
        ds.write_dataset(_clicks(i), key)
    proxy = LossyProxy(moto_endpoint)
    try:
        result = run("--store", f"s3://{bucket}/lake", "--endpoint-url", proxy.url, "verify", "--all", "--json")
        seen = [(method, path) for method, path, _status in proxy.seen]
    finally:
        proxy.close()
    assert result.returncode == 0, result.stderr
    assert [d["key"] for d in json.loads(result.stdout)["datasets"]] == keys
    manifest_gets = sorted(
        p.split("?")[0] for m, p in seen if m == "GET" and p.split("?")[0].endswith("/manifest.json")
    )
    assert manifest_gets == [f"/{bucket}/lake/{key}/manifest.json" for key in keys], seen
    lists = [p for m, p in seen if m == "GET" and "list-type=2" in p]
    assert len(lists) == 1 + len(keys), lists


def _is_metadata(path: str) -> bool:
    return path.endswith("/manifest.json") or "/_segments/" in path


def test_head_on_s3_reads_at_most_two_objects_after_the_manifest(moto_endpoint: str) -> None:
    """``head -n 10`` of a 40-file dataset: after the manifest (root and segment), only the first part
    is read (at most 2 requests)."""
    from .._s3_proxy import LossyProxy

    bucket = make_bucket(moto_endpoint)
    ds = ParquetDatasetStore(S3Store(bucket, "lake", endpoint_url=moto_endpoint), max_rows_per_file=1_000)
    ds.write_dataset(pa.table({"id": pa.array(range(40_000), pa.int64())}), "big")
    assert len(ds.read_manifest("big").parts) == 40
    proxy = LossyProxy(moto_endpoint)
    try:
        result = run("--store", f"s3://{bucket}/lake", "--endpoint-url", proxy.url, "head", "big", "-n", "10", "--json")
        seen = [(method, path.split("?")[0]) for method, path, _status in proxy.seen]
    finally:
        proxy.close()
    assert result.returncode == 0, result.stderr
    assert [r["id"] for r in json.loads(result.stdout)["rows"]] == list(range(10))
    # The manifest is its root plus (format 2, over 32 files) the one segment holding the first part's entry.
    metadata = [i for i, (method, path) in enumerate(seen) if method == "GET" and _is_metadata(path)]
    assert sum("/_segments/" in seen[i][1] for i in metadata) <= 1, seen
    after = seen[max(metadata) + 1 :]
    assert len(after) <= 2, seen
    first = ds.read_manifest("big").parts[0]
    assert {path for _method, path in after} == {f"/{bucket}/lake/big/{first}"}, seen


def test_head_of_a_partitioned_dataset_and_of_an_evolved_schema(local: Target) -> None:
    """Partition columns (not in the files) and columns added later (absent from old parts) come out as a read."""
    ds = ParquetDatasetStore(local.store, max_rows_per_file=4)
    ids = pa.array(range(12), pa.int64())
    ds.write_dataset(pa.table({"id": ids, "region": ["eu", "us", "ap"] * 4}), "p", partition_by=["region"])
    doc = json.loads(local.cli("head", "p", "-n", "5", "--json").stdout)
    assert doc["columns"] == ["id", "region"]
    assert doc["rows"] == ds.scan_dataset("p").head(5).to_pylist()
    assert {r["region"] for r in doc["rows"]} <= {"eu", "us", "ap"} and len(doc["rows"]) == 5

    ds.write_dataset(pa.table({"id": ids.slice(0, 2)}), "e")
    ds.append_dataset(pa.table({"id": pa.array([7], pa.int64()), "note": ["new"]}), "e", allow_new_columns=True)
    evolved = json.loads(local.cli("head", "e", "-n", "3", "--json").stdout)
    assert evolved["rows"] == [{"id": 0, "note": None}, {"id": 1, "note": None}, {"id": 7, "note": "new"}]


# ------------------------------------------------------------------ wording, help


def test_plan_says_rows_in_the_selected_files(local: Target) -> None:
    ParquetDatasetStore(local.store, max_rows_per_file=10).write_dataset(
        pa.table({"id": pa.array(range(40), pa.int64())}), "t"
    )
    lines = local.cli("plan", "t", "--filter", "id == 12").stdout.splitlines()
    assert lines[2].startswith("selected  1 of 4 files, 10 rows in them (of 40), ")
    assert lines[3] == "pruned    3 files"


def test_ls_on_a_missing_bucket_names_the_bucket(moto_endpoint: str) -> None:
    result = run("--store", "s3://no-such-bucket-here/x", "--endpoint-url", moto_endpoint, "ls")
    assert result.returncode == 1
    error = one_line_error(result)
    assert "cannot list s3://no-such-bucket-here/x: " in error and "the bucket does not exist" in error


def test_help_names_both_endpoint_variables_and_the_new_commands() -> None:
    result = run("--help")
    assert result.returncode == 0 and "head" in result.stdout
    show = run("show", "--help").stdout
    assert "$AWS_ENDPOINT_URL_S3" in " ".join(show.split()) and "$AWS_ENDPOINT_URL," in " ".join(show.split())
    vacuum = " ".join(run("vacuum", "--help").stdout.split())
    assert "--force" in vacuum and "7d, 12h, 30m, 45s" in vacuum and "--all" in vacuum
