"""`attn-tutor practice` and `attn-tutor stats` as scripted sessions: piped stdin,
exact output lines, the progress store on disk, and a process killed mid-session.

Every number a learner types here is a hand calculation made in this file
(the classic example: Q = K = V = [[1, 1], [2, 2], [2, 2]], scores = Q Qᵀ,
scaled = scores / √2, weights = row-wise softmax, output = weights V).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import REPO, InterruptedInput, wrapped

pytestmark = pytest.mark.usefixtures("child_environment")  # processes started here read their environment

R2 = math.sqrt(2)
Q = [[1, 1], [2, 2], [2, 2]]
SCORES = [[sum(a * b for a, b in zip(qi, kj)) for kj in Q] for qi in Q]  # Q·Kᵀ with K = Q
SCALED = [[s / R2 for s in row] for row in SCORES]


def softmax(row):
    e = [math.exp(v - max(row)) for v in row]
    return [x / sum(e) for x in e]


WEIGHTS = [softmax(row) for row in SCALED]
OUTPUT = [[sum(w[k] * Q[k][j] for k in range(3)) for j in range(2)] for w in WEIGHTS]  # weights·V, V = Q


def typed(m, places=2):
    return "; ".join(" ".join(f"{v:.{places}f}" for v in row) for row in m)


def practise(cli, stdin: str, *argv: str) -> tuple[int, list[str], str]:
    """Run `attn-tutor practice ARGV` with ``stdin`` piped in; output lines without trailing blanks."""
    code, out, err = cli("practice", *argv, input=stdin)
    return code, [line.rstrip() for line in out.splitlines()], err


def stats(cli, *argv: str) -> tuple[int, str, str]:
    return cli("stats", *argv)


def store_path() -> Path:
    """The pinned progress store, found through the environment the ``child_environment`` fixture pins
    (a module that uses this marks its tests with it)."""
    return Path(os.environ["ATTN_TUTOR_HOME"]) / "progress.sqlite3"


def rows(sql: str) -> list[tuple]:
    conn = sqlite3.connect(store_path())
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


# --- the classic drill: the learner forgets 1/sqrt(d_k) --------------------------------------

HEADER = [
    "Practice: Three tokens, d_model = 4, one head with d_k = 2 (single-head-3x4, steps to do: 2)",
    'Type each matrix on one line, rows separated by ";" (1 1; 2 2) or in brackets ([[1, 1], [2, 2]]), or',
    "row by row (an empty line ends it early).",
    "Commands: hint, shape, show, skip, quit, help.",
]
SCORES_STEP = [
    "",
    "Step 1 of 2: Scores Q·Kᵀ",
    "   scores = Q·Kᵀ",
    "  Q [3×2]            K [3×2]",
    "  ╭────┬────┬────╮   ╭────┬────┬────╮",
    "  │    │ d1 │ d2 │   │    │ d1 │ d2 │",
    "  ├────┼────┼────┤   ├────┼────┼────┤",
    "  │ t1 │  1 │  1 │   │ t1 │  1 │  1 │",
    "  │ t2 │  2 │  2 │   │ t2 │  2 │  2 │",
    "  │ t3 │  2 │  2 │   │ t3 │  2 │  2 │",
    "  ╰────┴────┴────╯   ╰────┴────┴────╯",
]
SCALED_STEP = [
    "",
    "Step 2 of 2: Scaled scores",
    "   scaled = scores / √d_k,  √d_k = √2",
    "  scores [3×3]",
    "  ╭────┬────┬────┬────╮",
    "  │    │ t1 │ t2 │ t3 │",
    "  ├────┼────┼────┼────┤",
    "  │ t1 │  2 │  4 │  4 │",
    "  │ t2 │  4 │  8 │  8 │",
    "  │ t3 │  4 │  8 │  8 │",
    "  ╰────┴────┴────┴────╯",
]


def test_classic_drill_names_the_forgotten_sqrt_dk_then_quits(cli):
    unscaled = "2 4 4; 4 8 8; 4 8 8"
    code, out, err = practise(cli, f"{unscaled}\n{unscaled}\nquit\n",
                              "single-head-3x4", "--steps", "scores,scaled")
    assert (code, err) == (0, "")
    assert out == HEADER + SCORES_STEP + [
        "scores> 2 4 4; 4 8 8; 4 8 8",
        "✓ Right.",
        # once the step is answered, what it means (explain's sentence for it; issue 20, E)
        "  Entry (i, j) is the dot product q_i·k_j: how well query i matches key j. Rows are queries, columns",
        "  are keys.",
        # Q = K here: a right answer cannot show that the learner did not compute K·Qᵀ, so the drill says so
        "  Note: On this exercise K·Qᵀ = Q·Kᵀ because Q = K: computing K·Qᵀ by mistake gives the same scores,",
        "  so it cannot be caught here. Try `single-head-asym-3x4` to be tested on it.",
    ] + SCALED_STEP + [
        "scaled> 2 4 4; 4 8 8; 4 8 8",
        "✗ Not yet: 9 of 9 entries wrong (marked ✗).",
        "  Your scaled",
        "  ╭────┬─────┬─────┬─────╮",
        "  │    │  t1 │  t2 │  t3 │",
        "  ├────┼─────┼─────┼─────┤",
        "  │ t1 │ 2 ✗ │ 4 ✗ │ 4 ✗ │",
        "  │ t2 │ 4 ✗ │ 8 ✗ │ 8 ✗ │",
        "  │ t3 │ 4 ✗ │ 8 ✗ │ 8 ✗ │",
        "  ╰────┴─────┴─────┴─────╯",
        "Diagnosis: You forgot to divide by √d_k: scaled = scores / √2.",
        "Type the matrix again, or hint, show, skip.",
        "scaled> quit",
        "",
        "Session ended.",
        "Steps right: 1 of 2 (1 at the first try); shown: 0; skipped: 0.",
        "   1. scores  right at the first try",
        "   2. scaled  not finished, 1 wrong",
        "Your answers are saved; attn-tutor stats shows your progress.",
    ]
    assert rows("SELECT step, outcome, attempt, diagnosis, answer FROM answers ORDER BY id") == [
        ("scores", "correct", 1, None, unscaled),
        ("scaled", "wrong", 1, "no_scaling", unscaled),
    ]
    # ... and stats shows it (wide enough for the file's path on the last line, however deep pytest's tmp_path is)
    code, text, err = cli("stats", env={"COLUMNS": str(max(100, len(f"Progress file: {store_path()}")))})
    assert (code, err) == (0, "")
    # the last line names the progress file: a temporary folder's path (longer under xdist, or with a
    # long TMPDIR) may wrap at 100 columns, so it is compared without its line breaks
    report, named, where = text.partition("Progress file:")
    assert named and "".join(where.split()) == "".join(str(store_path()).split())
    assert max(len(line) for line in report.splitlines()) <= 100  # the report above the path fits 100 columns
    assert [line.rstrip() for line in report.splitlines()] == [
        "Progress: 1 session, 2 answers.",
        "",
        "Accuracy by step",
        "  ╭────────┬───────┬─────────┬──────────┬───────┬─────────┬───────────┬────────╮",
        "  │ step   │ right │ answers │ accuracy │ shown │ skipped │    review │ recall │",
        "  ├────────┼───────┼─────────┼──────────┼───────┼─────────┼───────────┼────────┤",
        # FSRS (desired retention 0.9): the next interval is the stability, S0(Good) = 2.3065 -> 2 days,
        # S0(Again) = 0.212 -> at least 1 day; recalled for sure on the day of the review
        "  │ scores │     1 │       1 │     100% │     0 │       0 │ in 2 days │   100% │",
        "  │ scaled │     0 │       1 │       0% │     0 │       0 │  in 1 day │   100% │",
        "  ╰────────┴───────┴─────────┴──────────┴───────┴─────────┴───────────┴────────╯",
        "",
        "Mistakes, by kind",
        "  1×  forgot to divide by √d_k",
        "      in single-head-3x4 scaled ×1",
        "",
        # scaled scores (0+1)/(1+2) = 0.33 < 0.5 of the unpractised steps; single-head-3x4 was
        # already practised on it, so the first other difficulty-1 exercise (by id) comes next
        "Practise next: scaled, your weakest step (0 of 1 right), with single-head-asym-3x4:",
        "  attn-tutor practice single-head-asym-3x4",
    ]
    code, text, _ = stats(cli, "--format", "json")
    doc = json.loads(text)
    assert doc["store"] == str(store_path())
    assert (doc["sessions"], doc["answers"]) == (1, 2)
    counts = [{k: v for k, v in s.items() if k not in ("due", "retention", "skills")} for s in doc["steps"]]
    assert counts == [
        {"step": "scores", "correct": 1, "wrong": 0, "shown": 0, "skipped": 0, "first_try": 1, "graded": 1, "accuracy": 1.0},
        {"step": "scaled", "correct": 0, "wrong": 1, "shown": 0, "skipped": 0, "first_try": 0, "graded": 1, "accuracy": 0.0},
    ]
    assert [(s["retention"], [k["family"] for k in s["skills"]]) for s in doc["steps"]] == [
        (1.0, ["single-head"]), (1.0, ["single-head"])]
    assert doc["mistakes"] == [{"key": "no_scaling", "kind": "diagnosis", "name": "forgot to divide by √d_k", "count": 1,
                                "where": [{"exercise": "single-head-3x4", "step": "scaled", "head": 0, "heads": 1,
                                           "count": 1}]}]
    assert doc["next"] == {"step": "scaled", "exercise": "single-head-asym-3x4", "correct": 0, "graded": 1,
                           "accuracy": 0.0, "command": "attn-tutor practice single-head-asym-3x4"}


def test_the_whole_classic_example_end_to_end(cli):
    script = [
        "1 1; 2 2; 2 2",  # Q
        "1 1", "2 2", "2 2", "",  # K, row by row
        "[[1, 1], [2, 2], [2, 2]]",  # V
        "; ".join(" ".join(str(v) for v in row) for row in SCORES),
        typed(SCORES),  # forgot the scaling
        typed(SCALED),
        typed(WEIGHTS),
        typed(OUTPUT),
    ]
    code, out, err = practise(cli, "\n".join(script) + "\n", "single-head-3x4")
    assert (code, err) == (0, "")
    assert [line for line in out if line.startswith(("✓", "✗", "Diagnosis"))] == [
        "✓ Right.", "✓ Right.", "✓ Right.", "✓ Right.",
        "✗ Not yet: 9 of 9 entries wrong (marked ✗).",
        "Diagnosis: You forgot to divide by √d_k: scaled = scores / √2.",
        "✓ Right, at try 2.", "✓ Right.", "✓ Right.",
    ]
    assert out[-10:] == [
        "Session complete.",
        "Steps right: 7 of 7 (6 at the first try); shown: 0; skipped: 0.",
        "   1. Q        right at the first try",
        "   2. K        right at the first try",
        "   3. V        right at the first try",
        "   4. scores   right at the first try",
        "   5. scaled   right after 1 wrong",
        "   6. weights  right at the first try",
        "   7. head_1   right at the first try",
        "Your answers are saved; attn-tutor stats shows your progress.",
    ]
    assert rows("SELECT COUNT(*), SUM(outcome = 'correct') FROM answers") == [(8, 7)]
    assert rows("SELECT ended IS NOT NULL FROM sessions") == [(1,)]


def test_end_of_input_ends_with_the_summary_and_exit_0(cli):
    code, out, err = practise(cli, "1 1; 2 2; 2 2\n", "single-head-3x4", "--steps", "q,k")
    assert (code, err) == (0, "")
    assert out[-7:] == [
        "K>",
        "",
        "End of input: session ended.",
        "Steps right: 1 of 2 (1 at the first try); shown: 0; skipped: 0.",
        "   1. Q  right at the first try",
        "   2. K  not answered",  # on screen when the input ended
        "Your answers are saved; attn-tutor stats shows your progress.",
    ]
    assert rows("SELECT step, outcome FROM answers") == [("q", "correct")]


def test_commands_at_the_prompt(cli):
    script = "help\nshape\nhint\nhint\nhint\nshow\nskip\n"
    code, out, _ = practise(cli, script, "single-head-3x4", "--steps", "scores,scaled")
    assert code == 0
    start = out.index("scores> help")
    assert out[start:start + 33] == [
        "scores> help",
        'Type each matrix on one line, rows separated by ";" (1 1; 2 2) or in brackets ([[1, 1], [2, 2]]), or',
        "row by row (an empty line ends it early).",
        "A matrix as PyTorch or NumPy prints it can be pasted too, over as many lines as it was printed on:",
        "tensor([[1.0000, 1.0000], [2.0000, 2.0000]], dtype=torch.float64), array([[1., 1.], [2., 2.]]) or",
        "print()'s [[1. 1.] [2. 2.]] (nan is not accepted: no value asked for is NaN).",
        "Numbers: 2, -1/3, 0.45, sqrt(2), 2*sqrt(2), exp(1), e, 1/(1 + 2*exp(sqrt(2))), -inf for a masked",
        "score.",
        "  hint   the formula; again: one entry worked out",
        "  shape  the shape of the answer",
        "  show   show the answer and move on (counted as missed)",
        "  skip   move on without answering (not counted)",
        "  quit   end the session (your answers are saved)",
        "  help   this list",
        "scores> shape",
        "scores is [3×3]: 3 rows, 3 columns.",
        "   Q [3×2] · Kᵀ [2×3] → scores [3×3]",
        "scores> hint",
        "Hint: scores = Q·Kᵀ",
        "   Entry (i, j) is the dot product of row i of Q with row j of K (column j of Kᵀ): one row per",
        "   query, one column per key.",
        "scores> hint",
        "Hint: one entry worked out:",
        "   scores[t1, t1] = Q[t1, :]·K[t1, :] = 1·1 + 1·1 = 2",  # q_t1·k_t1 = 1·1 + 1·1
        "scores> hint",
        "No more hints for this step: type show to see the answer, or skip.",
        "scores> show",
        "The answer: scores [3×3] (counted as missed)",
        "  ╭────┬────┬────┬────╮",
        "  │    │ t1 │ t2 │ t3 │",
        "  ├────┼────┼────┼────┤",
        "  │ t1 │  2 │  4 │  4 │",
        "  │ t2 │  4 │  8 │  8 │",
    ]
    assert "scaled> skip" in out and "Skipped." in out
    assert out[-4:-1] == ["Steps right: 0 of 2 (0 at the first try); shown: 1; skipped: 1.",
                          "   1. scores  shown (missed), 3 hints", "   2. scaled  skipped"]
    assert rows("SELECT step, outcome, hints FROM answers ORDER BY id") == [("scores", "shown", 3), ("scaled", "skipped", 0)]


def test_bad_typed_input_is_one_line_and_a_new_prompt(cli):
    bad = ["1 1; 2 2; 2 x", "((", "[[1, 2", "1/0", "2^1000", "exp(5000)", "__import__('os')", "1 1; 2 2; 2 é",
           "\x00", "9" * 500, "1 1; 2 2; 2"]
    code, out, err = practise(cli, "\n".join(bad) + "\nquit\n", "single-head-3x4", "--steps", "q")
    assert code == 0 and err == ""
    complaints = [line for line in out if line.startswith("Not an answer: ")]
    assert len(complaints) == len(bad)
    assert complaints[0] == 'Not an answer: row 3, entry 2: unknown name "x" at column 1 in "x" (known: sqrt, exp, cos, sin, e,'
    for line in bad[:-2]:
        shown = line.replace("\x00", "\\x00")  # control characters are echoed visibly
        assert f"Q> {shown}" in out
    # 500 characters: the first 200 echoed, then the length; too long for the rest of the prompt's
    # line, they start on the next one, wrapped at the width
    assert "\n".join(["Q>", "9" * 100, "9" * 100, "… (500 characters)"]) in "\n".join(out)
    assert max(len(line) for line in out) <= 100
    assert rows("SELECT COUNT(*) FROM answers") == [(0,)]  # nothing was graded


def test_entry_mode(cli):
    code, out, _ = practise(cli, "1\n1\n2\n2\n2\n3\n2\n", "single-head-3x4", "--steps", "q",
                            "--mode", "entry")
    assert code == 0
    prompts = [line for line in out if "]> " in line]
    assert prompts == ["Q[t1, d1]> 1", "Q[t1, d2]> 1", "Q[t2, d1]> 2", "Q[t2, d2]> 2", "Q[t3, d1]> 2",
                       "Q[t3, d2]> 3", "Q[t3, d2]> 2"]
    assert "Type again each entry marked ✗ (1 to retype), or hint, show, skip." in out
    assert "✓ Right, at try 2." in out


def test_head_and_tolerance_options(cli):
    # the second head (head 2) of the causal exercise: X·W_Q[:, 2:4]; W_Q's columns 3 and 4 are (0,1,0,1) and (1,0,1,0)
    x = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
    wq = [[0, 1], [1, 0], [0, 1], [1, 0]]
    q1 = [[sum(x[i][k] * wq[k][j] for k in range(4)) for j in range(2)] for i in range(3)]
    text = "; ".join(" ".join(str(v) for v in row) for row in q1)
    code, out, _ = practise(cli, text + "\n", "two-head-causal-3x4", "--steps", "q", "--head", "2")
    assert code == 0
    assert "Step 1 of 1, head 2: Queries Q" in out and "✓ Right." in out and f"Q (head 2)> {text}" in out
    # --tolerance 0.05 accepts one decimal
    code, out, _ = practise(cli, typed(SCALED, 1) + "\n", "single-head-3x4", "--steps", "scaled",
                            "--tolerance", "0.05")
    assert "✓ Right." in out


@pytest.mark.parametrize("argv, message", [
    (["single-head-3x4", "--steps", "q,nope"], "unknown step 'nope'"),
    (["single-head-3x4", "--steps", "masked"], "exercise single-head-3x4 has no step masked"),
    (["single-head-3x4", "--head", "2"], "there is no head 2; this exercise has one head, head 1"),
    (["single-head-3x4", "--head", "0"], "greater than or equal to 1"),  # heads are counted from 1
    (["single-head-3x4", "--tolerance", "0"], "the tolerance must be a number above 0"),
    (["single-head-3x4", "--tolerance", "nan"], "the tolerance must be a number above 0"),
    (["single-head-3x4", "--mode", "rows"], "'rows' is not one of"),
    (["no-such-exercise"], "error: no exercise 'no-such-exercise'"),
])
def test_bad_options_exit_2_without_asking(cli, argv, message):
    code, out, err = practise(cli, "1\n", *argv)
    assert code == 2
    assert message in " ".join(err.split())
    assert not any(line.startswith("Step ") for line in out)
    assert "Traceback" not in err


def test_an_exercise_file_by_path(cli, tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("id: mine\ntitle: One token\nx: [[1, 2]]\nheads:\n  - w_q: [[1], [1]]\n"
                    "    w_k: [[1], [0]]\n    w_v: [[0], [1]]\n")
    # Q = 1 + 2 = 3, K = 1, V = 2; one key: scores 3, scaled 3/1 = 3, weight 1, output 2
    code, out, _ = practise(cli, "3\n1\n2\n3\n3\n1\n2\n", str(path))
    assert code == 0
    assert out[0] == "Practice: One token (mine, steps to do: 7)"
    assert out.count("✓ Right.") == 7


def test_two_sessions_at_once_both_saved():
    script = b"1 1; 2 2; 2 2\n1 1; 2 2; 2 2\n1 1; 2 2; 2 2\n2 4 4; 4 8 8; 4 8 8\nquit\n"
    procs = [subprocess.Popen([sys.executable, "-m", "tutor", "practice", "single-head-3x4"], cwd=REPO,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    for p in procs:
        out, err = p.communicate(script, timeout=120)
        assert p.returncode == 0 and err == b"", err
        assert out.decode().count("✓ Right.") == 4
    assert rows("SELECT session, COUNT(*) FROM answers GROUP BY session") == [(1, 4), (2, 4)]


def test_without_an_exercise_the_weakest_step_picks_it(cli):
    code, out, _ = practise(cli, "quit\n")
    assert code == 0
    assert out[0] == "Practising single-head-3x4: it trains q, not practised yet."
    assert out[1].startswith("Practice: Three tokens")


# --- the store on disk ------------------------------------------------------------------------


@pytest.mark.parametrize("content", [b"not a database at all\n", b"SQLite format 3\x00" + b"\x07" * 2000])
@pytest.mark.parametrize("command", [["practice", "single-head-3x4"], ["stats"]])
def test_damaged_or_foreign_store_is_one_error_and_left_untouched(cli, content, command):
    path = store_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    code, out, err = cli(*command, input="1 1; 2 2; 2 2\n")
    assert code == 2
    assert out == ""  # not a single question asked
    assert len(err.splitlines()) == 1
    assert err.startswith((f"error: {path} is not an attn-tutor progress file; it was left untouched",
                           f"error: the progress file {path} is damaged; it was left untouched"))
    assert path.read_bytes() == content
    assert sorted(p.name for p in path.parent.iterdir()) == ["progress.sqlite3"]


def test_another_programs_sqlite_file_is_refused(cli):
    path = store_path()
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    code, out, err = practise(cli, "", "single-head-3x4")
    assert code == 2 and out == []
    assert err == (f"error: {path} is not an attn-tutor progress file; it was left untouched "
                   "(move it away, or set ATTN_TUTOR_HOME to use another folder)\n")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_stats_with_no_store_creates_nothing(cli):
    code, out, _ = stats(cli)
    assert code == 0
    assert out.splitlines()[0] == "No practice recorded yet."
    assert "attn-tutor practice single-head-3x4" in out
    assert not store_path().parent.exists()


def _read_until(proc: subprocess.Popen, needle: bytes, timeout: float = 60) -> bytes:
    got = b""
    deadline = time.monotonic() + timeout
    while needle not in got:
        left = deadline - time.monotonic()
        assert left > 0, got.decode(errors="replace")
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, got.decode(errors="replace")
            got += chunk
    return got


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_killed_session_keeps_every_answer_given(cli):
    proc = subprocess.Popen([sys.executable, "-m", "tutor", "practice", "single-head-3x4"], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    try:
        _read_until(proc, b"Q> ")
        proc.stdin.write(b"1 1; 2 2; 2 2\n")
        proc.stdin.flush()
        _read_until(proc, b"K> ")
        proc.stdin.write(b"9 9; 2 2; 2 2\n")  # a wrong answer is an answer too
        proc.stdin.flush()
        _read_until(proc, b"Type the matrix again")
        proc.stdin.write(b"1 1\n2 2\n")  # half a matrix, row by row: not an answer yet
        proc.stdin.flush()
        _read_until(proc, b"K row 3> ")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdin.close()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert rows("SELECT step, outcome, attempt, answer FROM answers ORDER BY id") == [
        ("q", "correct", 1, "1 1; 2 2; 2 2"), ("k", "wrong", 1, "9 9; 2 2; 2 2")]
    assert rows("SELECT ended FROM sessions") == [(None,)]
    # and the store opens cleanly afterwards
    code, out, err = cli("stats", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["answers"] == 2


# --- what the learner reads, under constraints -------------------------------------------------


def test_ascii_stream_no_colour_and_60_columns(cli_encoded):
    script = (typed(SCORES) + "\n" + "show\n").encode()  # forgets the scaling, then reveals
    r = cli_encoded("practice", "single-head-3x4", "--steps", "scaled,weights", input=script + b"show\n",
                    encoding="ascii", env={"COLUMNS": "60", "NO_COLOR": "1", "TERM": "xterm-256color"})
    assert r.code == 0, r.stderr
    out = r.stdout.decode("ascii")  # raises on any non-ASCII byte
    assert "\x1b[" not in out
    assert max(len(line) for line in out.splitlines()) <= 60
    lines = [line.rstrip() for line in out.splitlines()]
    assert "  | t1 | 2.00 [x] | 4.00 [x] | 4.00 [x] |" in lines
    assert "Diagnosis: You forgot to divide by sqrt(d_k): scaled =" in lines  # √ is sqrt on an ASCII stream
    # revealed numbers are whole, never cut: the exact form and its 4-decimal value
    assert "2*sqrt(2)" in out and "5.6569" in out
    for w in (WEIGHTS[0][0], WEIGHTS[0][1], WEIGHTS[1][0], WEIGHTS[1][1]):
        assert f"{w:.4f}" in out
    # the long exact forms of the weights are listed whole, each on one line
    assert "     1/(2 + exp(-2*sqrt(2)))" in lines
    assert r.stderr == b""


def test_undecodable_piped_bytes_are_a_message_not_a_crash(cli_encoded):
    """Bytes that are not UTF-8 on a UTF-8 stdin (strict, as Python makes it for a pipe)."""
    r = cli_encoded("practice", "single-head-3x4", "--steps", "q", input=b"\xff\xfe 1\n1 1; 2 2; 2 2\n",
                    encoding="utf-8")
    assert r.code == 0 and r.stderr == b""
    out = r.stdout.decode()
    assert "Not an answer: " in out and "✓ Right." in out


def test_help_for_each_command(cli):
    for command, options in (("practice", ["--steps", "--head", "--mode", "--tolerance"]), ("stats", ["--format"])):
        code, out, _ = cli(command, "--help")
        assert code == 0
        for option in options:
            assert option in out


# --- problems a new user found ------------------------------------------------------------------

STDIN_CLOSED = ("error: standard input is closed, and practice reads your answers from it: run it in a terminal to "
                "type them, or pipe a file of answers (attn-tutor practice EXERCISE < answers.txt)\n")


def test_closed_stdin_is_one_error_before_any_session(cli):
    closed = io.StringIO()
    closed.close()  # as sys.stdin after `<&-` (None) or a stream closed under the program: see the real process below
    code, out, err = cli("practice", "single-head-3x4", input=closed)
    assert (code, out, err) == (2, "", STDIN_CLOSED)
    assert not store_path().parent.exists()  # no session started, nothing written


@pytest.mark.skipif(sys.platform == "win32", reason="closes file descriptor 0")
def test_closed_stdin_in_a_real_process():
    r = subprocess.run([sys.executable, "-m", "tutor", "practice", "single-head-3x4"], preexec_fn=lambda: os.close(0),
                       capture_output=True, check=False, cwd=REPO, timeout=120)
    assert (r.returncode, r.stdout, r.stderr.decode()) == (2, b"", STDIN_CLOSED)
    assert not store_path().parent.exists()


# head 1 of the causal exercise, by hand (see tests/test_quiz.py): masked1 = [[0, -inf, -inf],
# [4√2, 0, -inf], [2√2, 4√2, 4√2]]; the mask-as-zero weights are softmax([0, 0, 0]) = 1/3 each and
# softmax([4√2, 0, 0]) = e^{4√2}/(e^{4√2} + 2) ≈ 0.9931, 1/(e^{4√2} + 2) ≈ 0.0035
def test_a_weight_on_a_masked_key_is_wrong_however_small(cli):
    mask_zero = "0.3333 0.3333 0.3333; 0.9931 0.0035 0.0035; 0.0287 0.4856 0.4856"
    e = math.exp(4 * R2)
    assert (f"{e / (e + 2):.4f}", f"{1 / (e + 2):.4f}") == ("0.9931", "0.0035")
    code, out, _ = practise(cli, mask_zero + "\nquit\n", "two-head-causal-3x4", "--head", "2",
                            "--steps", "weights")
    assert code == 0
    start = out.index(f"weights (head 2)> {mask_zero}")
    assert out[start + 1:start + 16] == [
        "✗ Not yet: 5 of 9 entries wrong (marked ✗).",  # 0.9931 claims [0.99305, 0.99315], not 0.9965
        "  Your weights",
        "  ╭────┬──────────┬──────────┬──────────╮",
        "  │    │       t1 │       t2 │       t3 │",
        "  ├────┼──────────┼──────────┼──────────┤",
        "  │ t1 │ 0.3333 ✗ │ 0.3333 ✗ │ 0.3333 ✗ │",
        "  │ t2 │ 0.9931 ✗ │   0.0035 │ 0.0035 ✗ │",
        "  │ t3 │   0.0287 │   0.4856 │   0.4856 │",
        "  ╰────┴──────────┴──────────┴──────────╯",
        "(t2, t3): a masked key (the query may not attend to it) gets a weight of exactly 0, not just close",
        "to 0.",
        "Diagnosis: You set the masked scores to 0; set them to -inf, so that they get zero weight after the",
        "softmax.",
        "Type the matrix again, or hint, show, skip.",
        "weights (head 2)> quit",
    ]


class Script(io.StringIO):
    """Piped answers; ``actions[n]`` runs just before line ``n`` (1-based) is read."""

    def __init__(self, text: str, actions: dict):
        super().__init__(text)
        self.actions = actions
        self.read = 0

    def readline(self, *args):  # type: ignore[override]
        self.read += 1
        if self.read in self.actions:
            self.actions[self.read]()
        return super().readline(*args)


class Locker:
    """A second connection that takes and releases the progress file's write lock."""

    conn: sqlite3.Connection | None = None

    def take(self) -> None:
        self.conn = sqlite3.connect(store_path(), isolation_level=None)
        self.conn.execute("BEGIN EXCLUSIVE")

    def release(self) -> None:
        if self.conn is not None:
            self.conn.execute("COMMIT")
            self.conn.close()
            self.conn = None


