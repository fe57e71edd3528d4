"""Reading a dataset as a Spark DataFrame: exactly the manifest's parts, verified.

The driver reads the committed manifest, checks that every part exists with
its recorded size (re-reading the manifest if an overwrite replaced it
meanwhile, like the dataset layer does), and then builds the DataFrame:

``native`` (a :class:`LocalStore`; an ``S3Store`` when Spark has ``s3a://``)
    The driver also checks every part's footer (row count, schema) and hands
    the listed files, and only those, to ``spark.read.parquet`` with the
    stored schema.

``arrow`` (any shared store)
    The part list is parallelized, one Spark partition per part; each task
    reads its part through the pickled store, checks its footer against the
    manifest and streams it out row group by row group (``mapInArrow``),
    adding the columns a file does not hold (partition values, columns added
    after it was written).

The DataFrame is lazy and bound to the version read at call time: if a later
write deletes those parts before an action runs, the action fails rather than
read another version (later versions never reuse the name of a file a
manifest referenced, short of deleting and re-creating the dataset).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from ..dataset import ParquetDatasetStore, PinnedDatasets, pin_manifests, read_committed_manifests
from ..dataset.engine import DNF, PartCheck, PartsVanished, add_partition_columns, check_columns
from ..dataset.manifest import DatasetManifest, FileEntry
from ..errors import CapabilityNotSupported, DatasetIncomplete, NotFound, RemoteStoreError
from ..storage.base import Store, validate_key
from ..storage.local import LocalStore
from ..storage.s3 import S3Store
from ._spark_filters import spark_column, spark_filter
from ._spark_schema import arrow_schema_to_spark, natively_readable, spark_schema_to_arrow
from ._spark_write import check_shared_store, s3a_available, spark_read_uri

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["ReadMode", "read_spark_dataset", "read_spark_datasets", "spark_filter"]

ReadMode = Literal["auto", "arrow", "native"]
_MODES = ("auto", "arrow", "native")
_READ_ATTEMPTS = 10
_FOOTER_THREADS = 16


def _check_columns(columns: Sequence[str] | None, schema: pa.Schema, dataset_key: str) -> list[str] | None:
    """Validate a projection against ``schema`` (the dataset layer's rules, plus Spark's).

    Raises:
        TypeError: ``columns`` is a string or holds non-strings.
        ValueError: empty, repeated, or unknown columns; the message names them.
    """
    cols = check_columns(columns, schema, dataset_key)
    if cols is None:
        return None
    if not cols:
        raise ValueError("columns must name at least one column (a Spark DataFrame needs one)")
    if len(set(cols)) != len(cols):
        raise ValueError(f"columns lists a column more than once: {cols}")
    return cols


def _verify_present(store: Store, check: PartCheck, entries: Sequence[FileEntry]) -> None:
    """Check that every part exists with its recorded size, before anything is read.

    Raises:
        PartsVanished: some parts are missing (all of them named).
        DatasetIncomplete: a part's size differs from the manifest (truncated or replaced).
    """

    def problems(entry: FileEntry) -> list[Any]:
        return check.problems(store, entry, footer=False)

    if len(entries) <= 1:
        found = [problems(e) for e in entries]
    else:
        with ThreadPoolExecutor(max_workers=min(_FOOTER_THREADS, len(entries))) as pool:
            found = list(pool.map(problems, entries))
    check.raise_for([p for each in found for p in each])


def _missing(key: str, exc: PartsVanished) -> DatasetIncomplete:
    return DatasetIncomplete(
        f"dataset {key!r}: parts listed in the manifest are missing (deleted by a later overwrite, or damaged): {exc}"
    )


@dataclass(frozen=True)
class _Part:
    """One selected file of a read, and the check its file must pass.

    Attributes:
        key: the dataset it belongs to.
        entry: its manifest entry (path, size, rows, partition values, missing columns).
        part_check: the dataset version's part check (shared by the parts of one dataset).
    """

    key: str
    entry: FileEntry
    part_check: PartCheck

    def check(self, store: Store) -> None:
        """Check that the file exists with its size and its footer agrees with the manifest (on the driver).

        Raises:
            DatasetIncomplete: the file is missing, unreadable, or disagrees with the manifest.
        """
        try:
            self.part_check.check(store, self.entry)
        except PartsVanished as exc:
            raise _about(_missing(self.key, exc), self.key) from None
        except DatasetIncomplete as exc:
            _about(exc, self.key)
            raise

    def open(self, store: Store) -> tuple[pa.NativeFile, pq.ParquetFile]:
        """Open the file and check its footer (in a task); the caller closes the file.

        Raises:
            DatasetIncomplete: the file is missing, unreadable, or disagrees with the manifest.
        """
        try:
            return self.part_check.open(store, self.entry, pre_buffer=False)
        except PartsVanished as exc:
            raise _missing(self.key, exc) from None


@dataclass(frozen=True)
class _Source:
    """One dataset's contribution to a read: the version planned, its stored schema, its selected files."""

    key: str
    manifest: DatasetManifest
    schema: pa.Schema
    selected: tuple[FileEntry, ...]
    dnf: DNF | None

    def parts(self) -> list[_Part]:
        check = PartCheck.of(self.key, self.manifest)
        return [_Part(self.key, entry, check) for entry in self.selected]


