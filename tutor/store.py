"""The progress store: one SQLite file of every answered practice step.

Where: ``$ATTN_TUTOR_HOME/progress.sqlite3`` when ``ATTN_TUTOR_HOME`` is set,
else ``platformdirs.user_data_dir("attn-tutor")/progress.sqlite3``.

Guarantees:

* every answer is committed by :meth:`Store.record` before it returns, so a
  killed process loses nothing already answered;
* an answer the file cannot take yet (locked by another program for longer
  than the busy timeout, a full disk) is kept by a :class:`Recorder` and
  written before the next one, never dropped while the process lives; a full
  disk first gets the write-ahead log checkpointed and truncated (the log
  itself is often what fills a nearly full disk), then the write is retried;
* two sessions may write at once: WAL journal, a busy timeout, and every
  write in its own ``BEGIN IMMEDIATE`` transaction;
* the file is ours only if its header carries :data:`APPLICATION_ID` and a
  schema version this code knows (``PRAGMA application_id`` /
  ``PRAGMA user_version``), our tables are there, it holds no trigger (a
  trigger would run on every answer saved), and ``PRAGMA quick_check`` finds
  it intact.  Anything else -- a text file, a damaged or truncated database,
  another program's database, a newer schema -- is a
  :class:`~tutor.errors.StoreError` naming the file, and the file is never
  written to.  Only a missing file, or one with no schema object at all and
  no application id or version set, is initialised;
* the checks read the file through a read-only connection, so a file that
  is refused keeps every byte, and its ``-wal`` file too (a read-write
  connection would checkpoint another program's log into its file on close);
* :meth:`Store.open_existing` (``stats``) only ever reads: it opens the file
  read-only and works on a read-only folder or file system;
* a new store is created atomically: built complete in a hidden temporary
  file in the same folder, then given its name (:func:`_create`), so a
  process killed while creating it leaves no half-made store;
* a write left unfinished by a killed process (a hot ``-journal``: a store
  made in place by an older attn-tutor, or another program's transaction)
  is undone before the checks, which read through read-only connections
  that cannot undo it: ``practice`` lets SQLite roll it back in place (a
  read-write open, as any SQLite program does; :func:`_roll_back`), and
  says so truthfully when it cannot (a read-only folder); ``stats`` reads
  what was committed from a copy of the file and its journal, never
  writing the file.

Reading a file read-only (``mode=ro``).  A WAL database needs its ``-shm``
(and ``-wal``) file to be read; SQLite creates them when they are missing,
which a read-only folder refuses ("unable to open database file").  Then:

* with no ``-wal`` file holding frames, the file is opened ``immutable=1``:
  SQLite reads the database file alone, without locks.  Nothing is missed
  (there is no log to read) -- but SQLite also cannot see a writer that
  starts meanwhile; on a read-only file system there is none, and the answers
  are read in one go;
* with a ``-wal`` file holding frames (a session was killed, then the folder
  became read-only: a backup, a snapshot), ``immutable=1`` would silently
  leave out the answers in the log, so the database and its log are copied
  into a temporary folder and the copy is read.

The checks before a file is known to be ours also read a WAL-mode file
``immutable=1`` when it has no ``-wal`` frames, so that no ``-wal``/``-shm``
file is left next to a file that is refused.  Such a read could in theory
race a checkpoint of a session that starts and ends meanwhile; the file's
size and modification time are compared before and after, and the check is
repeated through SQLite's locks when they differ.

Schema (version 1)::

    sessions(id, exercise, mode, tolerance, started, ended)
    answers(id, session -> sessions.id, at, exercise, step, head, outcome,
            attempt, hints, diagnosis, diagnosis_text, answer)

Each row of ``answers`` is an :class:`tutor.attempt.Attempt` (the record the
drill emits).  ``outcome`` is ``correct``, ``wrong``, ``shown`` (revealed: a miss) or
``skipped`` (not counted).  ``attempt`` is the 1-based try at that step in
that session; ``diagnosis`` the key of the first diagnosis of a wrong answer.

The summaries (:class:`Stats`) and the choice of what to practise next
(:func:`recommend`) are pure functions of the rows.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Self

from .attempt import OUTCOMES, Attempt  # the record the store writes and reads (shared with the quiz)
from .errors import StoreError
from .messages import plural, t
from .steps import STEP_IDS

SCHEMA_VERSION = 1
APPLICATION_ID = 0x41545554  # "ATUT" in the database header
FILENAME = "progress.sqlite3"
BUSY_TIMEOUT_MS = 10_000
_MAGIC = b"SQLite format 3\x00"
_HEADER = 100  # bytes of the database header
_WAL_HEADER = 32  # bytes of a -wal file's header: a -wal no longer than this holds no frame
_TABLES = {"sessions", "answers"}
_WAL_PAGES = 8  # checkpoint the write-ahead log once it holds this many pages (SQLite's default: 1000)
_WAL_LIMIT = 64 * 1024  # and truncate it back to this many bytes when it restarts

# SQLite's primary result codes (https://sqlite.org/rescode.html) that call for their own sentence
_BUSY, _LOCKED, _READONLY, _CORRUPT, _FULL, _CANTOPEN, _NOTADB = 5, 6, 8, 11, 13, 14, 26
_READONLY_ROLLBACK = 776  # extended: a read-only connection met a hot journal it cannot roll back

_SCHEMA = """
CREATE TABLE sessions (
    id        INTEGER PRIMARY KEY,
    exercise  TEXT NOT NULL,
    mode      TEXT NOT NULL,
    tolerance REAL NOT NULL,
    started   TEXT NOT NULL,
    ended     TEXT
);
CREATE TABLE answers (
    id             INTEGER PRIMARY KEY,
    session        INTEGER NOT NULL REFERENCES sessions(id),
    at             TEXT NOT NULL,
    exercise       TEXT NOT NULL,
    step           TEXT NOT NULL,
    head           INTEGER,
    outcome        TEXT NOT NULL CHECK (outcome IN ('correct', 'wrong', 'shown', 'skipped')),
    attempt        INTEGER NOT NULL,
    hints          INTEGER NOT NULL DEFAULT 0,
    diagnosis      TEXT,
    diagnosis_text TEXT,
    answer         TEXT
);
CREATE INDEX answers_by_step ON answers(step, outcome);
"""


#: A row of ``answers`` as attn-tutor writes it: the type SQLite holds for every value (``typeof``:
#: SQLite keeps whatever type a program writes, whatever the column says) and a known outcome.
#: Rows that are not are left out of every reading (:meth:`Store.stats`, :meth:`Store.attempts`).
_AS_WRITTEN = (
    "typeof(session) = 'integer' AND typeof(at) = 'text' AND typeof(exercise) = 'text'"
    " AND typeof(step) = 'text' AND typeof(head) IN ('integer', 'null') AND typeof(outcome) = 'text'"
    " AND outcome IN ('correct', 'wrong', 'shown', 'skipped') AND typeof(attempt) = 'integer'"
    " AND typeof(hints) = 'integer' AND typeof(diagnosis) IN ('text', 'null')"
    " AND typeof(diagnosis_text) IN ('text', 'null') AND typeof(answer) IN ('text', 'null')"
)
_ANSWERS = f"(SELECT * FROM answers WHERE {_AS_WRITTEN})"


def _text(data: bytes) -> str:
    """A TEXT value as Python reads it: UTF-8, an invalid byte (another program wrote it) as U+FFFD, never an error."""
    return data.decode("utf-8", "replace")


class StoreLockedError(StoreError):
    """The progress file stayed locked by another program for longer than the busy timeout."""

    def __init__(self, message: str, path: Path):
        super().__init__(message)
        self.path = path
        self.reason = t("store.busy", path=path)  # why an answer waits, as a clause


class StoreFullError(StoreError):
    """The disk holding the progress file is full (``SQLITE_FULL``); the write may succeed later."""

    def __init__(self, message: str, path: Path):
        super().__init__(message)
        self.path = path
        self.reason = t("store.full.reason", path=path)


class StoreDamagedError(StoreError):
    """The progress file is damaged (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``, a failed
    ``quick_check``, a truncated file).  Nothing is written to it any more."""

    def __init__(self, message: str, path: Path, reason: str | None = None):
        super().__init__(message)
        self.path = path
        self.reason = reason or message


class StoreGoneError(StoreDamagedError):
    """The progress file was deleted or replaced during a session, and what is at its path now cannot
    take the session's answers (a foreign or damaged file, a folder that cannot be written): nothing
    more is written by this session."""


def _file_id(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path`` (links followed), ``None`` when there is none."""
    try:
        st = path.stat()
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def home() -> Path:
    """The user's attn-tutor data directory: ``ATTN_TUTOR_HOME``, else the platform's user data dir."""
    env = os.environ.get("ATTN_TUTOR_HOME")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("attn-tutor", appauthor=False))


