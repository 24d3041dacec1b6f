"""The worked solution shows the arithmetic (issue 11, item 3): dot products, exp values, row sums, weighted sums.

The numbers are recomputed here by hand (``math.exp``, ``math.sqrt``) from
the exercise's inputs, and every expanded dot product that `explain` prints
is added up again in the test, so the arithmetic shown has to add up to the
value shown.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import pytest

from tutor.base.decimals import legible, pretty, tex
from tutor.exercise.catalog import bundled, resolve
from tutor.steps import KINDS, hand_sized, solve

from .conftest import EXERCISES


def _explain(cli, *argv: str, env: dict[str, str] | None = None) -> str:
    code, out, err = cli("explain", *argv, env=env)
    assert (code, err) == (0, "")
    return out


# --- the Done-when: the first query row of the classic ----------------------------------------------------------


def test_the_classic_shows_exp_of_each_scaled_score_and_the_row_sum(cli):
    out = _explain(cli, "single-head-3x4")
    e1, e2 = math.exp(math.sqrt(2)), math.exp(2 * math.sqrt(2))  # scaled row t1 = (√2, 2√2, 2√2)
    total = e1 + 2 * e2
    assert (f"{e1:.4f}", f"{e2:.4f}", f"{total:.4f}") == ("4.1133", "16.9188", "37.9509")
    row = out[out.index("t1: exp(√2)"):]
    assert row.startswith("t1: exp(√2) ≈ 4.1133,  exp(2√2) ≈ 16.9188,  exp(2√2) ≈ 16.9188")
    # Σ is the sum of the terms as printed (F8 of the class trial), exactly: 4.1133 + 2·16.9188 = 37.9509
    assert Fraction("4.1133") + 2 * Fraction("16.9188") == Fraction("37.9509")
    assert "Σ ≈ 4.1133 + 16.9188 + 16.9188 = 37.9509" in row.splitlines()[1]
    weights = row[row.index("weights:"):]
    assert weights.startswith(f"weights: 4.1133 / 37.9509 ≈ {e1 / total:.4f},  16.9188 / 37.9509 ≈ {e2 / total:.4f}")


def test_the_classic_expands_every_score_and_every_output_entry(cli):
    out = _explain(cli, "single-head-3x4")
    # Q = K = V = [[1, 1], [2, 2], [2, 2]] (x · W, worked by hand in the exercise's description)
    assert "scores[t1, t1] = 1·1 + 1·1 = 2" in out
    assert "scores[t2, t3] = 2·2 + 2·2 = 8" in out
    assert "Q[t2, d1] = 0·1 + 2·1 + 0·0 + 2·0 = 2" in out
    assert "scaled[t1, t2] = 4 / √2 = 2√2 ≈ 2.8284" in out
    w0 = 1 / (1 + 2 * math.exp(math.sqrt(2)))
    w1 = (1 - w0) / 2
    # the weights carried at 6 places, two more than the result's, so the products as printed give it (F8)
    assert f"head_1[t1, d1] = {w0:.6f}·1 + {w1:.6f}·2 + {w1:.6f}·2 ≈ {w0 + 4 * w1:.4f}" in out
    assert round(Fraction(f"{w0:.6f}") + 4 * Fraction(f"{w1:.6f}"), 4) == Fraction(f"{w0 + 4 * w1:.4f}")


def test_precision_applies_to_the_arithmetic(cli):
    out = _explain(cli, "single-head-3x4", "--precision", "6")
    assert f"exp(√2) ≈ {math.exp(math.sqrt(2)):.6f}" in out  # 4.113250


def test_brief_is_the_compact_view(cli):
    out = _explain(cli, "single-head-3x4", "--brief")
    assert "Worked out" not in out and "exp(√2) ≈" not in out
    assert "1/(1 + 2·exp(√2)) ≈ 0.1084" in out  # the results are still there


def test_an_exercise_beyond_hand_size_has_no_arithmetic_by_default(cli, tmp_path):
    five = tmp_path / "five.yaml"
    five.write_text("id: five\ntitle: five tokens\nx: [[1, 0], [0, 1], [1, 1], [2, 0], [0, 2]]\n"
                    "heads:\n  - w_q: [[1, 0], [0, 1]]\n    w_k: [[1, 1], [0, 1]]\n    w_v: [[1, 0], [0, 1]]\n")
    assert "Worked out" not in _explain(cli, str(five))
    ex = resolve(str(five))
    assert not hand_sized(ex) and ex.L == 5


def test_every_bundled_exercise_is_hand_sized_and_its_worksheet_has_no_arithmetic(cli):
    assert all(hand_sized(ex) for ex in bundled())
    out = _explain(cli, "single-head-3x4", "--format", "markdown", "--blank")
    assert "Worked out" not in out and "exp(√2)" not in out and "37.9509" not in out


def test_markdown_lists_the_arithmetic_under_each_step(cli):
    out = _explain(cli, "single-head-3x4", "--format", "markdown")
    assert "- scores\\[t1, t1\\] = 1·1 + 1·1 = 2" in out
    assert "- t1: exp(√2) ≈ 4.1133,  exp(2√2) ≈ 16.9188,  exp(2√2) ≈ 16.9188" in out
    assert "  - Σ ≈ 4.1133 + 16.9188 + 16.9188 = 37.9509" in out


def test_ascii_stream_transliterates_the_arithmetic(cli_encoded):
    r = cli_encoded("explain", "single-head-3x4", encoding="ascii", env={"COLUMNS": "100"})
    out = r.stdout.decode("ascii")
    assert "t1: exp(sqrt(2)) ~ 4.1133,  exp(2*sqrt(2)) ~ 16.9188" in out
    assert "sum ~ 4.1133 + 16.9188 + 16.9188 = 37.9509" in out


def test_narrow_terminal_wraps_between_parts_never_inside_a_number(cli):
    out = _explain(cli, "single-head-3x4", env={"COLUMNS": "60"})
    lines = [line.rstrip() for line in out.splitlines()]
    assert all(len(line) <= 60 for line in lines)
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("t1: exp(√2)"))
    block = lines[start:start + 6]
    # every "≈" is followed by its number on the same line
    assert all(not line.endswith("≈") for line in block)
    assert any("exp(2√2) ≈ 16.9188" in line for line in block)


# --- masks, tiny weights and the masked step ---------------------------------------------------------------------


def test_a_masked_row_shows_exp_of_minus_infinity_as_zero_and_a_tiny_weight_is_not_printed_as_zero(cli):
    out = _explain(cli, "two-head-causal-3x4")
    assert "t1: keeps t1; blocks t2, t3 (−∞)" in out
    assert "exp(−∞) = 0" in out
    # head 0, row t2: masked scores (0, 8√2): weight of t1 is 1/(1 + e^{8√2}) ≈ 1.2e-5, which rounds to 0.0000
    tiny = 1 / (1 + math.exp(8 * math.sqrt(2)))
    assert f"{tiny:.4f}" == "0.0000" and f"{tiny:.1e}" == "1.2e-05"
    assert "≈ 1.2e−5" in out


def test_legible_decimals():
    assert legible(1.23e-5, 4) == "1.2e-5"
    assert legible(-4e-9, 2) == "-4.0e-9"
    assert legible(0.1084, 4) == "0.1084" and legible(0.0, 4) == "0.0000"
    assert pretty(-1.23e-5, 4, keep_small=True) == "−1.2e−5"
    assert pretty(-1.23e-5, 4) == "0.0000"  # the default is unchanged for tables that do not ask
    assert tex(1.23e-5, 4, keep_small=True) == r"1.2 \times 10^{-5}"


# --- the arithmetic adds up ------------------------------------------------------------------------------------------

_PRODUCT = re.compile(r"^(?P<label>\S+\[[^\]]+\]) = (?P<sum>[^=≈]+?) (?P<sign>[=≈]) ")


def _number(text: str) -> float:
    text = text.replace("−", "-").strip("()")
    return float(Fraction(text)) if "/" in text else float(text)


@pytest.mark.parametrize("path", sorted(EXERCISES.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_expanded_dot_product_adds_up_to_the_value_shown(path):
    """Every ``a·b + c·d (+ bias)`` line is re-added here; the sum of the factors as printed (4 places)
    must be the step's value to within the rounding of those factors."""
    sol = solve(resolve(str(path)))
    checked = 0
    for step in sol.steps:
        for piece in KINDS[step.id].arithmetic(sol, step, 4):
            m = _PRODUCT.match(piece.label + piece.sep + str(piece.lines[0]))
            if m is None or "·" not in m["sum"]:
                continue
            if any(f in m["sum"] for f in ("cos(", "sin(")):  # RoPE's exact factors: tests/test_rope.py reads them
                continue
            terms = m["sum"].split(" + ")
            total, slack = 0.0, 0.0
            for term in terms:
                factors = [_number(f) for f in term.split("·")]
                total += math.prod(factors)
                slack += 0.5e-4 * sum(abs(f) for f in factors) + 1e-12
            i, j = step.row_labels.index(m["label"].split("[")[1].split(",")[0]), \
                step.col_labels.index(m["label"].split(", ")[1].rstrip("]"))
            assert abs(total - step.value[i][j]) <= slack, (step.id, piece)
            checked += 1
    # with a KV cache K and V are the cache with the new rows appended (no arithmetic): k_new, v_new are worked out
    worked = ("q", "k_new", "v_new", "scores") if sol.exercise.has_cache else ("q", "k", "v", "scores")
    if sol.exercise.rope is not None:  # RoPE's scores are written in cos and sin (tests/test_rope.py)
        worked = tuple(w for w in worked if w != "scores")
    assert checked >= sum(s.shape[0] * s.shape[1] for s in sol.steps if s.id in worked)


