"""A store that dies right after an append or merge commit lands, and module-level jobs for the
multiprocess re-execution tests of exactly-once retries (``reconstructable`` needs importable
definitions; the store and marker come from ``PDS_RETRY_*`` environment variables)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa

from dagster_parquet_dataset import Store
from dagster_parquet_dataset.dagster_io import LocalStoreResource, RemoteStoreIOManager, S3StoreResource

from .._stores import PassThrough, WrappingStore


class StepDied(Exception):
    """The step's death right after its commit landed (before Dagster could record anything)."""


class DieAfterCommitStore(PassThrough, WrappingStore):
    """Dies right after the first append or merge commit lands, once per ``marker`` file: raises
    :class:`StepDied` (``how="raise"``) or ends the process with ``os._exit`` (``how="exit"``)."""

    def __init__(self, inner: Store, marker: str, how: str) -> None:
        super().__init__(inner)
        self.marker, self.how = marker, how

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        token = super().write_if(path, data, expected=expected)
        if path.endswith("/manifest.json") and (b'"append"' in data or b'"merge"' in data):
            if not os.path.exists(self.marker):
                Path(self.marker).touch()
                if self.how == "exit":
                    os._exit(17)  # the step process dies: no event, no clean-up
                raise StepDied(f"the step died right after committing {path}")
        return token


class DyingLocal(LocalStoreResource):
    marker: str
    how: str = "raise"

    def get_store(self) -> Store:
        return DieAfterCommitStore(super().get_store(), self.marker, self.how)


class DyingS3(S3StoreResource):
    marker: str
    how: str = "raise"

    def get_store(self) -> Store:
        return DieAfterCommitStore(super().get_store(), self.marker, self.how)


@dg.asset(metadata={"write_mode": "append"})
def retry_events() -> pa.Table:
    return pa.table({"id": [1, 2]})


@dg.asset(metadata={"write_mode": "merge", "key_columns": ["id"]})
def retry_merged() -> pa.Table:
    return pa.table({"id": [1, 2], "v": ["a", "b"]})


def _io(s3: bool) -> RemoteStoreIOManager:
    marker = dg.EnvVar("PDS_RETRY_MARKER")
    if s3:
        store: Any = DyingS3(
            bucket=dg.EnvVar("PDS_RETRY_BUCKET"),
            prefix="lake",
            endpoint_url=dg.EnvVar("PDS_RETRY_ENDPOINT"),
            marker=marker,
            how="exit",
        )
    else:
        store = DyingLocal(root=dg.EnvVar("PDS_RETRY_ROOT"), marker=marker, how="exit")
    return RemoteStoreIOManager(store=store, retain_versions=1)


def _job(asset: Any, s3: bool) -> dg.JobDefinition:
    defs = dg.Definitions(
        assets=[asset],
        jobs=[dg.define_asset_job("retry_job", selection=[asset])],
        resources={"io_manager": _io(s3)},
        executor=dg.multiprocess_executor,
    )
    return defs.resolve_job_def("retry_job")


# One function per job and store: Dagster caches a reconstructed job by the function it comes from.
def get_append_job() -> dg.JobDefinition:
    return _job(retry_events, s3=False)


def get_merge_job() -> dg.JobDefinition:
    return _job(retry_merged, s3=False)


def get_append_job_s3() -> dg.JobDefinition:
    return _job(retry_events, s3=True)


def get_merge_job_s3() -> dg.JobDefinition:
    return _job(retry_merged, s3=True)