def unwrapped(lines: list[str]) -> str:
    return " ".join(" ".join(lines).split())


def test_a_locked_progress_file_does_not_end_the_session_and_loses_nothing(cli, monkeypatch):
    from tutor.store import files

    monkeypatch.setattr(files, "BUSY_TIMEOUT_MS", 100)
    locker = Locker()
    stdin = Script("1 1; 2 2; 2 2\n9 9; 2 2; 2 2\n1 1; 2 2; 2 2\n1 1; 2 2; 2 2\nquit\n",
                   {1: locker.take, 4: locker.release})  # locked while Q and K (twice) are answered
    try:
        code, out, err = cli("practice", "single-head-3x4", input=stdin)
    finally:
        locker.release()
    assert (code, err) == (0, "")
    warning = (f"Not saved yet: the progress file {store_path()} is locked by another program. Your answer is kept, "
               "and saved with your next answer or at the end.")
    text = unwrapped(out.splitlines())
    assert len(wrapped(warning, store_path()).findall(out)) == 3
    assert text.count("✓ Right.") == 2 and text.count("✓ Right, at try 2.") == 1  # the session went on
    assert [line.rstrip() for line in out.splitlines()][-3:] == [
        "   6. weights  not reached", "   7. head_1   not reached",
        "Your answers are saved; attn-tutor stats shows your progress."]
    assert rows("SELECT step, outcome, attempt, answer FROM answers ORDER BY id") == [
        ("q", "correct", 1, "1 1; 2 2; 2 2"), ("k", "wrong", 1, "9 9; 2 2; 2 2"), ("k", "correct", 2, "1 1; 2 2; 2 2"),
        ("v", "correct", 1, "1 1; 2 2; 2 2")]
    assert rows("SELECT ended IS NOT NULL FROM sessions") == [(1,)]


