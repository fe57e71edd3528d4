"""Loading an input: from the datasets of its upstream output to the value its annotation asks for.

:func:`load_input` is ``RemoteStoreIOManager.load_input`` once the IO manager
has mapped the context to dataset keys. It picks the handler (from the
annotation, or the type recorded in the manifest), checks each dataset's owner,
reads one partition, several as one value, or one value per partition, and
words every error so it names the asset and partition. It also applies the
rules for missing data (see ``docs/dagster.md``): an upstream whose output was
``None``, an ``Optional`` input, and a partition mapping that yields no partition.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
from dagster import InputContext
from dagster._core.errors import DagsterInvariantViolationError

from ..dataset import DatasetManifest, ParquetDatasetStore, PinnedDatasets, pin_manifests, read_committed_manifests
from ..errors import (
    DatasetIncomplete,
    DatasetNotFound,
    ManifestCorrupted,
    NotFound,
    RemoteStoreError,
    VersionNotRetained,
)
from . import _context as _ctx
from . import _ownership as _own
from ._handler_base import NO_DATA_KEY, OUTPUT_NAME_KEY, PYTHON_TYPE_KEY, STEP_KEY_KEY, TypeHandler
from ._registry import HandlerRegistry
from .options import ReadOptions, run_as_of

#: Threads reading partitions at once when an input spans several.
_PARTITION_READ_THREADS = 8

#: Times an input over several partitions reads again after a commit replaced a partition's version.
_REPIN_ATTEMPTS = 5

#: Handler used for an unannotated input whose manifest records no Python type.
_FALLBACK_TYPE_NAME = "pyarrow.Table"

#: Partitions of the upstream whose manifests are tried for its schema when a mapping yields none.
_SCHEMA_PROBES = 4

_DICT_ORIGINS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)

Target = tuple[str | None, str]
"""``(partition_key, dataset_key)`` of one dataset an input reads."""


class UnsupportedTypeError(RemoteStoreError, TypeError):
    """No type handler writes or reads the given Python type; the message lists the supported ones."""


class NoDataStored(RemoteStoreError, LookupError):
    """The upstream's output was ``None`` (it holds no data), and the input is not ``Optional``."""


class _NoData:
    """What reading a dataset whose output was ``None`` gives (see :data:`NO_DATA_KEY`)."""


_NO_DATA = _NoData()


def strip_optional(tp: Any) -> tuple[Any, bool]:
    """``Optional[X]`` -> ``(X, True)``; anything else -> ``(tp, False)``."""
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(args) < len(typing.get_args(tp)):
            return args[0], True
    return tp, False


def _is_any(tp: Any) -> bool:
    return tp is Any or tp is object or tp is None


def type_label(tp: Any) -> str:
    """``module.Class`` for a class, else its ``repr``."""
    if isinstance(tp, type):
        return f"{tp.__module__}.{tp.__qualname__}"
    return repr(tp)


def _requested_type(context: InputContext) -> tuple[bool, Any, bool]:
    """``(as_dict, element_type, optional)``; ``element_type`` is ``None`` for "as written"."""
    try:
        annotation = context.dagster_type.typing_type
    except DagsterInvariantViolationError:  # a context built without a type: load as written
        annotation = Any
    tp, optional = strip_optional(annotation)
    if tp is dict or tp is typing.Dict:  # noqa: UP006 - bare typing.Dict may appear
        return True, None, optional
    if typing.get_origin(tp) in _DICT_ORIGINS:
        args = typing.get_args(tp)
        inner = strip_optional(args[1])[0] if len(args) == 2 else Any
        return True, None if _is_any(inner) else inner, optional
    return False, None if _is_any(tp) else tp, optional


def _recorded_metadata(datasets: ParquetDatasetStore, key: str, version: int | None = None) -> dict[str, str] | None:
    """The manifest ``metadata`` of ``key`` (``None`` if absent or unreadable: the read reports that)."""
    try:
        return datasets.read_manifest(key, version=version).metadata
    except (NotFound, ManifestCorrupted):
        return None


def holds_no_data(metadata: dict[str, str] | None) -> bool:
    """Whether manifest ``metadata`` marks a dataset whose output was ``None``."""
    return (metadata or {}).get(NO_DATA_KEY) == "true"


