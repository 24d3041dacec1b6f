"""practice EXERCISE --tiled: FlashAttention's online softmax typed quantity by quantity, graded by the one rule,
its mistakes named; the input ends, Ctrl-C, closed stdin, ASCII and narrow streams as in practice.

The numbers are worked out here by hand.  single-head-3x4, query t1, --block-size 1 (the issue's example):
scores √2, 2√2, 2√2; V rows [1, 1], [2, 2], [2, 2].  Block 1: m = √2, l = 1, acc = [1, 1].  Block 2: m = 2√2,
alpha = exp(−√2) ≈ 0.243117, l = 1 + exp(−√2), acc = [2 + exp(−√2)]·2.  Block 3: m = 2√2, alpha = 1,
l = 2 + exp(−√2), acc = [4 + exp(−√2)]·2.  o = acc / l ≈ 1.891617, lse = 2√2 + log(2 + exp(−√2)) ≈ 3.636293.
"""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import pytest

from tutor.exercise.catalog import resolve
from tutor.flash import drill as tq
from tutor.flash.walk import tiled
from tutor.practice import Answer

from .conftest import REPO, InterruptedInput

E = math.exp(-math.sqrt(2))
RIGHT = ["sqrt(2)", "1", "1 1",  # block 1: m, l, acc
         "2*sqrt(2)", "exp(-sqrt(2))", "1 + exp(-sqrt(2))", "2 + exp(-sqrt(2)), 2 + exp(-sqrt(2))",  # block 2
         "2.83", "1", f"{2 + E:.4f}", f"[{4 + E:.4f}, {4 + E:.4f}]",  # block 3, some as decimals
         f"{(4 + E) / (2 + E):.3f} {(4 + E) / (2 + E):.3f}", f"{2 * math.sqrt(2) + math.log(2 + E):.2f}"]  # o, lse
STDIN_CLOSED = ("error: standard input is closed, and practice reads your answers from it: run it in a terminal to "
                "type them, or pipe a file of answers (attn-tutor practice EXERCISE < answers.txt)\n")


def practise(cli, lines, *argv):
    """``practice ARGV --tiled`` with ``lines`` piped in: (code, output lines without trailing blanks, err)."""
    code, out, err = cli("practice", *argv, "--tiled", input="".join(f"{x}\n" for x in lines))
    return code, [line.rstrip() for line in out.splitlines()], err


def store_made(home: Path) -> bool:
    return home.exists()


def test_every_quantity_right_exact_and_decimal(cli, home):
    code, out, err = practise(cli, RIGHT, "single-head-3x4", "--block-size", "1")
    assert (code, err) == (0, "")
    assert out.count("✓ Right.") == 13 and "✗" not in "\n".join(out)
    assert out[-17:-14] == ["", "Session complete.", "Quantities right: 13 of 13 (13 at the first try); shown: 0; skipped: 0."]
    assert out[-1] == "This drill is not recorded in your progress file: stats does not count it."
    assert not store_made(home)  # nothing written: no progress file, not even its folder


def test_the_issue_example_is_the_default_row_and_its_blocks_are_given(cli):
    code, out, _ = practise(cli, ["quit"], "single-head-3x4", "--block-size", "1")
    assert code == 0
    assert " ".join(out[:2]) == ("Online softmax by hand, single-head-3x4 (Three tokens, d_model = 4, one head with "
                                 "d_k = 2): query t1, keys in blocks of 1; 13 quantities to type.")
    assert "Query t1 is the first row whose running max rises most often, so alpha matters; --query picks another." \
        in " ".join(out)
    assert out[out.index("Block 1 of 3 (keys t1)"):][:4] == [
        "Block 1 of 3 (keys t1)", "  scores: t1: √2 ≈ 1.4142", "  V rows: t1: [1, 1]", "block 1 m> quit"]