def test_answers_still_unsaved_at_the_end_are_counted_after_the_summary(cli, monkeypatch):
    from tutor.store import files

    monkeypatch.setattr(files, "BUSY_TIMEOUT_MS", 100)
    locker = Locker()
    try:
        code, out, err = cli("practice", "single-head-3x4", "--steps", "q,k,v",
                             input=Script("1 1; 2 2; 2 2\nskip\nquit\n", {1: locker.take}))
    finally:
        locker.release()
    assert code == 2
    assert err == f"error: 2 answers could not be saved: the progress file {store_path()} is locked by another program\n"
    lines = [line.rstrip() for line in out.splitlines()]
    assert lines[-5:] == [
        "Session ended.",
        "Steps right: 1 of 3 (1 at the first try); shown: 0; skipped: 1.",
        "   1. Q  right at the first try; not saved: answer 1",
        "   2. K  skipped; not saved: answer 1",
        "   3. V  not answered",
    ]  # the summary marks each answer not saved, and makes no claim that the answers are saved
    assert unwrapped(lines).count("Not saved yet: ") == 2
    assert rows("SELECT COUNT(*) FROM answers") == [(0,)]


def test_a_huge_piped_line_is_echoed_cut(cli):
    code, out, _ = practise(cli, "1" * 200_000 + "\nquit\n", "single-head-3x4", "--steps", "q")
    assert code == 0
    # echoed after its prompt: 200 characters, then the cut, wrapped at 100 columns
    start = out.index("Q>")
    assert out[start:start + 5] == [
        "Q>", "1" * 100, "1" * 100, "… (200000 characters)",
        "Not an answer: the answer has 200000 characters; at most 100000 are allowed. Type it again (or"]
    assert max(len(line) for line in out) <= 100


