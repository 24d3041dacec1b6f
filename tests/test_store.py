"""The progress store: schema and identity, refusing files that are not ours,
concurrent writers, and the pure summaries (counts worked out by hand)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tutor.base.errors import StoreError
from tutor.store import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    Attempt,
    Recorder,
    Stats,
    StepStats,
    Store,
    StoreDamagedError,
    StoreFullError,
    StoreLockedError,
    default_path,
    recommend,
)

from .conftest import REPO, wrapped

pytestmark = pytest.mark.usefixtures("child_environment")  # processes started here read their environment


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_default_path_is_in_the_data_folder(tmp_path):
    assert default_path(tmp_path / "h") == tmp_path / "h" / "progress.sqlite3"


def test_a_new_store_is_versioned_identified_and_in_wal_mode(tmp_path):
    path = tmp_path / "deep" / "dir" / "p.sqlite3"
    Store.open(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID == 0x41545554
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"sessions", "answers", "mistakes", "skills", "reviews"}
    conn.close()
    Store.open(path).close()  # reopening our own file is fine


def test_open_existing_creates_nothing(tmp_path):
    assert Store.open_existing(tmp_path / "none" / "p.sqlite3") is None
    assert not (tmp_path / "none").exists()


def test_records_and_stats_by_hand(tmp_path):
    with Store.open(tmp_path / "p.sqlite3") as store:
        s1 = store.begin_session("single-head-3x4", mode="matrix", tolerance=None)
        store.record(s1, Attempt("single-head-3x4", "q", 0, "correct", 1))
        store.record(s1, Attempt("single-head-3x4", "scaled", 0, "wrong", 1, 0, ("no_scaling",), "2 4 4"))
        store.record(s1, Attempt("single-head-3x4", "scaled", 0, "wrong", 2, 1, ("no_scaling", "transposed")))
        store.record(s1, Attempt("single-head-3x4", "scaled", 0, "correct", 3, 1))
        store.record(s1, Attempt("single-head-3x4", "weights", 0, "shown", 1))
        store.record(s1, Attempt("single-head-3x4", "head_output", 0, "skipped", 1))
        store.end_session(s1)
        s2 = store.begin_session("two-head-causal-3x4", mode="entry", tolerance=0.01)
        store.record(s2, Attempt("two-head-causal-3x4", "masked", 1, "wrong", 1, 0, ("mask_zero",)))
        store.record(s2, Attempt("two-head-causal-3x4", "weights", 1, "wrong", 1, 0, (), "0.10 0.44 0.44",
                                 notes=("truncated_decimal",)))
        stats = store.stats()
        assert len(store.attempts()) == 8
        assert store.attempts()[1].answer == "2 4 4"
        assert store.attempts()[2].diagnoses == ("no_scaling", "transposed")  # every key, in order
        assert store.attempts()[7].notes == ("truncated_decimal",)
    assert stats.sessions == 2 and stats.answers == 8
    # steps in the order of the computation, not alphabetical
    assert [s.step for s in stats.steps] == ["q", "scaled", "masked", "weights", "head_output"]
    scaled = stats.step("scaled")
    assert (scaled.correct, scaled.wrong, scaled.shown, scaled.skipped, scaled.first_try) == (1, 2, 0, 0, 0)
    assert scaled.graded == 3 and scaled.accuracy == pytest.approx(1 / 3)
    assert stats.step("weights").accuracy == 0.0  # shown counts as a miss
    assert stats.step("head_output").accuracy is None  # skipped does not count
    assert stats.step("output") == StepStats("output")
    # grouped by key (not by the first sentence), each with where it happened
    assert [(m.key, m.kind, m.count, [(p.exercise, p.step, p.head, p.count) for p in m.places])
            for m in stats.mistakes] == [
        ("no_scaling", "diagnosis", 2, [("single-head-3x4", "scaled", 0, 2)]),
        ("mask_zero", "diagnosis", 1, [("two-head-causal-3x4", "masked", 1, 1)]),
        ("transposed", "diagnosis", 1, [("single-head-3x4", "scaled", 0, 1)]),
        ("truncated_decimal", "grading", 1, [("two-head-causal-3x4", "weights", 1, 1)])]
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
    assert "written by a newer attn-tutor (schema 7; this one reads up to 2)" in str(info.value)


def test_an_empty_file_is_initialised(tmp_path):
    path = tmp_path / "p.sqlite3"
    path.touch()
    Store.open(path).close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 2


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


# --- issue 8: a damaged store is found before the first write (F.17) -----------------------------


def listing(folder: Path) -> dict[str, str]:
    """Every file in ``folder`` with the digest of its bytes: what "left untouched" promises."""
    return {p.name: digest(p) for p in sorted(folder.iterdir())}


def store_with_answers(path: Path, n: int = 30) -> None:
    """A real store of ``n`` answers, closed cleanly (so checkpointed: no -wal, no -shm)."""
    with Store.open(path) as store:
        s = store.begin_session("single-head-3x4", mode="matrix", tolerance=0.005)
        for i in range(n):
            store.record(s, Attempt("single-head-3x4", "q", 0, "wrong" if i % 3 else "correct", i + 1,
                                    answer="1 1; 2 2; 2 2"))
        store.end_session(s)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def cut(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


DAMAGED = "is damaged; it was left untouched (move it away to start afresh, or set ATTN_TUTOR_HOME to use another folder)"


# What the learner found: the last 100 bytes cut off (SQLite still reads the schema and takes new rows;
# quick_check sees the lost bytes), and its siblings: a byte, a kilobyte, a whole page, all but the header.
@pytest.mark.parametrize("lose", [100, 1, 1000, 4096, "all but the header", "half the header"])
def test_a_store_cut_short_is_refused_before_any_write_and_left_untouched(tmp_path, lose):
    path = tmp_path / "p.sqlite3"
    store_with_answers(path)
    size = path.stat().st_size
    keep = {"all but the header": 100, "half the header": 50}.get(lose) if isinstance(lose, str) else size - lose
    cut(path, keep)
    before = listing(tmp_path)
    for opener in (Store.open, Store.open_existing):
        with pytest.raises(StoreDamagedError) as info:
            opener(path)
        assert str(info.value) == f"the progress file {path} {DAMAGED}"
        assert listing(tmp_path) == before  # the file's bytes, and no -wal or -shm left beside it


def header_damage(data: bytearray, where: str) -> None:
    if where == "page size":
        data[16:18] = b"\x00\x03"  # not a power of two
    elif where == "size in pages":
        data[28:32] = (999).to_bytes(4, "big")  # more pages than the file holds
    elif where == "first page":
        data[100:110] = b"\xff" * 10  # the b-tree header of sqlite_master
    elif where == "a later page":
        data[2 * 4096:2 * 4096 + 8] = b"\xff" * 8  # a table's b-tree page header: only quick_check sees it
    elif where == "last page":
        data[-4096:-4000] = b"\x00" * 96


@pytest.mark.parametrize("where", ["page size", "size in pages", "first page", "a later page", "last page"])
def test_a_store_with_a_damaged_header_or_page_is_refused_and_left_untouched(tmp_path, where):
    path = tmp_path / "p.sqlite3"
    store_with_answers(path, 200)
    data = bytearray(path.read_bytes())
    header_damage(data, where)
    path.write_bytes(bytes(data))
    before = listing(tmp_path)
    for opener in (Store.open, Store.open_existing):
        with pytest.raises(StoreDamagedError, match="is damaged; it was left untouched"):
            opener(path)
    assert listing(tmp_path) == before


def test_the_learners_cut_store_stops_practice_and_stats_alike(tmp_path, cli):
    """F.17 as found: `stats` called the store damaged while `practice` wrote into it and said
    "saved".  Now both say it is damaged, before any question, and neither writes."""
    from .test_practice_cli import store_path

    path = store_path()
    path.parent.mkdir(parents=True)
    store_with_answers(path, 3)
    cut(path, path.stat().st_size - 100)
    before = listing(path.parent)
    for argv in (["practice", "single-head-3x4"], ["stats"], ["stats", "--format", "json"], ["practice"]):
        code, out, err = cli(*argv, input="1 1; 2 2; 2 2\nquit\n")
        assert code == 2, argv
        if "json" in argv:  # --format json: the error is also a JSON document on stdout (G.24)
            assert [e["message"] for e in json.loads(out)["errors"]] == [f"the progress file {path} {DAMAGED}"]
        else:
            assert out == "", argv  # not a single question asked, no claim that anything is saved
        assert err == f"error: the progress file {path} {DAMAGED}\n", argv
        assert listing(path.parent) == before, argv


def damage_under(path: Path) -> None:
    """Damage ``path`` while a session has it open, as another program or a failing disk would:
    the answers table's page is overwritten, and a commit by another connection makes every
    other connection read pages afresh."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        assert other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0  # every page in the file itself
        (root,), = other.execute("SELECT rootpage FROM sqlite_master WHERE name = 'answers'").fetchall()
        (page,), = other.execute("PRAGMA page_size").fetchall()
        with path.open("r+b") as f:
            f.seek((root - 1) * page)
            f.write(b"\xff" * page)
        other.execute("UPDATE sessions SET mode = mode")
    finally:
        other.close()


