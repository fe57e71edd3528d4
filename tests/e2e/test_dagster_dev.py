"""The example as a user runs it: ``dagster definitions validate`` and a real ``dagster dev``.

``dagster dev`` runs on 127.0.0.1 at a free port with a temp ``DAGSTER_HOME``
and a temp data root (``PDS_DATA_ROOT``), in its own process group. One
partition is materialized through the GraphQL API (``launchRun`` of
``daily_events_job`` with the ``dagster/partition`` tag, what the UI's
"Materialize" does for one partition); the run goes through the queued run
coordinator and the daemon like any UI run. Then the datasets on disk are
checked and the whole process group is shut down with SIGTERM.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dagster_parquet_dataset import LocalStore, ParquetDatasetStore
from dagster_parquet_dataset.dataset import data_version

from .conftest import PROJECT_DIR

BIN_DIR = Path(sys.executable).parent
DAGSTER = str(BIN_DIR / "dagster")
PARTITION = "2024-06-03"
DAILY_KEYS = ("raw/click_events", "raw/customer_updates", "staging/clean_events", "marts/daily_event_stats")

#: dagster dev maps SIGTERM to its SIGINT handler; if this test runs with SIGINT ignored (a background
#: job of a non-interactive shell), the server would inherit that and ignore SIGTERM. Restore SIGINT's
#: default before exec'ing dagster, as ``make run`` does.
_WITH_DEFAULT_SIGINT = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
]

STARTUP_TIMEOUT_S = 120.0
RUN_TIMEOUT_S = 360.0  # five steps (four assets and their dataset checks), each a process that imports Dagster
SHUTDOWN_TIMEOUT_S = 30.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _example_env(home: Path, data_root: Path) -> dict[str, str]:
    """The environment of a user's shell plus the example's variables, pointing at temp folders."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PDS_", "DAGSTER_"))}
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env.update(
        DAGSTER_HOME=str(home),
        PDS_STORE="local",
        PDS_DATA_ROOT=str(data_root),
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        PATH=f"{BIN_DIR}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def test_definitions_validate(tmp_path: Path) -> None:
    proc = subprocess.run(
        [DAGSTER, "definitions", "validate"],
        cwd=PROJECT_DIR,
        env=_example_env(tmp_path / "home", tmp_path / "data"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "Validation successful for code location example_project" in output, output


@dataclass
class DagsterDev:
    """A running ``dagster dev``: its process (leader of its own group), URL and log file."""

    proc: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def log_tail(self, chars: int = 6_000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def graphql(self, query: str, variables: dict[str, Any] | None = None, timeout: float = 30.0) -> dict[str, Any]:
        """POST a query; returns ``data`` (raises on transport or GraphQL errors)."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = json.loads(response.read())
        if payload.get("errors"):
            raise AssertionError(f"GraphQL errors: {payload['errors']}")
        return payload["data"]  # type: ignore[no-any-return]

    def stop(self) -> tuple[int | None, bool]:
        """SIGTERM to the whole process group, SIGKILL after a timeout; ``(exit code, needed SIGKILL)``."""
        pgid = self.proc.pid  # start_new_session: the leader's pid is the group id
        if self.proc.poll() is None:
            _signal_group(pgid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
            killed = False
        except subprocess.TimeoutExpired:
            _signal_group(pgid, signal.SIGKILL)
            self.proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
            killed = True
        # dagster dev stops its webserver, daemon and code server; give stragglers the same grace, then kill.
        deadline = time.monotonic() + SHUTDOWN_TIMEOUT_S
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)
            killed = True
        return self.proc.returncode, killed


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


WORKSPACE_QUERY = """
query Workspace {
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError {
          __typename
          ... on PythonError { message stack }
          ... on RepositoryLocation { repositories { name pipelines { name } } }
        }
      }
    }
    ... on PythonError { message }
  }
}
"""

LAUNCH_RUN_MUTATION = """
mutation Launch($executionParams: ExecutionParams!) {
  launchRun(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { runId status tags { key value } } }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on PythonError { message stack }
    ... on Error { message }
  }
}
"""

RUN_STATUS_QUERY = """
query RunStatus($runId: ID!) {
  runOrError(runId: $runId) {
    __typename
    ... on Run { status creationTime startTime endTime }
    ... on Error { message }
  }
}
"""

RUN_LOGS_QUERY = """
query RunLogs($runId: ID!) {
  logsForRun(runId: $runId, limit: 2000) {
    __typename
    ... on EventConnection {
      events {
        __typename
        ... on MessageEvent { message level stepKey }
        ... on ExecutionStepFailureEvent { error { message stack } }
        ... on RunFailureEvent { error { message stack } }
      }
    }
    ... on Error { message }
  }
}
"""

MATERIALIZATIONS_QUERY = """
query Materializations($path: [String!]!, $partition: String!) {
  assetOrError(assetKey: {path: $path}) {
    __typename
    ... on Asset {
      assetMaterializations(partitions: [$partition]) {
        runId
        partition
        tags { key value }
        metadataEntries {
          __typename
          label
          ... on TextMetadataEntry { text }
          ... on IntMetadataEntry { intValue }
          ... on MarkdownMetadataEntry { mdStr }
          ... on TableSchemaMetadataEntry { schema { columns { name description } } }
        }
      }
    }
  }
}
"""

ASSET_NODES_QUERY = """
query AssetNodes {
  assetNodes {
    assetKey { path }
    description
    metadataEntries {
      label
      ... on TableSchemaMetadataEntry { schema { columns { name description } } }
    }
  }
}
"""

CHECK_EXECUTIONS_QUERY = """
query CheckExecutions($path: [String!]!, $check: String!, $partition: String!) {
  assetCheckExecutions(assetKey: {path: $path}, checkName: $check, partition: $partition, limit: 5) {
    runId
    evaluation { success metadataEntries { __typename label } }
  }
}
"""

#: The dataset checks the example defines on every asset.
CHECK_NAMES = ("dataset_integrity", "schema_unchanged", "row_count_change")


def _undescribed_columns(entries: list[dict[str, Any]]) -> list[str] | None:
    """The columns of the ``dagster/column_schema`` entry without a description (``None``: no such entry)."""
    schema = next((e["schema"] for e in entries if e["label"] == "dagster/column_schema"), None)
    if schema is None or not schema["columns"]:
        return None
    return [c["name"] for c in schema["columns"] if not c["description"]]


def _assert_what_the_ui_shows(server: DagsterDev, run_id: str) -> None:
    """Every asset has a description and described columns; each output of the run a preview and described
    columns; ``manifest_version`` is text everywhere (the UI plots numeric metadata, and version numbers of
    different partitions make a meaningless plot)."""
    nodes = server.graphql(ASSET_NODES_QUERY)["assetNodes"]
    assert len(nodes) >= 7
    for node in nodes:
        name = "/".join(node["assetKey"]["path"])
        assert node["description"], f"asset {name} has no description"
        assert _undescribed_columns(node["metadataEntries"]) == [], f"asset {name}: columns without a description"
    for key in DAILY_KEYS:
        materializations = server.graphql(MATERIALIZATIONS_QUERY, {"path": key.split("/"), "partition": PARTITION})
        entries = materializations["assetOrError"]["assetMaterializations"][0]["metadataEntries"]
        by_label = {e["label"]: e for e in entries}
        assert by_label["preview"]["__typename"] == "MarkdownMetadataEntry" and "|" in by_label["preview"]["mdStr"], key
        assert _undescribed_columns(entries) == [], f"{key}: its output has columns without a description"
        assert by_label["manifest_version"]["__typename"] == "TextMetadataEntry", key
        for check in CHECK_NAMES:
            executions = server.graphql(
                CHECK_EXECUTIONS_QUERY, {"path": key.split("/"), "check": check, "partition": PARTITION}
            )["assetCheckExecutions"]
            assert [e["runId"] for e in executions] == [run_id], (key, check)
            evaluation = executions[0]["evaluation"]
            assert evaluation["success"], (key, check)
            types = {e["label"]: e["__typename"] for e in evaluation["metadataEntries"]}
            assert types["manifest_version"] == "TextMetadataEntry", (key, check, types)


@pytest.fixture
def dagster_dev(tmp_path: Path, data_root: Path) -> Iterator[DagsterDev]:
    """``dagster dev`` on the example, answering GraphQL with the code location loaded."""
    port = _free_port()
    log_path = tmp_path / "dagster-dev.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [*_WITH_DEFAULT_SIGINT, DAGSTER, "dev", "--host", "127.0.0.1", "--port", str(port)],
            cwd=PROJECT_DIR,
            env=_example_env(tmp_path / "home", data_root),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: SIGTERM reaches it and all its children
        )
    server = DagsterDev(proc, f"http://127.0.0.1:{port}", log_path)
    try:
        _wait_until_loaded(server)
        yield server
    finally:
        if proc.poll() is None or _group_alive(proc.pid):
            server.stop()


def _wait_until_loaded(server: DagsterDev) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    last: object = None
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            pytest.fail(f"dagster dev exited with {server.proc.returncode} while starting:\n{server.log_tail()}")
        try:
            data = server.graphql(WORKSPACE_QUERY, timeout=5)
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
            last = exc
        else:
            entries = {e["name"]: e for e in data["workspaceOrError"].get("locationEntries", [])}
            entry = entries.get("example_project")
            last = entry
            if entry is not None and entry["loadStatus"] == "LOADED":
                location = entry["locationOrLoadError"]
                if location["__typename"] == "PythonError":
                    pytest.fail(f"the code location failed to load: {location['message']}\n{location['stack']}")
                jobs = {p["name"] for repo in location["repositories"] for p in repo["pipelines"]}
                assert {"daily_events_job", "marts_job", "spark_orders_job"} <= jobs, jobs
                return
        time.sleep(0.5)
    pytest.fail(
        f"dagster dev did not load the code location in {STARTUP_TIMEOUT_S:.0f}s (last: {last!r}):\n{server.log_tail()}"
    )


def _run_failure_report(server: DagsterDev, run_id: str) -> str:
    data = server.graphql(RUN_LOGS_QUERY, {"runId": run_id})["logsForRun"]
    lines = []
    for event in data.get("events", []):
        line = f"[{event.get('level')}] {event.get('stepKey') or ''} {event['__typename']}: {event.get('message')}"
        if event.get("error"):
            line += f"\n{event['error']['message']}\n{event['error']['stack']}"
        lines.append(line)
    return "\n".join(lines[-80:])


def _wait_for_run(server: DagsterDev, run_id: str) -> str:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    status = "UNKNOWN"
    while time.monotonic() < deadline:
        result = server.graphql(RUN_STATUS_QUERY, {"runId": run_id})["runOrError"]
        assert result["__typename"] == "Run", result
        status = result["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            queued = (result["startTime"] or 0) - result["creationTime"]
            ran = (result["endTime"] or 0) - (result["startTime"] or 0)
            print(f"run {run_id}: {status}, queued {queued:.1f}s, ran {ran:.1f}s")
            return str(status)
        time.sleep(1.0)
    pytest.fail(
        f"run {run_id} still {status} after {RUN_TIMEOUT_S:.0f}s:\n{_run_failure_report(server, run_id)}\n"
        f"dagster dev log:\n{server.log_tail()}"
    )


def test_dagster_dev_materializes_a_partition_and_shuts_down(dagster_dev: DagsterDev, data_root: Path) -> None:
    server = dagster_dev
    launched = server.graphql(
        LAUNCH_RUN_MUTATION,
        {
            "executionParams": {
                "selector": {
                    "repositoryLocationName": "example_project",
                    "repositoryName": "__repository__",
                    "jobName": "daily_events_job",
                },
                "runConfigData": {},
                "executionMetadata": {"tags": [{"key": "dagster/partition", "value": PARTITION}]},
            }
        },
    )["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    assert {"key": "dagster/partition", "value": PARTITION} in launched["run"]["tags"]

    status = _wait_for_run(server, run_id)
    assert status == "SUCCESS", (
        f"run {run_id} ended {status}:\n{_run_failure_report(server, run_id)}\ndagster dev log:\n{server.log_tail()}"
    )

    # The datasets on disk: one per asset for this partition, committed by this run.
    datasets = ParquetDatasetStore(LocalStore(str(data_root)))
    for key in DAILY_KEYS:
        folder = data_root / key / PARTITION
        assert (folder / "manifest.json").is_file() and (folder / "_SUCCESS").is_file(), sorted(data_root.rglob("*"))
        raw_manifest = json.loads((folder / "manifest.json").read_text())
        assert raw_manifest["run_id"] == run_id
        assert raw_manifest["dataset_key"] == f"{key}/{PARTITION}"
        assert raw_manifest["metadata"]["dagster.asset_key"] == key
        assert raw_manifest["metadata"]["dagster.partition_key"] == PARTITION
        for part in raw_manifest["parts"]:
            assert (folder / part).is_file()
    other_days = [p for p in (data_root / "raw" / "click_events").iterdir() if p.name != PARTITION]
    assert other_days == [], "only the launched partition was materialized"

    # Read back: the Spark aggregate accounts for every clean event of the day.
    stats = datasets.read_dataset(f"marts/daily_event_stats/{PARTITION}")
    clean = datasets.read_manifest(f"staging/clean_events/{PARTITION}")
    assert sum(stats.column("events").to_pylist()) == clean.row_count > 2_000
    assert set(stats.column("event_date").to_pylist()) == {dt.date.fromisoformat(PARTITION)}

    # Dagster recorded the materialization with the IO manager's metadata.
    materializations = server.graphql(
        MATERIALIZATIONS_QUERY, {"path": ["marts", "daily_event_stats"], "partition": PARTITION}
    )["assetOrError"]["assetMaterializations"]
    assert [m["runId"] for m in materializations] == [run_id]
    entries = {e["label"]: e for e in materializations[0]["metadataEntries"]}
    assert entries["dataset_key"]["text"] == f"marts/daily_event_stats/{PARTITION}"
    assert entries["dagster/partition_row_count"]["intValue"] == stats.num_rows
    # The data version Dagster recorded is the stored content's (issue 19), not one Dagster made up.
    cleaned = server.graphql(MATERIALIZATIONS_QUERY, {"path": ["staging", "clean_events"], "partition": PARTITION})
    tags = {t["key"]: t["value"] for t in cleaned["assetOrError"]["assetMaterializations"][0]["tags"]}
    expected = data_version(clean)
    assert expected is not None and tags.get("dagster/data_version") == expected, tags
    _assert_what_the_ui_shows(server, run_id)

    # Clean shutdown of the whole process group by SIGTERM.
    pgid = server.proc.pid
    returncode, needed_kill = server.stop()
    assert returncode is not None, "dagster dev is still running"
    assert not needed_kill, f"dagster dev ignored SIGTERM for {SHUTDOWN_TIMEOUT_S:.0f}s:\n{server.log_tail()}"
    assert not _group_alive(pgid), "a process of dagster dev's group outlived it"