@dataclass(frozen=True)
class _TaskReader:
    """The function ``mapInArrow`` runs on the executors (pickled with the store and the part list).

    Its input is the indices of the parts to read; for each it opens the part,
    checks the footer against the manifest, and streams the requested columns
    row group by row group, adding the columns the file does not hold
    (partition values, columns added after it was written) as constants.
    """

    store: Store
    schema: pa.Schema  # the whole stored schema (the union of the datasets' schemas)
    parts: tuple[_Part, ...]
    target: pa.Schema  # the output: requested columns, as Spark takes them

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from self._read(self.parts[index])

    def _read(self, part: _Part) -> Iterator[pa.RecordBatch]:
        entry = part.entry
        names = self.target.names
        source, parquet = part.open(self.store)
        with source:
            in_file = set(parquet.schema_arrow.names)
            stored = [c for c in names if c in in_file]
            constant = [c for c in names if c not in in_file]
            if stored:
                pieces: Iterator[pa.Table] = (
                    pa.Table.from_batches([b]) for b in parquet.iter_batches(columns=stored, use_threads=False)
                )
            else:  # only constant columns: as many rows as the file holds
                rows = parquet.metadata.num_rows
                pieces = (
                    pa.table({"_": pa.nulls(min(65536, rows - i))}).drop_columns("_") for i in range(0, rows, 65536)
                )
            for table in pieces:
                if constant:
                    table = add_partition_columns(table, entry.partition_values or {}, self.schema, constant)
                table = table.select(names)
                # Unsafe only where Spark is coarser: nanoseconds become microseconds.
                if not table.schema.equals(self.target):
                    table = table.cast(self.target, safe=False)
                yield from table.to_batches()


def _about(exc: BaseException, key: str) -> BaseException:
    """Record on ``exc`` the dataset it is about (its ``key``), as the IO manager's ``read_many`` contract asks."""
    return exc.about(key) if isinstance(exc, RemoteStoreError) else exc


def _latest_manifest(datasets: ParquetDatasetStore, key: str) -> DatasetManifest | None:
    try:
        return datasets.read_manifest(key)
    except NotFound:
        return None


def _plan_source(
    datasets: ParquetDatasetStore, key: str, filters: Any, version: int | None, first: ParquetDatasetStore | None = None
) -> _Source:
    """:func:`_plan_one`, with ``key`` recorded on a ``DatasetIncomplete`` (``DatasetNotFound`` included)."""
    try:
        return _plan_one(datasets, key, filters, version, first)
    except DatasetIncomplete as exc:
        _about(exc, key)
        raise


def _plan_one(
    datasets: ParquetDatasetStore, key: str, filters: Any, version: int | None, first: ParquetDatasetStore | None
) -> _Source:
    """Plan ``key``'s read from its manifest (``plan_read``), once every selected part exists with its size.

    Only the selected parts are checked: a part the filters prune is never touched.
    If parts are missing because a commit replaced the version meanwhile, the
    read is planned again on the new version. ``first`` (a view pinned on
    manifests already read) plans the first attempt; ``datasets`` the others.

    Raises:
        DatasetNotFound / DatasetIncomplete / ManifestCorrupted: as ``read_dataset``.
        NotFound: ``version`` is not retained.
        ValueError / TypeError: filters ``plan_read`` rejects.
    """
    read_plan = (first or datasets).plan_read(key, filters=filters, version=version)
    for attempt in range(_READ_ATTEMPTS):
        if attempt:
            time.sleep(random.uniform(0, 0.01 * attempt))
        manifest = read_plan.manifest
        assert manifest is not None  # plan_read always attaches the manifest it planned against
        try:
            _verify_present(datasets.store, PartCheck.of(key, manifest), read_plan.selected)
        except PartsVanished as exc:
            latest = None if version is not None else _latest_manifest(datasets, key)
            if latest is None or (latest.version, latest.parts) == (manifest.version, manifest.parts):
                raise DatasetIncomplete(
                    f"dataset {key!r}: parts listed in the manifest are missing or unreadable: {exc}"
                ) from None
            read_plan = datasets.plan_read(key, filters=filters)
            continue
        schema = _stored_schema(datasets.store, key, manifest)
        return _Source(key, manifest, schema, tuple(read_plan.selected), read_plan.filters)
    raise DatasetIncomplete(f"dataset {key!r} kept changing while it was read; try again")