def default_path() -> Path:
    """Where the progress store lives: ``home() / progress.sqlite3``."""
    return home() / FILENAME


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# --- summaries (pure) -------------------------------------------------------------


@dataclass(frozen=True)
class StepStats:
    """Counts for one step kind (``q``, ``scores``, ...) over every exercise and head."""

    step: str
    correct: int = 0
    wrong: int = 0
    shown: int = 0
    skipped: int = 0
    first_try: int = 0

    @property
    def graded(self) -> int:
        """Answers that count for accuracy: right, wrong, or revealed with ``show`` (a miss)."""
        return self.correct + self.wrong + self.shown

    @property
    def accuracy(self) -> float | None:
        """``correct / graded``; ``None`` when nothing was graded."""
        return self.correct / self.graded if self.graded else None

    @property
    def score(self) -> float:
        """Accuracy smoothed towards 1/2 (``(correct + 1) / (graded + 2)``): an
        unpractised step scores 0.5, below a step mostly right and above one mostly wrong."""
        return (self.correct + 1) / (self.graded + 2)


@dataclass(frozen=True)
class DiagnosisCount:
    """How often a diagnosis was given, with the latest sentence given for it."""

    key: str
    count: int
    message: str


@dataclass(frozen=True)
class Stats:
    """Everything ``attn-tutor stats`` reports, computed from the store's rows."""

    sessions: int = 0
    answers: int = 0
    steps: tuple[StepStats, ...] = ()
    diagnoses: tuple[DiagnosisCount, ...] = ()
    practised: dict[tuple[str, str], int] = field(default_factory=dict)  # (exercise, step) -> graded answers
    left_out: int = 0  # rows of answers not as attn-tutor writes them (see :data:`_AS_WRITTEN`), not counted

    def step(self, step: str) -> StepStats:
        """The counts for ``step`` (zeros when never practised)."""
        for s in self.steps:
            if s.step == step:
                return s
        return StepStats(step)