def test_hints_and_sessions_are_counted_in_words(cli):
    code, out, _ = practise(cli, "hint\nshow\n", "single-head-3x4", "--steps", "q")
    assert out[-2] == "   1. Q  shown (missed), 1 hint"
    _, text, _ = stats(cli)
    assert text.splitlines()[0] == "Progress: 1 session, 1 answer."
    practise(cli, "skip\n", "single-head-3x4", "--steps", "q")
    _, text, _ = stats(cli)
    assert text.splitlines()[0] == "Progress: 2 sessions, 2 answers."


def test_mistakes_giving_the_same_numbers_are_all_shown(cli):
    # scores / sqrt(d_model) = scores / sqrt(4) = scores / 2 = scores / d_k = scores / d_v
    code, out, _ = practise(cli, "1 2 2; 2 4 4; 2 4 4\nquit\n", "single-head-3x4", "--steps", "scaled")
    start = out.index("scaled> 1 2 2; 2 4 4; 2 4 4")
    assert out[start + 10:start + 17] == [
        "Diagnosis: this answer matches three mistakes, which give the same numbers here:",
        "  • You divided by √d_model = √4; divide by √d_k of the head instead: scaled = scores / √2.",
        "  • You divided by d_k = 2 instead of its square root: scaled = scores / √2.",
        "  • You divided the scores by d_v = d_out = 2; divide by the square root of the head's d_k: scaled =",
        "    scores / √2.",
        "Type the matrix again, or hint, show, skip.",
        "scaled> quit",
    ]


