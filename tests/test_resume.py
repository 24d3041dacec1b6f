"""Issue 11, item 4: an interrupted session resumes where it stopped; practice with no exercise
starts at the weakest step.

The classic by hand: Q = K = V = X·W = [[1, 1], [2, 2], [2, 2]]; scores = Q·Kᵀ = [[2, 4, 4], [4, 8, 8],
[4, 8, 8]].
"""

from __future__ import annotations

import os
import select
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from .conftest import REPO
from .test_practice_cli import practise, store_path

pytestmark = pytest.mark.usefixtures("child_environment")  # processes started here read their environment

QKV = "1 1; 2 2; 2 2"
SCORES = "2 4 4; 4 8 8; 4 8 8"


def test_an_interrupted_session_resumes_at_step_4_after_3_answers(cli):
    code, out, _ = practise(cli, f"{QKV}\n{QKV}\n{QKV}\n", "single-head-3x4")  # the input ends after 3 answers
    assert code == 0 and "End of input: session ended." in out
    code, out, _ = practise(cli, f"{SCORES}\nquit\n", "single-head-3x4")
    assert " ".join(out[0:2]) == ("Resuming where your last session of these steps stopped: step 4 of 7, scores; "
                                  "the steps before it are given. --restart begins anew.")
    assert "Step 4 of 7: Scores Q·Kᵀ" in out and "Step 1 of 7: Queries Q" not in out
    assert "✓ Right." in out
    summary = out[out.index("Session ended."):]
    assert summary[1:6] == ["Steps right: 1 of 4 asked (1 at the first try); shown: 0; skipped: 0.",
                            "   1. Q        given", "   2. K        given", "   3. V        given",
                            "   4. scores   right at the first try"]
    assert summary[6] == "   5. scaled   not answered"  # on screen when the session ended
    # and again: the chain goes on at step 5
    code, out, _ = practise(cli, "quit\n", "single-head-3x4")
    assert "step 5 of 7, scaled;" in out[0]


def test_restart_begins_anew_and_other_selections_do_not_resume(cli):
    practise(cli, f"{QKV}\n", "single-head-3x4")
    code, out, _ = practise(cli, "quit\n", "single-head-3x4", "--restart")
    assert "Step 1 of 7: Queries Q" in out and not any(line.startswith("Resuming") for line in out)
    # the session above (restarted, quit at step 1) is now the latest: nothing to resume past step 1
    code, out, _ = practise(cli, "quit\n", "single-head-3x4")
    assert "Step 1 of 7: Queries Q" in out
    practise(cli, f"{QKV}\n", "single-head-3x4", "--steps", "q,k")
    for argv in (["--steps", "q"], ["--mode", "entry"]):  # another selection or mode: its own sessions
        code, out, _ = practise(cli, "quit\n", "single-head-3x4", *argv)
        assert not any(line.startswith("Resuming") for line in out), argv
    code, out, _ = practise(cli, "quit\n", "single-head-3x4", "--steps", "k,q")  # the same steps, another order
    assert out[0].startswith("Resuming where your last session of these steps stopped: step 2 of 2, K;")  # named as its prompt K>


def test_a_complete_session_is_not_resumed(cli):
    practise(cli, f"{QKV}\n{QKV}\n", "single-head-3x4", "--steps", "q,k")
    code, out, _ = practise(cli, "quit\n", "single-head-3x4", "--steps", "q,k")
    assert "Step 1 of 2: Queries Q" in out


def test_a_killed_session_resumes_too(cli):
    """kill -9 after three answers: each was committed before its verdict was shown, so the next
    session begins at step 4."""
    env = dict(os.environ, COLUMNS="100")
    proc = subprocess.Popen([sys.executable, "-m", "tutor", "practice", "single-head-3x4"], cwd=REPO, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"{QKV}\n{QKV}\n{QKV}\n".encode())
    proc.stdin.flush()
    seen = b""
    deadline = time.monotonic() + 120
    while b"Step 4 of 7" not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1)
        if ready:
            seen += os.read(proc.stdout.fileno(), 65536)
    try:
        assert b"Step 4 of 7" in seen, seen.decode(errors="replace")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    conn = sqlite3.connect(store_path())
    assert conn.execute("SELECT step, outcome FROM answers ORDER BY id").fetchall() == [
        ("q", "correct"), ("k", "correct"), ("v", "correct")]
    assert conn.execute("SELECT ended, complete FROM sessions").fetchall() == [(None, 0)]
    conn.close()
    code, out, _ = cli("practice", "single-head-3x4", input="quit\n")  # the next session: the store as the kill left it
    assert code == 0
    assert "Resuming where your last session of these steps stopped: step 4 of 7, scores;" in out


def test_practice_with_no_exercise_starts_at_the_weakest_step(cli):
    # q, k, v, scores right on the classic; scaled wrong twice: scaled is the weakest step kind
    # (score (0 + 1) / (2 + 2) = 0.25 against (1 + 1) / (1 + 2) for the others)
    practise(cli, f"{QKV}\n{QKV}\n{QKV}\n{SCORES}\n{SCORES}\n{SCORES}\nquit\n", "single-head-3x4")
    code, out, _ = practise(cli, "quit\n")
    assert code == 0
    # the first other difficulty-1 exercise by id: single-head-asym-3x4 (before single-head-dk4-2x4)
    assert out[0] == "Practising single-head-asym-3x4: it trains scaled, your weakest step (0 of 2 right)."
    assert out[1] == "Starting at step 5 of 8 (scaled), your weakest step; the steps before it are given."
    assert "Step 5 of 8: Scaled scores" in out and "Step 1 of 8: Queries Q" not in out
    assert "   1. Q        given" in out
