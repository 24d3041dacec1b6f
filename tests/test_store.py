"""The progress store: schema and identity, refusing files that are not ours,
concurrent writers, and the pure summaries (counts worked out by hand)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tutor.errors import StoreError
from tutor.store import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    Attempt,
    Recorder,
    Stats,
    StepStats,
    Store,
    StoreLockedError,
    default_path,
    recommend,
)

from .conftest import REPO


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_default_path_is_under_attn_tutor_home(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_TUTOR_HOME", str(tmp_path / "h"))
    assert default_path() == tmp_path / "h" / "progress.sqlite3"


def test_default_path_without_home_is_the_platform_data_dir(monkeypatch):
    import platformdirs

    monkeypatch.delenv("ATTN_TUTOR_HOME")
    assert default_path() == Path(platformdirs.user_data_dir("attn-tutor", appauthor=False)) / "progress.sqlite3"


def test_a_new_store_is_versioned_identified_and_in_wal_mode(tmp_path):
    path = tmp_path / "deep" / "dir" / "p.sqlite3"
    Store.open(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID == 0x41545554
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 1
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"sessions", "answers"}
    conn.close()
    Store.open(path).close()  # reopening our own file is fine


def test_open_existing_creates_nothing(tmp_path):
    assert Store.open_existing(tmp_path / "none" / "p.sqlite3") is None
    assert not (tmp_path / "none").exists()


def test_records_and_stats_by_hand(tmp_path):
    with Store.open(tmp_path / "p.sqlite3") as store:
        s1 = store.begin_session("single-head-3x4", mode="matrix", tolerance=0.005)
        store.record(s1, Attempt("single-head-3x4", "q", 0, "correct", 1))
        store.record(s1, Attempt("single-head-3x4", "scaled", 0, "wrong", 1, 0, "no_scaling", "You forgot.", "2 4 4"))
        store.record(s1, Attempt("single-head-3x4", "scaled", 0, "wrong", 2, 1, "no_scaling", "You forgot again."))
        store.record(s1, Attempt("single-head-3x4", "scaled", 0, "correct", 3, 1))
        store.record(s1, Attempt("single-head-3x4", "weights", 0, "shown", 1))
        store.record(s1, Attempt("single-head-3x4", "head_output", 0, "skipped", 1))
        store.end_session(s1)
        s2 = store.begin_session("two-head-causal-3x4", mode="entry", tolerance=0.01)
        store.record(s2, Attempt("two-head-causal-3x4", "masked", 1, "wrong", 1, 0, "mask_zero", "Zero."))
        stats = store.stats()
        assert len(store.attempts()) == 7
        assert store.attempts()[1].answer == "2 4 4"
    assert stats.sessions == 2 and stats.answers == 7
    # steps in the order of the computation, not alphabetical
    assert [s.step for s in stats.steps] == ["q", "scaled", "masked", "weights", "head_output"]
    scaled = stats.step("scaled")
    assert (scaled.correct, scaled.wrong, scaled.shown, scaled.skipped, scaled.first_try) == (1, 2, 0, 0, 0)
    assert scaled.graded == 3 and scaled.accuracy == pytest.approx(1 / 3)
    assert stats.step("weights").accuracy == 0.0  # shown counts as a miss
    assert stats.step("head_output").accuracy is None  # skipped does not count
    assert stats.step("output") == StepStats("output")
    # no_scaling twice (latest sentence kept), mask_zero once
    assert [(d.key, d.count, d.message) for d in stats.diagnoses] == [
        ("no_scaling", 2, "You forgot again."), ("mask_zero", 1, "Zero.")]
    assert stats.practised[("single-head-3x4", "scaled")] == 3
    assert ("single-head-3x4", "head_output") not in stats.practised


def test_unknown_outcome_is_a_programming_error(tmp_path):
    with Store.open(tmp_path / "p.sqlite3") as store:
        s = store.begin_session("x", mode="matrix", tolerance=0.005)
        with pytest.raises(ValueError):
            store.record(s, Attempt("x", "q", 0, "great"))  # type: ignore[arg-type]


# --- files that are not ours are reported and left untouched -------------------------------


def test_text_file_is_refused_and_untouched(tmp_path):
    path = tmp_path / "p.sqlite3"
    path.write_text("my notes, not a database\n")
    before = digest(path)
    with pytest.raises(StoreError) as info:
        Store.open(path)
    assert str(info.value) == (f"{path} is not an attn-tutor progress file; it was left untouched "
                               "(move it away, or set ATTN_TUTOR_HOME to use another folder)")
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.sqlite3"]


def test_another_programs_database_is_refused_and_untouched(tmp_path):
    path = tmp_path / "p.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE contacts (name TEXT)")
    conn.execute("INSERT INTO contacts VALUES ('Ada')")
    conn.commit()
    conn.close()
    before = digest(path)
    with pytest.raises(StoreError, match="is not an attn-tutor progress file"):
        Store.open(path)
    assert digest(path) == before
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL
    assert conn.execute("SELECT name FROM contacts").fetchall() == [("Ada",)]
    conn.close()


def test_another_application_id_is_refused(tmp_path):
    path = tmp_path / "p.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 1234")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not an attn-tutor progress file"):
        Store.open(path)


def test_damaged_database_is_refused_and_untouched(tmp_path):
    path = tmp_path / "p.sqlite3"
    with Store.open(path) as store:
        store.record(store.begin_session("x", mode="matrix", tolerance=0.005), Attempt("x", "q", 0, "correct"))
    for extra in ("-wal", "-shm"):
        assert not (tmp_path / f"p.sqlite3{extra}").exists()  # checkpointed on close
    data = bytearray(path.read_bytes())
    data[100:] = b"\xff" * (len(data) - 100)  # keep the header, wreck every page
    path.write_bytes(bytes(data))
    before = digest(path)
    with pytest.raises(StoreError) as info:
        Store.open(path)
    assert str(info.value).startswith(f"the progress file {path} is damaged; it was left untouched")
    assert digest(path) == before


def test_truncated_header_is_refused(tmp_path):
    path = tmp_path / "p.sqlite3"
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 20)
    before = digest(path)
    with pytest.raises(StoreError):
        Store.open(path)
    assert digest(path) == before


def test_our_id_without_our_tables_is_damaged(tmp_path):
    path = tmp_path / "p.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    conn.execute("CREATE TABLE sessions (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="is damaged"):
        Store.open(path)


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "p.sqlite3"
    Store.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError) as info:
        Store.open(path)
    assert "written by a newer attn-tutor (schema 7; this one reads up to 1)" in str(info.value)


def test_an_empty_file_is_initialised(tmp_path):
    path = tmp_path / "p.sqlite3"
    path.touch()
    Store.open(path).close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 1


def test_a_directory_is_refused(tmp_path):
    (tmp_path / "p.sqlite3").mkdir()
    with pytest.raises(StoreError, match="is not a file"):
        Store.open(tmp_path / "p.sqlite3")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs file permissions")
def test_an_unreadable_file_is_one_error(tmp_path):
    path = tmp_path / "p.sqlite3"
    Store.open(path).close()
    path.chmod(0)
    try:
        with pytest.raises(StoreError, match="cannot read the progress file"):
            Store.open(path)
    finally:
        path.chmod(0o600)


# --- two sessions at once --------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys
    from tutor.store import Attempt, Store
    path, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.stdin.readline()  # wait for the go
    with Store.open(path) as store:
        s = store.begin_session(name, mode="matrix", tolerance=0.005)
        for i in range(n):
            store.record(s, Attempt(name, "q", 0, "correct" if i % 2 else "wrong", i + 1))
        store.end_session(s)
    print("done")
""")


