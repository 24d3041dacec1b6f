"""The progress store under a hostile tester (issue 8, second round): a store whose creation was killed,
values of the wrong type in a row, the file deleted under a running session."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tutor.base.errors import StoreError
from tutor.store import Attempt, Store
from tutor.store import files as store_files

from .conftest import REPO

pytestmark = pytest.mark.usefixtures("child_environment")  # processes started here read their environment


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_python(code: str, *args: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], cwd=REPO,
                          capture_output=True, timeout=120, check=False)


# --- item 2: a write killed half-way never locks the learner out --------------------------------

#: A process that writes ``sys.argv[1]`` in rollback-journal mode and is killed (SIGKILL) before its
#: commit, after its pages reached the file: the file holds uncommitted pages, its -journal is hot.
#: ``sys.argv[2]``: "create" makes the schema (as attn-tutor used to create a store in place),
#: "append" adds 200 answers to an existing store.
KILLED_WRITER = """
    import os, signal, sqlite3, sys
    from tutor.store import schema
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA cache_size = 1")  # pages spill into the file before the commit
    conn.execute("BEGIN IMMEDIATE")
    if sys.argv[2] == "create":
        schema.initialise(conn)
    for i in range(200):
        conn.execute("INSERT INTO sessions (exercise, mode, tolerance, started) VALUES (?, 'matrix', 0.1, 'now')",
                     ("x" * 500,))
    os.kill(os.getpid(), signal.SIGKILL)
"""


def killed_writer(path: Path, what: str) -> None:
    done = run_python(KILLED_WRITER, path, what)
    assert done.returncode == -9, done.stderr.decode()
    assert Path(f"{path}-journal").stat().st_size > 0  # hot: the next reader must undo the write
    assert path.stat().st_size > 4096


def test_stats_reads_a_store_whose_creation_was_killed_and_writes_nothing(cli, tmp_path):
    """The tester's lock-out: every command said the file "cannot be written (attempt to write a readonly
    database)", because the checks' read-only connections cannot roll a hot journal back.  stats now reads
    what was committed (nothing) from a copy, and leaves both files exactly as they were."""
    home = tmp_path / "home"
    home.mkdir()
    path = home / "progress.sqlite3"
    killed_writer(path, "create")
    before = digest(path), digest(Path(f"{path}-journal"))
    code, out, err = cli("stats")
    assert (code, err) == (0, "")
    assert "No practice recorded yet." in out
    assert (digest(path), digest(Path(f"{path}-journal"))) == before
    code, out, err = cli("stats", "--format", "json")
    assert code == 0 and '"answers": 0' in out


def test_practice_undoes_a_killed_creation_and_saves(cli, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    path = home / "progress.sqlite3"
    killed_writer(path, "create")
    code, out, err = cli("practice", "single-head-3x4", input="1 1; 2 2; 2 2\n")
    assert (code, err) == (0, "")
    assert "Your answers are saved" in out
    assert not Path(f"{path}-journal").exists()
    with Store.open_existing(path) as s:
        assert [(a.step, a.outcome) for a in s.attempts()] == [("q", "correct")]


def test_a_killed_write_to_a_store_with_answers_keeps_the_committed_ones(cli, tmp_path):
    """The sibling: a store with answers, in rollback-journal mode (another tool switched it), and a
    writer killed mid-transaction.  stats shows the committed answers; practice undoes the write."""
    path = tmp_path / "home" / "progress.sqlite3"
    with Store.open(path) as s:
        session = s.begin_session("single-head-3x4", mode="matrix", tolerance=0.005)
        s.record(session, Attempt("single-head-3x4", "q", 0, "wrong", 1, answer="1 2"))
    killed_writer(path, "append")
    before = digest(path)
    code, out, err = cli("stats", "--format", "json")
    assert (code, err) == (0, "")
    assert '"sessions": 1' in out and '"answers": 1' in out
    assert digest(path) == before
    code, out, err = cli("practice", "single-head-3x4", input="1 1; 2 2; 2 2\n")
    assert (code, err) == (0, "")
    with Store.open_existing(path) as s:
        assert [(a.step, a.outcome) for a in s.attempts()] == [("q", "wrong"), ("q", "correct")]
        assert s.stats().sessions == 2


def test_a_hot_journal_met_by_a_read_only_connection_is_named_truthfully(tmp_path, monkeypatch):
    """A writer killed between the checks and the read: the read-only connection meets the hot journal.
    The sentence says what is wrong, never that the file "cannot be written" (stats only reads)."""
    path = tmp_path / "p.sqlite3"
    with Store.open(path) as s:
        s.record(s.begin_session("single-head-3x4", mode="matrix", tolerance=0.005),
                 Attempt("single-head-3x4", "q", 0, "correct"))
    killed_writer(path, "append")
    monkeypatch.setattr(store_files, "journal_left", lambda path: False)  # as if it appeared after the look
    with pytest.raises(StoreError) as info:
        Store.open_existing(path)
    message = str(info.value)
    assert "cannot be written" not in message
    assert message.startswith(f"the progress file {path} holds a write left unfinished by a process that was stopped")


def test_a_store_whose_first_page_was_never_written_is_not_called_foreign(tmp_path):
    """A creation killed before page 1 reached the file: its header is zeros.  With the journal beside it,
    that is an unfinished write, not another program's file."""
    path = tmp_path / "p.sqlite3"
    killed_writer(path, "create")
    if path.read_bytes()[:16].strip(b"\x00"):
        pytest.skip("SQLite wrote the first page before the kill on this system")
    before = digest(path)
    with pytest.raises(StoreError) as info:
        store_files.check_header(path)
    assert "left unfinished by a process that was stopped" in str(info.value)
    assert "its first page was never written" in str(info.value)
    assert digest(path) == before


