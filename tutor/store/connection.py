"""An open progress store: opening it checked, and every write in its own transaction.

Guarantees:

* every answer is committed by :meth:`Store.record` before it returns, so a
  killed process loses nothing already answered -- the answer, the keys of
  every mistake it matched and its review in the schedule go in one
  transaction;
* a full disk first gets the write-ahead log checkpointed and truncated (the
  log itself is often what fills a nearly full disk), then the write is
  retried once; a write that finds the file damaged marks it so, and nothing
  more is written to it;
* two sessions may write at once: WAL journal, a busy timeout, and every
  write in its own ``BEGIN IMMEDIATE`` transaction;
* :meth:`Store.open_existing` (``stats``, ``list``) only ever reads: it opens
  the file read-only and works on a read-only folder or file system; a file
  of an older schema is read through a migrated copy in memory;
* a new file is created whole or not at all, and a write a killed process
  left unfinished (a hot journal) is undone before the checks (:mod:`.files`);
* every value read is of the type attn-tutor writes: other rows are left out
  and counted (:data:`.schema.ANSWER_AS_WRITTEN`);
* the file deleted or replaced during a session is noticed (:meth:`Store.gone`)
  and the session's answers are written to what is there now
  (:meth:`Store.reopen`, :class:`.recorder.Recorder`), never to a deleted file.

The checks on the file itself are :mod:`.files`; what the file holds,
:mod:`.schema`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Self

from ..base.errors import StoreError
from ..base.messages import t
from ..base.outfile import os_reason
from . import files, schema
from .attempt import OUTCOMES, Attempt
from .errors import StoreDamagedError, StoreFullError, StoreGoneError, error

if TYPE_CHECKING:
    from .queries import Stats

Work = Callable[[sqlite3.Connection], int]


def now() -> str:
    """The current time as the store writes it: ISO 8601, UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