def _stored_schema(store: Store, key: str, manifest: DatasetManifest) -> pa.Schema:
    schema = manifest.schema
    if schema is not None:
        return schema
    entries = manifest.file_entries()
    if not entries:
        return pa.schema([])
    # A Spec-only manifest: the first footer is the schema.
    source, footer = _Part(key, entries[0], PartCheck.of(key, manifest)).open(store)
    source.close()
    return footer.schema_arrow


def _union_schema(sources: Sequence[_Source]) -> pa.Schema:
    """The columns of all ``sources`` (first seen first); a column some dataset lacks becomes nullable.

    Raises:
        ValueError: a column has different types in two datasets (both named).
    """
    fields: dict[str, pa.Field] = {}
    owner: dict[str, str] = {}
    for source in sources:
        for field in source.schema:
            have = fields.get(field.name)
            if have is None:
                fields[field.name], owner[field.name] = field, source.key
            elif not have.type.equals(field.type):
                raise ValueError(
                    f"column {field.name!r} is {have.type} in dataset {owner[field.name]!r} but {field.type} in "
                    f"dataset {source.key!r}; datasets read as one DataFrame may differ only by added columns"
                )
    everywhere = set.intersection(*(set(s.schema.names) for s in sources)) if sources else set()
    return pa.schema(
        [f if f.name in everywhere else f.with_nullable(True) for f in fields.values()],
        metadata=sources[0].schema.metadata if sources else None,
    )


def _native_possible(spark: SparkSession, store: Store) -> str | None:
    if isinstance(store, LocalStore):
        return None
    if isinstance(store, S3Store):
        return None if s3a_available(spark) else "Spark has no s3a:// filesystem (the hadoop-aws jar)"
    return f"Spark cannot read {store!r} itself"


def _check_common(spark: Any, datasets: Any, mode: Any) -> None:
    """The argument checks both read functions share.

    Raises:
        TypeError: ``spark`` is not a SparkSession or ``datasets`` not a ParquetDatasetStore.
        ValueError: an unknown ``mode``.
        CapabilityNotSupported: a ``MemoryStore``.
    """
    from pyspark.sql import SparkSession as _SparkSession

    if not isinstance(spark, _SparkSession):
        raise TypeError(f"spark must be a SparkSession, got {type(spark).__module__}.{type(spark).__name__}")
    if not isinstance(datasets, ParquetDatasetStore):
        raise TypeError(f"datasets must be a ParquetDatasetStore, got {type(datasets).__name__}")
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, _MODES))}, got {mode!r}")
    check_shared_store(datasets.store, "read a dataset into Spark")