def test_damage_found_by_a_write_stops_every_later_write(tmp_path):
    path = tmp_path / "p.sqlite3"
    with Store.open(path) as store:
        s = store.begin_session("x", mode="matrix", tolerance=0.005)
        recorder = Recorder(store, s)
        assert recorder.add(Attempt("x", "q", 0, "correct")) is True
        damage_under(path)
        assert recorder.add(Attempt("x", "k", 0, "wrong", answer="9 9")) is False
        assert isinstance(recorder.error, StoreDamagedError) and recorder.lost
        assert recorder.error.reason == f"the progress file {path} turned out to be damaged, so nothing more is written to it"
        after = listing(tmp_path)
        assert recorder.add(Attempt("x", "k", 0, "correct", 2)) is False
        assert recorder.flush() is False
        with pytest.raises(StoreDamagedError):
            store.end_session(s)
        assert listing(tmp_path) == after  # not one more byte written once the damage was found
        assert [(a.step, a.attempt) for a in recorder.pending] == [("k", 1), ("k", 2)]  # kept, in order


def test_damage_found_mid_session_keeps_the_session_going_and_never_claims_saved(cli):
    from .test_practice_cli import Script, store_path, unwrapped

    # Q right; K wrong; (the file is damaged); K right; V right; quit
    stdin = Script("1 1; 2 2; 2 2\n9 9; 2 2; 2 2\n1 1; 2 2; 2 2\n1 1; 2 2; 2 2\nquit\n",
                   {3: lambda: damage_under(store_path())})
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q,k,v", input=stdin)
    path = store_path()
    reason = f"the progress file {path} turned out to be damaged, so nothing more is written to it"
    assert code == 2
    assert err == f"error: 2 answers could not be saved: {reason}\n"
    text = unwrapped(out.splitlines())
    assert len(wrapped(f"Not saved: {reason}. Nothing more from this session will be saved; "
                       "the summary lists what was not.", path).findall(out)) == 2
    assert "saved with your next answer" not in text and "Your answers are saved" not in text
    assert text.count("✓ Right.") == 2  # the session went on to its end
    assert [line.rstrip() for line in out.splitlines()][-4:] == [
        "Steps right: 3 of 3 (2 at the first try); shown: 0; skipped: 0.",
        "   1. Q  right at the first try",
        "   2. K  right after 1 wrong; not saved: answer 2",
        "   3. V  right at the first try; not saved: answer 1",
    ]
    assert cli("stats") == (2, "", f"error: the progress file {path} {DAMAGED}\n")