@dataclass(frozen=True)
class Recommendation:
    """What to practise next: the weakest step kind, and an exercise that trains it."""

    step: str
    exercise: str
    stats: StepStats


def recommend(stats: Stats, exercises: Sequence[tuple[str, Iterable[str], int | None]]) -> Recommendation | None:
    """The weakest step kind among those ``exercises`` train, and the exercise to train it on.

    ``exercises`` are ``(id, step kinds it has, difficulty)``.  The weakest
    step has the lowest :attr:`StepStats.score` (ties: earliest in the
    computation); among the exercises that have it, the one least practised on
    that step, then the easiest, then by id.  ``None`` when there are no exercises.
    """
    kinds = {ex_id: set(steps) for ex_id, steps, _ in exercises}
    available = [s for s in STEP_IDS if any(s in k for k in kinds.values())]
    if not available:
        return None
    weakest = min(available, key=lambda s: (stats.step(s).score, STEP_IDS.index(s)))
    candidates = [(stats.practised.get((ex_id, weakest), 0), diff if diff is not None else 3, ex_id)
                  for ex_id, _, diff in exercises if weakest in kinds[ex_id]]
    return Recommendation(weakest, min(candidates)[2], stats.step(weakest))


# --- the store ------------------------------------------------------------------------


class Store:
    """An open progress store.  Use :meth:`open` (to practise: read and write) or
    :meth:`open_existing` (to read only); close with :meth:`close` or ``with``."""

    def __init__(self, conn: sqlite3.Connection, path: Path, *, readonly: bool = False,
                 cleanup: Callable[[], None] | None = None):
        self.conn = conn
        self.conn.text_factory = _text
        self.path = path
        self.readonly = readonly
        self.damaged: StoreDamagedError | None = None  # set when a write found the file damaged: no more writes
        self._cleanup = cleanup
        self.identity = _file_id(path) if not readonly else None  # the file this store writes: see gone()
        self._sidecars = self._own_sidecars()

    # -- opening -----------------------------------------------------------------
    @classmethod
    def open(cls, path: Path | str | None = None, *, busy_timeout_ms: int | None = None) -> Store:
        """Open the store at ``path`` (default :func:`default_path`) to read and write, creating it if missing.

        An existing file is checked first, through a read-only connection:
        it must be ours (see the module docstring) and pass ``PRAGMA
        quick_check``.  A write waits up to ``busy_timeout_ms`` (default
        :data:`BUSY_TIMEOUT_MS`) for another program's lock before failing
        with :class:`StoreLockedError`.  Raises :class:`StoreError` for a file
        that is not ours, damaged (:class:`StoreDamagedError`), newer, or that
        cannot be written (a read-only file or folder); such a file is left
        exactly as it was.
        """
        path = Path(path) if path is not None else default_path()
        if _journal_left(path):
            _roll_back(path)  # a writer killed mid-transaction: undo its write, as any SQLite program would
        _check_header(path)
        if path.exists() and path.stat().st_size > 0:
            _inspect(path)  # before any read-write connection exists
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise StoreError(t("store.unwritable", path=path, reason=err.strerror or err)) from None
            _check_writable(path)
            _create(path)  # complete before it has its name: a kill leaves no half-made store
        _check_writable(path)
        conn = _connect(path, BUSY_TIMEOUT_MS if busy_timeout_ms is None else busy_timeout_ms)
        try:
            _adopt(conn, path)
        except BaseException:
            conn.close()
            raise
        return cls(conn, path)

    @classmethod
    def open_existing(cls, path: Path | str | None = None) -> Store | None:
        """Open the store at ``path`` read-only, to read it; ``None`` when there is none yet
        (no file, or a file with nothing in it).  Nothing is created or written, so it
        works on a read-only folder.  Raises :class:`StoreError` as :meth:`open` does."""
        path = Path(path) if path is not None else default_path()
        if not path.exists() and not path.is_symlink():
            return None
        if _journal_left(path):  # read what was committed, from a copy: the file itself is never written
            conn, cleanup = _open_rolled_back_copy(path)
            try:
                ours = _judge(conn, path, whole=False)
            except BaseException:
                conn.close()
                cleanup()
                raise
            if not ours:
                conn.close()
                cleanup()
                return None
            return cls(conn, path, readonly=True, cleanup=cleanup)
        _check_header(path)
        if path.stat().st_size == 0 or not _inspect(path):
            return None
        conn, cleanup = _open_read(path)
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
        return {p: _file_id(p) for p in (Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))}

    def gone(self) -> bool:
        """True when the file at :attr:`path` is no longer the one this store writes (deleted, or
        replaced by another file): a write would go to a file no one reads again."""
        return self.identity is not None and _file_id(self.path) != self.identity

    def session_row(self, session: int) -> tuple[str, str, float, str] | None:
        """``(exercise, mode, tolerance, started)`` of a session, read from the file this store writes."""
        rows = self._read("SELECT exercise, mode, tolerance, started FROM sessions WHERE id = ?", (session,))
        return rows[0] if rows else None

    def reopen(self) -> None:
        """Write from now on to what is at :attr:`path` now, in place of the file that was deleted or
        replaced: created when missing, checked as :meth:`open` checks it (a foreign or damaged file is
        left untouched).  Raises :class:`StoreGoneError` when it cannot be used; this store then
        writes nothing more."""
        try:
            self.conn.close()
        except sqlite3.Error:
            pass
        # SQLite leaves the -wal and -shm of a deleted database behind, and would read that log into the
        # next database made at the path: remove them -- only those this connection used (same identity)
        for sidecar, identity in self._sidecars.items():
            if identity is not None and _file_id(sidecar) == identity:
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
    def _write(self, sql: str, args: Sequence[object]) -> int:
        """Run one statement in its own ``BEGIN IMMEDIATE`` transaction.

        A full disk gets the write-ahead log checkpointed and truncated, then
        one more try.  A damaged file (found by this write) is never written
        again: every later write raises the same :class:`StoreDamagedError`
        without touching it."""
        if self.readonly:
            raise ValueError("this store was opened read-only")
        if self.damaged is not None:
            raise self.damaged
        again = True
        while True:
            try:
                done = self._transaction(sql, args)
                self._sidecars = self._own_sidecars()  # the log this write used (made on the first write)
                return done
            except sqlite3.Error as err:
                error = _error(self.path, err)
            if isinstance(error, StoreDamagedError):
                self.damaged = StoreDamagedError(t("store.damaged_now", path=self.path), self.path,
                                                 t("store.damaged_now.reason", path=self.path))
                raise self.damaged
            if isinstance(error, StoreFullError) and again and self._reclaim():
                again = False
                continue
            raise error

    def _transaction(self, sql: str, args: Sequence[object]) -> int:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            cur = self.conn.execute(sql, args)
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                try:
                    self.conn.execute("ROLLBACK")
                except sqlite3.Error:  # the first error is the one to report
                    pass
            raise
        return cur.lastrowid or 0

    def _reclaim(self) -> bool:
        """Checkpoint the write-ahead log into the file and truncate it: on a nearly full
        disk the log's own growth is what fails.  ``True`` when the log was emptied."""
        try:
            busy, _, _ = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error:
            return False
        return busy == 0

    def begin_session(self, exercise: str, *, mode: str, tolerance: float, started: str | None = None) -> int:
        """Start a practice session (at ``started``, default now); returns its id (committed at once)."""
        return self._write("INSERT INTO sessions (exercise, mode, tolerance, started) VALUES (?, ?, ?, ?)",
                           (exercise, mode, tolerance, started or _now()))

    def end_session(self, session: int) -> None:
        """Mark a session finished (a killed session simply has no end time)."""
        self._write("UPDATE sessions SET ended = ? WHERE id = ?", (_now(), session))

    def record(self, session: int, a: Attempt) -> None:
        """Store one answered step and commit it before returning.

        Raises :class:`StoreLockedError`, :class:`StoreFullError`,
        :class:`StoreDamagedError` or :class:`StoreError` when the file does not take it."""
        if a.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {a.outcome!r}")
        self._write(
            "INSERT INTO answers (session, at, exercise, step, head, outcome, attempt, hints, diagnosis, diagnosis_text, answer)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (session, a.at or _now(), a.exercise, a.step, a.head, a.outcome, a.attempt, a.hints, a.diagnosis, a.diagnosis_text, a.answer),
        )

    # -- reading --------------------------------------------------------------------
    def attempts(self) -> list[Attempt]:
        """Every recorded answer, oldest first (rows not as attn-tutor writes them left out: :data:`_AS_WRITTEN`)."""
        rows = self._read("SELECT exercise, step, head, outcome, attempt, hints, diagnosis, diagnosis_text, answer, at"
                          f" FROM {_ANSWERS} ORDER BY id")
        return [Attempt(*row) for row in rows]

    def _read(self, sql: str, args: Sequence[object] = ()) -> list[tuple]:
        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.Error as err:
            raise _error(self.path, err, reading=True) from None

    def stats(self, top: int = 5) -> Stats:
        """Accuracy by step kind, the ``top`` most frequent diagnoses, practice per (exercise, step).

        Only rows as attn-tutor writes them are counted (:data:`_AS_WRITTEN`: every value of
        the type its column holds); the others -- a value another program or a hand edit
        put there, such as a BLOB for a step -- are left out and counted in :attr:`Stats.left_out`,
        so that the rest of the progress stays usable.
        """
        (sessions,), = self._read("SELECT COUNT(*) FROM sessions")
        (left_out,), = self._read(f"SELECT COUNT(*) FROM answers WHERE NOT ({_AS_WRITTEN})")
        by_step = {
            step: StepStats(step, correct, wrong, shown, skipped, first)
            for step, correct, wrong, shown, skipped, first in self._read(
                "SELECT step, SUM(outcome = 'correct'), SUM(outcome = 'wrong'), SUM(outcome = 'shown'),"
                f" SUM(outcome = 'skipped'), SUM(outcome = 'correct' AND attempt = 1) FROM {_ANSWERS} GROUP BY step")
        }
        order: dict[str, int] = {s: i for i, s in enumerate(STEP_IDS)}
        steps = tuple(sorted(by_step.values(), key=lambda s: (order.get(s.step, len(order)), s.step)))
        diagnoses = tuple(
            DiagnosisCount(key, count, text or "")
            for key, count, text in self._read(
                "SELECT diagnosis, COUNT(*),"
                f" (SELECT b.diagnosis_text FROM {_ANSWERS} b WHERE b.diagnosis = a.diagnosis ORDER BY b.id DESC LIMIT 1)"
                f" FROM {_ANSWERS} a WHERE diagnosis IS NOT NULL GROUP BY diagnosis ORDER BY COUNT(*) DESC, diagnosis"
                " LIMIT ?",
                (top,))
        )
        practised = {(ex, step): n for ex, step, n in self._read(
            f"SELECT exercise, step, COUNT(*) FROM {_ANSWERS} WHERE outcome != 'skipped' GROUP BY exercise, step")}
        answers = sum(s.graded + s.skipped for s in steps)
        return Stats(sessions, answers, steps, diagnoses, practised, left_out)


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
    created when missing -- a new session row and every answer of this session,
    those already written to the old file included (:attr:`notice` says so);
    when that file cannot be used, the answers stay in :attr:`pending`
    (:attr:`lost`).  :attr:`session` is then the new session's id.
    """

    def __init__(self, store: Store, session: int):
        self.store = store
        self.session = session
        self.pending: list[Attempt] = []
        self.saved: list[Attempt] = []  # written this session: written again if the file goes away
        self.error: StoreError | None = None
        self.notice: str | None = None  # set when the answers were moved to a new file, for the caller to show
        try:
            self._row = store.session_row(session)  # (exercise, mode, tolerance, started): to start it again elsewhere
        except StoreError:
            self._row = None

    def add(self, a: Attempt) -> bool:
        """Write ``a`` (and any answer still waiting); ``True`` when nothing is left waiting."""
        if a.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {a.outcome!r}")
        self.pending.append(a if a.at is not None else replace(a, at=_now()))
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
        self.error = None
        return True

    def _move(self) -> bool:
        """The file went away: a new session row, and every answer of this session, in what is there now."""
        try:
            self.store.reopen()
            if self._row is None:  # its row could not be read when the session began: it cannot be started again
                raise StoreGoneError(t("store.gone_unusable", path=self.store.path, reason="?"), self.store.path)
            exercise, mode, tolerance, started = self._row
            self.session = self.store.begin_session(exercise, mode=mode, tolerance=tolerance, started=started)
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


# --- opening, checked ------------------------------------------------------------------


def _error(path: Path, err: sqlite3.Error, *, reading: bool = False) -> StoreError:
    """One sentence for an SQLite failure on ``path``, chosen by SQLite's result code.

    ``reading``: the failure came from a read (every check, ``stats``), so it is never worded
    as the file not being writable: SQLite's "attempt to write a readonly database" from a
    read-only connection means it could not undo a killed writer's unfinished write (a hot
    journal) or recover its log, and says so."""
    extended = getattr(err, "sqlite_errorcode", None) or 0
    code = extended & 0xFF
    if code in (_BUSY, _LOCKED):
        return StoreLockedError(t("store.locked", path=path), path)
    if code in (_CORRUPT, _NOTADB):
        return StoreDamagedError(t("store.corrupt", path=path), path)
    if code == _FULL:
        return StoreFullError(t("store.full", path=path), path)
    if extended == _READONLY_ROLLBACK:
        return StoreError(t("store.unfinished", path=path, reason=str(err)))
    if code == _READONLY and reading:
        return StoreError(t("store.read_failed", path=path, reason=str(err)))
    if code == _READONLY:
        return StoreError(t("store.readonly", path=path, reason=str(err)))
    return StoreError(t("store.failed", path=path, reason=str(err)))


def _header(path: Path) -> bytes:
    """The first :data:`_HEADER` bytes of ``path`` (fewer when the file is shorter)."""
    try:
        with path.open("rb") as f:
            return f.read(_HEADER)
    except OSError as err:
        raise StoreError(t("store.unreadable", path=path, reason=err.strerror or err)) from None


def _check_header(path: Path) -> None:
    """Refuse, before SQLite touches it, a path that is not a file or a file that is not SQLite."""
    if not path.exists() and not path.is_symlink():
        return
    if not path.is_file():
        raise StoreError(t("store.not_file", path=path))
    head = _header(path)[:len(_MAGIC)]
    if head and head != _MAGIC:
        if head.strip(b"\x00") == b"" and _journal_left(path):  # its first page never written: a killed creation
            raise StoreError(t("store.unfinished", path=path, reason=t("store.unfinished.header")))
        raise StoreError(t("store.foreign", path=path))


def _wal_frames(path: Path) -> bool:
    """Whether ``path``'s ``-wal`` file may hold committed pages (it exists and is longer than its header)."""
    try:
        return os.stat(f"{path}-wal").st_size > _WAL_HEADER
    except OSError:
        return False


