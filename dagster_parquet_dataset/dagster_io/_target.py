"""What one Dagster step reads or writes, read from its context once.

As Dagster's own ``DbIOManager`` turns a context into one ``TableSlice`` and
hands it to one handler per type, ``RemoteStoreIOManager`` turns an output
context into one :class:`OutputTarget` (asset key, partition keys, dataset
key, options parsed and validated once from the definition metadata, the
manifest metadata to record, the live version read once) and hands it to the
type handler's one write hook, :meth:`~._handler_base.TypeHandler.write`; an
input context becomes one :class:`InputTarget`, which :mod:`._load` reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..dataset import LiveVersion
from ._presentation import Presentation
from .options import ReadOptions, WriteOptions

if TYPE_CHECKING:
    from dagster import AssetKey, InputContext, OutputContext


@dataclass(frozen=True)
class OutputTarget:
    """One output written to one dataset: everything its write needs, decided before it runs.

    Attributes:
        context: the output context (``None`` when a handler is called outside a step).
        what: how messages name the output (``"asset daily_sales"``).
        asset_key: the asset, or ``None`` for an op output.
        partition_keys: the partition keys the output covers (empty when unpartitioned).
        dataset_key: the dataset written.
        options: the write options, parsed and validated once from the definition metadata.
        run_id: recorded in the manifest.
        metadata: the manifest metadata to record (type, owner, partition).
        expect_owner: the owner the commit expects (see :mod:`._ownership`).
        idempotency_key: the exactly-once key of an append or merge (``None`` for an overwrite or outside a run).
        live: the dataset's live version, read once at the start of the step (``None``: not read yet).
        presentation: the preview and column descriptions of the output metadata (``None``: none).
    """

    context: OutputContext | None
    what: str
    asset_key: AssetKey | None
    partition_keys: tuple[str, ...]
    dataset_key: str
    options: WriteOptions
    run_id: str | None
    metadata: dict[str, str]
    expect_owner: Mapping[str, str | None]
    idempotency_key: str | None = None
    live: LiveVersion | None = None
    presentation: Presentation | None = None

    @property
    def write_mode(self) -> str:
        """``"overwrite"``, ``"append"`` or ``"merge"``."""
        return self.options.write_mode

    @property
    def definition_metadata(self) -> Mapping[str, Any]:
        """The output's definition metadata (empty outside a step), for handler-specific options."""
        return (getattr(self.context, "definition_metadata", None) or {}) if self.context is not None else {}

    def commit_kwargs(self) -> dict[str, Any]:
        """The keyword arguments every write mode's call takes from the target: ``run_id`` and ``metadata``
        (recorded in the manifest unchanged) and ``expect_owner`` (checked by the commit)."""
        return {"run_id": self.run_id, "metadata": self.metadata, "expect_owner": dict(self.expect_owner)}


@dataclass(frozen=True)
class InputTarget:
    """One input: the datasets it reads and how, decided before it reads anything.

    Attributes:
        context: the input context.
        label: how messages name the input (``"input 'prices'"``).
        asset_key: the upstream asset, or ``None`` for an op input.
        datasets: ``(partition_key, dataset_key)`` of each dataset read, in order
            (``partition_key`` is ``None`` for an unpartitioned upstream).
        options: the read options, parsed and validated once from the input metadata.
    """

    context: InputContext
    label: str
    asset_key: AssetKey | None
    datasets: tuple[tuple[str | None, str], ...]
    options: ReadOptions

    @property
    def partition_keys(self) -> tuple[str, ...]:
        """The partition keys read (empty when the upstream is unpartitioned)."""
        return tuple(pk for pk, _key in self.datasets if pk is not None)

    @property
    def dataset_keys(self) -> tuple[str, ...]:
        """The dataset keys read, in order."""
        return tuple(key for _pk, key in self.datasets)