def test_practice_says_truthfully_when_it_cannot_undo_a_killed_write(tmp_path, monkeypatch):
    """Where the process may not write (a read-only folder: simulated, the tests may run as root),
    practice says what is wrong and what to do, and the files stay as they were."""
    path = tmp_path / "p.sqlite3"
    killed_writer(path, "create")
    before = digest(path)
    real_connect = sqlite3.connect

    def read_only(database, *args, **kwargs):  # every read-write open behaves as on a read-only folder
        if not kwargs.get("uri"):
            database, kwargs = Path(database).absolute().as_uri() + "?mode=ro", {**kwargs, "uri": True}
        return real_connect(database, *args, **kwargs)

    monkeypatch.setattr(store_files.sqlite3, "connect", read_only)
    with pytest.raises(StoreError) as info:
        Store.open(path)
    message = str(info.value)
    assert message.startswith(f"the progress file {path} holds a write left unfinished by a process that was stopped")
    assert "make its folder writable, or set ATTN_TUTOR_HOME" in message
    assert digest(path) == before


@pytest.mark.parametrize("at", ["fsync", "link"])
def test_a_store_is_created_whole_or_not_at_all(tmp_path, at):
    """A process killed while creating the store (here: just before the built file is written to disk,
    or before it gets its name) leaves no progress file at all -- only a hidden temporary file -- and the
    next session creates it afresh."""
    path = tmp_path / "home" / "progress.sqlite3"
    done = run_python(f"""
        import os, signal, sys
        from pathlib import Path
        from tutor import store
        from tutor.store import files
        def killed(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)
        files.os.{at} = killed
        Path(sys.argv[1]).parent.mkdir(parents=True)
        store.Store.open(sys.argv[1])
    """, path)
    assert done.returncode == -9, done.stderr.decode()
    assert not path.exists()
    assert all(p.name.startswith(".progress.sqlite3.") for p in path.parent.iterdir())
    with Store.open(path) as s:
        s.record(s.begin_session("single-head-3x4", mode="matrix", tolerance=0.005),
                 Attempt("single-head-3x4", "q", 0, "correct"))
    with Store.open_existing(path) as s:
        assert len(s.attempts()) == 1


def test_a_new_store_is_built_beside_its_name_and_leaves_nothing_else(tmp_path):
    path = tmp_path / "p.sqlite3"
    Store.open(path).close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.sqlite3"]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    conn.close()


def test_an_empty_file_is_replaced_by_a_whole_store(tmp_path):
    """The tester's /tmp/hk_bad: a progress file of 0 bytes (``touch``) becomes a store, whole."""
    path = tmp_path / "progress.sqlite3"
    path.touch()
    with Store.open(path) as s:
        s.record(s.begin_session("single-head-3x4", mode="matrix", tolerance=0.005),
                 Attempt("single-head-3x4", "q", 0, "correct"))
    with Store.open_existing(path) as s:
        assert len(s.attempts()) == 1


# --- item 3: a value of the wrong type in a row --------------------------------------------------


def two_answers(path: Path) -> None:
    """A store with one session: q wrong (diagnosed), then q right."""
    with Store.open(path) as s:
        session = s.begin_session("single-head-3x4", mode="matrix", tolerance=0.005)
        s.record(session, Attempt("single-head-3x4", "q", 0, "wrong", 1, 0, ("transposed",), "1 2",
                                  family="single-head"))
        s.record(session, Attempt("single-head-3x4", "q", 0, "correct", 2, 0, (), "1 1; 2 2; 2 2", family="single-head"))