def _fingerprint(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _unchanged(path: Path, before: tuple[int, int, int] | None) -> bool:
    """No checkpoint wrote ``path`` and no writer began a log since ``before`` was taken."""
    return _fingerprint(path) == before and not _wal_frames(path)


def _check_writable(path: Path) -> None:
    """Refuse before connecting when the file, or the folder its ``-wal``/``-shm`` files go in, cannot be written."""
    for target in (path, path.parent):
        if target.exists() and not os.access(target, os.W_OK):
            statvfs = getattr(os, "statvfs", None)
            read_only_fs = statvfs is not None and bool(statvfs(target).f_flag & getattr(os, "ST_RDONLY", 1))
            reason = os.strerror(errno.EROFS if read_only_fs else errno.EACCES)
            raise StoreError(t("store.readonly", path=path, reason=reason))


def _connect(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """A read-write connection (autocommit; transactions are explicit)."""
    try:
        conn = sqlite3.connect(str(path), timeout=busy_timeout_ms / 1000, isolation_level=None)
        conn.text_factory = _text
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA trusted_schema = OFF")  # views and triggers in the file may call no function with side effects
        # Keep the write-ahead log small: on a nearly full disk an ever-growing log (a copy of every page
        # written, until a checkpoint at 1000 pages) is what fills it, and cannot be checkpointed then.
        conn.execute(f"PRAGMA wal_autocheckpoint = {_WAL_PAGES}")
        conn.execute(f"PRAGMA journal_size_limit = {_WAL_LIMIT}")
    except sqlite3.Error as err:
        raise _error(path, err) from None
    return conn


def _connect_ro(path: Path, *, immutable: bool = False) -> sqlite3.Connection:
    """A read-only connection (``mode=ro``, optionally ``immutable=1``: see the module docstring),
    with the file opened: raises :class:`sqlite3.Error` (``SQLITE_CANTOPEN`` for a WAL file
    whose ``-shm`` cannot be created, ``SQLITE_CORRUPT`` ...) for the caller to word."""
    uri = path.absolute().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")
    conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    conn.text_factory = _text
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchall()  # SQLite opens the file lazily: open it now
    except BaseException:
        conn.close()
        raise
    return conn


def _nothing() -> None:
    pass


def _open_read(path: Path) -> tuple[sqlite3.Connection, Callable[[], None]]:
    """A read-only connection to ``path``, and what to do after closing it.

    ``mode=ro`` first; when SQLite cannot open it so (a WAL file in a
    read-only folder, without its ``-shm``), ``immutable=1`` if no ``-wal``
    file holds frames, else a copy of the file and its ``-wal`` in a
    temporary folder (removed by the returned callable)."""
    try:
        return _connect_ro(path), _nothing
    except sqlite3.Error as err:
        if (getattr(err, "sqlite_errorcode", None) or 0) & 0xFF != _CANTOPEN:
            raise _error(path, err, reading=True) from None
    if _wal_frames(path):
        return _open_copy(path)
    try:
        return _connect_ro(path, immutable=True), _nothing
    except sqlite3.Error as err:
        raise _error(path, err, reading=True) from None


def _journal_left(path: Path) -> bool:
    """Whether a rollback journal (``-journal``) with content lies next to ``path``: a writer was
    killed mid-transaction (or is writing now).  SQLite undoes such a write on the next read-write
    open; a read-only connection cannot, and refuses the file ("attempt to write a readonly database")."""
    try:
        return os.stat(f"{path}-journal").st_size > 0
    except OSError:
        return False


def _roll_back(path: Path) -> None:
    """Let SQLite undo the write a killed process left unfinished in ``path`` (its hot ``-journal``),
    through a read-write connection that reads one page and closes; the checks that follow are
    then made on what was committed.  (A journal of a writer still alive is not hot: SQLite waits
    for its lock instead.)  A file SQLite cannot read at all is left to those checks to name;
    one whose journal cannot be undone here (a read-only folder) is a :class:`StoreError` saying so."""
    try:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except sqlite3.Error as err:
        raise StoreError(t("store.unfinished", path=path, reason=str(err))) from None
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchall()
    except sqlite3.Error as err:
        code = (getattr(err, "sqlite_errorcode", None) or 0) & 0xFF
        if code not in (_CORRUPT, _NOTADB):
            raise StoreError(t("store.unfinished", path=path, reason=str(err))) from None
    finally:
        conn.close()


def _open_rolled_back_copy(path: Path) -> tuple[sqlite3.Connection, Callable[[], None]]:
    """Read what was committed to ``path`` when a ``-journal`` lies beside it, without writing it:
    the file and its journal are copied into a temporary folder, SQLite undoes the unfinished write
    in the copy, and the copy is read (``stats`` only reads, on a read-only file system too)."""
    folder = Path(tempfile.mkdtemp(prefix="attn-tutor-"))

    def cleanup() -> None:
        shutil.rmtree(folder, ignore_errors=True)

    copy = folder / FILENAME
    try:
        shutil.copyfile(path, copy)
        shutil.copyfile(f"{path}-journal", f"{copy}-journal")
        _roll_back(copy)
        if _header(copy)[:len(_MAGIC)] not in (_MAGIC, b""):
            raise StoreError(t("store.foreign", path=path))
        return _connect_ro(copy), cleanup
    except OSError as err:
        cleanup()
        raise StoreError(t("store.unreadable", path=path, reason=err.strerror or err)) from None
    except StoreError as err:
        cleanup()
        raise StoreError(str(err).replace(str(copy), str(path))) from None
    except sqlite3.Error as err:
        cleanup()
        raise _error(path, err, reading=True) from None


def _create(path: Path) -> None:
    """Create the store at ``path`` atomically: built complete (schema, application id, version,
    WAL mode) in a temporary file in the same folder, written to disk, then given its name.

    A process killed while creating leaves at most a hidden temporary file, never a half-made
    store (a kill during an in-place creation left an uncommitted file and a hot journal that
    every later read-only check refused).  The name is taken with a hard link, so a store another
    session created meanwhile is never replaced; an empty file (``touch``) is replaced whole.
    """
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        conn = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            conn.execute("BEGIN")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
            conn.execute("PRAGMA journal_mode = WAL")
        finally:
            conn.close()
        with tmp.open("rb+") as f:
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            if path.stat().st_size == 0:
                os.replace(tmp, path)
        except OSError:  # a file system without hard links
            if not path.exists() or path.stat().st_size == 0:
                os.replace(tmp, path)
        _sync_folder(path.parent)
    except sqlite3.Error as err:
        raise _error(path, err) from None
    except OSError as err:
        raise StoreError(t("store.readonly", path=path, reason=err.strerror or err)) from None
    finally:
        for leftover in (tmp, Path(f"{tmp}-journal"), Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            try:
                leftover.unlink()
            except OSError:
                pass


def _sync_folder(folder: Path) -> None:
    """Write a folder's entries to disk (a new name survives a power cut); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _open_copy(path: Path) -> tuple[sqlite3.Connection, Callable[[], None]]:
    """Read ``path`` and its ``-wal`` from a copy in a temporary folder (the original folder
    is read-only and SQLite cannot open the log there)."""
    folder = Path(tempfile.mkdtemp(prefix="attn-tutor-"))

    def cleanup() -> None:
        shutil.rmtree(folder, ignore_errors=True)

    copy = folder / FILENAME
    try:
        shutil.copyfile(path, copy)
        shutil.copyfile(f"{path}-wal", f"{copy}-wal")
        return _connect_ro(copy), cleanup
    except OSError as err:
        cleanup()
        raise StoreError(t("store.unreadable", path=path, reason=err.strerror or err)) from None
    except sqlite3.Error as err:
        cleanup()
        raise _error(path, err, reading=True) from None


def _identity(conn: sqlite3.Connection) -> tuple[int, int, list[tuple[str, str]]]:
    """``(application_id, user_version, [(type, name) of every schema object])``."""
    (app_id,), = conn.execute("PRAGMA application_id").fetchall()
    (version,), = conn.execute("PRAGMA user_version").fetchall()
    objects = [(str(kind), str(name)) for kind, name in conn.execute("SELECT type, name FROM sqlite_master")]
    return app_id, version, objects


def _verify(path: Path, app_id: int, version: int, objects: list[tuple[str, str]]) -> bool:
    """True when the file is ours and current; False when it is empty; raises otherwise.

    Empty means no schema object at all (a view, a trigger, an index or a
    virtual table is something) and no application id or version set."""
    if not objects and app_id == 0 and version == 0:
        return False
    if app_id != APPLICATION_ID:
        raise StoreError(t("store.foreign", path=path))
    if version > SCHEMA_VERSION:
        raise StoreError(t("store.newer", path=path, version=version, known=SCHEMA_VERSION))
    if version < 1 or not _TABLES <= {name for kind, name in objects if kind == "table"}:
        raise StoreDamagedError(t("store.corrupt", path=path), path)
    if any(kind == "trigger" for kind, _ in objects):
        raise StoreError(t("store.trigger", path=path))
    return True


def _judge(conn: sqlite3.Connection, path: Path, *, whole: bool) -> bool:
    """Whether the file behind ``conn`` is ours (True) or empty (False), checked with
    ``PRAGMA quick_check``; raises :class:`StoreError` otherwise.  ``whole``: the
    database file alone holds every page (no ``-wal`` frames), so its size must be
    a whole number of pages -- a shorter one was cut."""
    try:
        conn.execute("BEGIN")  # one snapshot for every check
        try:
            ours = _verify(path, *_identity(conn))
            (page,), = conn.execute("PRAGMA page_size").fetchall()
            problems = conn.execute("PRAGMA quick_check(1)").fetchall()
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
    except sqlite3.Error as err:
        raise _error(path, err, reading=True) from None
    cut = whole and bool(page) and (_fingerprint(path) or (0, 0, 0))[1] % page != 0
    if problems != [("ok",)] or cut:
        if ours:
            raise StoreDamagedError(t("store.corrupt", path=path), path)
        raise StoreError(t("store.foreign", path=path))
    return ours


def _inspect(path: Path) -> bool:
    """Check an existing, non-empty file before anything else opens it: ours (True),
    empty (False), else :class:`StoreError`.  Reads only.

    A WAL-mode file with no ``-wal`` frames is read ``immutable=1``, which
    creates no ``-wal``/``-shm`` file beside it.  Its size and modification
    time before and after, and the absence of ``-wal`` frames after, tell
    whether a writer began meanwhile (a checkpoint writes the file only after
    frames were written to the log); if so it is read again, in the end
    through SQLite's locks."""
    for _ in range(3):
        if _header(path)[18:19] != b"\x02" or _wal_frames(path):
            break
        before = _fingerprint(path)
        try:
            conn = _connect_ro(path, immutable=True)
        except sqlite3.Error as err:
            if _unchanged(path, before):
                raise _error(path, err, reading=True) from None
            continue
        try:
            verdict = _judge(conn, path, whole=True)
        except StoreError:
            if _unchanged(path, before):
                raise
            continue
        finally:
            conn.close()
        if _unchanged(path, before):
            return verdict
    whole = not _wal_frames(path)
    conn, cleanup = _open_read(path)
    try:
        return _judge(conn, path, whole=whole)
    finally:
        conn.close()
        cleanup()


def _adopt(conn: sqlite3.Connection, path: Path) -> None:
    """Check that the open file is ours, or initialise it when empty; then switch to WAL.

    The check and the initialisation share one ``BEGIN IMMEDIATE``
    transaction, so a session never reads a schema another session is
    half-way through creating (separate reads of the application id, the
    version and the tables could see it half-made and call the file foreign),
    and two sessions starting at once create it once.  (The file was already
    checked by :func:`_inspect` when it had any content; this repeats only the
    cheap identity check, for a file another session created meanwhile.)
    """
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not _verify(path, *_identity(conn)):
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        (mode,), = conn.execute("PRAGMA journal_mode").fetchall()
        if str(mode).lower() != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
    except sqlite3.Error as err:
        raise _error(path, err) from None
