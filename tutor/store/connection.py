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
  of an older schema is read through a migrated copy in memory.

The checks on the file itself are :mod:`.files`; what the file holds,
:mod:`.schema`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Self

from ..attempt import OUTCOMES, Attempt
from ..errors import StoreError
from ..messages import t
from . import files, schema
from .errors import StoreDamagedError, StoreFullError, error

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
        self.path = path
        self.readonly = readonly
        self.damaged: StoreDamagedError | None = None  # set when a write found the file damaged: no more writes
        self._cleanup = cleanup

    # -- opening -----------------------------------------------------------------
    @classmethod
    def open(cls, path: Path | str | None = None, *, busy_timeout_ms: int | None = None) -> Store:
        """Open the store at ``path`` (default :func:`~.files.default_path`) to read and write,
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
        path = Path(path) if path is not None else files.default_path()
        files.check_header(path)
        if path.exists() and path.stat().st_size > 0:
            files.inspect(path)  # before any read-write connection exists
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise StoreError(t("store.unwritable", path=path, reason=err.strerror or err)) from None
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
    def open_existing(cls, path: Path | str | None = None) -> Store | None:
        """Open the store at ``path`` read-only, to read it; ``None`` when there is none yet
        (no file, or a file with nothing in it).  Nothing is created or written, so it
        works on a read-only folder; a file of an older schema is read through a copy in
        memory, migrated.  Raises :class:`StoreError` as :meth:`open` does."""
        path = Path(path) if path is not None else files.default_path()
        if not path.exists() and not path.is_symlink():
            return None
        files.check_header(path)
        if path.stat().st_size == 0 or not files.inspect(path):
            return None
        conn, cleanup = files.open_read(path)
        try:
            copy = schema.migrated_copy(conn)
        except sqlite3.Error as err:
            conn.close()
            cleanup()
            raise error(path, err) from None
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
                return self._transaction(work)
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
                      head: int | None = None, begin_at: int = 0) -> int:
        """Start a practice session; returns its id (committed at once).

        ``tolerance`` is ``None`` for the rounding rule; ``steps`` the step ids
        chosen (catalogue order, comma-separated; ``None``: every step), ``head``
        the 0-based head chosen (``None``: every head), ``begin_at`` the 0-based
        index of the first step asked.  Raises :class:`StoreError`."""
        return self._statement(
            "INSERT INTO sessions (exercise, mode, tolerance, started, steps, head, begin_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)", (exercise, mode, tolerance, now(), steps, head, begin_at))

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
            if a.family is not None:
                review(conn, session, answer, a, at)
            return answer

        self.write(work)

    # -- reading --------------------------------------------------------------------
    def read(self, sql: str, args: Sequence[object] = ()) -> list[tuple]:
        """The rows of one query; an SQLite failure becomes a :class:`StoreError`."""
        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.Error as err:
            raise error(self.path, err) from None

    def attempts(self) -> list[Attempt]:
        """Every recorded answer, oldest first, with its mistakes' keys (in the order given)."""
        mistakes: dict[int, dict[str, list[str]]] = {}
        for answer, key, kind in self.read("SELECT answer, key, kind FROM mistakes ORDER BY answer, kind, rank"):
            mistakes.setdefault(answer, {}).setdefault(kind, []).append(key)
        rows = self.read("SELECT id, exercise, step, head, outcome, attempt, hints, answer, at, family"
                         " FROM answers ORDER BY id")
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

