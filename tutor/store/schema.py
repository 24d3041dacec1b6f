"""What a progress file holds: the schema, how a file is recognised as ours, and the migrations.

Schema (version 2)::

    sessions(id, exercise, mode, tolerance, started, ended,
             steps, head, begin_at, complete)
    answers(id, session -> sessions.id, at, exercise, step, head, outcome,
            attempt, hints, diagnosis, diagnosis_text, answer, family)
    mistakes(answer -> answers.id, key, kind, rank)
    skills(step, family, state, learning_step, stability, difficulty, due, last_review, reviews)
    reviews(id, answer -> answers.id, session -> sessions.id, step, head, family, rating, at, before)

* ``sessions``: one practice session.  ``tolerance`` is ``--tolerance``
  (``NULL``: the rounding rule of :mod:`tutor.answers.grading`); ``steps``
  the ``--steps`` chosen (ids in the catalogue's order, comma-separated;
  ``NULL``: every step) and ``head`` the ``--head`` (0-based; ``NULL``: every
  head) -- with ``exercise`` and ``mode`` the key a session is resumed by;
  ``begin_at`` the 0-based index of the first step asked (the steps before
  it were given: a resumed session, or one started at the weakest step);
  ``complete`` 1 once every step asked was answered right, shown or skipped.
* ``answers``: each row an :class:`tutor.store.attempt.Attempt`.  ``outcome`` is
  ``correct``, ``wrong``, ``shown`` (revealed: a miss) or ``skipped`` (not
  counted); ``attempt`` the 1-based try at that step in that session;
  ``diagnosis`` the key of the first diagnosis of a wrong answer
  (``diagnosis_text``, its sentence, is kept for answers saved by schema 1
  and no longer written); ``family`` the exercise family
  (:attr:`tutor.exercise.record.Exercise.family`; ``NULL`` for schema 1's answers).
* ``mistakes``: every key that matched a wrong answer: ``kind`` is
  ``diagnosis`` (a misconception of :mod:`tutor.mistakes.diagnose`, or
  ``single_entry``; mistakes the answer cannot tell apart are one row, their
  keys joined by ``+``, :func:`tutor.mistakes.diagnose.group_key` -- rows
  written before kept one per key) or ``grading`` (a note of the grading rule, such as
  ``truncated_decimal``), ``rank`` its place among the answer's keys of
  that kind (0 first).  The step and exercise are the answer's.
* ``skills`` and ``reviews``: the spaced-repetition schedule
  (:mod:`.scheduling`): one row per skill (a step kind in an exercise
  family) with its fsrs card, and one row per graded step.

Identity: ``PRAGMA application_id`` is :data:`APPLICATION_ID` and ``PRAGMA
user_version`` the schema version.  A file of an older version is migrated
once, in one transaction, when it is opened to be written
(:func:`adopt`); one opened only to be read is migrated in a copy in memory
(:func:`migrated_copy`), never on disk.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from ..base.messages import t
from .errors import StoreDamagedError, StoreError

SCHEMA_VERSION = 2
APPLICATION_ID = 0x41545554  # "ATUT" in the database header

#: The tables each schema version has (a file missing one is damaged).
TABLES: dict[int, frozenset[str]] = {
    1: frozenset({"sessions", "answers"}),
    2: frozenset({"sessions", "answers", "mistakes", "skills", "reviews"}),
}

_SESSIONS = """
CREATE TABLE sessions (
    id        INTEGER PRIMARY KEY,
    exercise  TEXT NOT NULL,
    mode      TEXT NOT NULL,
    tolerance REAL,
    started   TEXT NOT NULL,
    ended     TEXT,
    steps     TEXT,
    head      INTEGER,
    begin_at  INTEGER NOT NULL DEFAULT 0,
    complete  INTEGER NOT NULL DEFAULT 0
)"""

_ANSWERS = """
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
    answer         TEXT,
    family         TEXT
)"""

#: The tables and indexes schema 2 adds to schema 1.
_ADDED = (
    "CREATE INDEX answers_by_session ON answers(session)",
    """CREATE TABLE mistakes (
    answer INTEGER NOT NULL REFERENCES answers(id),
    key    TEXT NOT NULL,
    kind   TEXT NOT NULL CHECK (kind IN ('diagnosis', 'grading')),
    rank   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (answer, key)
)""",
    """CREATE TABLE skills (
    step          TEXT NOT NULL,
    family        TEXT NOT NULL,
    state         INTEGER NOT NULL,
    learning_step INTEGER,
    stability     REAL,
    difficulty    REAL,
    due           TEXT NOT NULL,
    last_review   TEXT,
    reviews       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (step, family)
)""",
    """CREATE TABLE reviews (
    id      INTEGER PRIMARY KEY,
    answer  INTEGER NOT NULL REFERENCES answers(id),
    session INTEGER NOT NULL REFERENCES sessions(id),
    step    TEXT NOT NULL,
    head    INTEGER,
    family  TEXT NOT NULL,
    rating  INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 4),
    at      TEXT NOT NULL,
    before  TEXT NOT NULL
)""",
    "CREATE INDEX reviews_by_session ON reviews(session, step, head)",
)

#: A new file, at :data:`SCHEMA_VERSION`.
CREATE: tuple[str, ...] = (_SESSIONS, _ANSWERS, "CREATE INDEX answers_by_step ON answers(step, outcome)") + _ADDED

#: Schema 1 -> 2.  ``sessions`` is rebuilt (SQLite cannot drop the NOT NULL of ``tolerance`` in
#: place): its rows are copied with their ids, as complete (schema 1 did not record the steps a
#: session asked, so none of them is resumed); every diagnosis an answer kept becomes a mistake.
#: Answers saved before the schedule existed count in the accuracy, not in the schedule.
_V1_TO_V2: tuple[str, ...] = (
    _SESSIONS.replace("CREATE TABLE sessions", "CREATE TABLE sessions_v2"),
    "INSERT INTO sessions_v2 (id, exercise, mode, tolerance, started, ended, complete)"
    " SELECT id, exercise, mode, tolerance, started, ended, 1 FROM sessions ORDER BY id",
    "DROP TABLE sessions",
    "ALTER TABLE sessions_v2 RENAME TO sessions",
    "ALTER TABLE answers ADD COLUMN family TEXT",
) + _ADDED + (
    "INSERT INTO mistakes (answer, key, kind) SELECT id, diagnosis, 'diagnosis' FROM answers"
    " WHERE diagnosis IS NOT NULL",
)

#: A row of ``answers`` as attn-tutor writes it: the type SQLite holds for every value (``typeof``:
#: SQLite keeps whatever type a program writes, whatever the column says) and a known outcome.
#: Rows that are not are left out of every reading (:func:`.queries.stats`, :meth:`Store.attempts`,
#: what to resume, what is solved) and counted (:attr:`.queries.Stats.left_out`).
ANSWER_AS_WRITTEN = (
    "typeof(session) = 'integer' AND typeof(at) = 'text' AND typeof(exercise) = 'text'"
    " AND typeof(step) = 'text' AND typeof(head) IN ('integer', 'null') AND typeof(outcome) = 'text'"
    " AND outcome IN ('correct', 'wrong', 'shown', 'skipped') AND typeof(attempt) = 'integer'"
    " AND typeof(hints) = 'integer' AND typeof(diagnosis) IN ('text', 'null')"
    " AND typeof(diagnosis_text) IN ('text', 'null') AND typeof(answer) IN ('text', 'null')"
    " AND typeof(family) IN ('text', 'null')"
)
#: ``answers`` as a table of only the rows as written (``FROM`` this, ``AS`` an alias where needed).
ANSWERS = f"(SELECT * FROM answers WHERE {ANSWER_AS_WRITTEN})"
#: A row of ``mistakes`` as attn-tutor writes it (of an answer as written: see :data:`MISTAKES`).
MISTAKE_AS_WRITTEN = ("typeof(answer) = 'integer' AND typeof(key) = 'text' AND typeof(kind) = 'text'"
                      " AND kind IN ('diagnosis', 'grading') AND typeof(rank) = 'integer'")
MISTAKES = f"(SELECT * FROM mistakes WHERE {MISTAKE_AS_WRITTEN})"
#: A row of ``skills`` as the scheduler writes it (:mod:`.scheduling`).
SKILL_AS_WRITTEN = (
    "typeof(step) = 'text' AND typeof(family) = 'text' AND typeof(state) = 'integer'"
    " AND typeof(learning_step) IN ('integer', 'null') AND typeof(stability) IN ('real', 'null')"
    " AND typeof(difficulty) IN ('real', 'null') AND typeof(due) = 'text'"
    " AND typeof(last_review) IN ('text', 'null') AND typeof(reviews) = 'integer'"
)
#: A row of ``reviews`` whose rating and card before it can be read back (:func:`.scheduling.review`).
REVIEW_AS_WRITTEN = "typeof(rating) = 'integer' AND rating BETWEEN 1 AND 4 AND typeof(before) = 'text'"
#: A row of ``sessions`` whose selection can be resumed (:func:`.queries.unfinished`).
SESSION_AS_WRITTEN = ("typeof(exercise) = 'text' AND typeof(mode) = 'text' AND typeof(started) = 'text'"
                      " AND typeof(tolerance) IN ('real', 'null') AND typeof(steps) IN ('text', 'null')"
                      " AND typeof(head) IN ('integer', 'null') AND typeof(begin_at) = 'integer'"
                      " AND typeof(complete) = 'integer'")

#: ``MIGRATIONS[v]`` takes a file from version ``v`` to ``v + 1``.
MIGRATIONS: dict[int, tuple[str, ...]] = {1: _V1_TO_V2}


def identity(conn: sqlite3.Connection) -> tuple[int, int, list[tuple[str, str]]]:
    """``(application_id, user_version, [(type, name) of every schema object])``."""
    (app_id,), = conn.execute("PRAGMA application_id").fetchall()
    (version,), = conn.execute("PRAGMA user_version").fetchall()
    objects = [(str(kind), str(name)) for kind, name in conn.execute("SELECT type, name FROM sqlite_master")]
    return app_id, version, objects


def verify(path: Path, app_id: int, version: int, objects: list[tuple[str, str]]) -> bool:
    """True when the file is ours (this version or an older one this code migrates); False when
    it is empty; raises :class:`StoreError` otherwise.

    Empty means no schema object at all (a view, a trigger, an index or a
    virtual table is something) and no application id or version set."""
    if not objects and app_id == 0 and version == 0:
        return False
    if app_id != APPLICATION_ID:
        raise StoreError(t("store.foreign", path=path))
    if version > SCHEMA_VERSION:
        raise StoreError(t("store.newer", path=path, version=version, known=SCHEMA_VERSION))
    if version < 1 or not TABLES[version] <= {name for kind, name in objects if kind == "table"}:
        raise StoreDamagedError(t("store.corrupt", path=path), path)
    if any(kind == "trigger" for kind, _ in objects):
        raise StoreError(t("store.trigger", path=path))
    return True


def upgrade(conn: sqlite3.Connection, version: int) -> None:
    """Run the migrations from ``version`` to :data:`SCHEMA_VERSION` on ``conn``, inside the
    caller's transaction, and set the new version (``PRAGMA user_version`` is part of the
    transaction: a migration that fails leaves the file at its old version, every row kept)."""
    for v in range(version, SCHEMA_VERSION):
        for statement in MIGRATIONS[v]:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def initialise(conn: sqlite3.Connection) -> None:
    """Create the current schema (:data:`CREATE`) in an empty file, inside the caller's transaction,
    and set the application id and :data:`SCHEMA_VERSION` (a new file needs no migration)."""
    for statement in CREATE:
        conn.execute(statement)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def adopt(conn: sqlite3.Connection, path: Path) -> None:
    """Check that the open file is ours, initialise it when empty, migrate it when older; then switch to WAL.

    The check, the initialisation and the migration share one ``BEGIN
    IMMEDIATE`` transaction, so a session never reads a schema another
    session is half-way through creating or migrating (separate reads of the
    application id, the version and the tables could see it half-made and
    call the file foreign), and two sessions starting at once create or
    migrate it once.  Raises :class:`sqlite3.Error` for the caller to word.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        _app_id, version, objects = identity(conn)
        if not verify(path, _app_id, version, objects):
            initialise(conn)
        elif version < SCHEMA_VERSION:
            upgrade(conn, version)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    (mode,), = conn.execute("PRAGMA journal_mode").fetchall()
    if str(mode).lower() != "wal":
        conn.execute("PRAGMA journal_mode = WAL")


def migrated_copy(conn: sqlite3.Connection) -> sqlite3.Connection | None:
    """For a read-only connection to a file of an older schema: a copy of it in memory,
    migrated (the file is never written); ``None`` when the file is current."""
    (version,), = conn.execute("PRAGMA user_version").fetchall()
    if version >= SCHEMA_VERSION:
        return None
    memory = sqlite3.connect(":memory:", isolation_level=None)
    conn.backup(memory)
    memory.execute("BEGIN")
    upgrade(memory, version)
    memory.execute("COMMIT")
    return memory


class Rows(Protocol):
    """What a query needs of an open store: the rows of one SQL query (:meth:`tutor.store.Store.read`)."""

    def read(self, sql: str, args: Sequence[object] = ()) -> list[tuple]: ...