@pytest.mark.parametrize("exercise_id", ["single-head-3x4", "two-head-causal-3x4", "fully-masked-row-3x3",
                                         "padding-4x2", "single-head-dk4-2x4"])
def test_every_weights_row_sums_its_exps_and_divides(exercise_id):
    """For each row: Σ is the sum of the exp values printed, and each weight is e_j / Σ (recomputed here)."""
    sol = solve(resolve(exercise_id))
    for step in (s for s in sol.steps if s.id == "weights"):
        pieces = KINDS["weights"].arithmetic(sol, step, 4)
        assert [p.label for p in pieces] == list(step.row_labels)
        for i, piece in enumerate(pieces):
            if len(piece.lines) == 1:  # a row with no key left: every weight 0
                assert all(v == 0 for v in step.value[i])
                continue
            exps = [0.0 if "−∞" in part else _number(part.split(" ")[-1]) for part in str(piece.lines[0]).split(",  ")]
            total = _number(piece.lines[1].split(" ")[-1])
            assert abs(sum(exps) - total) <= 0.5e-4 * len(exps) + 1e-9
            for j, e in enumerate(exps):
                assert abs(e / total - step.value[i][j]) <= 1e-3


def test_a_kind_without_arithmetic_says_nothing():
    sol = solve(resolve("two-head-dk1-3x4"))
    assert KINDS["concat"].arithmetic(sol, sol.step("concat"), 4) == ()


