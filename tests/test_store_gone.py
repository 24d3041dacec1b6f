"""The progress file deleted or replaced during a practice session (issue 8, second round, item d).

SQLite keeps writing to the file it opened: after ``rm progress.sqlite3`` (or a backup moved over it) every
answer went to a deleted file, and the summary said they were saved.  Now each write first checks that the
file at the path is still the one opened; when it is not, the session and *all* its answers -- those
already written to the old file too -- are written to what is there now (created when missing), and the
learner is told; when what is there cannot be used (another program's file), nothing is written to it and
the answers are reported as not saved (exit code 2), never lost silently.

Single-head-3x4 by hand: Q = K = V = [[1, 1], [2, 2], [2, 2]], scores = [[2, 4, 4], [4, 8, 8], [4, 8, 8]].
"""

from __future__ import annotations

import io
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from .conftest import wrapped

ANSWERS = ["1 1; 2 2; 2 2", "1 1; 2 2; 2 2", "1 1; 2 2; 2 2", "2 4 4; 4 8 8; 4 8 8"]  # q, k, v, scores


@pytest.fixture
def store(home) -> Path:
    return home / "progress.sqlite3"


def answers_in(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT s.exercise, a.step, a.outcome FROM answers a JOIN sessions s ON s.id = a.session"
                          " ORDER BY a.id").fetchall()


class Meddling(io.StringIO):
    """Piped answers; ``meddle()`` runs just before line ``at`` (0-based) is read."""

    def __init__(self, lines, at, meddle):
        super().__init__("".join(f"{line}\n" for line in lines))
        self.count, self.at, self.meddle = 0, at, meddle

    def readline(self, *args):
        if self.count == self.at:
            self.meddle()
        self.count += 1
        return super().readline(*args)


def remove(*suffixes):
    def meddle(store: Path):
        for suffix in suffixes:
            Path(str(store) + suffix).unlink(missing_ok=True)
    return meddle


RIGHT = [("single-head-3x4", step, "correct") for step in ("q", "k", "v", "scores")]


@pytest.mark.parametrize("meddle", [remove(""), remove("", "-wal", "-shm")], ids=["the file", "with its -wal and -shm"])
@pytest.mark.parametrize("at", [1, 3])
def test_deleted_mid_session_every_answer_is_saved_in_a_new_file(cli, store, meddle, at):
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q,k,v,scores",
                         input=Meddling(ANSWERS, at, lambda: meddle(store)))
    flat = " ".join(out.split())
    assert (code, err) == (0, "")
    assert wrapped(f"The progress file {store} was deleted or replaced during this session: this session and its",
                   store).search(out)
    assert answers_in(store) == RIGHT  # the ones given before the deletion too, once each
    assert "could not be saved" not in flat


def test_deleted_after_the_last_answer_it_is_saved_at_the_summary(cli, store):
    stream = Meddling(ANSWERS + [""], 4, lambda: remove("")(store))  # deleted while the session waits for input after the last step
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q,k,v,scores", input=stream)
    assert (code, err) == (0, "")
    assert answers_in(store) == RIGHT


def test_replaced_by_another_progress_file_the_answers_join_it(cli, store, tmp_path):
    cli("practice", "single-head-3x4", "--steps", "q", input="1 1; 2 2; 2 2\n")  # one answer, earlier
    shutil.copy(store, tmp_path / "backup.sqlite3")

    def restore():
        os.replace(tmp_path / "backup.sqlite3", store)

    code, out, err = cli("practice", "single-head-3x4", "--steps", "q,k,v,scores", input=Meddling(ANSWERS, 2, restore))
    assert (code, err) == (0, "")
    assert answers_in(store) == [("single-head-3x4", "q", "correct")] + RIGHT


def test_replaced_by_a_file_that_is_not_a_progress_file_nothing_is_lost_silently(cli, store):
    def foreign():
        store.unlink()
        store.write_text("my notes, not a database\n" * 100)

    code, out, err = cli("practice", "single-head-3x4", "--steps", "q,k,v,scores", input=Meddling(ANSWERS, 2, foreign))
    flat = " ".join(out.split())
    assert code == 2
    assert "Not saved: the progress file" in flat and "was deleted or replaced during this session" in flat
    assert "answers could not be saved" in err
    assert store.read_text() == "my notes, not a database\n" * 100  # untouched
