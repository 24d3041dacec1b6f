"""Issue 11, items 6 and 7: the FSRS schedule in the progress store, its migration, stats by mistake.

The FSRS numbers are worked out here from the algorithm's published defaults (py-fsrs 6:
initial stability S₀(Again) = 0.212, S₀(Hard) = 1.2931, S₀(Good) = 2.3065; decay -0.1542).  With
the desired retention 0.9 the next interval is the stability itself, rounded to whole days (at
least 1): R(t) = (1 + F·t/S)^decay with F = 0.9^(1/decay) - 1 is 0.9 exactly at t = S.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tutor.store import AGAIN, APPLICATION_ID, GOOD, HARD, SCHEMA_VERSION, Attempt, Store, skills
from tutor.store.scheduling import rating

from .test_practice_cli import practise, rows, store_path

pytestmark = pytest.mark.usefixtures("child_environment")  # store_path() reads where it puts the store

DECAY = -0.1542
F = 0.9 ** (1 / DECAY) - 1
S0 = {AGAIN: 0.212, HARD: 1.2931, GOOD: 2.3065}
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def recall(days: int, stability: float) -> float:
    return (1 + F * days / stability) ** DECAY


def test_the_formulas_of_the_docstring():
    assert recall(3, 3.0) == pytest.approx(0.9)
    assert recall(0, 1.0) == 1.0


def at(days: float = 0) -> str:
    return (T0 + timedelta(days=days)).isoformat(timespec="seconds")


def test_ratings_from_the_outcome():
    a = Attempt("x", "q", 0, "correct")
    assert rating(a, None) == GOOD  # right at the first try, no hint
    assert rating(Attempt("x", "q", 0, "correct", 1, 1), None) == HARD  # after a hint
    assert rating(Attempt("x", "q", 0, "wrong"), None) == AGAIN
    assert rating(Attempt("x", "q", 0, "shown"), None) == AGAIN
    assert rating(Attempt("x", "q", 0, "correct", 3), AGAIN) == HARD  # right after tries: the Again is revised
    assert rating(Attempt("x", "q", 0, "wrong", 2), AGAIN) is None  # one review per step and session
    assert rating(Attempt("x", "q", 0, "skipped"), None) is None


@pytest.mark.parametrize(("answers", "expected"), [
    ([("correct", 1)], GOOD),
    ([("wrong", 1), ("correct", 2)], HARD),
    ([("wrong", 1), ("wrong", 2), ("shown", 3)], AGAIN),
    ([("shown", 1)], AGAIN),
])
def test_one_review_per_graded_step_with_its_stability_and_due_time(tmp_path, answers, expected):
    with Store.open(tmp_path / "p.sqlite3") as store:
        s = store.begin_session("single-head-3x4", mode="matrix", tolerance=None)
        for outcome, attempt in answers:
            store.record(s, Attempt("single-head-3x4", "scores", 0, outcome, attempt, at=at(), family="single-head"))
        rows = store.read("SELECT rating FROM reviews")
        (skill,) = skills(store, T0)
    assert rows == [(expected,)]
    assert (skill.step, skill.family, skill.reviews) == ("scores", "single-head", 1)
    assert skill.due == T0 + timedelta(days=max(1, round(S0[expected])))  # Good: 2 days; Hard, Again: 1 day
    conn = sqlite3.connect(tmp_path / "p.sqlite3")
    (stability,), = conn.execute("SELECT stability FROM skills").fetchall()
    assert stability == pytest.approx(S0[expected])


def test_a_skill_is_shared_by_the_exercises_of_a_family_and_due_later_after_a_good_review(tmp_path):
    with Store.open(tmp_path / "p.sqlite3") as store:
        s = store.begin_session("single-head-3x4", mode="matrix", tolerance=None)
        store.record(s, Attempt("single-head-3x4", "q", 0, "correct", at=at(), family="single-head"))
        s = store.begin_session("single-head-dk4-2x4", mode="matrix", tolerance=None)
        store.record(s, Attempt("single-head-dk4-2x4", "q", 0, "correct", at=at(2), family="single-head"))
        (skill,) = skills(store, T0 + timedelta(days=2))
        assert skill.reviews == 2
        assert skill.due > T0 + timedelta(days=4)  # a second Good review, on time: a longer interval than the first
        assert skill.retention == pytest.approx(1.0)  # reviewed just now


def test_done_when_stats_json_reports_the_next_due_time_and_the_retention_per_step(cli):
    code, _, _ = practise(cli, "1 1; 2 2; 2 2\n1 1; 2 2; 2 3\nquit\n", "single-head-3x4")
    assert code == 0
    conn = sqlite3.connect(store_path())  # move the reviews three days back, as if they were made then
    (reviewed,), = conn.execute("SELECT last_review FROM skills WHERE step = 'q'").fetchall()
    back = timedelta(days=3)
    for step, due, last in conn.execute("SELECT step, due, last_review FROM skills").fetchall():
        conn.execute("UPDATE skills SET due = ?, last_review = ? WHERE step = ?",
                     ((datetime.fromisoformat(due) - back).isoformat(), (datetime.fromisoformat(last) - back).isoformat(),
                      step))
    conn.commit()
    conn.close()
    code, out, _ = cli("stats", "--format", "json")
    assert code == 0
    steps = {s["step"]: s for s in json.loads(out)["steps"]}
    q, k = steps["q"], steps["k"]
    # q: right at the first try (Good): stability 2.3065, due 2 days after the review, recall after 3 days
    assert datetime.fromisoformat(q["due"]) == datetime.fromisoformat(reviewed) - back + timedelta(days=2)
    assert q["retention"] == pytest.approx(recall(3, 2.3065), abs=1e-4)
    assert q["skills"] == [{"family": "single-head", "due": q["due"], "retention": q["retention"], "reviews": 1}]
    # k: wrong (Again): stability 0.212, due 1 day after
    assert k["retention"] == pytest.approx(recall(3, 0.212), abs=1e-4)
    assert {d["step"] for d in json.loads(out)["due_now"]} == {"q", "k"}
    code, out, _ = cli("stats")
    assert "Due now: 2 skills. attn-tutor practice --due reviews them." in out


def test_practice_due_reviews_what_is_due(cli):
    assert " ".join(practise(cli, "", "--due")[1]) == (
        "Nothing is scheduled yet: practise first (attn-tutor practice), and each step you answer is scheduled "
        "for review.")
    practise(cli, "1 1; 2 2; 2 2\n1 1; 2 2; 2 3\nquit\n", "single-head-3x4")
    code, out, _ = practise(cli, "", "--due")
    assert code == 0 and out[0].startswith("Nothing is due for review now; the next review is ")
    conn = sqlite3.connect(store_path())
    conn.execute("UPDATE skills SET due = '2000-01-01T00:00:00+00:00' WHERE step = 'k'")
    conn.commit()
    conn.close()
    code, out, _ = practise(cli, "quit\n", "--due")
    assert out[0] == "Reviewing what is due on single-head-3x4 (single-head): k."
    assert "Step 1 of 1: Keys K" in out
    code, out, err = practise(cli, "", "--due", "--steps", "q")
    assert code == 2


def test_a_store_written_by_schema_1_migrates_once_keeping_every_row(tmp_path):
    """A schema-1 store, written with schema 1's own statements (the code before this issue), opens
    and migrates once, in one transaction; stats reads an unmigrated copy without writing it."""
    path = tmp_path / "p.sqlite3"
    v1(path)
    copy = tmp_path / "copy.sqlite3"
    shutil.copyfile(path, copy)
    before = hashlib.sha256(copy.read_bytes()).hexdigest()
    with Store.open_existing(copy) as store:  # read-only: migrated in memory
        stats = store.stats()
        assert stats.answers == 3 and [m.key for m in stats.mistakes] == ["no_scaling"]
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == before
    with Store.open(path) as store:
        attempts = store.attempts()
        store.record(store.begin_session("x", mode="matrix", tolerance=None),
                     Attempt("x", "q", 0, "correct", family="single-head"))
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    assert conn.execute("SELECT id, exercise, mode, tolerance, ended, complete FROM sessions ORDER BY id").fetchall() == [
        (1, "single-head-3x4", "matrix", 0.005, "2024-05-01T10:05:00+00:00", 1),
        (2, "two-head-causal-3x4", "entry", 0.01, None, 1),  # schema 1 kept no selection: never resumed
        (3, "x", "matrix", None, None, 0)]
    assert [(a.step, a.outcome, a.diagnoses, a.answer) for a in attempts] == [
        ("q", "correct", (), "1 1; 2 2; 2 2"), ("scaled", "wrong", ("no_scaling",), "2 4 4; 4 8 8; 4 8 8"),
        ("masked", "wrong", (), None)]
    assert conn.execute("SELECT diagnosis_text FROM answers WHERE id = 2").fetchone() == ("You forgot.",)  # kept
    assert conn.execute("SELECT COUNT(*) FROM skills").fetchone() == (1,)
    conn.close()
    with Store.open(path) as store:  # once: a second open finds it current
        assert len(store.attempts()) == 4


def v1(path: Path) -> None:
    """A store as schema 1 wrote it (its statements, verbatim), with two sessions and three answers."""
    conn = sqlite3.connect(path)
    conn.executescript(f"""
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
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = 1;
INSERT INTO sessions VALUES (1, 'single-head-3x4', 'matrix', 0.005, '2024-05-01T10:00:00+00:00', '2024-05-01T10:05:00+00:00');
INSERT INTO sessions VALUES (2, 'two-head-causal-3x4', 'entry', 0.01, '2024-05-02T10:00:00+00:00', NULL);
INSERT INTO answers VALUES (1, 1, '2024-05-01T10:01:00+00:00', 'single-head-3x4', 'q', 0, 'correct', 1, 0, NULL, NULL, '1 1; 2 2; 2 2');
INSERT INTO answers VALUES (2, 1, '2024-05-01T10:02:00+00:00', 'single-head-3x4', 'scaled', 0, 'wrong', 1, 0, 'no_scaling', 'You forgot.', '2 4 4; 4 8 8; 4 8 8');
INSERT INTO answers VALUES (3, 2, '2024-05-02T10:01:00+00:00', 'two-head-causal-3x4', 'masked', 1, 'wrong', 1, 0, NULL, NULL, NULL);
""")
    conn.commit()
    conn.close()


def test_a_failed_migration_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    from tutor.store import schema

    path = tmp_path / "p.sqlite3"
    v1(path)
    broken = schema.MIGRATIONS[1][:-1] + ("INSERT INTO no_such_table VALUES (1)",)
    monkeypatch.setitem(schema.MIGRATIONS, 1, broken)
    with pytest.raises(Exception):
        Store.open(path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM answers").fetchone() == (3,)
    assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} == {"sessions", "answers"}


def test_stats_groups_mistakes_by_key_and_names_where_each_happened(cli):
    unscaled = "2 4 4; 4 8 8; 4 8 8"
    practise(cli, "1 1; 2 2; 2 2\n" * 3 + "2 4 4; 4 8 8; 4 8 8\n" + f"{unscaled}\n{unscaled}\nquit\n", "single-head-3x4")
    # two-head causal, head 2: Q = [[0, 2], [4, 0], [2, 2]], K = [[2, 0], [0, 4], [2, 2]]; scores = Q·Kᵀ
    # = [[0, 8, 4], [8, 0, 8], [4, 8, 8]] (by hand); unscaled masked scores keep them below the diagonal
    practise(cli, "0 -inf -inf; 8 0 -inf; 4 8 8\nquit\n", "two-head-causal-3x4", "--steps", "masked", "--head", "2")
    code, out, _ = cli("stats", "--format", "json")
    mistakes = {m["key"]: m for m in json.loads(out)["mistakes"]}
    assert mistakes["no_scaling"]["count"] == 3
    assert mistakes["no_scaling"]["name"] == "forgot to divide by √d_k"
    assert mistakes["no_scaling"]["where"] == [
        {"exercise": "single-head-3x4", "step": "scaled", "head": 0, "heads": 1, "count": 2},
        {"exercise": "two-head-causal-3x4", "step": "masked", "head": 1, "heads": 2, "count": 1}]
    code, out, _ = cli("stats")
    assert "  3×  forgot to divide by √d_k" in out
    assert "      in single-head-3x4 scaled ×2, two-head-causal-3x4 masked (head 2) ×1" in out


# --- a schedule of the right types, out of range (issue 20, B) -------------------------------------------

#: Values of the right SQL type that the scheduler never writes, each in the column it goes in: a stability of
#: 0 (a division by zero), negative, infinite or vast; a due date in the year 9999 (with an offset that carries
#: it past the calendar, too); a last review in the far future or before any real one;
#: a difficulty off FSRS's [1, 10]; a state it does not have; a negative learning step.
OUT_OF_RANGE = [
    "stability = 0", "stability = -1", "stability = 9e999", "stability = -9e999", "stability = 1e300",
    "due = '9999-12-31T23:59:59+00:00'", "due = '9999-12-31T23:59:59-14:00'",
    "last_review = '9999-01-01T00:00:00+00:00'", "last_review = '0001-01-01T00:00:00+00:00'",
    "difficulty = 0.0", "difficulty = 99.0", "state = 7", "learning_step = -5",
]


@pytest.mark.parametrize("change", OUT_OF_RANGE)
def test_a_schedule_out_of_range_starts_afresh_and_no_answer_is_lost(cli, change):
    """One right answer, then a skill's row edited to a value of its type the scheduler never writes:
    ``stats`` and ``practice --due`` leave it out and say so (exit 0); the next ``practice`` saves its
    answer, says once that the skill starts afresh, and writes a schedule the scheduler wrote again."""
    right = "1 1; 2 2; 2 2\nquit\n"
    assert practise(cli, right, "single-head-3x4", "--steps", "q")[0] == 0
    conn = sqlite3.connect(store_path())
    conn.execute(f"UPDATE skills SET {change}")
    conn.commit()
    conn.close()

    code, out, err = cli("stats")
    assert (code, err) == (0, "")
    assert "1 row of the progress file is not as attn-tutor writes it" in " ".join(out.split())
    code, doc, err = cli("stats", "--format", "json")
    assert code == 0 and json.loads(doc)["left_out"] == 1 and json.loads(doc)["steps"][0]["due"] is None
    code, out, err = cli("practice", "--due", input="quit\n")
    assert code == 0 and "internal error" not in err

    code, lines, err = practise(cli, right * 2, "single-head-3x4", "--steps", "q")  # the second line: quit's
    text = " ".join(" ".join(lines).split())
    assert (code, err) == (0, "")
    assert text.count("The review schedule of q (single-head) in the progress file held values attn-tutor does not "
                      "write") == 1
    assert rows("SELECT COUNT(*) FROM answers") == [(2,)]  # the answer just typed is saved
    (stability, difficulty, due, last), = rows("SELECT stability, difficulty, due, last_review FROM skills")
    assert stability == pytest.approx(S0[GOOD]) and 1 <= difficulty <= 10  # a first Good review again
    assert datetime.fromisoformat(due) - datetime.fromisoformat(last) == timedelta(days=2)
    code, doc, _ = cli("stats", "--format", "json")
    assert json.loads(doc)["left_out"] == 0


def test_a_schedule_in_range_is_kept(tmp_path):
    """The bounds leave a schedule the scheduler wrote alone: a card a century ahead, the largest interval."""
    from tutor.store.scheduling import card_of

    now = datetime.now(UTC)
    far = (now + timedelta(days=36500)).isoformat()
    card = card_of((2, None, 36500.0, 10.0, far, now.isoformat()), now)
    assert card is not None and card.stability == 36500.0
    assert card_of((2, None, 0.0009, 5.0, far, now.isoformat()), now) is None  # below FSRS's STABILITY_MIN
    ahead = card_of((2, None, 3.0, 5.0, "2026-12-01T10:00:00+14:00", "2026-11-28T10:00:00-12:00"), now)
    assert ahead is not None and ahead.due == datetime(2026, 11, 30, 20, 0, tzinfo=UTC)  # an offset read as UTC
