"""Reading Dagster contexts that may be hand-built by ``build_input_context`` / ``build_output_context``.

Such contexts may lack a name, a step key, a partitions definition or an
instance; Dagster raises ``DagsterInvariantViolationError`` on access. These
helpers return ``None`` instead, so the IO manager works with every context
Dagster's test helpers build.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


def step_key_of(context: InputContext | OutputContext) -> str | None:
    """The step key, or ``None`` for a context built without one."""
    return _get(lambda: context.step_key)


def partitions_def_of(context: InputContext | OutputContext) -> Any:
    """The asset's partitions definition, or ``None`` for a context built with a partition key only."""
    return _get(lambda: context.asset_partitions_def)


def step_context_of(context: OutputContext) -> Any:
    """The run's step execution context, or ``None`` for a context built by hand."""
    return _get(lambda: context.step_context)


def _instance_of(context: InputContext | OutputContext) -> DagsterInstance | None:
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
        rank = _rank(partitions_def, _instance_of(context))
        return sorted(keys, key=rank) if rank is not None else list(keys)
    except (DagsterError, CheckError, ValueError, TypeError):
        return list(keys)