# --- issue 8: a foreign file with no table is not empty (F.19) ------------------------------------


def foreign(path: Path, *sql: str, wal: bool = False) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
    for statement in sql:
        conn.execute(statement)
    conn.close()


FOREIGN_SCHEMAS = {
    "a view": ["CREATE VIEW v AS SELECT 1 AS one"],
    "a view and its trigger": ["CREATE VIEW v AS SELECT 1 AS one",
                               "CREATE TRIGGER tr INSTEAD OF INSERT ON v BEGIN SELECT 1; END"],
    "a virtual table": ["CREATE VIRTUAL TABLE r USING rtree(id, x0, x1)"],
    "statistics only": ["CREATE TABLE t (x)", "CREATE INDEX i ON t (x)", "INSERT INTO t VALUES (1)", "ANALYZE",
                        "DROP TABLE t"],  # sqlite_stat1 stays
    "another program's version": ["PRAGMA user_version = 5"],
    "another program's id": ["PRAGMA application_id = 7"],
}


@pytest.mark.parametrize("wal", [False, True], ids=["rollback", "wal"])
@pytest.mark.parametrize("schema", FOREIGN_SCHEMAS)
def test_a_foreign_file_without_tables_is_refused_and_left_untouched(tmp_path, schema, wal):
    path = tmp_path / "p.sqlite3"
    foreign(path, *FOREIGN_SCHEMAS[schema], wal=wal)
    before = listing(tmp_path)
    for opener in (Store.open, Store.open_existing):
        with pytest.raises(StoreError) as info:
            opener(path)
        assert str(info.value) == (f"{path} is not an attn-tutor progress file; it was left untouched "
                                   "(move it away, or set ATTN_TUTOR_HOME to use another folder)")
        assert listing(tmp_path) == before  # no table added, not switched to WAL, no -wal/-shm beside it