@pytest.mark.parametrize("typed, at, key, sentence", [
    # block 2 from the right state (m_old = √2, l_old = 1, acc_old = [1, 1]), each mistake worked by hand:
    ([f"{math.exp(math.sqrt(2)):.4f}"], "alpha", "alpha_inverted", "You rescaled by exp(m_new − m_old)"),  # exp(√2)
    (["exp(sqrt(2))"], "alpha", "alpha_inverted", "You rescaled by exp(m_new − m_old)"),  # the same, exactly
    (["exp(-sqrt(2))", "2"], "l", "no_rescale_l", "You did not rescale l when the max changed"),  # 1 + exp(0)
    (["exp(-sqrt(2))", f"{math.exp(math.sqrt(2)) + 1:.3f}"], "l", "alpha_inverted", "You rescaled by"),  # e^√2·1 + 1
    (["exp(-sqrt(2))", "1.2431", "3 3"], "acc", "no_rescale_acc", "You did not rescale acc"),  # [1, 1] + [2, 2]
    (["exp(-sqrt(2))", "1.2431", f"{(2 + E) / (1 + E):.4f} {(2 + E) / (1 + E):.4f}"], "acc", "divide_per_block",
     "You divided acc by l at every block"),  # acc / l at block 2
])
def test_each_misconception_is_named(cli, typed, at, key, sentence):
    code, out, err = practise(cli, ["sqrt(2)", "1", "1 1", "2*sqrt(2)", *typed], "single-head-3x4", "--block-size", "1")
    assert (code, err) == (0, "")
    text = "\n".join(out)
    wrong = text.index(f"block 2 {at}> {typed[-1]}")
    after = text[wrong:]
    assert after.splitlines()[1].startswith("✗ Not yet")
    assert "Diagnosis: " + sentence in " ".join(after.split("\n"))
    assert text.count("Diagnosis:") == 1


def test_a_biased_row_walks_and_names_its_mistakes(cli):
    """alibi-causal-3x2, head 1, query c (scores √2/2 − 1/8, √2/2 − 1/16, √2; worked in tests/test_tiled.py):
    at block 2 the max rises by the bias alone, alpha = exp(−1/16); exp(1/16) is the inverted factor."""
    code, out, err = practise(cli, ["sqrt(2)/2 - 1/8", "1", "1 0", "0.64", "exp(1/16)", "exp(-1/16)"],
                              "alibi-causal-3x2", "--block-size", "1", "--head", "1", "--query", "c")
    assert (code, err) == (0, "")
    text = "\n".join(out)
    assert "  scores: a: √2/2 − 1/8 ≈ 0.5821" in out and "query c of head 1" in " ".join(out[:3])
    assert "Given, block by block: the query's biased scores s_j (scaled + B, the scores the softmax reads;" in " ".join(out)
    assert "block 2 alpha> exp(1/16)\n✗ Not yet." in text and "Diagnosis: You rescaled by exp(m_new − m_old)" in text
    assert "block 2 alpha> exp(-1/16)\n✓ Right, at try 2." in text


def test_hints_shape_show_skip_help(cli):
    code, out, _ = practise(cli, ["sqrt(2)", "1", "1 1", "2*sqrt(2)", "hint", "hint", "hint", "shape", "help", "show",
                                  "skip", "shape", "quit"], "single-head-3x4", "--block-size", "1")
    assert code == 0
    start = out.index("block 2 alpha> hint")
    assert out[start:start + 8] == [
        "block 2 alpha> hint",
        "Hint: alpha = exp(m_old − m): the rescale factor (at most 1)",
        "   l and acc were summed relative to the old max; exp(m_old − m) moves them to the new one. It is 1",
        "   when the max did not change, and 0 while the old max was −∞ (also while m is still −∞, where",
        "   exp(−∞ − (−∞)) is no number: FlashAttention-2's kernel takes 0 there).",
        "block 2 alpha> hint",
        "Hint: worked out with this block's numbers:",
        "   alpha = exp(m_old − m) = exp(√2 − 2√2) = exp(−√2) ≈ 0.2431",
    ]
    assert out[start + 8:start + 11] == ["block 2 alpha> hint",
                                         "No more hints for block 2 alpha: type show to see it, or skip.",
                                         "block 2 alpha> shape"]
    assert "block 2 alpha is one number." not in out and "alpha is one number." in out
    assert "  quit   end the session (nothing is recorded)" in out
    assert "The answer: block 2 alpha = exp(−√2) ≈ 0.2431 (counted as missed)" in out
    assert "block 2 l> skip" in out and "Skipped." in out
    assert "acc is a row [1×2]: one entry per column of V." in out
    summary = out[out.index("Session ended."):]
    assert summary[1] == "Quantities right: 4 of 13 (4 at the first try); shown: 1; skipped: 1."
    assert summary[2:9] == ["   1. block 1 m      right at the first try", "   2. block 1 l      right at the first try",
                            "   3. block 1 acc    right at the first try", "   4. block 2 m      right at the first try",
                            "   5. block 2 alpha  shown (missed), 3 hints", "   6. block 2 l      skipped",
                            "   7. block 2 acc    not answered"]