# --- "=" only where the numbers as written give the result ------------------------------------------------------

_RESULT = re.compile(r" = (?P<sum>[^=≈]+?) = (?P<exact>[^=≈ ]+)(?: [=≈] \S+)?$")


@pytest.mark.parametrize("path", sorted(EXERCISES.glob("*.yaml")), ids=lambda p: p.stem)
def test_an_equals_sign_after_a_dot_product_is_exactly_true_of_the_numbers_written(path):
    """``a·b + c·d = r``: added up exactly (as fractions) from the factors as printed, the sum is ``r``;
    where rounded factors do not give it, the line says ``≈`` instead."""
    sol = solve(resolve(str(path)))
    checked = 0
    for step in sol.steps:
        for piece in KINDS[step.id].arithmetic(sol, step, 4):
            m = _RESULT.search(piece.sep + str(piece.lines[0]))
            if m is None or "·" not in m["sum"]:
                continue
            if any(f in m["sum"] + m["exact"] for f in ("cos(", "sin(", "√")):  # RoPE's and a norm's exact factors: the exact
                continue  # entries themselves, not rationals (their products: test_rope.py, test_prenorm_block.py)
            checked += 1
            written = Fraction(0)
            for term in m["sum"].split(" + "):
                written += math.prod(Fraction(f.replace("−", "-").strip("()")) for f in term.split("·"))
            assert written == Fraction(m["exact"].replace("−", "-")), (step.id, piece)
    worked = ("q", "k_new", "v_new") if sol.exercise.has_cache else ("q", "k", "v")  # K, V appended to a cache: no sum
    if not sol.exercise.has_norm:  # after a norm the projections carry square roots (test_prenorm_block.py)
        assert checked >= sum(s.shape[0] * s.shape[1] for s in sol.steps if s.id in worked)  # integer projections