def test_an_input_table_shows_one_form_throughout(cli):
    # the weights of the classic example: row t1 = [1/(1 + 2e^√2), 1/(2 + e^-√2), 1/(2 + e^-√2)];
    # the first is longer than 16 characters, so the whole table is in decimals
    w = WEIGHTS
    code, out, _ = practise(cli, "quit\n", "single-head-3x4", "--steps", "head_output")
    start = out.index("   head_1 = weights·V")
    assert out[start + 1:start + 10] == [  # given matrices: two places more than the answers (6)
        "  weights [3×3]                             V [3×2]",
        "  ╭────┬──────────┬──────────┬──────────╮   ╭────┬────┬────╮",
        "  │    │       t1 │       t2 │       t3 │   │    │ d1 │ d2 │",
        "  ├────┼──────────┼──────────┼──────────┤   ├────┼────┼────┤",
        f"  │ t1 │ {w[0][0]:.6f} │ {w[0][1]:.6f} │ {w[0][2]:.6f} │   │ t1 │  1 │  1 │",
        f"  │ t2 │ {w[1][0]:.6f} │ {w[1][1]:.6f} │ {w[1][2]:.6f} │   │ t2 │  2 │  2 │",
        f"  │ t3 │ {w[2][0]:.6f} │ {w[2][1]:.6f} │ {w[2][2]:.6f} │   │ t3 │  2 │  2 │",
        "  ╰────┴──────────┴──────────┴──────────╯   ╰────┴────┴────╯",
        "head_1> quit",
    ]
    # the scaled scores (√2, 2√2, 4√2: all short) are exact over decimal, every one of them
    code, out, _ = practise(cli, "quit\n", "single-head-3x4", "--steps", "weights")
    start = out.index("  scaled [3×3]")
    assert out[start + 1:start + 12] == [
        "  ╭────┬──────────┬──────────┬──────────╮",
        "  │    │       t1 │       t2 │       t3 │",
        "  ├────┼──────────┼──────────┼──────────┤",
        "  │ t1 │       √2 │      2√2 │      2√2 │",
        f"  │    │ {R2:.6f} │ {2 * R2:.6f} │ {2 * R2:.6f} │",
        "  ├────┼──────────┼──────────┼──────────┤",
        "  │ t2 │      2√2 │      4√2 │      4√2 │",
        f"  │    │ {2 * R2:.6f} │ {4 * R2:.6f} │ {4 * R2:.6f} │",
        "  ├────┼──────────┼──────────┼──────────┤",
        "  │ t3 │      2√2 │      4√2 │      4√2 │",
        f"  │    │ {2 * R2:.6f} │ {4 * R2:.6f} │ {4 * R2:.6f} │",
    ]


