"""A session's answers on their way to the store: none dropped while the process lives."""

from __future__ import annotations

from dataclasses import replace

from ..base.errors import StoreError
from ..base.messages import join_and, plural, t
from .attempt import OUTCOMES, Attempt
from .connection import Store, now
from .errors import StoreDamagedError, StoreGoneError


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

    When the file was deleted or replaced during the session (:meth:`Store.gone`),
    the next :meth:`add` or :meth:`flush` writes to what is at the path now --
    created when missing -- a new session row (the same selection, so it can be
    resumed) and every answer of this session, those already written to the old
    file included (:attr:`notice` says so); when that file cannot be used, the
    answers stay in :attr:`pending` (:attr:`lost`).  :attr:`session` is then the
    new session's id.
    """

    def __init__(self, store: Store, session: int):
        self.store = store
        self.session = session
        self.pending: list[Attempt] = []
        self.saved: list[Attempt] = []  # written this session: written again if the file goes away
        self.error: StoreError | None = None
        self.notice: str | None = None  # set when the answers were moved to a new file, for the caller to show
        self._told: set[tuple[str, str]] = set()  # skills started afresh that a notice has named
        try:  # what the session was started with: to start it again elsewhere
            self._row = store.session_row(session)
        except StoreError:
            self._row = None

    def add(self, a: Attempt) -> bool:
        """Write ``a`` (and any answer still waiting); ``True`` when nothing is left waiting."""
        if a.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {a.outcome!r}")
        self.pending.append(a if a.at is not None else replace(a, at=now()))
        return self.flush()

    def flush(self) -> bool:
        """Write the waiting answers, oldest first; stop at the first failure.  ``True`` when all are written."""
        if (self.saved or self.pending) and self.store.damaged is None and self.store.gone() and not self._move():
            return False
        while self.pending:
            try:
                self.store.record(self.session, self.pending[0])
            except StoreError as err:
                self.error = err
                return False
            self.saved.append(self.pending.pop(0))
            self._tell_restarted()
        self.error = None
        return True

    def _tell_restarted(self) -> None:
        """A notice, once per skill, when a review started a skill afresh (its schedule held values the
        scheduler does not write): the answer is saved all the same."""
        new = sorted(self.store.restarted - self._told)
        if not new:
            return
        self._told |= set(new)
        said = plural("store.skills_restarted", len(new), skills=join_and([f"{step} ({family})" for step, family in new]))
        self.notice = said if self.notice is None else f"{self.notice} {said}"

    def _move(self) -> bool:
        """The file went away: a new session row, and every answer of this session, in what is there now."""
        try:
            self.store.reopen()
            if self._row is None:  # its row could not be read when the session began: it cannot be started again
                raise StoreGoneError(t("store.gone_unusable", path=self.store.path, reason="?"), self.store.path)
            exercise, mode, tolerance, started, steps, head, begin_at = self._row
            self.session = self.store.begin_session(exercise, mode=mode, tolerance=tolerance, steps=steps, head=head,
                                                    begin_at=begin_at, started=started)
        except StoreError as err:
            self.error = err
            return False
        self.pending[:0] = self.saved
        self.notice = plural("store.recreated", len(self.pending), path=self.store.path)
        self.saved = []
        return True

    @property
    def lost(self) -> bool:
        """``True`` when the waiting answers cannot be written by this process any more
        (the file turned out to be damaged), ``False`` while a later try may succeed."""
        return isinstance(self.error, StoreDamagedError)


def why_unsaved(recorder: Recorder) -> str:
    """Why the recorder's answers are waiting, as a clause (no advice to try again: they are retried)."""
    err = recorder.error
    return str(getattr(err, "reason", None) or err)