def test_an_index_whose_table_is_gone_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "p.sqlite3"  # an index with no table: SQLite calls the schema malformed
    foreign(path, "CREATE TABLE t (x)", "CREATE INDEX i ON t (x)", "PRAGMA writable_schema = ON",
            "DELETE FROM sqlite_master WHERE type = 'table'", "PRAGMA writable_schema = OFF")
    before = listing(tmp_path)
    for opener in (Store.open, Store.open_existing):
        with pytest.raises(StoreError, match="is damaged; it was left untouched"):
            opener(path)
    assert listing(tmp_path) == before


KILLED_WRITER = textwrap.dedent("""
    import os, sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for statement in sys.argv[2:]:
        conn.execute(statement)
    os._exit(0)  # killed: the -wal file keeps what was committed, not yet checkpointed
""")


def killed_writer(path: Path, *sql: str) -> None:
    subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path), *sql], check=True, timeout=60)
    assert Path(f"{path}-wal").stat().st_size > 32


def test_a_foreign_file_with_a_wal_left_behind_keeps_its_file_and_its_log(tmp_path):
    """A read-write connection would checkpoint the other program's log into its file on close."""
    path = tmp_path / "p.sqlite3"
    foreign(path, "CREATE TABLE contacts (name TEXT)", wal=True)
    killed_writer(path, "INSERT INTO contacts VALUES ('Ada')")
    db, wal = digest(path), digest(Path(f"{path}-wal"))
    for opener in (Store.open, Store.open_existing):
        with pytest.raises(StoreError, match="is not an attn-tutor progress file"):
            opener(path)
        assert (digest(path), digest(Path(f"{path}-wal"))) == (db, wal)


@pytest.mark.parametrize("sql", ["", "PRAGMA journal_mode = WAL", "PRAGMA page_size = 1024"], ids=["none", "wal", "page"])
def test_a_sqlite_file_with_nothing_in_it_is_initialised_and_stats_leaves_it_alone(tmp_path, sql):
    path = tmp_path / "p.sqlite3"
    foreign(path, *([sql] if sql else []), "VACUUM")
    before = digest(path)
    assert Store.open_existing(path) is None  # nothing recorded yet: and stats writes nothing
    assert digest(path) == before
    with Store.open(path) as store:
        store.record(store.begin_session("x", mode="matrix", tolerance=0.005), Attempt("x", "q", 0, "correct"))
    with Store.open_existing(path) as store:
        assert len(store.attempts()) == 1