def edit(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(sql)
    conn.commit()
    conn.close()


@pytest.mark.parametrize(("sql", "left_out"), [
    ("UPDATE answers SET diagnosis_text = x'41' WHERE diagnosis IS NOT NULL", 1),  # TypeError in jsontext
    ("UPDATE answers SET step = x'71'", 2),  # AttributeError in textsafe
    ("UPDATE answers SET step = x'ff00'", 2),  # printed as b'\xff\x00'
    ("UPDATE answers SET diagnosis = x'41' WHERE diagnosis IS NOT NULL", 1),
    ("UPDATE answers SET head = 'zero'", 2),
    ("UPDATE answers SET attempt = 1.5 WHERE outcome = 'correct'", 1),
    ("UPDATE answers SET answer = x'00' WHERE outcome = 'wrong'", 1),
    ("UPDATE answers SET at = x'32303234'", 2),  # a number would become text: the column's affinity
])
def test_rows_of_another_type_are_left_out_and_counted(cli, tmp_path, sql, left_out):
    """Decided: a row that is not what attn-tutor writes is left out of every count, and stats says how many
    (the rest of the progress stays usable; practice still writes).  Never an internal error."""
    path = tmp_path / "home" / "progress.sqlite3"
    two_answers(path)
    edit(path, sql)
    for fmt in ("rich", "json"):
        code, out, err = cli("stats", "--format", fmt)
        assert (code, err) == (0, "")
        assert "b'" not in out
        if fmt == "json":
            doc = json.loads(out)
            assert doc["left_out"] == left_out
            assert doc["answers"] == 2 - left_out
        else:
            sentence = ("1 row of the progress file is not as attn-tutor writes it" if left_out == 1 else
                        f"{left_out} rows of the progress file are not as attn-tutor writes them")
            assert sentence in " ".join(out.split())
    code, out, err = cli("practice", input="")  # the recommendation reads the same rows
    assert (code, err) == (0, "")
    with Store.open_existing(path) as s:
        assert len(s.attempts()) == 2 - left_out


def test_text_that_is_not_utf8_reads_as_replacement_characters(cli, tmp_path):
    path = tmp_path / "home" / "progress.sqlite3"
    two_answers(path)
    edit(path, "UPDATE answers SET step = CAST(x'71ff' AS TEXT) WHERE outcome = 'wrong'")
    code, out, err = cli("stats", "--format", "json")
    assert (code, err) == (0, "")
    assert [s["step"] for s in json.loads(out)["steps"]] == ["q", "q\ufffd"]


def test_an_unknown_outcome_written_past_the_check_is_left_out(tmp_path):
    path = tmp_path / "p.sqlite3"
    two_answers(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    conn.execute("UPDATE answers SET outcome = 'great' WHERE outcome = 'wrong'")
    conn.commit()
    conn.close()
    with Store.open_existing(path) as s:
        stats = s.stats()
    assert (stats.answers, stats.left_out, stats.step("q").correct, stats.step("q").wrong) == (1, 1, 1, 0)


@pytest.mark.parametrize(("sql", "mistakes", "skills"), [
    ("UPDATE mistakes SET key = x'41'", 0, 1),  # a key of schema 2's mistakes table as a BLOB
    ("UPDATE mistakes SET kind = 'other'", 0, 1),
    ("UPDATE skills SET stability = 'high'", 1, 0),  # REAL affinity keeps text that is not a number
    ("UPDATE skills SET due = x'32303234'", 1, 0),
])
def test_mistake_and_skill_rows_of_another_type_are_left_out_and_counted(cli, tmp_path, sql, mistakes, skills):
    """Schema 2's other tables: a mistake or a scheduled skill of another type is left out and counted;
    the answers themselves still count, and practice still writes (the skill starts afresh)."""
    path = tmp_path / "home" / "progress.sqlite3"
    two_answers(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    conn.execute(sql)
    conn.commit()
    conn.close()
    code, out, err = cli("stats", "--format", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert (doc["left_out"], doc["answers"]) == (1, 2)
    assert len(doc["mistakes"]) == mistakes
    assert len(doc["steps"][0]["skills"]) == skills
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q", input="1 1; 2 2; 2 2\n")
    assert (code, err) == (0, "")
    with Store.open_existing(path) as s:
        assert len(s.attempts()) == 3