def seed_store() -> None:
    from tutor.store import Attempt, Store

    with Store.open(store_path()) as s:
        session = s.begin_session("two-head-causal-3x4", mode="matrix", tolerance=0.005)
        for step in ("q", "scaled", "masked", "head_output", "concat", "output"):
            s.record(session, Attempt("two-head-causal-3x4", step, 0, "correct"))
        s.record(session, Attempt("two-head-causal-3x4", "head_output", 0, "shown"))


def test_stats_at_60_columns_cuts_nothing(cli):
    seed_store()
    code, text, err = cli("stats", env={"COLUMNS": "60"})
    assert (code, err) == (0, "")
    lines = [line.rstrip() for line in text.splitlines()]
    assert lines[:19] == [
        "Progress: 1 session, 7 answers.",
        "",
        "Accuracy by step",
        "  ╭─────────────┬───────┬─────────┬──────────┬───────╮",
        "  │ step        │ right │ answers │ accuracy │ shown │",
        "  ├─────────────┼───────┼─────────┼──────────┼───────┤",
        "  │ q           │     1 │       1 │     100% │     0 │",
        "  │ scaled      │     1 │       1 │     100% │     0 │",
        "  │ masked      │     1 │       1 │     100% │     0 │",
        "  │ head_output │     1 │       2 │      50% │     1 │",  # 1 right of 2 (one shown)
        "  │ concat      │     1 │       1 │     100% │     0 │",
        "  │ output      │     1 │       1 │     100% │     0 │",
        "  ╰─────────────┴───────┴─────────┴──────────┴───────╯",
        "  ╭─────────────┬─────────┬────────┬────────╮",
        "  │ step        │ skipped │ review │ recall │",  # answers saved without a family: not scheduled
        "  ├─────────────┼─────────┼────────┼────────┤",
        "  │ q           │       0 │      - │      - │",
        "  │ scaled      │       0 │      - │      - │",
        "  │ masked      │       0 │      - │      - │",
    ]
    assert "…" not in text and max(len(line) for line in lines) <= 60


