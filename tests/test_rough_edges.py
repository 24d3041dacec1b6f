"""Issue 11, item 8: the rough edges a new user hit, one test each."""

from __future__ import annotations

import json
import re
import sqlite3
import sys

import pytest

from .test_practice_cli import practise, store_path

pytestmark = pytest.mark.usefixtures("child_environment")  # processes started here read their environment


def test_a_matrix_typed_row_by_row_ends_at_its_last_row(cli):
    """Three rows for a 3-row V: graded at once, no "V row 4>" prompt; the verdict on a line of its own."""
    code, out, _ = practise(cli, "1 1\n2 2\n2 2\n", "single-head-3x4", "--steps", "v")
    assert code == 0
    assert not any("row 4>" in line for line in out)
    assert out[out.index("V row 3> 2 2") + 1] == "✓ Right."


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_in_a_terminal_the_verdict_is_on_its_own_line():
    from .ptys import answer, spawn

    child = spawn("practice", "single-head-3x4", "--steps", "v")
    answer(child, "V> ", "1 1")
    answer(child, "V row 2> ", "2 2")
    answer(child, "V row 3> ", "2 2")
    child.expect(r"2 2\r\n(.*)Right\.")
    before = re.sub(r"\x1b\[[0-9;]*m", "", child.match.group(1)).strip()  # without its style codes
    assert before in ("✓", "")  # nothing typed or echoed before the mark on its line
    child.expect_exact("Session complete.")
    child.expect(pexpect_eof())
    assert child.wait() == 0


def pexpect_eof():
    import pexpect

    return pexpect.EOF


@pytest.mark.parametrize("width", [60, 64, 70, 76, 80])
def test_labels_of_exact_entries_never_split_inside_a_cell(cli, width):
    code, out, _ = cli("explain", "padding-4x2", env={"COLUMNS": str(width)})
    assert code == 0
    lines = out.splitlines()
    start = lines.index("   Exact entries:")
    listed = [line for line in lines[start + 1:start + 12] if line.startswith("     ")]
    assert listed
    for line in listed:
        places = line.split("  ")[0] if "≈" in line else line  # the labels column (a grid when it is narrow)
        assert places.count("(") == places.count(")"), line  # "(like, tea)" whole, never "(like," then "tea)"


def test_the_step_on_screen_when_a_session_ends_is_not_answered_not_unreached(cli):
    code, out, _ = practise(cli, "1 1; 2 2; 2 2\nquit\n", "single-head-3x4", "--steps", "q,k,v")
    assert "   2. K  not answered" in out and "   3. V  not reached" in out


def test_help_shows_no_bool_on_flags_and_the_whole_steps_list(cli):
    for command in ("practice", "explain", "check", "new"):
        code, out, _ = cli(command, "--help", env={"COLUMNS": "80"})
        assert code == 0 and "<bool>" not in out, command
    code, out, _ = cli("practice", "--help", env={"COLUMNS": "80"})
    text = " ".join(out.replace("│", " ").split())
    assert "q, k_new, v_new, k, v, q_rot, k_rot, scores, scaled, biased, masked, weights, head_output, concat, output." in text
    assert "…" not in out


def test_one_root_sign_on_a_screen(cli):
    """The formula said √d_k and the diagnosis sqrt(d_k): now √ everywhere (sqrt on an ASCII stream)."""
    code, out, _ = practise(cli, "hint\n2 4 4; 4 8 8; 4 8 8\nquit\n", "single-head-3x4", "--steps", "scaled")
    text = "\n".join(out)
    assert "scores / √d_k" in text and "Diagnosis: You forgot to divide by √d_k: scaled = scores / √2." in text
    assert "Divide every score by √2" in text
    assert "sqrt" not in text


def test_sentences_agree_with_their_nouns(cli, tmp_path):
    from tutor.exercise.catalog import resolve
    from tutor.mistakes.diagnose import diagnose
    from tutor.steps import solve

    sol = solve(resolve("single-head-asym-3x4"))  # Q ≠ K: the transpose is no column-wise softmax
    w = sol.step("weights", 0).value
    transposed = [[w[j][i] for j in range(3)] for i in range(3)]
    messages = [d.message for d in diagnose(sol, "weights", 0, transposed, tolerance=0.005)]
    assert ("Your weights matrix is transposed: your rows are its columns. It is square, so the shape stays [3×3];"
            " swap rows and columns (entry (i, j) goes to (j, i)).") in messages
    path = tmp_path / "seven.yaml"  # seven steps given, one (head_output) wrong
    path.write_text("exercise: single-head-3x4\nq: [[1, 1], [2, 2], [2, 2]]\nk: [[1, 1], [2, 2], [2, 2]]\n"
                    "v: [[1, 1], [2, 2], [2, 2]]\nscores: [[2, 4, 4], [4, 8, 8], [4, 8, 8]]\n"
                    "scaled: [[1.41, 2.83, 2.83], [2.83, 5.66, 5.66], [2.83, 5.66, 5.66]]\n"
                    "weights: [[0.11, 0.45, 0.45], [0.03, 0.49, 0.49], [0.03, 0.49, 0.49]]\n"
                    "head_output: [[1.89, 1.89], [1.97, 1.97], [1.97, 1.00]]\n")
    code, out, _ = cli("check", path, env={"COLUMNS": "200"})
    assert code == 1 and "✗ wrong: 1 of 7 given steps is wrong;" in out