def test_two_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "p.sqlite3"  # not created yet: both also race to create the schema
    n = 150
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name, str(n)], cwd=REPO,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in ("a", "b")]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.strip() == "done"
    with Store.open(path) as store:
        rows = store.attempts()
        stats = store.stats()
    assert len(rows) == 2 * n
    assert sorted(r.attempt for r in rows if r.exercise == "a") == list(range(1, n + 1))
    assert stats.sessions == 2
    assert stats.step("q").correct == n  # i odd: n/2 per writer


def lock(path: Path) -> sqlite3.Connection:
    """Another connection holding the write lock of ``path`` until it commits."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    return conn


def test_a_locked_file_fails_a_write_after_the_busy_timeout(tmp_path):
    path = tmp_path / "p.sqlite3"
    with Store.open(path, busy_timeout_ms=50) as store:
        s = store.begin_session("x", mode="matrix", tolerance=0.005)
        other = lock(path)
        with pytest.raises(StoreLockedError) as info:
            store.record(s, Attempt("x", "q", 0, "correct"))
        assert str(info.value) == f"the progress file {path} stayed locked by another session; try again"
        assert info.value.path == path
        other.execute("COMMIT")
        other.close()


def test_the_recorder_keeps_what_a_locked_file_refuses_and_writes_it_later_in_order(tmp_path):
    path = tmp_path / "p.sqlite3"
    with Store.open(path, busy_timeout_ms=50) as store:
        s = store.begin_session("x", mode="matrix", tolerance=0.005)
        recorder = Recorder(store, s)
        assert recorder.add(Attempt("x", "q", 0, "wrong", 1, answer="9 9")) is True
        other = lock(path)
        assert recorder.add(Attempt("x", "q", 0, "correct", 2)) is False
        assert recorder.add(Attempt("x", "k", 0, "skipped", 1)) is False
        assert [(a.step, a.attempt) for a in recorder.pending] == [("q", 2), ("k", 1)]
        assert isinstance(recorder.error, StoreLockedError)
        waiting = [a.at for a in recorder.pending]  # stamped when given
        assert recorder.flush() is False  # still locked: nothing lost, nothing written twice
        other.execute("COMMIT")
        other.close()
        assert recorder.add(Attempt("x", "v", 0, "correct", 1)) is True
        assert recorder.pending == [] and recorder.error is None
        got = [(a.step, a.outcome, a.attempt) for a in store.attempts()]
        ats = [a.at for a in store.attempts()]
    assert got == [("q", "wrong", 1), ("q", "correct", 2), ("k", "skipped", 1), ("v", "correct", 1)]
    assert ats[1:3] == waiting  # the time each was given, not the time it was written
    with Store.open(path) as store, pytest.raises(ValueError):
        Recorder(store, s).add(Attempt("x", "q", 0, "great"))  # type: ignore[arg-type]


# --- what to practise next ----------------------------------------------------------------------

EXERCISES = [
    ("single-head-3x4", {"q", "k", "v", "scores", "scaled", "weights", "head_output"}, 1),
    ("single-head-dk4-2x4", {"q", "k", "v", "scores", "scaled", "weights", "head_output"}, 1),
    ("padding-4x2", {"q", "k", "v", "scores", "scaled", "masked", "weights", "head_output"}, 2),
    ("two-head-causal-3x4", {"q", "k", "v", "scores", "scaled", "masked", "weights", "head_output", "concat", "output"}, 3),
]


def test_a_new_learner_starts_with_q_on_the_easiest_exercise():
    rec = recommend(Stats(), EXERCISES)
    assert (rec.step, rec.exercise) == ("q", "single-head-3x4")


def test_the_weakest_step_wins_and_its_least_practised_exercise():
    # scaled: 1 right of 4 -> (1+1)/(4+2) = 0.33; every other step right 2 of 2 -> 0.75; masked etc. unseen -> 0.5
    steps = tuple(StepStats(s, correct=2) for s in ("q", "k", "v", "scores", "weights", "head_output"))
    steps += (StepStats("scaled", correct=1, wrong=3),)
    practised = {("single-head-3x4", "scaled"): 4}
    rec = recommend(Stats(1, 16, steps, (), practised), EXERCISES)
    assert rec.step == "scaled"
    assert rec.exercise == "single-head-dk4-2x4"  # same difficulty, not practised on scaled yet
    assert (rec.stats.correct, rec.stats.graded) == (1, 4)


def test_an_unpractised_step_comes_before_mastered_ones():
    steps = tuple(StepStats(s, correct=3) for s in ("q", "k", "v", "scores", "scaled", "weights", "head_output"))
    rec = recommend(Stats(1, 21, steps), EXERCISES)
    # masked is the first step never practised (0.5 < 0.8); padding-4x2 is the easiest exercise with a mask
    assert (rec.step, rec.exercise) == ("masked", "padding-4x2")


def test_no_exercises_no_recommendation():
    assert recommend(Stats(), []) is None
