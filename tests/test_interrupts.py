"""Ctrl-C, decided once for every command (issue 8, second round, item 5).

A practice session ended by Ctrl-C at any moment -- at the prompt, while an answer is being graded, while
feedback is shown, in the middle of a write to the store -- ends with its summary, every answer graded
before it saved (once), exit code 0.  Any other command interrupted prints one ``interrupted`` line on
stderr and exits 130 (Typer used to turn the KeyboardInterrupt into a silent exit 130 before
:func:`tutor.cli.main` saw it, for every command: practice too, when the Ctrl-C came while grading).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tutor import practice as quiz
from tutor.practice import Answer
from tutor.store import Store, default_path

from .conftest import REPO, default_sigint

pytestmark = pytest.mark.usefixtures("child_environment")  # processes started here read their environment

Q = K = "1 1; 2 2; 2 2"  # single-head-3x4: W_Q = W_K


def answers(home: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(default_path(home))
    try:
        return conn.execute("SELECT step, outcome FROM answers ORDER BY id").fetchall()
    finally:
        conn.close()


def test_ctrl_c_while_an_answer_is_graded_ends_with_the_summary(cli, home, monkeypatch):
    real = quiz.handle
    graded: list[str] = []

    def handle(state, event):
        if isinstance(event, Answer):
            graded.append(event.text)
            if len(graded) == 2:  # Ctrl-C while the second answer is being graded
                raise KeyboardInterrupt
        return real(state, event)

    monkeypatch.setattr(quiz, "handle", handle)
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q,k,v", input=f"{Q}\n{K}\n{Q}\n")
    assert (code, err) == (0, "")
    assert "Interrupted: session ended." in out and "Steps right: 1 of 3" in out
    assert answers(home) == [("q", "correct")]  # the answer being graded is dropped, the one before is kept


def test_ctrl_c_while_feedback_is_shown_keeps_that_answer(cli, home, monkeypatch):
    from tutor.render.quiz import QuizRenderer

    real = QuizRenderer.show
    shown: list[str] = []

    def show(self, effect):
        shown.append(type(effect).__name__)
        if type(effect).__name__ == "Correct" and shown.count("Correct") == 1:
            raise KeyboardInterrupt
        return real(self, effect)

    monkeypatch.setattr(QuizRenderer, "show", show)
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q,k", input=f"{Q}\n{K}\n")
    assert (code, err) == (0, "")
    assert "Interrupted: session ended." in out
    assert answers(home) == [("q", "correct")]


def test_ctrl_c_in_the_middle_of_a_write_saves_the_answer_once(cli, home, monkeypatch):
    """The signal arrives while SQLite writes the answer: the write completes, and is noted as done,
    before the session ends (neither lost nor written twice at the summary)."""
    real = Store.record

    def record(self, session, attempt):
        os.kill(os.getpid(), signal.SIGINT)  # a real SIGINT, delivered in the middle of the write
        return real(self, session, attempt)

    monkeypatch.setattr(Store, "record", record)
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q,k", input=f"{Q}\n{K}\n")
    assert (code, err) == (0, "")
    assert "Interrupted: session ended." in out and "Steps right: 1 of 2" in out
    assert answers(home) == [("q", "correct")]


def test_ctrl_c_during_the_introduction_ends_with_the_summary(cli, home, monkeypatch):
    from tutor.render.quiz import QuizRenderer

    def intro(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(QuizRenderer, "intro", intro)
    code, out, err = cli("practice", "single-head-3x4", input=f"{Q}\n")
    assert (code, err) == (0, "")
    assert "Interrupted: session ended." in out
    with Store.open_existing(default_path(home)) as s:
        assert s.stats().sessions == 1 and s.attempts() == []


SLOW = """
    import os, signal, sys, time
    from tutor.practice import machine
    real = machine.{name}
    def slow(*args, **kwargs):
        {when}
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while this runs
            time.sleep(30)
        return real(*args, **kwargs)
    machine.{name} = slow
    {patch}
    from tutor.cli import main
    sys.exit(main())
"""


def run_slow(args: list[str], *, name: str = "_matrix", when: str = "if True:", patch: str = "",
             input: str = "") -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(SLOW).format(name=name, when=when, patch=patch)
    return subprocess.run([sys.executable, "-c", code, *args], input=input, capture_output=True, text=True,
                          cwd=REPO, timeout=60, check=False, preexec_fn=default_sigint)


def test_a_real_ctrl_c_while_grading_ends_the_practice_session_with_its_summary(home):
    """In a process of its own, through the real SIGINT handler: the second answer's grading is slow."""
    done = run_slow(["practice", "single-head-3x4", "--steps", "q,k,v"],
                    when="if args[1] == 'SECOND':", input=f"{Q}\nSECOND\n{Q}\n")
    assert (done.returncode, done.stderr) == (0, "")
    assert "Interrupted: session ended." in done.stdout and "Steps right: 1 of 3" in done.stdout
    assert answers(home) == [("q", "correct")]


INTERRUPTED_AT = """
    import os, signal, sys
    def profile(frame, event, arg):  # a real SIGINT as the command enters {name}
        if event == "call" and frame.f_code.co_name == "{name}":
            sys.setprofile(None)
            os.kill(os.getpid(), signal.SIGINT)
    sys.setprofile(profile)
    from tutor.cli import main
    sys.exit(main())
"""


@pytest.mark.parametrize("args", [
    ["explain", "single-head-3x4"],
    ["explain", "single-head-3x4", "--format", "json"],
    ["check", str(REPO / "tests" / "data" / "check" / "classic-correct.yaml")],
    ["validate", str(REPO / "exercises")],
    ["list"],
    ["stats"],
])
def test_any_other_command_interrupted_says_so_in_one_line_and_exits_130(args):
    name = "recommendation" if args == ["stats"] else "parse_yaml"
    code = textwrap.dedent(INTERRUPTED_AT).format(name=name)
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=60, check=False, preexec_fn=default_sigint)  # as in a foreground job
    assert (done.returncode, done.stderr, done.stdout) == (130, "interrupted\n", "")


def test_an_interrupt_inside_a_command_is_one_line_in_process(cli, monkeypatch):
    from tutor.exercise import catalog

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(catalog, "load_catalog", interrupted)
    assert cli("list") == (130, "", "interrupted\n")
    assert cli("list", "--format", "json") == (130, "", "interrupted\n")