def read_spark_dataset(
    spark: SparkSession,
    datasets: ParquetDatasetStore,
    key: str,
    *,
    columns: Sequence[str] | None = None,
    filters: Any = None,
    mode: ReadMode = "auto",
    version: int | None = None,
    as_of: datetime | None = None,
) -> DataFrame:
    """Read the committed dataset ``key`` as a Spark DataFrame: only the manifest's parts, verified.

    The files to read are planned from the manifest alone
    (:meth:`ParquetDatasetStore.plan_read`): with ``filters``, files whose
    partition values or statistics rule them out are never opened, and Spark
    is given exactly the selected files. Every selected part is checked to
    exist with its recorded size before the DataFrame is built; row counts and
    schemas are checked against the manifest from each part's footer (on the
    driver for ``native`` reads, in the tasks for ``arrow`` reads). The
    DataFrame has the stored schema
    (:func:`~dagster_parquet_dataset.spark.arrow_schema_to_spark`), so a
    dataset written by pandas or pyarrow reads too, and so does one
    partitioned by columns (the partition columns come back with their stored
    types) or with columns added after some of its files (null there).

    Args:
        spark: the session to build the DataFrame on.
        datasets: the dataset store (its store must be reachable from the executors).
        key: the dataset key.
        columns: read only these columns, in this order.
        filters: DNF filters as ``read_dataset`` takes them (a filter column
            need not be among ``columns``). Files that partition values or
            statistics rule out are not read, and the rows are filtered with
            :func:`spark_filter`, so the DataFrame holds exactly the rows
            ``read_dataset`` returns for the same filters.
        mode: ``"native"`` reads with ``spark.read.parquet`` over the listed
            files (a ``LocalStore``, or an ``S3Store`` when Spark has
            ``s3a://``); ``"arrow"`` reads on the executors through the store;
            ``"auto"`` picks native on a ``LocalStore`` when Spark's Parquet
            reader understands every column (not nanosecond timestamps,
            durations, unsigned 64-bit integers, ...) and no selected file has
            partition values to put back, else arrow.
        version: a retained past version instead of the latest.
        as_of: an aware ``datetime``: read the version that was live then (the newest committed at or
            before it, from the manifests' ``created_at_utc``; see ``ParquetDatasetStore.version_at``).

    Returns:
        A lazy DataFrame over the version committed at call time (or ``version``, or ``as_of``'s).

    Raises:
        DatasetNotFound: nothing is stored under ``key``.
        NotFound: ``version`` is not retained (``VersionNotRetained``, also for ``as_of``), or ``as_of`` is
            before the dataset's first version.
        DatasetIncomplete: ``_SUCCESS`` or a selected part is missing, or a part is
            truncated or disagrees with the manifest (raised here for what the
            driver checks; a task that finds a damaged part fails the Spark job
            with a ``PythonException`` naming the ``DatasetIncomplete``).
        ManifestCorrupted: the manifest cannot be parsed.
        ValueError: ``version`` and ``as_of`` both given, a naive ``as_of`` (``TypeError``: not a ``datetime``),
            an unknown column (named), an empty or repeating ``columns``, a bad ``mode``,
            or filters ``read_dataset`` rejects (malformed, an unknown column, a literal the column
            cannot be compared with; ``TypeError`` for a literal of the wrong kind).
        TypeError: a selected column has no Spark type (named; leave it out with ``columns``).
        CapabilityNotSupported: a ``MemoryStore``, or ``mode="native"`` where Spark cannot read the
            store, a column's type, or files whose partition values must be put back (the message says which).
    """
    _check_common(spark, datasets, mode)
    key = validate_key(key, what="dataset key")
    if as_of is not None:
        if version is not None:
            raise ValueError(f"read_spark_dataset takes version ({version}) or as_of ({as_of!r}), not both")
        version = datasets.version_at(key, as_of)
    source = _plan_source(datasets, key, filters, version)
    return _read_sources(spark, datasets.store, [source], columns, filters is not None, mode=mode, label=key)


def read_spark_datasets(
    spark: SparkSession,
    datasets: ParquetDatasetStore,
    keys: Sequence[str],
    *,
    columns: Sequence[str] | None = None,
    filters: Any = None,
    mode: ReadMode = "auto",
) -> DataFrame:
    """Read several committed datasets (e.g. a partitioned asset's partitions) as ONE Spark DataFrame.

    Each dataset's files are planned from its manifest as
    :func:`read_spark_dataset` plans them (``filters`` prune files by partition
    values and statistics; every selected part is verified), and the DataFrame
    is one scan over the union of all selected files: a single
    ``spark.read.parquet(*files)`` (``native``) or a single executor-side read
    (``arrow``), not a union of per-dataset DataFrames, so the plan stays one
    scan for hundreds or thousands of datasets.

    The datasets may differ by added columns: the DataFrame has every column
    of every dataset (in the order first seen, ``keys`` order), null in the
    rows of datasets that lack it. A column must have the same type wherever
    it appears. The rows are those of ``read_spark_dataset`` for each key with
    the same ``columns`` and ``filters``, together (no order is promised).

    Args:
        spark: the session to build the DataFrame on.
        datasets: the dataset store holding all the datasets.
        keys: the dataset keys (at least one, no repeats).
        columns: read only these columns (each in at least one dataset), in this order.
        filters: DNF filters as ``read_dataset`` takes them; every filter
            column must exist in every dataset.
        mode: as for :func:`read_spark_dataset`, for the whole read.

    Returns:
        A lazy DataFrame over the versions committed at call time.

    Raises:
        TypeError: ``keys`` is a string or holds non-strings; otherwise as :func:`read_spark_dataset`.
        ValueError: ``keys`` is empty or repeats a key; a column has different types in two
            datasets (both named); a column no dataset has; or as :func:`read_spark_dataset`.
        DatasetNotFound / DatasetIncomplete / ManifestCorrupted / CapabilityNotSupported:
            as :func:`read_spark_dataset`, for the first dataset (in ``keys`` order) that fails.
    """
    _check_common(spark, datasets, mode)
    if isinstance(keys, (str, bytes)):
        raise TypeError(f"keys must be a list of dataset keys, not a single string {keys!r}")
    key_list = [validate_key(k, what="dataset key") for k in keys]
    if not key_list:
        raise ValueError("keys must name at least one dataset")
    repeated = sorted({k for k in key_list if key_list.count(k) > 1})
    if repeated:
        raise ValueError(f"keys repeats dataset(s) {repeated}: each dataset's rows would be read more than once")
    if len(key_list) == 1:
        sources = [_plan_source(datasets, key_list[0], filters, None)]
    else:
        # Every manifest fetched at once (one GET each), then planned without fetching it again.
        pinned = pin_manifests(datasets, read_committed_manifests(datasets, key_list))
        plain = datasets.unpinned if isinstance(datasets, PinnedDatasets) else datasets  # re-plans read afresh
        with ThreadPoolExecutor(max_workers=min(_FOOTER_THREADS, len(key_list))) as pool:
            sources = list(pool.map(lambda k: _plan_source(plain, k, filters, None, pinned), key_list))
    label = key_list[0] if len(key_list) == 1 else f"{len(key_list)} datasets ({key_list[0]!r}, ...)"
    return _read_sources(spark, datasets.store, sources, columns, filters is not None, mode=mode, label=label)