def test_heads_are_counted_from_one_in_text_and_from_zero_in_json(cli):
    code, out, _ = cli("explain", "two-head-causal-3x4")
    assert "Head 1" in out and "Head 2" in out and "Head 0" not in out
    assert "head_1 = weights·V" in out and "concat = [head_1, head_2]" in out
    code, out, _ = cli("explain", "two-head-causal-3x4", "--head", "2")
    assert "Head 2" in out and "Head 1 " not in out
    code, out, err = cli("explain", "two-head-causal-3x4", "--head", "3")
    assert code == 2 and "there is no head 3; this exercise has heads 1 to 2" in err
    code, out, _ = cli("explain", "two-head-causal-3x4", "--format", "json")
    heads = {s["head"] for s in json.loads(out)["steps"]}
    assert heads == {0, 1, None}
    code, out, _ = practise(cli, "quit\n", "two-head-causal-3x4", "--steps", "q", "--head", "2")
    assert "Step 1 of 1, head 2: Queries Q" in out and "Q (head 2)> quit" in out


def test_a_near_miss_exercise_id_gets_a_suggestion(cli):
    code, _, err = cli("explain", "single-head-3x3")
    assert (code, err) == (2, "error: no exercise 'single-head-3x3': not a bundled id, nor a file "
                              "(did you mean 'single-head-3x4'?)\n")
    code, _, err = cli("practice", "two-head-causal", input="quit\n")
    assert code == 2 and "did you mean 'two-head-causal-3x4'?" in err
    code, _, err = cli("explain", "nothing-like-it")
    assert "did you mean" not in err and "run `attn-tutor list` to see the ids" in err


LEARNING_ORDER = ["single-head-3x4", "single-head-dk4-2x4", "single-head-asym-3x4", "padding-4x2", "two-head-dk1-3x4",
                  "fully-masked-row-3x3", "causal-left-padding-4x2", "two-head-causal-3x4",
                  "two-head-fused-3x4", "cross-attention-2x3", "gqa-four-heads-2x4", "mqa-two-heads-3x4",  # format v2
                  "decode-one-token-cache-3", "decode-sliding-window-cache-3", "sliding-window-sinks-4x2",
                  "decode-two-tokens-alignment", "alibi-causal-3x2", "alibi-three-heads-3x2", "rope-relative-4x2",
                  "prenorm-rmsnorm-3x2", "prenorm-layernorm-causal-3x3", "postnorm-layernorm-3x2",
                  "mla-latent-two-heads-3x4",
                  "rope-half-causal-3x4"]  # format v3 (issue 23) among them


def test_list_is_in_learning_order_with_done_and_pending(cli):
    """By difficulty (1, 1, 1, 2, 2, 3, ..., 4), then by the most advanced concept of the tags
    (basics < scaling < output-projection; padding < per-head-form; mask < output-projection < cross-attention
    < grouped-kv < kv-cache), then by id."""
    code, out, _ = cli("list", "--format", "json")
    rows = json.loads(out)
    assert [r["id"] for r in rows if r["source"] == "bundled"][:len(LEARNING_ORDER)] == LEARNING_ORDER
    assert all(not r["done"] and r["solved"] == 0 for r in rows)
    practise(cli, "1 1; 2 2; 2 2\n" * 3 + "quit\n", "single-head-3x4")
    code, out, _ = cli("list", "--format", "json")
    first = json.loads(out)[0]
    assert (first["id"], first["solved"], first["steps"], first["done"]) == ("single-head-3x4", 3, 7, False)
    code, out, _ = cli("list", env={"COLUMNS": "200"})
    assert re.search(r"pending 3/7\s+single-head-3x4", out)
    conn = sqlite3.connect(store_path())  # every step right once: done
    for step in ("scores", "scaled", "weights", "head_output"):
        conn.execute("INSERT INTO answers (session, at, exercise, step, head, outcome, attempt)"
                     " VALUES (1, '2025-01-01T00:00:00+00:00', 'single-head-3x4', ?, 0, 'correct', 1)", (step,))
    conn.commit()
    conn.close()
    code, out, _ = cli("list", env={"COLUMNS": "200"})
    assert re.search(r"done\s+single-head-3x4", out)
