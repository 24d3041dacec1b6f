"""A session's answers on their way to the store: none dropped while the process lives."""

from __future__ import annotations

from dataclasses import replace

from ..attempt import OUTCOMES, Attempt
from ..errors import StoreError
from .connection import Store, now
from .errors import StoreDamagedError


class Recorder:
    """A session's answers on their way to the store, none ever dropped.

    :meth:`add` writes an answer at once, after any still waiting.  When
    the store cannot take it (:class:`StoreError`: the file locked by another
    program for longer than the busy timeout, a full disk) the answer stays
    in :attr:`pending`, in order, and :attr:`error` says why; the next
    :meth:`add` or :meth:`flush` tries again.  When the file turned out to be
    damaged (:attr:`lost`), nothing more is written to it: the answers stay in
    :attr:`pending` for the caller to report.  Each answer keeps the time it
    was given, not the time it was written.
    """

    def __init__(self, store: Store, session: int):
        self.store = store
        self.session = session
        self.pending: list[Attempt] = []
        self.error: StoreError | None = None

    def add(self, a: Attempt) -> bool:
        """Write ``a`` (and any answer still waiting); ``True`` when nothing is left waiting."""
        if a.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {a.outcome!r}")
        self.pending.append(a if a.at is not None else replace(a, at=now()))
        return self.flush()

    def flush(self) -> bool:
        """Write the waiting answers, oldest first; stop at the first failure.  ``True`` when all are written."""
        while self.pending:
            try:
                self.store.record(self.session, self.pending[0])
            except StoreError as err:
                self.error = err
                return False
            self.pending.pop(0)
        self.error = None
        return True

    @property
    def lost(self) -> bool:
        """``True`` when the waiting answers cannot be written by this process any more
        (the file turned out to be damaged), ``False`` while a later try may succeed."""
        return isinstance(self.error, StoreDamagedError)