def _expected_owner(context: InputContext, partition_key: str | None) -> dict[str, str]:
    """What the manifest of an upstream dataset should record (see :mod:`._ownership`)."""
    if context.has_asset_key:
        return _own.asset_owner(context.asset_key.to_user_string(), partition_key)
    upstream = context.upstream_output
    if upstream is None:
        return {}
    found = {STEP_KEY_KEY: _ctx.step_key_of(upstream), OUTPUT_NAME_KEY: _ctx.name_of(upstream)}
    return {k: v for k, v in found.items() if v is not None}


def _failed_target(exc: Exception, targets: Sequence[Target]) -> Target | None:
    """The target a read error is about: its ``dataset_key`` attribute, else the longest key whose ``repr``
    its message contains; ``None`` when neither tells."""
    key = getattr(exc, "dataset_key", None)
    for target in targets:
        if target[1] == key:
            return target
    message = str(exc)
    named = [t for t in targets if repr(t[1]) in message]
    return max(named, key=lambda t: len(t[1])) if named else None


class _Load:
    """One ``load_input`` call: the context, its options and its datasets."""

    def __init__(
        self, context: InputContext, datasets: ParquetDatasetStore, registry: HandlerRegistry, targets: list[Target]
    ) -> None:
        self.context = context
        self.datasets = datasets
        self.registry = registry
        self.targets = targets
        self.as_dict, self.element_type, self.optional = _requested_type(context)
        options = ReadOptions.from_metadata(context.definition_metadata, _ctx.label(context))
        self.options = options.with_run_as_of(run_as_of(_ctx.run_tags_of(context)))
        self.read_kwargs = self.options.read_kwargs()
        self.handler: TypeHandler | None = None

    def describe(self, partition_key: str | None) -> str:
        return _ctx.describe_input(self.context, partition_key)

    def lenient(self, partition_key: str | None) -> bool:
        """Whether an absent dataset is skipped rather than an error (decided once every target is probed).

        ``allow_missing_partitions`` skips absent partitions; an ``Optional`` input gets ``None`` when no
        requested partition holds data, so for it absence is an error only while another partition holds data.
        """
        return (self.options.allow_missing_partitions and partition_key is not None) or self.optional

    # ------------------------------------------------------------- handlers

    def handler_for_annotation(self, tp: Any) -> TypeHandler:
        handler = self.registry.for_type(tp) if isinstance(tp, type) else None
        if handler is None:
            raise UnsupportedTypeError(
                f"RemoteStoreIOManager cannot load {_ctx.label(self.context)} as {type_label(tp)}. "
                f"Annotate it with one of: {self.registry.describe_supported()} "
                "(or dict[str, <one of them>] to get one value per partition, or leave it unannotated "
                "to get the type that was written)."
            )
        return handler

    def handler_as_written(self, manifests: Sequence[DatasetManifest | None]) -> TypeHandler:
        """The handler of the Python type recorded in the first manifest that holds data."""
        type_name = _FALLBACK_TYPE_NAME
        for manifest in manifests:
            if manifest is not None and not holds_no_data(manifest.metadata):
                type_name = (manifest.metadata or {}).get(PYTHON_TYPE_KEY, _FALLBACK_TYPE_NAME)
                break
        handler = self.registry.for_name(type_name)
        if handler is None:
            reason = self.registry.unavailable_reason(type_name)
            raise UnsupportedTypeError(
                f"{_ctx.label(self.context)}: the dataset was written as {type_name}, which this process cannot "
                f"load{f' ({reason})' if reason else ''}. Annotate the input with one of: "
                f"{self.registry.describe_supported()}."
            )
        return handler

    def _manifest(self, key: str) -> DatasetManifest | None:
        try:
            return self.datasets.read_manifest(key)
        except NotFound:
            return None  # reported by the read itself (absent or incomplete)

    def pick_handler(self, keys: Sequence[str]) -> TypeHandler:
        if self.element_type is not None:
            return self.handler_for_annotation(self.element_type)
        for key in keys:
            manifest = self._manifest(key)
            if manifest is not None and not holds_no_data(manifest.metadata):
                return self.handler_as_written([manifest])
        return self.handler_as_written([])

    # --------------------------------------------------------------- errors

    def translated(self, exc: Exception, partition_key: str | None, key: str) -> Exception:
        """``exc`` (from reading ``key``) re-worded to name the partition, or ``exc`` itself."""
        what = self.describe(partition_key)
        if isinstance(exc, DatasetNotFound):
            return DatasetNotFound(
                f"cannot load {what}: dataset {key!r} is absent "
                f"(nothing stored at {self.datasets.store.uri(key)}); materialize it first"
                + ("" if partition_key is None else ", or set allow_missing_partitions on the input")
                + " (an input annotated Optional gets None instead)"
            )
        as_of = self.options.as_of
        when = f"as of {as_of.isoformat()}" if as_of is not None else f"at version {self.options.version}"
        if isinstance(exc, DatasetIncomplete):
            new: Exception = DatasetIncomplete(f"cannot load {what}: dataset {key!r} is incomplete: {exc}")
        elif isinstance(exc, VersionNotRetained):
            new = VersionNotRetained(
                f"cannot load {what} {when}: {exc}. "
                "Set retain_versions on RemoteStoreIOManager to keep more versions readable."
            )
        elif isinstance(exc, NotFound):  # a version newer than the latest, or as_of before the first version
            new = NotFound(f"cannot load {what} {when}: {exc}")
        else:
            return exc
        new.__cause__ = exc
        return new

    def no_data_error(self, partition_keys: Sequence[str | None]) -> NoDataStored:
        shown = [pk for pk in partition_keys if pk is not None]
        where = self.describe(None) + (
            f" partition(s) {', '.join(repr(p) for p in shown[:10])}" + (" ..." if len(shown) > 10 else "")
            if shown
            else ""
        )
        return NoDataStored(
            f"cannot load {_ctx.label(self.context)}: {where} holds no data (its output was None when it was "
            "last materialized). Annotate the input as Optional (e.g. pa.Table | None) to get None, or "
            "re-materialize the upstream with data."
        )

    # ---------------------------------------------------------------- reads

    def read_one(self, target: Target) -> tuple[bool, Any]:
        """``(found, value)`` of one dataset; ``value`` is :data:`_NO_DATA` for a dataset whose output was None."""
        partition_key, key = target
        try:
            kwargs = self.read_kwargs
            if self.options.as_of is None:
                recorded = _recorded_metadata(self.datasets, key, self.options.version)
            else:  # the version live at as_of, then read as that version
                manifest = self.datasets.read_manifest(key, as_of=self.options.as_of)
                recorded, kwargs = manifest.metadata, {**kwargs, "version": manifest.version}
            _own.check_owner(recorded, _expected_owner(self.context, partition_key), key=key, writing=False)
            if holds_no_data(recorded):
                return True, _NO_DATA
            assert self.handler is not None
            return True, self.handler.read(self.context, self.datasets, key, columns=self.options.columns, **kwargs)
        except DatasetNotFound:
            if self.lenient(partition_key):
                return False, None
            raise self.translated(DatasetNotFound(key), partition_key, key) from None
        except NotFound as exc:  # VersionNotRetained, a version newer than the latest, as_of before the first
            before_first = self.options.as_of is not None and not isinstance(exc, VersionNotRetained)
            if before_first and self.lenient(partition_key):
                return False, None  # the dataset held nothing then
            raise self.translated(exc, partition_key, key) from exc
        except DatasetIncomplete as exc:
            raise self.translated(exc, partition_key, key) from exc

    def probe(self, target: Target) -> tuple[bool, bool]:
        """``(exists, holds data)`` of ``target`` after checking its owner, from its manifest alone (one GET)."""
        partition_key, key = target
        try:
            recorded = self.datasets.read_manifest(key).metadata
        except ManifestCorrupted:
            return True, True  # the read reports it
        except NotFound:
            # No manifest: absent, or incomplete. Only here does the dataset layer look further.
            try:
                self.datasets.plan_read(key)
            except DatasetNotFound:
                if self.lenient(partition_key):
                    return False, False
                raise self.translated(DatasetNotFound(key), partition_key, key) from None
            except DatasetIncomplete as exc:
                raise self.translated(exc, partition_key, key) from exc
            recorded = _recorded_metadata(self.datasets, key)  # written meanwhile
        _own.check_owner(recorded, _expected_owner(self.context, partition_key), key=key, writing=False)
        return True, not holds_no_data(recorded)

    def _pool_map(self, fn: Callable[[Target], Any]) -> list[Any]:
        if len(self.targets) == 1:
            return [fn(self.targets[0])]
        workers = min(_PARTITION_READ_THREADS, len(self.targets))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pds-load") as pool:
            return list(pool.map(fn, self.targets))

    def _report_missing(self, missing: list[str | None]) -> None:
        if not missing:
            return
        if not self.options.allow_missing_partitions:
            # Lenient only because the input is Optional, and some partitions exist: an error as before.
            pk = missing[0]
            key = next(k for p, k in self.targets if p == pk)
            raise self.translated(DatasetNotFound(key), pk, key)
        self.context.log.warning(
            f"{self.describe(None)}: skipped {len(missing)} missing partition(s) "
            f"(allow_missing_partitions): {', '.join(str(m) for m in missing[:10])}"
            + (" ..." if len(missing) > 10 else "")
        )

    def run(self, empty: Callable[[_Load], Any]) -> Any:
        """The input's value; ``empty`` builds it when the partition mapping yields no partition.

        Raises:
            See ``RemoteStoreIOManager.load_input``.
        """
        context = self.context
        partitioned = context.has_asset_key and context.has_asset_partitions
        if self.as_dict and not partitioned:
            raise TypeError(
                f"{_ctx.label(context)} is annotated as a dict (one value per partition), but "
                f"{self.describe(None)} is not partitioned; annotate it with the value type instead"
            )
        if not self.targets:
            if self.as_dict:
                return {}
            # Unannotated: None, as Dagster's UPath IO managers give; a typed input gets an empty value.
            return None if self.optional or self.element_type is None else empty(self)
        if self.options.version is not None and len(self.targets) > 1:
            raise ValueError(
                f"{_ctx.label(context)}: metadata 'version' ({self.options.version}) names one version of one "
                f"dataset, but this input reads {len(self.targets)} partitions, each its own dataset with its own "
                "version numbers; load a single partition, or drop 'version'"
            )
        if self.options.as_of is not None and len(self.targets) > 1 and not self.as_dict:
            raise ValueError(
                f"{_ctx.label(context)}: {self.options.as_of_source} reads each partition at its own version, but this input "
                f"loads {len(self.targets)} partitions as one value; annotate it dict[str, ...] (one value per "
                "partition) or load a single partition"
            )
        if not self.as_dict and len(self.targets) > 1:
            # Every partition's committed manifest, fetched once and in parallel: the probes, the
            # handler choice and the read all start from these (no second fetch, no _SUCCESS check).
            keys = [k for _pk, k in self.targets]
            self.datasets = pin_manifests(self.datasets, read_committed_manifests(self.datasets, keys))
        self.handler = self.pick_handler([k for _pk, k in self.targets])
        if self.as_dict or len(self.targets) == 1:
            results = self._pool_map(self.read_one)
            found = [ok for ok, _obj in results]
            has_data = [ok and obj is not _NO_DATA for ok, obj in results]
        else:
            probed = self._pool_map(self.probe)
            found = [ok for ok, _data in probed]
            has_data = [data for _ok, data in probed]
            results = []
        if self.optional and not any(has_data):
            return None  # no requested partition holds data: absent, or its output was None
        if not any(found):
            if self.as_dict:
                return {}
            raise DatasetNotFound(
                f"cannot load {self.describe(None)}: none of the {len(self.targets)} requested partitions "
                f"exists (first: {self.targets[0][1]!r}); allow_missing_partitions skips missing partitions, but "
                "at least one is needed"
            )
        self._report_missing([pk for (pk, _key), ok in zip(self.targets, found, strict=True) if not ok])
        no_data = [pk for (pk, _k), ok, data in zip(self.targets, found, has_data, strict=True) if ok and not data]
        if no_data and not any(has_data):
            raise self.no_data_error(no_data)
        if no_data:
            context.log.info(f"{self.describe(None)}: {len(no_data)} partition(s) hold no data (output None)")
        if self.as_dict:
            pairs = zip(self.targets, results, has_data, strict=True)
            return {str(pk): obj for (pk, _key), (_ok, obj), data in pairs if data}
        if results:  # a single target, holding data
            return results[0][1]
        present = [t for t, data in zip(self.targets, has_data, strict=True) if data]
        return self.read_many(present)

    def _repin(self, target: Target, exc: DatasetIncomplete) -> DatasetIncomplete | None:
        """After reading ``target``'s pinned manifest failed with ``exc``: ``None`` once its latest committed
        manifest, another version with the same owner, is pinned instead (read again); else the error to report
        (``DatasetNotFound`` if it was deleted meanwhile, ``exc`` if its version did not change)."""
        partition_key, key = target
        datasets = self.datasets
        if not isinstance(datasets, PinnedDatasets) or key not in datasets.pins.found:
            return exc
        fresh = read_committed_manifests(datasets, [key], again=True)
        if key in fresh.failed:
            error = fresh.failed[key]
            return error if isinstance(error, DatasetIncomplete) else exc
        pinned, latest = datasets.pins.found[key], fresh.found[key]
        if (latest.version, latest.parts) == (pinned.version, pinned.parts) or holds_no_data(latest.metadata):
            return exc
        _own.check_owner(latest.metadata, _expected_owner(self.context, partition_key), key=key, writing=False)
        self.datasets = pin_manifests(datasets, datasets.pins.with_manifest(key, latest))
        return None

    def read_many(self, present: list[Target]) -> Any:
        """``handler.read_many`` over the partitions found present, with errors naming the partition.

        A partition deleted between the presence check and the read is skipped
        with ``allow_missing_partitions`` (the read starts again without it).
        """
        assert self.handler is not None
        stale = 0
        while True:
            try:
                keys = [key for _pk, key in present]
                return self.handler.read_many(
                    self.context, self.datasets, keys, columns=self.options.columns, filters=self.options.filters
                )
            except DatasetIncomplete as exc:  # DatasetNotFound included
                failed = _failed_target(exc, present)
                if failed is None:
                    raise
                if not isinstance(exc, DatasetNotFound) and stale < _REPIN_ATTEMPTS:
                    fresh = self._repin(failed, exc)
                    if fresh is None:
                        stale += 1
                        continue  # a commit replaced the version read: read the new one
                    exc = fresh
                if isinstance(exc, DatasetNotFound) and self.options.allow_missing_partitions and len(present) > 1:
                    self.context.log.warning(
                        f"{self.describe(None)}: skipped partition {failed[0]!r}, deleted while "
                        "loading (allow_missing_partitions)"
                    )
                    present = [t for t in present if t != failed]
                    continue
                raise self.translated(exc, failed[0], failed[1]) from exc
            except ValueError as exc:
                if "concatenat" not in str(exc):  # combine's errors say the partitions cannot be concatenated
                    raise
                raise ValueError(f"cannot concatenate the partitions of {self.describe(None)}: {exc}") from exc