def test_worked_hints_for_l_acc_o_lse():
    r = tiled(resolve("single-head-3x4"), 1)[0]
    by = {(a.block, a.name): a for a in tq.asks(r)}
    assert tq.worked(r, by[1, "l"]) == "l = alpha*l_old + Σ_block exp(s_j - m) = exp(-sqrt(2))*1 + 1 = 1 + exp(-sqrt(2))"
    assert tq.worked(r, by[1, "acc"]) == ("acc = alpha*acc_old + Σ_block exp(s_j - m)*V_j = exp(-sqrt(2))*[1, 1] + "
                                          "1*[2, 2] = [2 + exp(-sqrt(2)), 2 + exp(-sqrt(2))]")
    assert tq.worked(r, by[None, "o"]) == "o = acc / l = [4 + exp(-sqrt(2)), 4 + exp(-sqrt(2))] / (2 + exp(-sqrt(2)))"
    assert tq.worked(r, by[None, "lse"]) == "lse = m + log(l) = 2*sqrt(2) + log(2 + exp(-sqrt(2)))"


def test_nonsense_is_one_line_and_asked_again_nothing_graded(cli):
    bad = ["__import__('os')", "1 1", "x", "((", "1/0", "exp(5000)", "", "9" * 300]
    code, out, err = practise(cli, [*bad, "quit"], "single-head-3x4", "--block-size", "1")
    assert (code, err) == (0, "")
    complaints = [line for line in out if line.startswith("Not an answer: ")]
    assert len(complaints) == len(bad) - 1  # the empty line just asks again
    assert "Not an answer: m is one number; you typed 2 entries. Type it again (or help)." in " ".join(out)
    assert "   1. block 1 m      not answered" in out  # on screen, never graded
    code, out, _ = practise(cli, ["sqrt(2)", "1", "1"], "single-head-3x4", "--block-size", "1")
    assert "Not an answer: acc is a row of 2 entries (one per column of V); you typed 1. Type it again (or help)." \
        in " ".join(out)


def test_a_coarse_answer_is_neither_right_nor_wrong(cli):
    code, out, _ = practise(cli, ["sqrt(2)", "1", "1 1", "2.8", "2.83"], "single-head-3x4", "--block-size", "1")
    assert code == 0
    i = out.index("block 2 m> 2.8")
    assert out[i + 1] == "Give at least 2 decimals (e.g. 2.83): a coarser value is neither right nor wrong. Type it again."
    assert out[i + 2] == "block 2 m> 2.83" and out[i + 3] == "✓ Right."


def test_a_truncated_decimal_is_named(cli):
    """alpha = exp(−√2) = 0.2431167…: to 5 places 0.24312; 0.24311 is the value cut off, and is named so."""
    code, out, _ = practise(cli, ["sqrt(2)", "1", "1 1", "2*sqrt(2)", "0.24311"], "single-head-3x4", "--block-size", "1")
    assert code == 0
    i = out.index("block 2 alpha> 0.24311")
    assert out[i + 1:i + 4] == ["✗ Not yet.", "  Your block 2 alpha: 0.24311 ✗",
                                "Cut off instead of rounded: 0.24311673 to 5 decimals is 0.24312, not 0.24311."]
    assert out[i + 4] == "Type it again, or hint, show, skip."  # cut off is all there is to say: no "no known mistake"


