"""Reading Dagster contexts that may be hand-built by ``build_input_context`` / ``build_output_context``.

Such contexts may lack a name, a step key, a partitions definition or an
instance; Dagster raises ``DagsterInvariantViolationError`` on access. These
helpers return ``None`` instead, so the IO manager works with every context
Dagster's test helpers build.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dagster import (
    DagsterInstance,
    InputContext,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    OutputContext,
    StaticPartitionsDefinition,
    TimeWindowPartitionsDefinition,
)
from dagster._check import CheckError
from dagster._core.errors import DagsterError, DagsterInvariantViolationError

from . import keys as keys_mod

_UNAVAILABLE = (DagsterInvariantViolationError, CheckError)


def _get(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except _UNAVAILABLE:
        return None


def name_of(context: InputContext | OutputContext) -> str | None:
    """The input or output name, or ``None`` for a context built without one."""
    return _get(lambda: context.name)


def label(context: InputContext | OutputContext) -> str:
    """``"input 'x'"`` / ``"output 'x'"``, or ``"the input"`` / ``"the output"`` without a name."""
    kind = "input" if isinstance(context, InputContext) else "output"
    name = name_of(context)
    return f"{kind} {name!r}" if name is not None else f"the {kind}"


def step_key_of(context: OutputContext) -> str | None:
    """The step key of an output (an ``InputContext`` has none: use its ``upstream_output``), or ``None``
    for a context built without one."""
    return _get(lambda: context.step_key)


def partitions_def_of(context: InputContext | OutputContext) -> Any:
    """The asset's partitions definition, or ``None`` for a context built with a partition key only."""
    return _get(lambda: context.asset_partitions_def)


def step_context_of(context: OutputContext) -> Any:
    """The run's step execution context, or ``None`` for a context built by hand."""
    return _get(lambda: context.step_context)


def instance_of(context: InputContext) -> DagsterInstance | None:
    """The instance of an input's run (an ``OutputContext`` has none), or ``None`` for a context built without one."""
    return _get(lambda: context.instance)


def _rank(partitions_def: Any, instance: DagsterInstance | None) -> Callable[[str], Any] | None:
    """A sort key giving ``partitions_def``'s own partition order, or ``None`` if it cannot be had cheaply."""
    if isinstance(partitions_def, TimeWindowPartitionsDefinition):
        return partitions_def.start_time_for_partition_key
    if isinstance(partitions_def, MultiPartitionsDefinition):
        # Dagster orders multi-partition keys as the product of the dimensions, sorted by name.
        dimensions = [(d.name, _rank(d.partitions_def, instance)) for d in partitions_def.partitions_defs]
        if any(rank is None for _name, rank in dimensions):
            return None

        def multi(key: str) -> tuple[Any, ...]:
            mpk = key if isinstance(key, MultiPartitionKey) else partitions_def.get_partition_key_from_str(key)
            return tuple(rank(mpk.keys_by_dimension[name]) for name, rank in dimensions)  # type: ignore[misc]

        return multi
    if isinstance(partitions_def, StaticPartitionsDefinition) or instance is not None:
        try:
            keys = partitions_def.get_partition_keys(dynamic_partitions_store=instance)
        except (DagsterError, CheckError, TypeError):
            return None
        index = {k: i for i, k in enumerate(keys)}
        return lambda key: index.get(key, len(index))
    return None


def ordered_partition_keys(context: InputContext, keys: Sequence[str]) -> list[str]:
    """``keys`` in the partitions definition's order (Dagster may list them in any order).

    Keys stay as given when the order cannot be had: no partitions definition,
    or dynamic partitions without an instance to look them up in.
    """
    partitions_def = partitions_def_of(context)
    if partitions_def is None or len(keys) < 2:
        return list(keys)
    try:
        rank = _rank(partitions_def, instance_of(context))
        return sorted(keys, key=rank) if rank is not None else list(keys)
    except (DagsterError, CheckError, ValueError, TypeError):
        return list(keys)


def partition_values(partitions_def: Any, partition_key: str) -> tuple[list[str], dict[str, str] | None]:
    """Folder values of a partition key and, for a multi-dimension key, its value per dimension.

    ``partitions_def`` is ``None`` for a hand-built context that has a partition
    key but no definition: the key is then a single dimension unless it is a
    ``MultiPartitionKey`` object.

    Raises:
        ValueError: a multi-dimension key that ``partitions_def`` cannot parse.
    """
    if isinstance(partitions_def, MultiPartitionsDefinition) or isinstance(partition_key, MultiPartitionKey):
        mpk = (
            partition_key
            if isinstance(partition_key, MultiPartitionKey)
            else partitions_def.get_partition_key_from_str(partition_key)
        )
        by_dim = dict(mpk.keys_by_dimension)
        return keys_mod.partition_values(str(partition_key), by_dim), by_dim
    return keys_mod.partition_values(partition_key), None


def describe_output(context: OutputContext) -> str:
    """``"asset a/b"``, or ``"output 'x' of step 's'"`` for an op output."""
    if context.has_asset_key:
        return f"asset {context.asset_key.to_user_string()}"
    step_key = step_key_of(context)
    return label(context) + (f" of step {step_key!r}" if step_key is not None else "")


def describe_input(context: InputContext, partition_key: str | None) -> str:
    """What an input reads: ``"asset a/b partition 'p'"``, or its upstream op output."""
    if context.has_asset_key:
        what = f"asset {context.asset_key.to_user_string()}"
        return what + (f" partition {partition_key!r}" if partition_key is not None else "")
    upstream = context.upstream_output
    return describe_output(upstream) if upstream is not None else "upstream"


def run_id_of(context: OutputContext) -> str | None:
    """The run id, or ``None`` for a context built without one."""
    return _get(lambda: context.run_id)


def run_partition_key_of(context: InputContext) -> str | None:
    """The partition key of the run an input is loaded in, or ``None`` (an unpartitioned run)."""
    return _get(lambda: context.partition_key if context.has_partition_key else None)


def run_tags_of(context: InputContext | OutputContext) -> Mapping[str, str]:
    """The tags of the run, or ``{}`` for a context built by hand."""
    return _get(lambda: context.step_context.dagster_run.tags) or {}