@pytest.mark.parametrize("columns", [40, 30, 20])
def test_stats_when_narrow_keeps_every_header_and_step_whole(cli, columns):
    seed_store()
    code, text, _ = cli("stats", env={"COLUMNS": str(columns)})
    assert code == 0 and "…" not in text
    words = set(text.replace("│", " ").replace(":", " ").replace(",", " ").split())
    assert {"step", "right", "answers", "accuracy", "shown", "skipped"} <= words or columns == 20
    assert {"q", "scaled", "masked", "head_output", "concat", "output"} <= words
    # the command, whole or continued over lines as a shell reads it (a backslash-newline is removed)
    assert "attn-tutor practice single-head-3x4" in text.replace("\\\n", "")
    if columns < len("attn-tutor practice single-head-3x4") + 2:
        assert "attn-tutor practice single-head-3x4" not in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= columns  # every line (issue 20, E)


# --- Ctrl-C, however the process was started --------------------------------------------------


class SignalWatchingInput(io.StringIO):
    """Piped answers that note SIGINT's handler each time a line is read."""

    def __init__(self, text: str):
        super().__init__(text)
        self.handlers: list[object] = []

    def readline(self, *args):
        self.handlers.append(signal.getsignal(signal.SIGINT))
        return super().readline(*args)