def load_input(
    context: InputContext,
    datasets: ParquetDatasetStore,
    registry: HandlerRegistry,
    targets: list[Target],
    sibling_keys: Callable[[], list[str]],
) -> Any:
    """Load an input from ``targets``, the datasets of its upstream output (see ``RemoteStoreIOManager``).

    ``sibling_keys`` gives dataset keys of other partitions of the upstream asset, tried in order
    for its schema when the partition mapping yields no partition.

    Raises:
        See ``RemoteStoreIOManager.load_input``.
    """
    load = _Load(context, datasets, registry, targets)

    def empty(load: _Load) -> Any:
        manifests: list[DatasetManifest | None] = []
        schema = pa.schema([])
        for key in sibling_keys()[:_SCHEMA_PROBES]:
            manifest = load._manifest(key)
            if manifest is not None and not holds_no_data(manifest.metadata) and manifest.schema is not None:
                manifests.append(manifest)
                schema = manifest.schema
                break
        if load.element_type is not None:
            handler = load.handler_for_annotation(load.element_type)
        else:
            handler = load.handler_as_written(manifests)
        columns = load.options.columns
        if columns is not None:
            schema = pa.schema([f for f in schema if f.name in set(columns)], metadata=schema.metadata)
        return handler.empty(schema)

    return load.run(empty)