def test_end_of_input_ends_with_the_summary_and_exit_0(cli):
    code, out, err = practise(cli, ["sqrt(2)"], "single-head-3x4", "--block-size", "1")
    assert (code, err) == (0, "")
    i = out.index("End of input: session ended.")
    assert out[i - 2:i] == ["block 1 l>", ""] and out[i + 1].startswith("Quantities right: 1 of 13")
    assert "   2. block 1 l      not answered" in out and "   3. block 1 acc    not reached" in out



def test_ctrl_c_while_reading_ends_with_the_summary(cli):
    code, out, err = cli("practice", "single-head-3x4", "--tiled", input=InterruptedInput("sqrt(2)\n"))
    assert (code, err) == (0, "")
    assert "Interrupted: session ended." in out and "Quantities right: 0 of" in out


def test_ctrl_c_while_an_answer_is_graded_ends_with_the_summary(cli, monkeypatch):
    real = tq.handle
    seen: list[str] = []

    def handle(state, event):
        if isinstance(event, Answer):
            seen.append(event.text)
            if len(seen) == 2:
                raise KeyboardInterrupt
        return real(state, event)

    monkeypatch.setattr(tq, "handle", handle)
    code, out, err = cli("practice", "single-head-3x4", "--tiled", "--block-size", "1", input="sqrt(2)\n1\n1 1\n")
    assert (code, err) == (0, "")
    assert "Interrupted: session ended." in out and "Quantities right: 1 of 13" in out
    assert "2. block 1 l      not answered" in out


def test_closed_stdin_is_one_error_before_anything(cli, home):
    closed = io.StringIO()
    closed.close()
    assert cli("practice", "single-head-3x4", "--tiled", input=closed) == (2, "", STDIN_CLOSED)
    assert not store_made(home)


def test_ascii_stream_no_colour_and_40_columns(cli_encoded):
    script = "\n".join(["sqrt(2)/2 - 1/8", "1", "1 0", "0.64", "exp(1/16)", "hint", "hint", "show", "quit"]) + "\n"
    r = cli_encoded("practice", "alibi-causal-3x2", "--tiled", "--block-size", "1", "--query", "c", input=script,
                    encoding="ascii", env={"COLUMNS": "40", "NO_COLOR": "1", "TERM": "xterm-256color"})
    assert r.code == 0 and r.stderr == b""
    out = r.stdout.decode("ascii")  # raises on any non-ASCII byte
    assert "\x1b[" not in out and max(len(line) for line in out.splitlines()) <= 40
    words = " ".join(out.split())
    assert "[x] Not yet." in out and "Diagnosis: You rescaled by exp(m_new - m_old)" in words
    assert "scores: a: sqrt(2)/2 - 1/8 ~ 0.5821" in words
    assert "alpha = exp(m_old - m) = exp(sqrt(2)/2 - 1/8 - (sqrt(2)/2 - 1/16)) = exp(-1/16) ~ 0.9394" in words
    assert "The answer: block 2 alpha = exp(-1/16) ~ 0.9394 (counted as missed)" in words


