"""Where Spark reaches a store: which stores its executors share, and the Hadoop URIs of native reads and writes."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..errors import CapabilityNotSupported
from ..storage.base import Store
from ..storage.local import LocalStore
from ..storage.memory import MemoryStore
from ..storage.s3 import S3Store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_GLOB_CHARS = frozenset("{}[]*?")


def check_shared_store(store: Store, action: str) -> None:
    """Refuse a store that Spark's executor processes cannot see.

    Raises:
        CapabilityNotSupported: ``store`` is a :class:`MemoryStore`.
    """
    if isinstance(store, MemoryStore):
        raise CapabilityNotSupported(
            f"cannot {action} with a MemoryStore: it lives in this Python process, and Spark runs its tasks in "
            "separate Python worker processes that would each get a private copy. Use a LocalStore (on a disk "
            "every executor sees) or an S3Store."
        )


def spark_uri(store: Store, path: str) -> str | None:
    """The Hadoop path under which Spark itself reaches ``path`` of ``store``, or ``None`` if it cannot.

    Not percent-encoded: Hadoop's ``Path`` quotes the characters a URI needs
    quoted itself, so ``Path.as_uri()`` would encode twice (``a b`` would
    become a folder literally named ``a%20b``).
    """
    if isinstance(store, LocalStore):
        return "file://" + os.path.join(store.root, *path.split("/"))
    if isinstance(store, S3Store):
        return f"s3a://{store.bucket}/" + "/".join(p for p in (store.prefix, path) if p)
    return None


def spark_read_uri(store: Store, path: str) -> str | None:
    """:func:`spark_uri` with Hadoop's glob characters escaped, for ``spark.read`` (which globs its paths)."""
    uri = spark_uri(store, path)
    if uri is None:
        return None
    return "".join("\\" + c if c in _GLOB_CHARS else c for c in uri)


def s3a_available(spark: SparkSession) -> bool:
    """Whether Spark's JVM has the ``s3a://`` filesystem (the hadoop-aws jar)."""
    try:
        loader = spark.sparkContext._jvm.java.lang.Thread.currentThread().getContextClassLoader()  # type: ignore[union-attr]
        loader.loadClass("org.apache.hadoop.fs.s3a.S3AFileSystem")
        return True
    except Exception:
        return False
