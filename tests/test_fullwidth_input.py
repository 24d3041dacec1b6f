"""Answers typed with a Chinese input method read as the ASCII they stand for (issue 22, item 5).

In its Chinese mode an input method types ``１``, ``；``, ``，``, ``（）``, ``－``,
``．``, ``。``, ``【】`` and the ideographic space; each answer that reads numbers
(practice, drills, check) takes them as ``1``, ``;``, ``,``, ``()``, ``-``, ``.``,
``[]`` and a space.  Every expectation here is the same answer typed in ASCII.
"""

from __future__ import annotations

import pytest

from tutor.answers.grammar import parse_entry
from tutor.answers.matrix import parse_matrix
from tutor.audit.check import audit
from tutor.audit.solution import read_solution
from tutor.base.halfwidth import halfwidth
from tutor.drills.record import Question, grade

WIDE = {chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)}


def wide(text: str) -> str:
    """``text`` as a Chinese input method types it: every ASCII character but the space full-width."""
    return "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch for ch in text)


def test_the_full_width_block_is_ascii_shifted() -> None:
    assert all(halfwidth(w) == a for w, a in WIDE.items())
    assert halfwidth("\u3000。【】") == " .[]"
    assert halfwidth("√²×·−∞") == "√²×·−∞"  # what the grammar reads as it is: left alone
    assert len(halfwidth("（１）。")) == 4  # one character for one: columns stay


@pytest.mark.parametrize("ascii_text", ["1 1; 2 2", "[[1, 1], [2, 2]]", "(1+2)/3 -1.5; 2^-1 √2",
                                        "[1, 0.25], [-inf, 3e-2]"])
def test_a_matrix_typed_full_width_is_the_ascii_one(ascii_text) -> None:
    want = [[(e.expr, e.places) for e in row] for row in parse_matrix(ascii_text)]
    for typed in (wide(ascii_text), wide(ascii_text).replace(" ", "\u3000"), ascii_text.replace(";", "；")):
        assert [[(e.expr, e.places) for e in row] for row in parse_matrix(typed)] == want, typed


def test_an_ideographic_full_stop_and_brackets() -> None:
    assert [[e.text for e in row] for row in parse_matrix("【【0。5，1】，【2，3】】")] == [["0.5", "1"], ["2", "3"]]


def test_an_error_names_the_column_typed() -> None:
    with pytest.raises(Exception, match="column 5"):
        parse_entry(wide("2 + * 3"))


def test_drill_answers_typed_full_width() -> None:
    shape = Question("shapes", "scores", "q1", "shape", "?", [2, 8, 5, 7], "[2, 8, 5, 7]", dims=("B", "H", "L_q", "L_k"))
    count = Question("counts", "params", "q2", "count", "?", 1_048_576, "1,048,576")
    assert grade(shape, "［２，８，５，７］").outcome == grade(shape, "[2, 8, 5, 7]").outcome == "correct"
    assert grade(count, "１，０４８，５７６").outcome == "correct"
    assert grade(shape, "［２，８，７，５］").outcome == "wrong"


def test_practice_takes_a_full_width_answer_as_the_ascii_one(cli) -> None:
    ascii_run = cli("practice", "single-head-3x4", "--steps", "scaled", input="2 4 4; 4 8 8; 4 8 8\n")
    wide_run = cli("practice", "single-head-3x4", "--steps", "scaled", input="２　４　４；４　８　８；４　８　８\n")
    assert ascii_run.code == wide_run.code == 0
    def verdicts(out: str) -> list[str]:
        return [line for line in out.splitlines() if "✗" in line or "✓" in line or "mistake" in line.lower()]
    assert verdicts(wide_run.out) == verdicts(ascii_run.out) and verdicts(ascii_run.out)


def test_check_reads_a_full_width_solution_as_the_ascii_one() -> None:
    def report(weights: str):
        return audit(read_solution(f"exercise: single-head-3x4\nweights: {weights}\n", "s.yaml"))

    plain = report("[[0.0634, 0.4683, 0.4683], [0.0091, 0.4955, 0.4955], [0.0091, 0.4955, 0.4955]]")
    typed = report("'【【０．０６３４，０．４６８３，０．４６８３】，【０．００９１，０．４９５５，０．４９５５】，"
                   "【０．００９１，０．４９５５，０．４９５５】】'")
    (p,), (q,) = plain.steps, typed.steps
    assert q.wrong == p.wrong and len(p.wrong) == 9
    assert [d.key for d in q.diagnoses] == [d.key for d in p.diagnoses] == ["no_scaling"]