@pytest.mark.parametrize("argv, message", [
    (["single-head-3x4", "--tiled", "--steps", "q"], "--tiled practises the online softmax of one query row; it goes "
                                                     "without --steps"),
    (["single-head-3x4", "--tiled", "--due", "--fresh"], "it goes without --due, --fresh"),
    (["single-head-3x4", "--tiled", "--mode", "entry"], "it goes without --mode"),
    (["--tiled"], "--tiled needs an exercise: attn-tutor practice EXERCISE --tiled"),
    (["single-head-3x4", "--tiled", "--query", "t9"], "query must be a query row: its label (t1, t2, t3) or its number"),
    (["single-head-3x4", "--tiled", "--query", "0"], "query must be a query row"),
    (["single-head-3x4", "--query", "1"], "--query chooses the query row of --tiled; add --tiled"),
    (["single-head-3x4", "--block-size", "2"], "--block-size sets the blocks of --tiled; add --tiled"),
    (["alibi-causal-3x2", "--tiled", "--head", "3"], "--head"),
    (["single-head-3x4", "--tiled", "--block-size", "0"], "--block-size"),
    (["single-head-3x4", "--tiled", "--tolerance", "-1"], "the tolerance must be a number above 0"),
])
def test_usage_errors_exit_2_before_any_question(cli, home, argv, message):
    code, out, err = cli("practice", *argv, input="sqrt(2)\n")
    assert code == 2 and out == "" and message in err and "Traceback" not in err
    assert not store_made(home)


def test_when_no_max_rises_the_intro_says_so(cli):
    """single-head-3x4 in blocks of 2: each row's largest score is in its first block (t1: √2, 2√2 | 2√2)."""
    code, out, _ = practise(cli, ["quit"], "single-head-3x4")
    assert code == 0
    assert ("At this block size no row's running max rises once it is a number, so nothing is rescaled (alpha is 1, "
            "or 0 while m was −∞); query t1 is asked (--query picks another).") in " ".join(out)


def test_the_default_row_is_where_the_max_rises_most():
    rows = tiled(resolve("alibi-causal-3x2"), 1, head=0)
    assert [tq.rises(r) for r in rows] == [0, 1, 2]  # a: one key; b: the max rises at b; c: at b and at c
    assert tq.default_row(rows).row == 2
    pad = tiled(resolve("causal-left-padding-4x2"), 2)
    assert tq.default_row(pad).row != 0  # PAD may attend to no key: never the default
    flat = tiled(resolve("single-head-3x4"), 2)
    assert [tq.rises(r) for r in flat] == [0, 0, 0] and tq.default_row(flat).row == 0


def test_asks_in_order_with_alpha_0_while_the_old_max_is_minus_infinity():
    r = tiled(resolve("causal-left-padding-4x2"), 1)[1]  # query Hello: keys PAD (padding), Hello
    names = [(a.block, a.name) for a in tq.asks(r)]
    assert names[:4] == [(0, "m"), (0, "l"), (0, "acc"), (1, "m")]  # block 1: PAD is padding, m = -inf
    assert (1, "alpha") in names and str(r.blocks[1].alpha) == "0"  # exp(m_old − m) with m_old = −∞
    assert names[-2:] == [(None, "o"), (None, "lse")]
    pad = tiled(resolve("causal-left-padding-4x2"), 1)[0]  # query PAD: no key at all, m stays −∞
    alphas = [a for a in tq.asks(pad) if a.name == "alpha"]
    assert [(a.block, str(a.right[0])) for a in alphas] == [(1, "0"), (2, "0"), (3, "0")]  # asked, as 0: one value
    assert "alpha = 0: m_old = m = -inf" in tq.worked(pad, alphas[0])


GOLDEN = REPO / "tests" / "golden" / "practice-tiled-single-head-3x4.txt"


def test_a_session_transcript_golden(cli):
    """What a learner reads, to the character (width 100, no colour): right answers, a mistake named, a hint,
    a coarse answer, show, skip, the end of input."""
    script = ["sqrt(2)", "1", "1 1", "2*sqrt(2)", "4.11", "hint", "hint", "0.24", "2", "1.24", "3 3", "2.24 2.24",
              "2.8", "2.83", "show", "skip", "4.24 4.24", "1.89, 1.89"]
    code, out, err = cli("practice", "single-head-3x4", "--tiled", "--block-size", "1",
                         input="".join(f"{x}\n" for x in script))
    assert (code, err) == (0, "")
    if os.environ.get("ATTN_TUTOR_UPDATE_GOLDEN") == "1":  # pragma: no cover - regenerating by hand
        GOLDEN.write_text(out, encoding="utf-8")
    assert out == GOLDEN.read_text(encoding="utf-8")
