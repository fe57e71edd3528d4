"""Storage layer: the ``Store`` protocol and its backends."""

from .base import Capability, FileInfo, Store, join_key, validate_key
from .local import LocalStore
from .memory import MemoryStore
from .s3 import S3Store

__all__ = [
    "Capability",
    "FileInfo",
    "LocalStore",
    "MemoryStore",
    "S3Store",
    "Store",
    "join_key",
    "validate_key",
]