def test_stats_on_an_empty_file_writes_nothing(tmp_path):
    path = tmp_path / "p.sqlite3"
    path.touch()
    assert Store.open_existing(path) is None
    assert path.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == ["p.sqlite3"]


def test_our_store_with_a_trigger_is_refused_and_left_untouched(tmp_path):
    """A trigger would run on every answer saved (``DELETE FROM answers``, say): never ours."""
    path = tmp_path / "p.sqlite3"
    store_with_answers(path, 2)
    foreign(path, "CREATE TRIGGER forget AFTER INSERT ON answers BEGIN DELETE FROM answers; END")
    before = listing(tmp_path)
    for opener in (Store.open, Store.open_existing):
        with pytest.raises(StoreError) as info:
            opener(path)
        assert str(info.value).startswith(f"the progress file {path} holds a trigger, which attn-tutor never creates")
    assert listing(tmp_path) == before


def test_a_view_added_to_our_store_is_harmless(tmp_path):
    path = tmp_path / "p.sqlite3"
    store_with_answers(path, 2)
    foreign(path, "CREATE VIEW mine AS SELECT step, COUNT(*) FROM answers GROUP BY step")
    with Store.open(path) as store:
        store.record(store.begin_session("x", mode="matrix", tolerance=0.005), Attempt("x", "k", 0, "correct"))
        assert len(store.attempts()) == 3


@pytest.mark.parametrize("opener", ["open", "open_existing"])
def test_a_store_from_a_newer_attn_tutor_is_refused_and_left_untouched(tmp_path, opener):
    path = tmp_path / "p.sqlite3"
    store_with_answers(path, 2)
    foreign(path, "PRAGMA user_version = 3")
    before = listing(tmp_path)
    with pytest.raises(StoreError) as info:
        getattr(Store, opener)(path)
    assert str(info.value) == (f"the progress file {path} was written by a newer attn-tutor "
                               "(schema 3; this one reads up to 2); upgrade attn-tutor")
    assert listing(tmp_path) == before


# --- issue 8: reading needs no write access (F.18) -------------------------------------------------

# Root ignores file modes, so a read-only folder is made for real with a mount in a private mount
# namespace (`unshare -rm`: a user namespace too, so it needs no root where user namespaces are
# allowed).  Where that is impossible the tests below it simulate what SQLite does there.


def _can_mount() -> bool:
    if shutil.which("unshare") is None or os.name != "posix":
        return False
    r = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                       capture_output=True, check=False, timeout=60)
    return r.returncode == 0


CAN_MOUNT = _can_mount()
needs_mount = pytest.mark.skipif(not CAN_MOUNT, reason="needs `unshare -rm` and mount (a private mount namespace)")

READ_ONLY = textwrap.dedent("""
    import io, json, os, subprocess, sys
    source, target = sys.argv[1], sys.argv[2]
    subprocess.run(["mount", "--bind", source, target], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", target], check=True)
    os.environ["ATTN_TUTOR_HOME"] = target
    from tutor.cli import main
    results = []
    for argv in (["stats", "--format", "json"], ["practice", "single-head-3x4"]):
        out, err = io.StringIO(), io.StringIO()
        sys.stdout, sys.stderr, sys.stdin = out, err, io.StringIO("1 1; 2 2; 2 2\\nquit\\n")
        code = main(argv)
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        results.append([code, out.getvalue(), err.getvalue()])
    print(json.dumps(results))
""")