def test_rounded_weights_that_do_not_add_up_to_the_exact_result_are_marked_approximate():
    from tutor.exact.numbers import Rat
    from tutor.steps.worked import as_written, result

    thirds = [("0.3333", "3")] * 3  # 0.3333·3 · 3 = 2.9997, the exact result is 3
    assert not as_written(thirds, "", Rat(Fraction(3)))
    assert result(Rat(Fraction(3)), 3.0, 4, rounded=True) == "≈ 3"
    assert as_written([("(1/3)", "3")] * 3, "", Rat(Fraction(3)))  # exact thirds: = 3 is true
    assert result(Rat(Fraction(3)), 3.0, 4) == "= 3"
    assert as_written([("0.7311", "1"), ("0.2689", "1")], "", Rat(Fraction(1)))  # 0.7311 + 0.2689 = 1 exactly


def test_exp_of_zero_is_carried_on_as_1_and_a_sum_of_ones_is_exact(cli):
    out = _explain(cli, "two-head-causal-3x4")
    # the second head, row t1: only key t1, whose scaled score is 0 (worked in the exercise's scores): exp(0) = 1, Σ = 1
    lines = out[out.index("t1: exp(0) = 1,  exp(−∞) = 0,  exp(−∞) = 0"):].splitlines()
    assert lines[1].strip() == "Σ = 1"
    assert lines[2].strip() == "weights: 1 / 1 = 1,  0,  0"
    row = out[out.index("t2: exp(4√2) ≈ 286.2468,  exp(0) = 1"):].splitlines()
    assert row[1].strip() == "Σ ≈ 286.2468 + 1 = 287.2468"  # e^{4√2} = 286.2468…, plus exp(0) = 1


def test_a_weight_is_written_with_an_equals_sign_only_when_the_division_shown_gives_it(cli):
    pad = _explain(cli, "padding-4x2")
    # row PAD attends I, like, tea with scaled scores 0, 0, 0: 1 / 3 is exactly 1/3
    assert "Σ = 1 + 1 + 1 = 3" in pad and "weights: 1 / 3 = 1/3 ≈ 0.3333" in pad
    fused = _explain(cli, "two-head-fused-3x4")
    # three equal scores √2: the exact weight is 1/3; Σ is the sum of the terms as printed, 3·4.1133 = 12.3399
    # (the true sum rounds to 12.3398, and 4.1133 / 12.3398 is not 1/3), so the division shown gives 1/3 exactly
    assert Fraction("4.1133") / Fraction("12.3399") == Fraction(1, 3)
    assert f"{3 * math.exp(math.sqrt(2)):.4f}" == "12.3398"
    assert "Σ ≈ 4.1133 + 4.1133 + 4.1133 = 12.3399" in fused and "4.1133 / 12.3399 = 1/3 ≈ 0.3333" in fused


def test_the_heatmap_does_not_print_a_tiny_weight_as_zero(cli):
    out = _explain(cli, "two-head-causal-3x4")
    heat = out[out.index("(darker = more weight)"):]
    # the first head's row t2: 1/(1 + e^{8√2}) ≈ 1.2e-5, beside 1 - 1.2e-5 (1.00 at two places)
    tiny = 1 / (1 + math.exp(8 * math.sqrt(2)))
    assert f"{tiny:.2f}" == "0.00"
    t2 = next(line for line in heat.splitlines() if line.lstrip("│ ").startswith("t2"))
    assert "░░ 1.2e−5" in t2 and "██ 1.00" in t2
