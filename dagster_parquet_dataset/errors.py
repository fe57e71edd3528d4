"""Error types shared by every layer.

All errors derive from :class:`RemoteStoreError`, so callers can catch the
whole family with one ``except``. Bad arguments raise :class:`ValueError`
(or :class:`TypeError` for a wrong type) before anything is written.
"""

from __future__ import annotations


class RemoteStoreError(Exception):
    """Base class of every error this package raises on purpose.

    Attributes:
        key: the dataset key the error is about, when it is about one dataset (``None``
            otherwise, or when the layer that raised it did not know it); code that must
            tell which dataset failed reads it here, never from the message.
    """

    key: str | None = None

    def __init__(self, *args: object, key: str | None = None) -> None:
        super().__init__(*args)
        if key is not None:
            self.key = key

    @property
    def dataset_key(self) -> str | None:
        """The same as :attr:`key` (the name the read paths used first)."""
        return self.key

    @dataset_key.setter
    def dataset_key(self, value: str | None) -> None:
        self.key = value

    def about(self, key: str) -> RemoteStoreError:
        """Record ``key`` as the dataset this error is about, unless one is recorded already; returns ``self``."""
        if self.key is None:
            self.key = key
        return self


class NotFound(RemoteStoreError):
    """The path, object or dataset does not exist."""


class VersionNotRetained(NotFound):
    """The dataset exists, but the requested past version's manifest is no longer kept.

    Distinct from "the dataset is missing" (:class:`DatasetNotFound`): raise
    ``retain_versions`` to keep more versions readable.
    """


class StoreAccessError(RemoteStoreError):
    """The store cannot be used at all: no credentials, access denied, a missing bucket,
    an unreachable endpoint or a wrong region.

    The message names the bucket, prefix and endpoint and says what to check.
    """


class AlreadyExists(RemoteStoreError):
    """The target already exists and the call was not allowed to replace it."""


class CapabilityNotSupported(RemoteStoreError):
    """The store lacks a capability the operation needs."""


class DatasetIncomplete(RemoteStoreError):
    """The dataset is structurally incomplete.

    ``_SUCCESS`` is missing, or a part listed in the manifest is missing,
    truncated, or disagrees with the manifest (row count, schema). Some of the
    dataset's files may exist, which is why this is not :class:`NotFound`.
    """


class DatasetNotFound(NotFound, DatasetIncomplete):
    """Nothing at all is stored under the dataset key.

    It is both a :class:`NotFound` (the natural reading) and a
    :class:`DatasetIncomplete` (what Spec 042 PDS-003 raises when
    ``_SUCCESS`` is absent), so code written against either catches it.
    """


class ManifestCorrupted(RemoteStoreError):
    """``manifest.json`` exists but cannot be parsed or is structurally invalid.

    Attributes:
        reason: the specific parse or structural failure.
    """

    def __init__(self, message: str, reason: str | None = None, *, key: str | None = None) -> None:
        super().__init__(message, key=key)
        self.reason = reason if reason is not None else message


class OwnerMismatch(RemoteStoreError):
    """The dataset records another owner than the write expected (its ``expect_owner``); nothing was committed.

    Raised by the commit itself, against whichever version it would replace or
    extend, so two writers with different owners racing to the same key never
    both succeed.

    Attributes:
        key: the dataset key.
        recorded: the owner entries the dataset's live version records.
        expected: the owner entries the write expected (absent keys: expected absent).
    """

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        recorded: dict[str, str] | None = None,
        expected: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, key=key)
        self.recorded, self.expected = dict(recorded or {}), dict(expected or {})


class CommitConflict(RemoteStoreError):
    """A compare-and-swap commit lost: another writer changed the target first."""


class CommitOutcomeUnknown(RemoteStoreError):
    """A commit's outcome could not be confirmed (the store did not answer).

    The new version may or may not be live. Its parts were kept, so whichever
    manifest is live stays readable; read the dataset to see which version it
    is. If the commit did not land, :meth:`ParquetDatasetStore.vacuum` removes
    the unused parts after its grace period.
    """


class PartitionsNotCombinable(RemoteStoreError, ValueError):
    """The partitions an input reads cannot be combined into one value: their schemas (or columns) disagree.

    Raised by a type handler's ``combine`` (a ``ValueError``, as before it existed); the IO
    manager re-words it to name the input's asset.
    """


class SparkWorkerEnvironmentError(RemoteStoreError, RuntimeError):
    """Spark's Python workers could not import a module the job needs (this package or one of its dependencies).

    The workers run another Python than the driver (``spark.pyspark.python`` or
    ``$PYSPARK_PYTHON``, else ``python3`` on the executors' path), one without
    the package installed. The message names the missing module, the Python the
    workers were told to use, the driver's Python, and what to set.

    Attributes:
        module: the module the workers could not import.
    """

    def __init__(self, message: str, module: str) -> None:
        super().__init__(message)
        self.module = module