def read_only_run(source: Path, target: Path) -> list[tuple[int, str, str]]:
    """`stats --format json`, then `practice`, with ATTN_TUTOR_HOME a read-only mount of ``source``."""
    target.mkdir()
    r = subprocess.run(["unshare", "-rm", sys.executable, "-c", READ_ONLY, str(source), str(target)], cwd=REPO,
                       capture_output=True, text=True, check=False, timeout=120)
    assert r.returncode == 0, r.stderr
    return [tuple(x) for x in json.loads(r.stdout)]


@needs_mount
@pytest.mark.parametrize("left", ["nothing", "-wal and -shm", "-wal only"])
def test_stats_reads_a_store_on_a_read_only_file_system(tmp_path, left):
    """F.18: `stats` refused ("unable to open database file") a store it only reads.  Clean
    (no -wal: read immutable), after a killed session (-wal and -shm: read through them), and
    after a killed session whose -shm is gone (-wal only: read from a copy, not immutable,
    which would leave out the answers in the log)."""
    source = tmp_path / "home"
    source.mkdir()
    path = source / "progress.sqlite3"
    store_with_answers(path, 5)
    if left != "nothing":
        killed_writer(path, "INSERT INTO answers (session, at, exercise, step, outcome, attempt)"
                            " VALUES (1, '2024-01-01T00:00:00+00:00', 'single-head-3x4', 'k', 'correct', 1)")
        if left == "-wal only":
            Path(f"{path}-shm").unlink()
    before = listing(source)
    (code, out, err), (pcode, pout, perr) = read_only_run(source, tmp_path / "ro")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["answers"] == (5 if left == "nothing" else 6)  # the answer in the log is counted too
    assert doc["store"] == str(tmp_path / "ro" / "progress.sqlite3")
    # practice needs to write: one line, exit 2, before any question
    assert (pcode, pout) == (2, "")
    assert perr == (f"error: the progress file {tmp_path / 'ro' / 'progress.sqlite3'} cannot be written "
                    "(Read-only file system), and practice saves every answer in it: make it writable, "
                    "or set ATTN_TUTOR_HOME to a writable folder\n")
    assert listing(source) == before


@needs_mount
def test_a_damaged_store_on_a_read_only_file_system_is_reported_as_damaged(tmp_path):
    source = tmp_path / "home"
    source.mkdir()
    path = source / "progress.sqlite3"
    store_with_answers(path, 3)
    cut(path, path.stat().st_size - 100)
    (code, out, err), (pcode, pout, perr) = read_only_run(source, tmp_path / "ro")
    message = f"error: the progress file {tmp_path / 'ro' / 'progress.sqlite3'} {DAMAGED}\n"
    assert (code, err) == (2, message)
    assert [e["message"] for e in json.loads(out)["errors"]] == [message[len("error: "):-1]]  # stats --format json (G.24)
    assert (pcode, pout, perr) == (2, "", message)  # damaged comes before read-only: the more useful news


def refuse_plain_read_only(monkeypatch, tmp_path) -> list[bool]:
    """Make a plain ``mode=ro`` connection fail as SQLite does in a read-only folder when a WAL
    file's -shm cannot be created (SQLITE_CANTOPEN, "unable to open database file"), by opening a
    file in a folder that does not exist; ``immutable=1`` connections are left alone.  Returns the
    list of ``immutable`` flags asked for."""
    from tutor.store import files as store_module

    real = store_module.connect_ro
    asked: list[bool] = []

    def connect(path: Path, *, immutable: bool = False) -> sqlite3.Connection:
        asked.append(immutable)
        if not immutable and path.parent == tmp_path:
            return real(tmp_path / "no such folder" / path.name)
        return real(path, immutable=immutable)

    monkeypatch.setattr(store_module, "connect_ro", connect)
    return asked


def test_read_only_fallback_without_a_log_reads_the_file_immutable(tmp_path, monkeypatch):
    """The simulated F.18 (runs everywhere): the fallback is taken, and it reads every answer."""
    path = tmp_path / "p.sqlite3"
    store_with_answers(path, 4)
    asked = refuse_plain_read_only(monkeypatch, tmp_path)
    with Store.open_existing(path) as store:
        assert len(store.attempts()) == 4
    assert asked[-2:] == [False, True]


