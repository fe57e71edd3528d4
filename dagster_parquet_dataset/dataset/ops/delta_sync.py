"""``sync_delta_log``: bring a dataset's Delta log up to its live version (see ``delta/log_writer.py``)."""

from __future__ import annotations

from ...storage.base import Capability
from .._dataset_options import DatasetOptions
from ..delta import check_delta_schema, sync_log
from ..io.key_checks import check_key_fits
from .read import committed_manifest


def sync_delta_log(options: DatasetOptions, key: str) -> int:
    """See :meth:`ParquetDatasetStore.sync_delta_log` (``key`` already validated).

    Raises:
        DatasetNotFound / DatasetIncomplete / ManifestCorrupted: as ``read_manifest``.
        CapabilityNotSupported: the store cannot put-if-absent or list.
        ValueError: a column Delta cannot hold without column mapping.
    """
    check_key_fits(options.store, key)
    options.require(Capability.CONDITIONAL_WRITE, Capability.LIST, action="keep a Delta log")
    live = committed_manifest(options.store, key)
    if live.schema is not None:
        check_delta_schema(live.schema, key=key)
    done = sync_log(options.store, key, known=[live], fill=True)
    return live.version if done is None else done
