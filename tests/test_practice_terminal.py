"""`attn-tutor practice` in a real terminal (a pseudo-terminal driven by pexpect):
prompts, line editing, Ctrl-C and Ctrl-D end the session cleanly with exit code 0,
and what was answered is in the store."""

from __future__ import annotations

import os
import re
import sqlite3
import sys
from pathlib import Path

import pytest

from .conftest import COLOUR
from .ptys import answer, at_prompt, default_sigint, ignored_sigint, spawn

pexpect = pytest.importorskip("pexpect")
pytestmark = [pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal"),
              pytest.mark.usefixtures("child_environment")]  # the processes started here read their environment


def answers() -> list[tuple]:
    path = Path(os.environ["ATTN_TUTOR_HOME"]) / "progress.sqlite3"
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT step, outcome, attempt FROM answers ORDER BY id").fetchall()
    finally:
        conn.close()


def test_ctrl_c_ends_with_the_summary_and_keeps_the_answers():
    child = spawn("practice", "single-head-3x4", preexec_fn=default_sigint)  # as a foreground job: Python's handler
    child.expect_exact("Step 1 of 7: Queries Q")
    answer(child, "Q> ", "1 1; 2 2; 2 2")
    child.expect_exact("Right.")
    answer(child, "K> ", "9 9; 2 2; 2 2")
    child.expect_exact("Not yet: 2 of 6 entries wrong")
    at_prompt(child, "K> ")
    child.sendintr()
    child.expect_exact("Interrupted: session ended.")
    child.expect_exact("Steps right: 1 of 7 (1 at the first try); shown: 0; skipped: 0.")
    child.expect_exact("2. K        not finished, 1 wrong")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and child.signalstatus is None
    assert "Traceback" not in child.before
    assert answers() == [("q", "correct", 1), ("k", "wrong", 1)]


def test_ctrl_c_ends_the_session_even_when_started_with_sigint_ignored():
    """Started as a background job (SIGINT ignored, so Python installs no handler), Ctrl-C at the prompt
    still ends the session with its summary: the session installs its own handler for its duration."""
    child = spawn("practice", "single-head-3x4", "--steps", "q,k", preexec_fn=ignored_sigint)
    answer(child, "Q> ", "1 1; 2 2; 2 2")
    child.expect_exact("Right.")
    at_prompt(child, "K> ")
    child.sendintr()
    child.expect_exact("Interrupted: session ended.")
    child.expect_exact("Steps right: 1 of 2 (1 at the first try); shown: 0; skipped: 0.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 and child.signalstatus is None
    assert answers() == [("q", "correct", 1)]


def test_ctrl_d_ends_the_session_cleanly():
    child = spawn("practice", "single-head-3x4", "--steps", "scores")
    at_prompt(child, "scores> ")  # a Ctrl-D sent before readline reads would be lost in the cooked terminal
    child.sendeof()
    child.expect_exact("End of input: session ended.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_line_editing_and_no_colour_under_no_color():
    child = spawn("practice", "single-head-3x4", "--steps", "scores", NO_COLOR="1")
    at_prompt(child, "scores> ")
    child.send("2 4 4; 4 8 8; 4 8 9")
    child.send("\x7f")  # backspace: the 9 becomes an 8
    child.sendline("8")
    child.expect_exact("Right.")
    child.expect_exact("Session complete.")
    child.expect(pexpect.EOF)
    transcript = child.before
    child.close()
    assert child.exitstatus == 0
    assert answers() == [("scores", "correct", 1)]
    assert not COLOUR.search(transcript)


def test_wrong_entries_are_marked_not_only_coloured():
    child = spawn("practice", "single-head-3x4", "--steps", "scaled")  # colours allowed here
    answer(child, "scaled> ", "2 4 4; 4 8 8; 4 8 8")
    child.expect_exact("You forgot to divide by √d_k")
    text = child.before
    answer(child, "scaled> ", "quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    assert plain.count("✗") == 2 + 9  # the headline (twice) and each of the 9 entries


@pytest.mark.parametrize(("argv", "prompt", "typed", "said"), [
    (("practice", "single-head-3x4", "--steps", "scaled"), "scaled> ", "\u221a2 2\u221a2 2\u221a2; 1 1 1; 1 1 1",
     "a character the input stream could not decode at"),
    (("drill", "shapes", "--seed", "1", "--count", "1"), "merged> ", "2\u00d74\u00d78",
     "a character the input stream could not decode at column 2"),
])
def test_a_character_the_terminal_stream_cannot_decode_is_refused_with_a_sentence(argv, prompt, typed, said):
    """Typed at a terminal whose stream is ASCII (issue 20, E): input() decodes with the stream's errors,
    so a `√` or a `×` is an unreadable answer and the prompt asks again, not an internal error (exit 3)."""
    child = spawn(*argv, PYTHONIOENCODING="ascii", NO_COLOR="1")
    child.expect_exact(prompt)
    child.sendline(typed)
    child.expect_exact(said)
    child.expect_exact(prompt)
    child.sendline("quit")
    child.expect(pexpect.EOF)
    text = child.before
    child.close()
    assert child.exitstatus == 0, text
    assert "internal error" not in text and "Traceback" not in text