def test_read_only_fallback_with_a_log_reads_a_copy_and_misses_nothing(tmp_path, monkeypatch):
    path = tmp_path / "p.sqlite3"
    store_with_answers(path, 4)
    killed_writer(path, "INSERT INTO answers (session, at, exercise, step, outcome, attempt)"
                        " VALUES (1, '2024-01-01T00:00:00+00:00', 'x', 'k', 'correct', 1)")
    before = listing(tmp_path)
    refuse_plain_read_only(monkeypatch, tmp_path)
    store = Store.open_existing(path)
    try:
        assert [a.step for a in store.attempts()][-1] == "k"  # immutable=1 would have missed it
        copy = Path(store.conn.execute("PRAGMA database_list").fetchall()[0][2])
        assert copy.parent != tmp_path and copy.exists()
    finally:
        store.close()
    assert not copy.parent.exists()  # the copy is removed
    assert listing(tmp_path) == before


def test_stats_writes_nothing_to_a_healthy_store(tmp_path):
    path = tmp_path / "p.sqlite3"
    store_with_answers(path, 4)
    before = digest(path)
    with Store.open_existing(path) as store:
        assert store.readonly
        assert store.stats().answers == 4
        with pytest.raises(ValueError):
            store.record(1, Attempt("x", "q", 0, "correct"))
    assert digest(path) == before


def test_practice_on_a_read_only_folder_is_one_error_before_any_question(tmp_path, cli, monkeypatch):
    """Simulated (root may write anywhere): the folder reports no write access, as a read-only mount does."""
    from .test_practice_cli import store_path

    path = store_path()
    path.parent.mkdir(parents=True)
    store_with_answers(path, 2)
    before = listing(path.parent)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) in (path, path.parent) and mode == os.W_OK
                        else real(p, mode, **kw))
    code, out, err = cli("practice", "single-head-3x4", input="1 1; 2 2; 2 2\n")
    assert (code, out) == (2, "")
    assert err == (f"error: the progress file {path} cannot be written (Permission denied), and practice saves every "
                   "answer in it: make it writable, or set ATTN_TUTOR_HOME to a writable folder\n")
    assert listing(path.parent) == before
    code, out, err = cli("stats", "--format", "json")
    assert (code, err, json.loads(out)["answers"]) == (0, "", 2)


# --- issue 8: a full disk loses nothing that could be saved (F.20) ------------------------------


def test_a_full_file_keeps_answers_and_writes_them_in_order_once_there_is_room(tmp_path):
    """SQLITE_FULL made deterministic with ``PRAGMA max_page_count`` (the file may not grow)."""
    path = tmp_path / "p.sqlite3"
    with Store.open(path) as store:
        s = store.begin_session("x", mode="matrix", tolerance=0.005)
        recorder = Recorder(store, s)
        assert recorder.add(Attempt("x", "q", 0, "wrong", 1, answer="9 9")) is True
        (pages,), = store.conn.execute("PRAGMA page_count").fetchall()
        store.conn.execute(f"PRAGMA max_page_count = {pages}")
        big = "9 " * 5000  # needs pages the file may not have
        assert recorder.add(Attempt("x", "q", 0, "wrong", 2, answer=big)) is False
        assert isinstance(recorder.error, StoreFullError) and not recorder.lost
        assert str(recorder.error) == f"the disk holding the progress file {path} is full; free some space, then try again"
        assert recorder.error.reason == f"the disk holding the progress file {path} is full"
        assert recorder.add(Attempt("x", "q", 0, "correct", 3)) is False  # small, but not before the one waiting
        waiting = [a.at for a in recorder.pending]
        store.conn.execute("PRAGMA max_page_count = 1073741823")  # room again
        assert recorder.add(Attempt("x", "k", 0, "correct", 1)) is True
        rows = store.attempts()
    assert [(a.step, a.attempt, a.outcome) for a in rows] == [("q", 1, "wrong"), ("q", 2, "wrong"), ("q", 3, "correct"),
                                                             ("k", 1, "correct")]
    assert rows[1].answer == big and [a.at for a in rows[1:3]] == waiting