def test_a_session_installs_its_ctrl_c_handler_and_restores_the_one_it_found(cli):
    """SIGINT ignored (a background job): during the session Ctrl-C raises KeyboardInterrupt; after it, ignored again."""
    answers = SignalWatchingInput("1 1; 2 2; 2 2\nquit\n")
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code, out, err = cli("practice", "single-head-3x4", "--steps", "q,k", input=answers)
        after = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (code, err) == (0, "") and "Session ended." in out
    assert answers.handlers == [signal.default_int_handler] * 2
    assert after is signal.SIG_IGN



def test_ctrl_c_while_reading_ends_with_the_summary_and_keeps_the_answers(cli):
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q,k", input=InterruptedInput("1 1; 2 2; 2 2\n"))
    assert (code, err) == (0, "")
    assert "Interrupted: session ended." in out and "Steps right: 1 of 2" in out
    assert rows("SELECT step, outcome FROM answers") == [("q", "correct")]


# --- scripted sessions (these went through Typer's CliRunner before the shared fixture) --------------


def test_practice_scripted_forgetting_the_scaling_then_correcting_it(cli):
    """The learner forgets 1/sqrt(d_k) at `scaled`, is told so, corrects it, then quits."""
    scores = "2 4 4; 4 8 8; 4 8 8"
    r2 = math.sqrt(2)
    scaled = "; ".join(" ".join(f"{v / r2:.2f}" for v in row) for row in ((2, 4, 4), (4, 8, 8), (4, 8, 8)))
    answers = "\n".join([scores, scores, scaled, "quit"]) + "\n"  # scores; scaled: unscaled, then right
    code, out, err = cli("practice", "single-head-3x4", "--steps", "scores,scaled,weights", input=answers)
    assert (code, err) == (0, "")
    assert out.count("Diagnosis: You forgot to divide by √d_k: scaled = scores / √2.") == 1
    assert out.count("✓ Right") == 2  # scores at once, scaled at the second try
    assert "Session ended." in out
