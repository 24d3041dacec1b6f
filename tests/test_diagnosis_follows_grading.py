"""A diagnosis never accepts what the grading rule refused (issue 8, second round, item f).

``tutor.mistakes.diagnose.matches`` gave every interval a slack of 1e-9 (absolute below 1) for float round-off.
``check`` judges decimals through it, so ``1.0000000001`` -- which claims [1.00000000005, 1.00000000015]
and does not hold 1 -- passed as right; under ``practice --tolerance 1e-12`` grading refused it and the
diagnosis called the answer right ("no known mistake explains this answer").  Now the right value gets no
slack: the claim is the interval the rule draws (a decimal ± half a unit in its last place, an exact form
itself), and ``practice``/``check`` hand the cells they refused to the diagnosis.

The verdicts below are computed independently, with Fractions: an entry written ``d`` to ``p`` places is
right for the true value ``v`` exactly when ``|d - v| <= 1/2 · 10^-p``.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from tutor.exercise.catalog import resolve
from tutor.mistakes.diagnose import Claim, diagnose, diagnose_claim, matches, off_cells
from tutor.steps import solve

Q = [[1, 1], [2, 2], [2, 2]]  # single-head-3x4 by hand: X·W_Q
SCORES = [[2, 4, 4], [4, 8, 8], [4, 8, 8]]  # Q·Kᵀ with K = Q


def rule_says_right(text: str, true: Fraction) -> bool:
    places = len(text.split(".")[1]) if "." in text else 0
    return abs(Fraction(text) - true) <= Fraction(1, 2) * Fraction(10) ** -places


OFF_BY_A_HAIR = ["1.0000000001", "0.9999999999", "1.000000000001", "0.99999999999999", "1.00000001"]


@pytest.mark.parametrize("text", OFF_BY_A_HAIR)
def test_check_refuses_a_decimal_whose_rounding_does_not_hold_the_value(cli, tmp_path, text):
    assert not rule_says_right(text, Fraction(1))
    (tmp_path / "sol.yaml").write_text(f"exercise: single-head-3x4\nq: [[{text}, 1], [2, 2], [2, 2]]\n")
    code, out, err = cli("check", tmp_path / "sol.yaml")
    assert (code, err) == (1, "")
    assert f"[t1, d1]: you wrote {text}, the right value is 1" in out
    assert f"= 1; you wrote {text}." in " ".join(out.split())  # the slip worked out, not "no known mistake"


@pytest.mark.parametrize("text", ["1.0", "1.0000000000", "1.000000000000000"])
def test_check_accepts_a_decimal_whose_rounding_holds_the_value(cli, tmp_path, text):
    assert rule_says_right(text, Fraction(1))
    (tmp_path / "sol.yaml").write_text(f"exercise: single-head-3x4\nq: [[{text}, 1], [2, 2], [2, 2]]\n")
    assert cli("check", tmp_path / "sol.yaml").code == 0


def true_weights() -> list[list[Decimal]]:
    """softmax(scores / √2) row by row, at 50 digits (decimal's exp and sqrt), by hand."""
    with localcontext() as ctx:
        ctx.prec = 50
        root2 = Decimal(2).sqrt()
        out = []
        for row in SCORES:
            e = [(Decimal(s) / root2).exp() for s in row]
            out.append([x / sum(e) for x in e])
        return out


def test_check_agrees_with_the_rule_over_many_decimals(cli, tmp_path):
    """Weights (irrational) written at 2..15 places, one of them moved by up to 3/4 of a unit before rounding."""
    weights = true_weights()
    rng = np.random.default_rng(26)
    outcomes = set()
    for _ in range(16):
        places = int(rng.integers(2, 16))
        unit = Decimal(10) ** -places
        rows, verdicts = [], []
        cell = (int(rng.integers(0, 3)), int(rng.integers(0, 3)))  # the one entry moved; the others rounded
        for i, true_row in enumerate(weights):
            row = []
            for j, v in enumerate(true_row):
                moved = v + unit * Decimal(int(rng.integers(-15, 16))) / 20 if (i, j) == cell else v
                text = str(moved.quantize(unit, rounding=ROUND_HALF_EVEN))
                row.append(text)
                verdicts.append(abs(Decimal(text) - v) <= unit / 2)
            rows.append(row)
        (tmp_path / "sol.yaml").write_text("exercise: single-head-3x4\nweights: [" +
                                            ", ".join("[" + ", ".join(r) + "]" for r in rows) + "]\n")
        code, out, _ = cli("check", tmp_path / "sol.yaml", "--format", "json")
        assert code == (0 if all(verdicts) else 1), (rows, verdicts)
        outcomes.add(code)
    assert outcomes == {0, 1}  # both verdicts were met


def test_practice_diagnoses_what_it_refused(cli):
    """With --tolerance 1e-12 grading refuses 1.0000000001 for 1; the diagnosis no longer calls it right."""
    code, out, err = cli("practice", "single-head-3x4", "--steps", "q", "--tolerance", "1e-12",
                         input="1.0000000001 1; 2 2; 2 2\nquit\n")
    flat = " ".join(out.split())
    assert code == 0 and "Not yet: 1 of 6 entries wrong" in flat
    assert "No known mistake explains this answer" not in flat
    assert "= 1; you wrote 1.0000000001." in flat  # the typed text, not the float's shortest form


def test_the_right_value_gets_no_slack_a_recomputation_some():
    one = np.array([[1.0]])
    hair = Claim(np.array([[1.00000000005]]), np.array([[1.00000000015]]))  # "1.0000000001"
    assert not matches(one, hair)
    assert off_cells(one, hair) == [(0, 0)]
    edge = Claim(np.array([[0.115]]), np.array([[0.125]]))  # "0.12": 0.125 lies on its edge
    assert matches(np.array([[0.125]]), edge)
    assert matches(np.array([[1.0 - 1e-13]]), Claim(one, one), slack=1e-12)


def test_diagnose_claim_uses_the_cells_grading_refused():
    sol = solve(resolve("single-head-3x4"))
    exact_hair = Claim(np.array(Q, dtype=float), np.array(Q, dtype=float))  # e.g. "1000000001/1000000000" read as 1.0
    assert diagnose_claim(sol, "q", 0, exact_hair) == []  # the floats cannot tell
    found = diagnose_claim(sol, "q", 0, exact_hair, wrong=[(0, 0)])  # grading could: one entry off
    assert [d.key for d in found] == ["single_entry"] and found[0].cells == ((0, 0),)


def test_a_misconception_is_still_recognised_within_its_rounding():
    sol = solve(resolve("single-head-3x4"))
    no_scaling = [[2.00, 4.00, 4.00], [4.00, 8.00, 8.00], [4.00, 8.00, 8.00]]  # scores given as scaled
    assert [d.key for d in diagnose(sol, "scaled", 0, no_scaling, tolerance=0.005)] == ["no_scaling"]


def test_a_misconception_that_leaves_a_refused_entry_right_does_not_explain_it():
    """Head 1 of two-head-causal-3x4, row t2 = [0.9965, 0.0035, 0]: 0.004 typed on the masked key is refused
    (a mask fixes it to exactly 0).  'rounded_scaled' fits every typed number within 0.005, but gives 0
    there, as the right value does: it does not explain the refused entry, so it is not offered."""
    sol = solve(resolve("two-head-causal-3x4"))
    typed = [[1, 0, 0], [0.9965, 0.0035, 0.004], [0.0287, 0.4856, 0.4856]]
    everything_fits = diagnose(sol, "weights", 1, typed, tolerance=0.005, wrong=[(0, 0)])  # cell (0, 0) is not its doing
    assert "rounded_scaled" not in [d.key for d in everything_fits]
    found = diagnose(sol, "weights", 1, typed, tolerance=0.005, wrong=[(1, 2)])
    assert [d.key for d in found] == ["single_entry"] and found[0].cells == ((1, 2),)