FULL_DISK = textwrap.dedent("""
    import io, json, os, sqlite3, subprocess, sys
    disk, size, fill_at, free_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", disk], check=True)
    os.environ["ATTN_TUTOR_HOME"] = os.path.join(disk, "home")
    filler = os.path.join(disk, "filler")

    def fill():
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\\0" * 4096)
        except OSError:  # ENOSPC: the disk is full
            pass
        os.close(fd)

    class Script(io.StringIO):
        def __init__(self, text, actions):
            super().__init__(text)
            self.actions, self.read = actions, 0
        def readline(self, *args):
            self.read += 1
            if self.read in self.actions:
                self.actions[self.read]()
            return super().readline(*args)

    wrong = "9" + " " * 1500 + "9; 2 2; 2 2\\n"  # 1.5 kB: the file must grow to take these
    from tutor.cli import main
    out, err = io.StringIO(), io.StringIO()
    sys.stdout, sys.stderr = out, err
    sys.stdin = Script(wrong * 46 + "1 1; 2 2; 2 2\\nquit\\n", {fill_at: fill, free_at: lambda: os.unlink(filler)})
    code = main(["practice", "single-head-3x4", "--steps", "q"])
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    conn = sqlite3.connect(os.path.join(disk, "home", "progress.sqlite3"))
    rows = conn.execute("SELECT attempt, outcome FROM answers ORDER BY id").fetchall()
    print(json.dumps([code, out.getvalue(), err.getvalue(), rows]))
""")


def full_disk_run(tmp_path: Path, fill_at: int, free_at: int) -> tuple[int, str, str, list]:
    disk = tmp_path / "disk"
    disk.mkdir()
    r = subprocess.run(["unshare", "-rm", sys.executable, "-c", FULL_DISK, str(disk), "256k", str(fill_at), str(free_at)],
                       cwd=REPO, capture_output=True, text=True, check=False, timeout=300)
    assert r.returncode == 0, r.stderr
    code, out, err, rows = json.loads(r.stdout)
    return code, out, err, [tuple(row) for row in rows]


@needs_mount
@pytest.mark.parametrize(("fill_at", "free_at"), [(10, 30), (20, 44), (40, 47)])
def test_answers_kept_while_the_disk_is_full_are_all_saved_once_space_is_freed(tmp_path, fill_at, free_at):
    """F.20 on a real 256 kB tmpfs: 47 answers of 1.5 kB; the disk is filled before answer
    ``fill_at`` and freed before answer ``free_at``.  The old store lost some that could be
    saved: the write-ahead log had grown to fill the disk itself and could not be checkpointed."""
    from .test_practice_cli import unwrapped

    code, out, err, rows = full_disk_run(tmp_path, fill_at, free_at)
    assert (code, err) == (0, "")
    assert rows == [(n, "wrong") for n in range(1, 47)] + [(47, "correct")]
    text = unwrapped(out.splitlines())
    assert "Not saved yet: the disk holding the progress file" in text  # it was full for a while
    assert out.splitlines()[-1] == "Your answers are saved; attn-tutor stats shows your progress."


@needs_mount
def test_answers_that_cannot_be_saved_are_each_named_in_the_summary(tmp_path):
    code, out, err, rows = full_disk_run(tmp_path, 5, 1000)  # filled, never freed
    saved = len(rows)
    assert 4 <= saved < 47 and rows == [(n, "wrong") for n in range(1, saved + 1)]
    home = tmp_path / "disk" / "home" / "progress.sqlite3"
    assert code == 2
    assert err == f"error: {47 - saved} answers could not be saved: the disk holding the progress file {home} is full\n"
    assert out.splitlines()[-1] == f"   1. Q  right after 46 wrong; not saved: answers {saved + 1}-47"
