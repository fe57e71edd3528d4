"""Write and read options that assets, ops and inputs set through Dagster definition metadata.

Output side (``@asset(metadata=...)``, ``AssetOut(metadata=...)``, ``Out(metadata=...)``):

``write_mode``
    ``"overwrite"`` (default): the output replaces the dataset with a new version.
    ``"append"``: the output's rows are added as a new version (the dataset is created if absent).
    ``"merge"``: the output is merged into the dataset by ``key_columns``.
``key_columns``
    Columns that identify a row; required for ``"merge"`` and only allowed with it.
``merge_strategy``
    ``"upsert"`` (default; replace matching rows whole, insert the rest), ``"insert"``
    (only rows whose key is new) or ``"update"`` (only rows whose key exists); ``"merge"`` only.
``partition_by``
    Columns whose values split the dataset into ``col=value/`` folders inside its own folder.
``allow_new_columns``
    ``True`` lets an append add nullable columns the dataset does not have yet; ``"append"`` only.

Input side (``AssetIn(metadata=...)``, ``In(metadata=...)``):

``columns``
    Load only these columns.
``filters``
    DNF filters: a list of ``(column, op, value)`` tuples (AND), or a list of such lists (OR of ANDs).
``version``
    Load this past version of the upstream dataset (while it is retained).
``as_of``
    Load the version of the upstream dataset that was live at this instant (the newest committed at or
    before it): ``MetadataValue.timestamp(...)``, a float POSIX timestamp, or an ISO-8601 string with a
    time zone (``"2026-03-01T12:00:00+00:00"``). Not with ``version``. The run tag
    ``dagster_parquet_dataset/as_of`` (:data:`AS_OF_TAG`) sets it for every input of the run
    that sets neither ``version`` nor ``as_of``.
``allow_missing_partitions``
    Skip upstream partitions that were never written instead of failing.

Everything is validated before any I/O; a bad value raises ``ValueError`` (or
``TypeError`` for a wrong type) whose message names the asset or input, the
metadata key and what is allowed. A key that is one of these options misspelt
(``write_mod``, ``filter``), another IO manager's name for one
(``mode``, ``schema_mode``, ``partition_filters``, ``root_uri``, ...; see
:data:`PEER_OUTPUT_KEYS` and :data:`PEER_INPUT_KEYS`) or an option of the other
side (``filters`` on an output) is a ``ValueError`` naming the option meant
(:func:`check_option_keys`); other keys (``owner``, ``team``, ...) are the
user's own and pass. This module is pure: no Dagster contexts, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from difflib import get_close_matches
from typing import Any

from dagster import MetadataValue

#: ``write_mode`` values, the first being the default.
WRITE_MODES: tuple[str, ...] = ("overwrite", "append", "merge")
#: ``merge_strategy`` values, the first being the default.
MERGE_STRATEGIES: tuple[str, ...] = ("upsert", "insert", "update")

WRITE_MODE_KEY = "write_mode"
KEY_COLUMNS_KEY = "key_columns"
MERGE_STRATEGY_KEY = "merge_strategy"
PARTITION_BY_KEY = "partition_by"
ALLOW_NEW_COLUMNS_KEY = "allow_new_columns"

COLUMNS_KEY = "columns"
FILTERS_KEY = "filters"
VERSION_KEY = "version"
AS_OF_KEY = "as_of"
ALLOW_MISSING_PARTITIONS_KEY = "allow_missing_partitions"

#: Run tag: load every input of the run that sets neither ``version`` nor ``as_of`` as of this instant
#: (ISO-8601 with a time zone).
AS_OF_TAG = "dagster_parquet_dataset/as_of"


#: Output metadata keys read by the IO manager: the write options, ``partition_expr`` (single-run backfills)
#: and the Spark handler's ``spark_repartition``.
OUTPUT_KEYS: tuple[str, ...] = (
    WRITE_MODE_KEY,
    KEY_COLUMNS_KEY,
    MERGE_STRATEGY_KEY,
    PARTITION_BY_KEY,
    ALLOW_NEW_COLUMNS_KEY,
    "partition_expr",
    "spark_repartition",
)
#: Input metadata keys read by the IO manager: the read options and the Spark handler's ``spark_config``.
INPUT_KEYS: tuple[str, ...] = (
    COLUMNS_KEY,
    FILTERS_KEY,
    VERSION_KEY,
    AS_OF_KEY,
    ALLOW_MISSING_PARTITIONS_KEY,
    "spark_config",
)

_STORE_CONFIG = "where the data lives is IO manager configuration: RemoteStoreIOManager(base_dir=...) or store=..."
_IO_CONFIG = "this is IO manager configuration, not asset metadata: RemoteStoreIOManager({key}=...)"

#: Output metadata keys of dagster-deltalake, dagster-polars and deltalake's ``write_deltalake``, with what to
#: write here instead. Each is refused: the IO manager would otherwise ignore it.
PEER_OUTPUT_KEYS: dict[str, str] = {
    "mode": "use write_mode ('overwrite', 'append' or 'merge')",
    "schema_mode": "use allow_new_columns=True (what schema_mode='merge' does; an overwrite replaces the schema)",
    "overwrite_schema": "drop it: an overwrite replaces the schema; allow_new_columns=True lets an append add columns",
    "merge_predicate": "use key_columns (the columns that identify a row) with write_mode='merge'",
    "predicate": "use key_columns with write_mode='merge' (a merge is by key columns, not by a predicate)",
    "merge_config": "use key_columns and merge_strategy ('upsert', 'insert' or 'update') with write_mode='merge'",
    "merge_type": "use merge_strategy ('upsert', 'insert' or 'update') with write_mode='merge'",
    "delta_merge_options": "use key_columns and merge_strategy with write_mode='merge'",
    "delta_write_options": "use write_mode and partition_by, each its own metadata key",
    "partition_cols": "use partition_by",
    "partition_columns": "use partition_by",
    "root_uri": _STORE_CONFIG,
    "base_dir": _STORE_CONFIG,
    "storage_options": _STORE_CONFIG,
    "compression": _IO_CONFIG,
    "row_group_size": _IO_CONFIG,
    "max_rows_per_file": _IO_CONFIG,
    "retain_versions": _IO_CONFIG,
    "writer_properties": "use compression and row_group_size on the IO manager: RemoteStoreIOManager(compression=...)",
}
#: Input metadata keys of dagster-deltalake, dagster-polars, deltalake and pyarrow, with what to write here.
PEER_INPUT_KEYS: dict[str, str] = {
    "filter": "use filters (a list of (column, op, value) tuples)",
    "partition_filters": "use filters (a list of (column, op, value) tuples; files are pruned by them)",
    "predicate": "use filters (a list of (column, op, value) tuples)",
    "where": "use filters (a list of (column, op, value) tuples)",
    "root_uri": _STORE_CONFIG,
    "base_dir": _STORE_CONFIG,
    "storage_options": _STORE_CONFIG,
}


#: Configuration names of the dagster-deltalake and dagster-polars IO managers that ``RemoteStoreIOManager`` does not
#: have, with what to write instead; passed to it they fail when the definitions load (:func:`check_config_keys`).
PEER_CONFIG_KEYS: dict[str, str] = {
    "mode": "the write mode is per asset: output metadata write_mode ('overwrite', 'append' or 'merge')",
    "overwrite_schema": "drop it: an overwrite replaces the schema; output metadata allow_new_columns=True lets an "
    "append add columns",
    "schema_mode": "output metadata allow_new_columns=True (what schema_mode='merge' does); an overwrite replaces "
    "the schema",
    "root_uri": "use base_dir (a local folder or 's3://bucket/prefix') or store=",
    "storage_options": "use store=S3StoreResource(bucket=..., endpoint_url=..., region=...) or base_dir='s3://...' "
    "with the AWS environment",
    "cloud_storage_options": "use store=S3StoreResource(bucket=..., endpoint_url=..., region=...)",
    "client_options": "use store=S3StoreResource(bucket=..., endpoint_url=..., region=...)",
    "schema": "use prefix (it goes in front of every dataset key)",
    "version": "the version to load is per input: input metadata version (or as_of)",
    "writer_engine": "drop it: pyarrow writes every part",
    "writer_properties": "use compression and row_group_size",
    "table_config": "drop it: there is no table configuration (delta_log=True also writes a Delta log)",
    "custom_metadata": "drop it: the manifest records the run, asset and partition",
    "extension": "drop it: a dataset is a folder of .parquet parts",
}


def check_config_keys(keys: Sequence[str], known: Sequence[str]) -> None:
    """Refuse IO manager configuration names it does not have, which pydantic would otherwise ignore.

    Args:
        keys: the names given to ``RemoteStoreIOManager(...)``.
        known: its field names.

    Raises:
        ValueError: a name that is not a field; the message says what to write instead (another IO
            manager's name, see :data:`PEER_CONFIG_KEYS`, or a misspelt field).
    """
    for key in keys:
        if key in known:
            continue
        if key in PEER_CONFIG_KEYS:
            hint = f"another IO manager's setting: {PEER_CONFIG_KEYS[key]}"
        else:
            close = get_close_matches(key.lower(), known, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}" if close else "it would be ignored"
        raise ValueError(f"RemoteStoreIOManager has no setting {key!r}: {hint}. Its settings are {', '.join(known)}")


def run_as_of(tags: Mapping[str, str] | None) -> datetime | None:
    """The instant the run tag :data:`AS_OF_TAG` names, as an aware UTC ``datetime`` (``None`` without it).

    Raises:
        ValueError: the tag is not ISO-8601 or has no time zone.
    """
    value = (tags or {}).get(AS_OF_TAG)
    return None if value is None else _instant(value, "this run", f"tag {AS_OF_TAG!r}")


def check_option_keys(metadata: Mapping[str, Any] | None, *, output: bool, what: str) -> None:
    """Refuse a metadata key that is meant as an option but would be ignored.

    Three kinds are refused: another IO manager's name for one of our options
    (:data:`PEER_OUTPUT_KEYS` / :data:`PEER_INPUT_KEYS`), one of our option names
    misspelt (``difflib`` similarity of at least 0.8, case ignored), and an
    option of the other side (``filters`` on an output, ``write_mode`` on an
    input). Keys with a ``/`` or ``.`` (``dagster/column_schema``) and every
    other key (``owner``, ``team``, ...) are the user's own and pass.

    Args:
        metadata: the output's or input's definition metadata.
        output: whether ``metadata`` is an output's (else an input's).
        what: how the message names the output or input.

    Raises:
        ValueError: such a key; the message names the option meant.
    """
    ours, theirs, peers = (
        (OUTPUT_KEYS, INPUT_KEYS, PEER_OUTPUT_KEYS) if output else (INPUT_KEYS, OUTPUT_KEYS, PEER_INPUT_KEYS)
    )
    side, other = ("output", "input") if output else ("input", "output")
    where = "AssetIn(metadata=...) / In(metadata=...)" if output else "@asset(metadata=...) / AssetOut / Out"
    for key in metadata or {}:
        if not isinstance(key, str) or key in ours or "/" in key or "." in key:
            continue
        folded = key.lower()
        if folded in peers:
            meant = peers[folded].replace("{key}", folded)
            problem = f"is another IO manager's name: {meant}"
        elif key in theirs and key not in (COLUMNS_KEY, VERSION_KEY, PARTITION_BY_KEY):
            problem = f"is an {other} option, which does nothing on an {side}; put it in the {other}'s {where}"
        else:
            close = get_close_matches(folded, ours, n=1, cutoff=0.8)
            if not close:
                continue
            problem = f"is not an option: did you mean {close[0]!r}"
        raise ValueError(
            f"{what}: {side} metadata key {key!r} {problem}. The IO manager reads only "
            f"{', '.join(map(repr, ours))} from {side} metadata (other keys are yours and pass); "
            "nothing was written or read."
        )


def _raw(value: Any) -> Any:
    """The plain Python value of a metadata entry (``MetadataValue.json([...])`` -> ``[...]``)."""
    return value.value if isinstance(value, MetadataValue) else value


def _column_list(value: Any, key: str, what: str, *, allow_empty: bool) -> tuple[str, ...]:
    """A list of distinct column names.

    Raises:
        TypeError: not a list/tuple of strings (a bare string included, with a hint).
        ValueError: empty (unless ``allow_empty``) or a name repeats.
    """
    if isinstance(value, str):
        raise TypeError(
            f"{what}: metadata {key!r} must be a list of column names, got the string {value!r}; use [{value!r}]"
        )
    if not isinstance(value, (list, tuple)):
        raise TypeError(
            f"{what}: metadata {key!r} must be a list of column names, got {type(value).__name__} {value!r}"
        )
    names = tuple(value)
    bad = [c for c in names if not isinstance(c, str) or not c]
    if bad:
        raise TypeError(f"{what}: metadata {key!r} must hold only non-empty column name strings, got {bad[0]!r}")
    if not names and not allow_empty:
        raise ValueError(f"{what}: metadata {key!r} must name at least one column")
    repeated = sorted({c for c in names if names.count(c) > 1})
    if repeated:
        raise ValueError(f"{what}: metadata {key!r} repeats {', '.join(map(repr, repeated))}: {list(names)}")
    return names


def _instant(value: Any, what: str, source: str = f"metadata {AS_OF_KEY!r}") -> datetime | None:
    """Metadata ``as_of`` (or what ``source`` names) as an aware UTC ``datetime`` (``None`` when absent).

    ``MetadataValue.timestamp`` holds a float POSIX timestamp; a string is ISO-8601 and must carry its zone.

    Raises:
        TypeError: neither a number, a string nor a ``datetime``.
        ValueError: a string that is not ISO-8601 or has no time zone; a non-finite number.
    """
    if value is None:
        return None
    hint = "use MetadataValue.timestamp(...), a POSIX timestamp or an ISO-8601 string with a time zone"
    if not source.startswith("metadata"):
        hint = "use an ISO-8601 timestamp with a time zone, e.g. '2026-03-01T12:00:00+00:00'"
    if isinstance(value, bool) or not isinstance(value, (int, float, str, datetime)):
        raise TypeError(f"{what}: {source} must name an instant ({hint}), got {value!r}")
    if isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(value, tz=timezone.utc)
        except (ValueError, OverflowError, OSError):
            raise ValueError(f"{what}: {source} is not a usable timestamp: {value!r}") from None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{what}: {source} is not an ISO-8601 timestamp ({hint}): {value!r}") from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            f"{what}: {source} {value.isoformat()} has no time zone, so it names no instant; "
            "add one, e.g. '+00:00' for UTC"
        )
    return value.astimezone(timezone.utc)


@dataclass(frozen=True)
class WriteOptions:
    """How an output is written, from its definition metadata (see the module docstring).

    Attributes:
        write_mode: ``"overwrite"``, ``"append"`` or ``"merge"``.
        partition_by: columns that partition the dataset into ``col=value/`` folders, or ``None``.
        key_columns: the merge keys (``"merge"`` only).
        merge_strategy: ``"upsert"``, ``"insert"`` or ``"update"`` (``"merge"`` only).
        allow_new_columns: whether an append may add new nullable columns.
    """

    write_mode: str = WRITE_MODES[0]
    partition_by: tuple[str, ...] | None = None
    key_columns: tuple[str, ...] | None = None
    merge_strategy: str = MERGE_STRATEGIES[0]
    allow_new_columns: bool = False

    @property
    def is_default(self) -> bool:
        """A plain overwrite without column partitioning: the handler writes the output itself."""
        return self.write_mode == "overwrite" and self.partition_by is None

    def append_kwargs(self) -> dict[str, Any]:
        """The keyword arguments an append call takes from these options (``partition_by``, ``allow_new_columns``)."""
        return {"partition_by": self.partition_by, "allow_new_columns": self.allow_new_columns}

    def merge_kwargs(self) -> dict[str, Any]:
        """The keyword arguments a merge call takes from these options (``key_columns``, ``strategy``,
        ``partition_by``)."""
        return {
            "key_columns": list(self.key_columns or ()),
            "strategy": self.merge_strategy,
            "partition_by": self.partition_by,
        }

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any] | None, what: str) -> WriteOptions:
        """Parse and check the write options in ``metadata``; the user's own keys are ignored.

        Args:
            metadata: the output's definition metadata.
            what: how error messages name the output, e.g. ``"asset sales/events"``.

        Raises:
            ValueError: a key :func:`check_option_keys` refuses (a misspelt option, another IO manager's
                name for one); an unknown ``write_mode`` or ``merge_strategy`` (the message lists the
                allowed ones), ``"merge"`` without ``key_columns``, an option given with a
                write mode it does not apply to, an empty or repeating column list.
            TypeError: a value of the wrong type (e.g. ``key_columns="id"`` instead of ``["id"]``).
        """
        check_option_keys(metadata, output=True, what=what)
        md = {k: _raw(v) for k, v in (metadata or {}).items()}
        mode = md.get(WRITE_MODE_KEY, WRITE_MODES[0])
        if not isinstance(mode, str) or mode not in WRITE_MODES:
            raise ValueError(
                f"{what}: metadata {WRITE_MODE_KEY!r} is {mode!r}; it must be one of "
                f"{', '.join(map(repr, WRITE_MODES))} (default {WRITE_MODES[0]!r})"
            )

        partition_by: tuple[str, ...] | None = None
        if md.get(PARTITION_BY_KEY) is not None:
            partition_by = _column_list(md[PARTITION_BY_KEY], PARTITION_BY_KEY, what, allow_empty=True) or None

        key_columns: tuple[str, ...] | None = None
        if md.get(KEY_COLUMNS_KEY) is not None:
            if mode != "merge":
                raise ValueError(
                    f"{what}: metadata {KEY_COLUMNS_KEY!r} only applies to {WRITE_MODE_KEY} 'merge', but "
                    f"{WRITE_MODE_KEY} is {mode!r}; add {WRITE_MODE_KEY}='merge' or remove {KEY_COLUMNS_KEY!r}"
                )
            key_columns = _column_list(md[KEY_COLUMNS_KEY], KEY_COLUMNS_KEY, what, allow_empty=False)
        elif mode == "merge":
            raise ValueError(
                f"{what}: {WRITE_MODE_KEY} 'merge' needs metadata {KEY_COLUMNS_KEY!r}, the columns that identify "
                f"a row, e.g. metadata={{'{WRITE_MODE_KEY}': 'merge', '{KEY_COLUMNS_KEY}': ['id']}}"
            )

        strategy = md.get(MERGE_STRATEGY_KEY)
        if strategy is not None:
            if mode != "merge":
                raise ValueError(
                    f"{what}: metadata {MERGE_STRATEGY_KEY!r} only applies to {WRITE_MODE_KEY} 'merge', "
                    f"but {WRITE_MODE_KEY} is {mode!r}"
                )
            if not isinstance(strategy, str) or strategy not in MERGE_STRATEGIES:
                raise ValueError(
                    f"{what}: metadata {MERGE_STRATEGY_KEY!r} is {strategy!r}; it must be one of "
                    f"{', '.join(map(repr, MERGE_STRATEGIES))} (default {MERGE_STRATEGIES[0]!r})"
                )

        allow_new = md.get(ALLOW_NEW_COLUMNS_KEY)
        if allow_new is not None:
            if not isinstance(allow_new, bool):
                raise TypeError(f"{what}: metadata {ALLOW_NEW_COLUMNS_KEY!r} must be True or False, got {allow_new!r}")
            if mode != "append":
                raise ValueError(
                    f"{what}: metadata {ALLOW_NEW_COLUMNS_KEY!r} only applies to {WRITE_MODE_KEY} 'append', "
                    f"but {WRITE_MODE_KEY} is {mode!r}"
                )

        return cls(
            write_mode=mode,
            partition_by=partition_by,
            key_columns=key_columns,
            merge_strategy=strategy if strategy is not None else MERGE_STRATEGIES[0],
            allow_new_columns=bool(allow_new),
        )


@dataclass(frozen=True)
class ReadOptions:
    """How an input is loaded, from its definition metadata (see the module docstring).

    Attributes:
        columns: the columns to load, or ``None`` for all.
        filters: DNF filters as given (validated against the schema by the dataset layer), or ``None``.
        version: the dataset version to load, or ``None`` for the latest.
        as_of: load the version live at this instant (an aware ``datetime``), or ``None``.
        allow_missing_partitions: skip upstream partitions that were never written.
        as_of_from_run: :attr:`as_of` comes from the run tag :data:`AS_OF_TAG`, not the input's metadata.
    """

    columns: list[str] | None = None
    filters: list[Any] | None = None
    version: int | None = None
    allow_missing_partitions: bool = False
    as_of: datetime | None = None
    as_of_from_run: bool = False

    @property
    def as_of_source(self) -> str:
        """What set :attr:`as_of`, for messages: ``"metadata 'as_of'"`` or the run tag."""
        return f"run tag {AS_OF_TAG!r}" if self.as_of_from_run else f"metadata {AS_OF_KEY!r}"

    def with_run_as_of(self, instant: datetime | None) -> ReadOptions:
        """These options, loading as of the run tag's ``instant`` when they set neither ``version`` nor ``as_of``."""
        if instant is None or self.version is not None or self.as_of is not None:
            return self
        return replace(self, as_of=instant, as_of_from_run=True)

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any] | None, what: str) -> ReadOptions:
        """Parse and check the read options in ``metadata``; the user's own keys are ignored.

        The shape of ``filters`` is checked here; its columns, operators and
        literals are checked against the dataset's schema when it is read.

        Args:
            metadata: the input's definition metadata.
            what: how error messages name the input, e.g. ``"input 'events'"``.

        Raises:
            TypeError: ``columns`` is not a list of strings, ``filters`` is not a list,
                ``version`` is not an int, ``allow_missing_partitions`` is not a bool, ``as_of``
                is neither a timestamp nor a string.
            ValueError: a key :func:`check_option_keys` refuses (``filter``, ``partition_filters``, a
                misspelt option); ``version`` is not positive; ``as_of`` is not ISO-8601, has no time
                zone, or is given with ``version``.
        """
        check_option_keys(metadata, output=False, what=what)
        md = {k: _raw(v) for k, v in (metadata or {}).items()}
        columns = md.get(COLUMNS_KEY)
        if columns is not None:
            if isinstance(columns, (str, bytes)) or not isinstance(columns, Sequence):
                raise TypeError(f"{what}: metadata {COLUMNS_KEY!r} must be a list of column names, got {columns!r}")
            if not all(isinstance(c, str) for c in columns):
                raise TypeError(f"{what}: metadata {COLUMNS_KEY!r} must hold only strings, got {columns!r}")
            columns = list(columns)

        filters = md.get(FILTERS_KEY)
        if filters is not None:
            if not isinstance(filters, (list, tuple)):
                raise TypeError(
                    f"{what}: metadata {FILTERS_KEY!r} must be a list of (column, op, value) tuples, or a list "
                    f"of such lists (OR of ANDs), got {type(filters).__name__} {filters!r}"
                )
            filters = list(filters) or None

        version = md.get(VERSION_KEY)
        if version is not None:
            if isinstance(version, bool) or not isinstance(version, int):
                raise TypeError(f"{what}: metadata {VERSION_KEY!r} must be an int (a dataset version), got {version!r}")
            if version < 1:
                raise ValueError(f"{what}: metadata {VERSION_KEY!r} must be >= 1 (versions start at 1), got {version}")

        allow_missing = md.get(ALLOW_MISSING_PARTITIONS_KEY, False)
        if not isinstance(allow_missing, bool):
            raise TypeError(
                f"{what}: metadata {ALLOW_MISSING_PARTITIONS_KEY!r} must be True or False, got {allow_missing!r}"
            )
        as_of = _instant(md.get(AS_OF_KEY), what)
        if as_of is not None and version is not None:
            raise ValueError(
                f"{what}: metadata {VERSION_KEY!r} ({version}) and {AS_OF_KEY!r} ({as_of.isoformat()}) both name "
                "the version to load; keep one"
            )
        return cls(
            columns=columns, filters=filters, version=version, allow_missing_partitions=allow_missing, as_of=as_of
        )

    def read_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :meth:`TypeHandler.read` beyond ``columns``: only the options that are set,
        so a handler written before ``filters``/``version`` existed keeps working when they are not used."""
        kwargs: dict[str, Any] = {}
        if self.filters is not None:
            kwargs["filters"] = self.filters
        if self.version is not None:
            kwargs["version"] = self.version
        return kwargs
