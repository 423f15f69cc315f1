"""An undo log for a driver's own memory, so an update can be rolled back.

A driver that remembers something across updates (the ironic-like driver
remembers which traits it set on each node) must forget or learn it only
when the whole update commits: the resource tracker may still fail after
the driver's part (saving the ledger), and then the tree is put back, so
the driver's memory must be put back too, or a retry would not do what the
failed attempt would have done.

Usage, in a driver: record how to undo each change as it is made
(:meth:`UndoLog.record`), and implement the contract's hooks with
:meth:`begin`, :meth:`commit` and :meth:`rollback`.  Transactions nest (the
tracker opens one per node inside one for the whole cycle); the log is
emptied when the outermost commits or rolls back, so it costs memory only
for one cycle's changes.
"""

from __future__ import annotations

from collections.abc import Callable


class UndoLog:
    """Undo actions since the outermost open transaction, newest last."""

    def __init__(self) -> None:
        # (undo, args) pairs: a function and its arguments cost fewer
        # objects than a closure per change (a cycle records one per node).
        self._undo: list[tuple[Callable[..., None], tuple]] = []
        self._open: list[int] = []

    def begin(self) -> int:
        """Open a (possibly nested) transaction; return its token."""
        self._open.append(len(self._undo))
        return len(self._open)

    def record(self, undo: Callable[..., None], *args: object) -> None:
        """Remember how to undo a change just made: ``undo(*args)`` (no-op
        when no transaction is open: nothing could roll it back)."""
        if self._open:
            self._undo.append((undo, args))

    def commit(self, token: int) -> None:
        """Keep the changes of transaction ``token`` (and any it holds)."""
        self._close(token)
        if not self._open:
            self._undo.clear()

    def rollback(self, token: int) -> None:
        """Undo every change since transaction ``token`` began, newest
        first, and close it."""
        mark = self._close(token)
        while len(self._undo) > mark:
            undo, args = self._undo.pop()
            undo(*args)

    def _close(self, token: int) -> int:
        if token != len(self._open) or token < 1:
            raise RuntimeError(
                f"transaction {token} is not the innermost open one "
                f"({len(self._open)} open); commit or roll back inner "
                "transactions first")
        return self._open.pop()
