"""Outputs that are not one value for one dataset: a ``None`` output, and a single-run backfill.

* :func:`write_none`: an output that is ``None`` writes no data and records
  that the partition holds none (see ``docs/dagster.md``, "None outputs").
* :func:`write_backfill`: an output over several partition keys, split by its
  ``partition_expr`` metadata (see :mod:`._backfill_split`); each key's dataset
  commits alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from dagster import MetadataValue, OutputContext

from ..dataset import DatasetManifest, ParquetDatasetStore
from ..errors import ManifestCorrupted, NotFound
from . import _backfill_split as _bf
from . import _context as _ctx
from . import _ownership as _own
from . import _presentation as _present
from ._asset_data_version import set_output_data_version
from ._handler_base import NO_DATA_KEY, TypeHandler
from ._output_metadata import manifest_metadata, output_metadata
from ._registry import HandlerRegistry
from ._wording import version_metadata
from ._write_modes import Written, write_output
from .options import WriteOptions


def recorded_metadata(datasets: ParquetDatasetStore, key: str) -> dict[str, str] | None:
    """The manifest ``metadata`` of ``key`` (``None`` if absent or unreadable: the write reports that)."""
    try:
        return datasets.read_manifest(key).metadata
    except (NotFound, ManifestCorrupted):
        return None


def write_none(context: OutputContext, datasets: ParquetDatasetStore, key: str, options: WriteOptions) -> None:
    """A ``None`` output: no data is written, and the partition is recorded as holding none.

    With ``write_mode`` overwrite (the default) over a dataset that holds an
    earlier version, a version with no rows and no columns is committed whose
    manifest metadata says so (:data:`NO_DATA_KEY`): an input then gets
    ``None`` (``Optional``) or a :class:`NoDataStored` error, never the earlier
    rows. Over nothing stored, nothing is written (an absent dataset already
    loads as ``None`` into an ``Optional`` input). An append or merge of
    ``None`` adds nothing and leaves the dataset as it was.

    Raises:
        DatasetKeyCollision: the key holds another asset or partition; nothing is written.
        RemoteStoreError: the dataset layer failed.
    """
    out: dict[str, Any] = {
        "dataset_key": MetadataValue.text(key),
        "write_mode": MetadataValue.text(options.write_mode),
        "written": MetadataValue.bool(False),
    }
    if options.write_mode != "overwrite":
        out["note"] = MetadataValue.text(
            f"the output was None, so nothing was {'appended' if options.write_mode == 'append' else 'merged'}; "
            "the dataset is left as it was"
        )
        context.add_output_metadata(out)
        return
    out["no_data"] = MetadataValue.bool(True)
    try:
        recorded: dict[str, str] | None = datasets.read_manifest(key).metadata
        stored = True
    except ManifestCorrupted:
        recorded, stored = None, True  # replaced like any damaged dataset an overwrite replaces
    except NotFound:  # nothing stored, or no manifest yet (an incomplete write serves no rows)
        recorded, stored = None, False
    if not stored:
        out["note"] = MetadataValue.text(
            "the output was None, so no dataset was written; inputs annotated Optional load None"
        )
        context.add_output_metadata(out)
        return
    metadata = {**manifest_metadata(context, "NoneType"), NO_DATA_KEY: "true"}
    _own.check_owner(recorded, _own.owner(metadata), key=key, writing=True)
    with _own.collisions(key):
        manifest = datasets.write_dataset(
            pa.table({}),
            key,
            overwrite=True,
            run_id=_ctx.run_id_of(context),
            metadata=metadata,
            expect_owner=_own.commit_owner(metadata),
        )
    partitioned = context.has_asset_key and context.has_asset_partitions
    out["dagster/partition_row_count" if partitioned else "dagster/row_count"] = MetadataValue.int(0)
    out["manifest_version"] = version_metadata(manifest.version)
    out["note"] = MetadataValue.text(
        f"the output was None: version {manifest.version} records that the dataset holds no data, so "
        "inputs load None (Optional) or fail, never the earlier version's rows"
    )
    context.add_output_metadata(out)


def write_backfill(
    context: OutputContext,
    obj: Any,
    options: WriteOptions,
    *,
    datasets: ParquetDatasetStore,
    handler_for: Callable[[Any, str], TypeHandler],
    registry: HandlerRegistry,
    key_for: Callable[[Sequence[str], Any, str], str],
    preview_rows: int,
) -> None:
    """Split an output over the run's partition keys by ``partition_expr``; each key's dataset commits alone.

    The same dataset keys, manifest metadata and owner checks as one-partition
    runs; every check runs before anything is written. Each partition's
    materialization gets its own metadata (row count, version, column schema
    with the declared descriptions, ``preview``), as a one-partition output does.
    """
    what = _ctx.describe_output(context)
    partitions_def = _ctx.partitions_def_of(context)
    partition_keys = [str(k) for k in context.asset_partition_keys]
    expr = _bf.parse_partition_expr(context.definition_metadata, partitions_def, what)
    if expr is None:
        raise _bf.missing_partition_expr(what, len(partition_keys), partitions_def)
    if obj is None:
        context.add_output_metadata(
            {
                "written": MetadataValue.bool(False),
                "note": MetadataValue.text("the output was None: nothing written"),
            }
        )
        return
    handler = handler_for(obj, what)
    path = list(context.asset_key.path)
    targets = []
    for pk in partition_keys:
        key = key_for(path, partitions_def, pk)
        metadata = manifest_metadata(context, handler.type_name, pk)
        _own.check_owner(recorded_metadata(datasets, key), _own.owner(metadata), key=key, writing=True)
        targets.append(_bf.PartitionTarget(pk, key, metadata))
    arrow = registry.for_type(pa.Table)
    assert arrow is not None
    run_id = _ctx.run_id_of(context)
    descriptions = _present.declared_descriptions(context.definition_metadata)
    shown = {t.dataset_key: _present.Presentation(descriptions, preview_rows) for t in targets}
    backfill = _bf.Backfill(
        what=what,
        targets=tuple(targets),
        locator=_bf.PartitionLocator.build(expr, partitions_def, partition_keys),
        options=options,
        run_id=run_id,
        write_table=lambda t, table: write_output(
            context,
            datasets,
            arrow,
            t.dataset_key,
            table,
            options,
            run_id=run_id,
            metadata=t.metadata,
            presentation=shown[t.dataset_key],
        ),
    )
    results = handler.write_partitions(context, datasets, obj, backfill)
    written = [Written.replaced(r) if isinstance(r, DatasetManifest) else r for r in results]
    _preview_self_written(datasets, obj, targets, shown, options)

    def described(target: _bf.PartitionTarget, one: Written) -> dict[str, Any]:
        uri = datasets.store.uri(target.dataset_key)
        key = target.dataset_key
        preview = shown[key].preview
        name = handler.type_name
        return output_metadata(context, key=key, uri=uri, written=one, type_name=name, options=options, preview=preview)

    if len(targets) == 1:
        context.add_output_metadata(described(targets[0], written[0]))
        set_output_data_version(context, written[0].manifest)
        return
    # Several partitions: Dagster tags them all with the step's one data version, which no single
    # partition's content gives; each partition's own is in its "data_version" metadata.
    step = _ctx.step_context_of(context)
    for target, one in zip(targets, written, strict=True):
        if step is not None:
            step.add_asset_metadata(
                described(target, one),
                asset_key=context.asset_key,
                partition_key=target.partition_key,
            )
    context.add_output_metadata(
        {
            "partitions_written": MetadataValue.int(len(targets)),
            "rows_written": MetadataValue.int(sum(w.rows for w in written)),
            "partition_expr": MetadataValue.json(expr),
            "write_mode": MetadataValue.text(options.write_mode),
            "python_type": MetadataValue.text(handler.type_name),
        }
    )


def _preview_self_written(
    datasets: ParquetDatasetStore,
    obj: Any,
    targets: Sequence[_bf.PartitionTarget],
    shown: dict[str, _present.Presentation],
    options: WriteOptions,
) -> None:
    """Previews of partitions a handler wrote without Arrow in this process (Spark).

    One partition: every row of ``obj`` is in it (a row outside the run's
    partitions fails the write), so its preview is ``obj.limit(n)``, as for a
    one-partition output. Several partitions of an overwrite: the first rows of
    each partition's new version, read back (one small scan each). Several
    partitions of an append or merge get none (the written rows of one
    partition are not told apart from the rows already there).

    Raises:
        RemoteStoreError: reading a committed partition back failed.
    """
    if all(p.preview is not None or p.preview_rows <= 0 for p in shown.values()):
        return
    if len(targets) == 1:
        shown[targets[0].dataset_key].preview_by_limit(obj)
        return
    if options.write_mode != "overwrite":
        return
    for target in targets:
        presentation = shown[target.dataset_key]
        if presentation.preview is None and presentation.preview_rows > 0:
            presentation.preview = datasets.scan_dataset(target.dataset_key).head(presentation.preview_rows)
