"""Fault injection for the model test: process crashes and lost responses, on real stores.

:class:`FaultyStore` wraps a real store. Before each operation the test arms
at most one fault with :meth:`FaultyStore.arm`:

- a crash at the N-th store call: that call and every later one raise
  :class:`InjectedCrash`, as if the process had died there (cleanup code that
  catches the error cannot do anything more, as in a real crash);
- a lost response: the inner call is applied, then the wrapper raises what a
  client sees when the response never arrives: :class:`CommitConflict` (the
  412 that botocore's own retry of a conditional PUT receives) or
  :class:`LostResponse` (a timeout).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from dagster_parquet_dataset import CommitConflict, Store
from dagster_parquet_dataset.storage.base import FileInfo
from tests._stores import InjectedCrash, WrappingStore

#: Ways a lost response surfaces to the caller.
LOST_AS = ("conflict", "timeout")


class LostResponse(ConnectionError):
    """The request reached the store and was applied, but its response never came back."""


@dataclass(frozen=True)
class Fault:
    """One fault for one operation.

    Attributes:
        kind: ``"crash"`` (at store call ``at``, 1-based, counted from :meth:`FaultyStore.arm`)
            or ``"lost"`` (the response of the ``at``-th call of kind ``op`` to a path
            ending in ``suffix`` is lost, surfacing as ``lost_as``).
        op: for ``"lost"``: ``"write_if"``, ``"write_bytes"`` or ``"delete"``.
        suffix: for ``"lost"``: only calls on paths ending in this count.
        lost_as: ``"conflict"`` or ``"timeout"``.
    """

    kind: str
    at: int
    op: str = "write_if"
    suffix: str = ""
    lost_as: str = "timeout"

    def __str__(self) -> str:
        if self.kind == "crash":
            return f"crash at store call {self.at}"
        return f"lost response ({self.lost_as}) of {self.op} #{self.at} on *{self.suffix}"


class FaultyStore(WrappingStore):
    """A real store with at most one armed :class:`Fault` per operation."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.fault: Fault | None = None
        self.count = 0
        self.matched = 0
        self.crashed = False
        self.lost = False
        self.fired_on: tuple[str, str] | None = None

    def arm(self, fault: Fault | None) -> None:
        """Start a new operation with ``fault`` (``None``: no fault)."""
        with self._lock:
            self.fault = fault
            self.count = self.matched = 0
            self.crashed = self.lost = False
            self.fired_on = None
            self.log.clear()

    def disarm(self) -> None:
        self.arm(None)

    @property
    def fired(self) -> bool:
        return self.crashed or self.lost

    def _before(self, op: str, path: str) -> None:
        super()._before(op, path)
        with self._lock:
            fault = self.fault
            if self.crashed:
                raise InjectedCrash(f"the process crashed earlier; {op} {path} never runs")
            if fault is None or fault.kind != "crash":
                return
            self.count += 1
            if self.count != fault.at:
                return
            self.crashed = True
            self.fired_on = (op, path)
        raise InjectedCrash(f"injected crash at call {fault.at}: {op} {path}")

    def _lose(self, op: str, path: str) -> bool:
        """Whether the response of this (already applied) call is the one to lose."""
        with self._lock:
            fault = self.fault
            if fault is None or fault.kind != "lost" or self.lost or fault.op != op or not path.endswith(fault.suffix):
                return False
            self.matched += 1
            if self.matched != fault.at:
                return False
            self.lost = True
            self.fired_on = (op, path)
            return True

    def _raise_lost(self, op: str, path: str) -> None:
        assert self.fault is not None
        if self.fault.lost_as == "conflict":
            raise CommitConflict(f"{path!r} changed since it was read (a retry after a lost response to {op})")
        raise LostResponse(f"read timeout on {op} {path} (the request was applied)")

    # Calls whose responses can be lost: apply them, then raise.

    def write_if(self, path: str, data: bytes, *, expected: str | None) -> str:
        token = super().write_if(path, data, expected=expected)
        if self._lose("write_if", path):
            self._raise_lost("write_if", path)
        return token

    def write_bytes(self, path: str, data: bytes) -> None:
        super().write_bytes(path, data)
        if self._lose("write_bytes", path):
            self._raise_lost("write_bytes", path)

    def delete(self, path: str, *, missing_ok: bool = False) -> None:
        super().delete(path, missing_ok=missing_ok)
        if self._lose("delete", path):
            self._raise_lost("delete", path)

    # Listing is lazy in some backends: count every yielded page as part of the one call.

    def list_files(self, path: str) -> Iterator[FileInfo]:
        self._before("list_files", path)
        return iter(list(self.inner.list_files(path)))