class Store:
    """An open progress store.  Use :meth:`open` (to practise: read and write) or
    :meth:`open_existing` (to read only); close with :meth:`close` or ``with``."""

    def __init__(self, conn: sqlite3.Connection, path: Path, *, readonly: bool = False,
                 cleanup: Callable[[], None] | None = None):
        self.conn = conn
        self.conn.text_factory = files.decode_text
        self.path = path
        self.readonly = readonly
        self.damaged: StoreDamagedError | None = None  # set when a write found the file damaged: no more writes
        #: the skills whose schedule held values the scheduler does not write, started afresh by a review (step, family)
        self.restarted: set[tuple[str, str]] = set()
        self._cleanup = cleanup
        self.identity = files.file_id(path) if not readonly else None  # the file this store writes: see gone()
        self._sidecars = self._own_sidecars()

    # -- opening -----------------------------------------------------------------
    @classmethod
    def open(cls, path: Path | str, *, busy_timeout_ms: int | None = None) -> Store:
        """Open the store at ``path`` (:func:`~.files.default_path` of the data folder) to read and write,
        creating it if missing and migrating it once if it has an older schema.

        An existing file is checked first, through a read-only connection:
        it must be ours (:mod:`.files`) and pass ``PRAGMA quick_check``.  A
        write waits up to ``busy_timeout_ms`` (default
        :data:`~.files.BUSY_TIMEOUT_MS`) for another program's lock before
        failing with :class:`~.errors.StoreLockedError`.  Raises
        :class:`StoreError` for a file that is not ours, damaged
        (:class:`StoreDamagedError`), newer, or that cannot be written (a
        read-only file or folder); such a file is left exactly as it was.
        """
        path = Path(path)
        if files.journal_left(path):
            files.roll_back(path)  # a writer killed mid-transaction: undo its write, as any SQLite program would
        files.check_header(path)
        if path.exists() and path.stat().st_size > 0:
            files.inspect(path)  # before any read-write connection exists
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise StoreError(t("store.unwritable", path=path, reason=os_reason(err))) from None
            files.check_writable(path)
            files.create(path)  # complete before it has its name: a kill leaves no half-made store
        files.check_writable(path)
        conn = files.connect(path, files.BUSY_TIMEOUT_MS if busy_timeout_ms is None else busy_timeout_ms)
        try:
            schema.adopt(conn, path)
        except sqlite3.Error as err:
            conn.close()
            raise error(path, err) from None
        except BaseException:
            conn.close()
            raise
        return cls(conn, path)

    @classmethod
    def open_existing(cls, path: Path | str) -> Store | None:
        """Open the store at ``path`` read-only, to read it; ``None`` when there is none yet
        (no file, or a file with nothing in it).  Nothing is created or written, so it
        works on a read-only folder; a file of an older schema is read through a copy in
        memory, migrated.  Raises :class:`StoreError` as :meth:`open` does."""
        path = Path(path)
        if not path.exists() and not path.is_symlink():
            return None
        if files.journal_left(path):  # read what was committed, from a copy: the file itself is never written
            conn, cleanup = files.open_rolled_back_copy(path)
            try:
                ours = files.judge(conn, path, whole=False)
            except BaseException:
                conn.close()
                cleanup()
                raise
            if not ours:
                conn.close()
                cleanup()
                return None
        else:
            files.check_header(path)
            if path.stat().st_size == 0 or not files.inspect(path):
                return None
            conn, cleanup = files.open_read(path)
        try:
            copy = schema.migrated_copy(conn)
        except sqlite3.Error as err:
            conn.close()
            cleanup()
            raise error(path, err, reading=True) from None
        if copy is not None:
            conn.close()
            conn = copy
        return cls(conn, path, readonly=True, cleanup=cleanup)

    def close(self) -> None:
        """Close the connection (every answer is already committed)."""
        try:
            self.conn.close()
        finally:
            if self._cleanup is not None:
                self._cleanup()
                self._cleanup = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the file deleted or replaced under a session -------------------------------
    def _own_sidecars(self) -> dict[Path, tuple[int, int] | None]:
        """The ``-wal`` and ``-shm`` files this store's connection uses, by identity (see :meth:`reopen`)."""
        if self.readonly:
            return {}
        return {p: files.file_id(p) for p in (Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))}

    def gone(self) -> bool:
        """True when the file at :attr:`path` is no longer the one this store writes (deleted, or
        replaced by another file): a write would go to a file no one reads again."""
        return self.identity is not None and files.file_id(self.path) != self.identity

    def session_row(self, session: int) -> tuple[str, str, float | None, str, str | None, int | None, int] | None:
        """``(exercise, mode, tolerance, started, steps, head, begin_at)`` of a session, read from the
        file this store writes (what :meth:`begin_session` takes, to start it again elsewhere)."""
        rows = self.read("SELECT exercise, mode, tolerance, started, steps, head, begin_at FROM sessions"
                         f" WHERE id = ? AND {schema.SESSION_AS_WRITTEN}", (session,))
        return rows[0] if rows else None

    def reopen(self) -> None:
        """Write from now on to what is at :attr:`path` now, in place of the file that was deleted or
        replaced: created when missing, checked (and migrated) as :meth:`open` does it (a foreign or
        damaged file is left untouched).  Raises :class:`~.errors.StoreGoneError` when it cannot be
        used; this store then writes nothing more."""
        try:
            self.conn.close()
        except sqlite3.Error:
            pass
        # SQLite leaves the -wal and -shm of a deleted database behind, and would read that log into the
        # next database made at the path: remove them -- only those this connection used (same identity)
        for sidecar, identity in self._sidecars.items():
            if identity is not None and files.file_id(sidecar) == identity:
                try:
                    sidecar.unlink()
                except OSError:
                    pass
        try:
            fresh = Store.open(self.path)
        except StoreError as err:
            self.damaged = StoreGoneError(t("store.gone_unusable", path=self.path, reason=err), self.path,
                                          t("store.gone_unusable", path=self.path, reason=err))
            raise self.damaged from None
        self.conn, self.identity, self.damaged = fresh.conn, fresh.identity, None
        self._sidecars = fresh._sidecars

    # -- writing -------------------------------------------------------------------
    def write(self, work: Work) -> int:
        """Run ``work(conn)`` in its own ``BEGIN IMMEDIATE`` transaction; returns what it returns.

        A full disk gets the write-ahead log checkpointed and truncated, then
        one more try.  A damaged file (found by this write) is never written
        again: every later write raises the same :class:`StoreDamagedError`
        without touching it.  Raises ``ValueError`` on a store opened read-only."""
        if self.readonly:
            raise ValueError("this store was opened read-only")
        if self.damaged is not None:
            raise self.damaged
        again = True
        while True:
            try:
                done = self._transaction(work)
                self._sidecars = self._own_sidecars()  # the log this write used (made on the first write)
                return done
            except sqlite3.Error as err:
                failure = error(self.path, err)
            if isinstance(failure, StoreDamagedError):
                self.damaged = StoreDamagedError(t("store.damaged_now", path=self.path), self.path,
                                                 t("store.damaged_now.reason", path=self.path))
                raise self.damaged
            if isinstance(failure, StoreFullError) and again and self._reclaim():
                again = False
                continue
            raise failure

    def _transaction(self, work: Work) -> int:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            result = work(self.conn)
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                try:
                    self.conn.execute("ROLLBACK")
                except sqlite3.Error:  # the first error is the one to report
                    pass
            raise
        return result

    def _statement(self, sql: str, args: Sequence[object]) -> int:
        """One statement in its own transaction; returns the row id it inserted (0 for none)."""
        return self.write(lambda conn: conn.execute(sql, args).lastrowid or 0)

    def _reclaim(self) -> bool:
        """Checkpoint the write-ahead log into the file and truncate it: on a nearly full
        disk the log's own growth is what fails.  ``True`` when the log was emptied."""
        try:
            busy, _, _ = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error:
            return False
        return busy == 0

    def begin_session(self, exercise: str, *, mode: str, tolerance: float | None, steps: str | None = None,
                      head: int | None = None, begin_at: int = 0, started: str | None = None) -> int:
        """Start a practice session (at ``started``, default now); returns its id (committed at once).

        ``tolerance`` is ``None`` for the rounding rule; ``steps`` the step ids
        chosen (catalogue order, comma-separated; ``None``: every step), ``head``
        the 0-based head chosen (``None``: every head), ``begin_at`` the 0-based
        index of the first step asked.  Raises :class:`StoreError`."""
        return self._statement(
            "INSERT INTO sessions (exercise, mode, tolerance, started, steps, head, begin_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)", (exercise, mode, tolerance, started or now(), steps, head, begin_at))

    def end_session(self, session: int, *, complete: bool = False) -> None:
        """Mark a session finished (a killed session simply has no end time); ``complete``
        when every step it asked was answered right, shown or skipped.  Raises :class:`StoreError`."""
        self._statement("UPDATE sessions SET ended = ?, complete = ? WHERE id = ?", (now(), int(complete), session))

    def record(self, session: int, a: Attempt) -> None:
        """Store one answered step -- with the keys of its mistakes and, for an attempt that
        names its exercise family, its review in the schedule -- and commit it before returning.

        Raises :class:`~.errors.StoreLockedError`, :class:`StoreFullError`,
        :class:`StoreDamagedError` or :class:`StoreError` when the file does
        not take it; ``ValueError`` for an unknown outcome."""
        if a.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {a.outcome!r}")
        from .scheduling import review

        restarted: set[tuple[str, str]] = set()

        def work(conn: sqlite3.Connection) -> int:
            at = a.at or now()
            answer = conn.execute(
                "INSERT INTO answers (session, at, exercise, step, head, outcome, attempt, hints, diagnosis, answer, family)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session, at, a.exercise, a.step, a.head, a.outcome, a.attempt, a.hints,
                 a.diagnoses[0] if a.diagnoses else None, a.answer, a.family)).lastrowid or 0
            rows = [(answer, key, "diagnosis", n) for n, key in enumerate(dict.fromkeys(a.diagnoses))]
            rows += [(answer, key, "grading", n) for n, key in enumerate(dict.fromkeys(a.notes))
                     if key not in a.diagnoses]
            conn.executemany("INSERT INTO mistakes (answer, key, kind, rank) VALUES (?, ?, ?, ?)", rows)
            if a.family is not None and review(conn, session, answer, a, at):
                restarted.add((a.step, a.family))
            return answer

        self.write(work)
        self.restarted |= restarted  # only once the answer is in: a write tried again may find the same row

    # -- reading --------------------------------------------------------------------
    def read(self, sql: str, args: Sequence[object] = ()) -> list[tuple]:
        """The rows of one query; an SQLite failure becomes a :class:`StoreError`."""
        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.Error as err:
            raise error(self.path, err, reading=True) from None

    def attempts(self) -> list[Attempt]:
        """Every recorded answer, oldest first, with its mistakes' keys (in the order given); rows not
        as attn-tutor writes them are left out (:data:`.schema.ANSWER_AS_WRITTEN`, :data:`.schema.MISTAKES`)."""
        mistakes: dict[int, dict[str, list[str]]] = {}
        for answer, key, kind in self.read(f"SELECT answer, key, kind FROM {schema.MISTAKES}"
                                           " ORDER BY answer, kind, rank"):
            mistakes.setdefault(answer, {}).setdefault(kind, []).append(key)
        rows = self.read("SELECT id, exercise, step, head, outcome, attempt, hints, answer, at, family"
                         f" FROM {schema.ANSWERS} ORDER BY id")
        out = []
        for id_, exercise, step, head, outcome, attempt, hints, answer, at, family in rows:
            found = mistakes.get(id_, {})
            out.append(Attempt(exercise, step, head, outcome, attempt, hints, tuple(found.get("diagnosis", ())), answer,
                               at, tuple(found.get("grading", ())), family))
        return out

    def stats(self, top: int = 5) -> Stats:
        """The summaries ``attn-tutor stats`` reports (:func:`.queries.stats`)."""
        from .queries import stats

        return stats(self, top)