def _read_sources(
    spark: SparkSession,
    store: Store,
    sources: Sequence[_Source],
    columns: Sequence[str] | None,
    filtered: bool,
    *,
    mode: ReadMode,
    label: str,
) -> DataFrame:
    """One DataFrame over the selected files of all ``sources``, filtered and projected."""
    schema = _union_schema(sources)
    projection = _check_columns(columns, schema, label)
    dnf: DNF | None = None
    if filtered:
        for source in sources:
            if source.manifest.schema is None:
                raise ValueError(
                    f"dataset {source.key!r} has a Spec 042-only manifest without a schema; it cannot be filtered"
                )
        dnf = sources[0].dnf  # every source normalized the filters against the same column types
    if dnf and projection is not None:
        projection = projection + sorted({p.column for c in dnf for p in c} - set(projection))
    parts = [part for source in sources for part in source.parts()]
    df = _read_parts(spark, store, schema, projection, parts, mode=mode, label=label)
    if dnf:
        df = df.where(spark_filter(dnf))
        if columns is not None:
            df = df.select(*[spark_column(c) for c in columns])
    return df


def _read_parts(
    spark: SparkSession,
    store: Store,
    schema: pa.Schema,
    projection: list[str] | None,
    parts: Sequence[_Part],
    *,
    mode: ReadMode,
    label: str,
) -> DataFrame:
    """The DataFrame over ``parts`` (one scan), with the ``projection`` of ``schema``."""
    selected = pa.schema([schema.field(c) for c in projection]) if projection is not None else schema
    spark_schema = arrow_schema_to_spark(selected)

    problem = _native_possible(spark, store)
    if problem is None and not natively_readable(selected):
        problem = "Spark's Parquet reader does not read every selected column's type as stored"
    if problem is None and any(p.entry.partition_values for p in parts):
        problem = "the files of a partition_by dataset do not hold the partition columns"
    if mode == "native" and problem is not None:
        raise CapabilityNotSupported(
            f"mode='native' is not possible for dataset {label!r}: {problem}; use mode='arrow'"
        )
    native = problem is None and (mode == "native" or (mode == "auto" and isinstance(store, LocalStore)))

    if not parts:
        return spark.createDataFrame([], spark_schema)
    if native:
        # Spark fills a column a file lacks (added to the dataset after the file was
        # written, or absent from another dataset) with nulls, as read_dataset does.
        with ThreadPoolExecutor(max_workers=min(_FOOTER_THREADS, len(parts))) as pool:
            list(pool.map(lambda part: part.check(store), parts))
        uris = [spark_read_uri(store, f"{p.key}/{p.entry.path}") for p in parts]
        return (
            spark.read.schema(spark_schema)
            .option("ignoreMissingFiles", "false")
            .option("ignoreCorruptFiles", "false")
            .parquet(*uris)  # type: ignore[arg-type]
        )

    reader = _TaskReader(store=store, schema=schema, parts=tuple(parts), target=spark_schema_to_arrow(spark_schema))
    # One Spark partition per part; each task gets the index of its part.
    return spark.range(0, len(parts), 1, len(parts)).mapInArrow(reader, spark_schema)
