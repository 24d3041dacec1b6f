"""Issue 20, C: mistakes from public reports that were named wrongly or not named at all.

Every wrong answer is computed here in torch (float64) from the exercise's own numbers, making the
mistake as a learner or published code makes it; ``check`` must name it, and name nothing false.
"""

from __future__ import annotations

import json
import math

import pytest

from tutor.exercise.catalog import resolve

from .test_misconceptions import T, allowed, diagnoses, heads_of, keys_at, matrix, solution
from .test_torch_parity import require_torch

torch = require_torch()
f64 = torch.float64


def _scaled(name: str, head: int = 0) -> torch.Tensor:
    q, k, _ = heads_of(resolve(name))[head]
    return q @ k.T / math.sqrt(q.shape[1])  # [L, L_k]


# --- weights written one-hot: a hard argmax, not dropout ------------------------------------------------


def test_a_one_hot_decode_row_is_not_called_dropout(cli, tmp_path):
    """The trial's input: the one query of the decode step writes [0, 0, 0, 1]; its row sums to 1, so it is
    no dropout signature.  The 1 sits on its largest score (a hard argmax), which is also what a causal mask
    on the wrong triangle leaves (only the query's own key): both are named, nothing else."""
    ex = resolve("decode-one-token-cache-3")
    found = diagnoses(cli, solution(tmp_path, ex.id, [{"weights": "[[0, 0, 0, 1]]"}]))
    named = keys_at(found, "weights")
    assert "dropout_on" not in named
    assert set(named) == {"argmax_weights", "mask_upper"}


def test_weights_one_hot_at_each_rows_largest_score_are_a_hard_argmax(cli, tmp_path):
    scaled = _scaled("single-head-asym-3x4")
    hard = torch.nn.functional.one_hot(scaled.argmax(dim=-1), scaled.shape[1]).to(f64)  # [3, 3]
    assert not torch.allclose(hard, torch.softmax(scaled, dim=-1), atol=0.01)
    found = diagnoses(cli, solution(tmp_path, "single-head-asym-3x4", [{"weights": matrix(hard, 0)}]))
    assert keys_at(found, "weights") == ["argmax_weights"]
    message = found["weights", 0][0]["message"]
    assert "hard argmax" in message and "dropout" not in message


def test_one_hot_at_a_key_that_is_not_the_largest_is_not_an_argmax(cli, tmp_path):
    scaled = _scaled("single-head-asym-3x4")
    wrong = torch.nn.functional.one_hot(scaled.argmin(dim=-1), scaled.shape[1]).to(f64)
    found = diagnoses(cli, solution(tmp_path, "single-head-asym-3x4", [{"weights": matrix(wrong, 0)}]))
    assert "argmax_weights" not in keys_at(found, "weights")


# --- the 1/√d_k in the wrong place -----------------------------------------------------------------------


def test_the_scale_folded_into_q_is_named_and_the_right_scaled_stops_the_error(cli, tmp_path):
    """Q written as Q/√2 (as F.multi_head_attention_forward scales q), the scores to match, the scaled
    scores right: "the 1/√d_k went into Q"; what follows lists scores (carried) and scaled (right again),
    and nothing computed from the right scaled scores inherits the error."""
    ex = resolve("single-head-asym-3x4")
    (q, k, _), = heads_of(ex)
    q_folded = q / math.sqrt(2)
    scores = q_folded @ k.T
    assert torch.allclose(scores, q @ k.T / math.sqrt(2))  # = the right scaled scores
    path = solution(tmp_path, ex.id, [{"q": matrix(q_folded), "scores": matrix(scores), "scaled": matrix(scores)}])
    code, out, _ = cli("check", path, "--format", "json")
    doc = json.loads(out)
    by_step = {s["id"]: s for s in doc["steps"]}
    assert [d["key"] for d in by_step["q"]["diagnoses"]] == ["q_prescaled"]
    assert by_step["scaled"]["verdict"] == "correct"
    assert [a["id"] if isinstance(a, dict) else a[0] for a in doc["affected"]] == ["scores", "scaled"]
    code, out, _ = cli("check", path)
    text = " ".join(out.split())
    assert "the 1/√d_k went into Q" in text
    assert "scaled: right again, so what is computed from it does not inherit the error" in text
    assert "not computed from these values" not in text and "inherit the error: weights" not in text


def test_scores_already_divided_by_the_root_are_named(cli, tmp_path):
    scaled = _scaled("single-head-asym-3x4")
    found = diagnoses(cli, solution(tmp_path, "single-head-asym-3x4", [{"scores": matrix(scaled)}]))
    assert keys_at(found, "scores") == ["scores_prescaled"]


def test_the_scale_applied_after_the_softmax(cli, tmp_path):
    """softmax(scores)/√d_k: named at the weights; before the softmax it is "no scaling" alone."""
    ex = resolve("two-head-causal-3x4")
    q, k, _ = heads_of(ex)[0]
    scores = (q @ k.T).masked_fill(~allowed(ex), -math.inf)
    wrong = torch.softmax(scores, dim=-1) / math.sqrt(2)
    found = diagnoses(cli, solution(tmp_path, ex.id, [{"masked": matrix(scores), "weights": matrix(wrong)}, {}]))
    assert keys_at(found, "weights") == ["scale_after_softmax"]
    assert keys_at(found, "masked") == ["no_scaling"]


@pytest.mark.parametrize(("root", "places"), [("1.4", 4), ("1.41", 4)])
def test_the_root_rounded_before_dividing(cli, tmp_path, root, places):
    ex = resolve("single-head-asym-3x4")
    (q, k, _), = heads_of(ex)
    wrong = q @ k.T / float(root)
    found = diagnoses(cli, solution(tmp_path, ex.id, [{"scaled": matrix(wrong, places)}]))
    assert keys_at(found, "scaled") == ["scale_root_rounded"]
    assert f"rounded to {root} (√2 = 1.414214…)" in found["scaled", 0][0]["message"]


# --- masks -------------------------------------------------------------------------------------------------


def test_a_minus_1e9_fill_is_named_when_the_kept_scores_are_exact_forms(cli, tmp_path):
    """Head 1 of the causal exercise: Q = K = [[2, 0], [0, 4], [2, 2]], scaled = Q·Kᵀ/√2, written exactly."""
    scaled = _scaled("two-head-causal-3x4")
    forms = [["2*sqrt(2)", "0", "2*sqrt(2)"], ["0", "8*sqrt(2)", "4*sqrt(2)"], ["2*sqrt(2)", "4*sqrt(2)", "4*sqrt(2)"]]
    values = [[eval(f, {"sqrt": math.sqrt}) for f in row] for row in forms]  # the test's own forms, not input
    assert torch.allclose(scaled, T(values))
    keep = allowed(resolve("two-head-causal-3x4"))
    rows = [[f'"{forms[i][j]}"' if keep[i, j] else '"-1e9"' for j in range(3)] for i in range(3)]
    found = diagnoses(cli, solution(tmp_path, "two-head-causal-3x4", [{"masked": matrix(rows)}, {}]))
    assert keys_at(found, "masked") == ["mask_large_negative"]


@pytest.mark.parametrize(("blocked", "named"), [
    (lambda n: torch.ones(n, n).triu(diagonal=0).bool(), "mask_diagonal"),  # j >= i: the diagonal blocked too
    (lambda n: torch.ones(n, n).tril(diagonal=-1).bool(), "mask_upper"),  # j < i: the past blocked
])
def test_a_causal_mask_built_wrongly_is_named_for_what_it_blocks(cli, tmp_path, blocked, named):
    scaled = _scaled("two-head-causal-3x4")
    wrong = scaled.masked_fill(blocked(3), -math.inf)
    found = diagnoses(cli, solution(tmp_path, "two-head-causal-3x4", [{"masked": matrix(wrong)}, {}]))
    assert keys_at(found, "masked") == [named]  # not "transposed" (head 1's scores are symmetric)
    message = found["masked", 0][0]["message"]
    assert ("blocks the past" in message) == (named == "mask_upper")


def test_a_decode_mask_on_the_wrong_triangle_keeps_only_the_querys_own_key(cli, tmp_path):
    """Lower-right alignment: query i sits at position i + L_k - L; the wrong triangle keeps j >= that."""
    ex = resolve("decode-two-tokens-alignment")
    q, k_new, _ = heads_of(ex)[0]
    k = torch.cat([T(ex.cache[0].k), k_new])  # [L_k, d_k]: the cached keys, then the new tokens'
    L, L_k = q.shape[0], k.shape[0]
    assert L < L_k  # a decode step: lower-right alignment differs from top-left
    pos = torch.arange(L)[:, None] + (L_k - L)
    wrong = (q @ k.T / math.sqrt(q.shape[1])).masked_fill(torch.arange(L_k)[None, :] < pos, -math.inf)
    per_head = [{"masked": matrix(wrong)}] + [{} for _ in range(ex.num_heads - 1)]
    found = diagnoses(cli, solution(tmp_path, ex.id, per_head))
    assert keys_at(found, "masked") == ["mask_upper"]


# --- ALiBi -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("head", [0, 1])
def test_alibi_slopes_counted_from_head_zero(cli, tmp_path, head):
    """Press et al.: m_h = 2^(−8h/H), h = 1 … H; counted from 0, head h gets the slope of head h − 1 (the first: 1)."""
    ex = resolve("alibi-causal-3x2")
    H = ex.num_heads
    scaled = _scaled(ex.id, head)
    L, L_k = scaled.shape
    distance = torch.arange(L_k)[None, :] - (torch.arange(L)[:, None] + L_k - L)  # j − i
    wrong = scaled + 2.0 ** (-8 * head / H) * distance
    per_head = [{"biased": matrix(wrong)} if h == head else {} for h in range(H)]
    found = diagnoses(cli, solution(tmp_path, ex.id, per_head))
    assert keys_at(found, "biased", head) == ["alibi_shifted"]


# --- decimals rounded the wrong way ------------------------------------------------------------------------


R2 = math.sqrt(2)
ROW1 = [1 / (1 + 2 * math.exp(R2)), math.exp(R2) / (1 + 2 * math.exp(R2))]  # 0.108384, 0.445808
ROW2 = [1 / (1 + 2 * math.exp(2 * R2)), math.exp(2 * R2) / (1 + 2 * math.exp(2 * R2))]  # 0.028705, 0.485648


def test_a_decimal_rounded_away_from_zero_is_named_in_check_and_practice(cli, tmp_path):
    """0.445808 to 4 places is 0.4458; 0.4459 is the value rounded up, the trial's input."""
    from .test_grading_rule import solution_file
    from .test_practice_cli import practise

    assert f"{ROW1[1]:.7f}" == "0.4458083" and f"{ROW1[1]:.4f}" == "0.4458"
    typed = f"{ROW1[0]:.4f} 0.4459 0.4459; " + "; ".join(f"{ROW2[0]:.4f} {ROW2[1]:.4f} {ROW2[1]:.4f}" for _ in range(2))
    code, out, _ = cli("check", solution_file(tmp_path, typed), "--format", "json")
    notes = json.loads(out)["steps"][0]["notes"]
    assert code == 1 and [(n["key"], len(n["cells"])) for n in notes] == [("rounded_away_decimal", 2)]
    code, out, _ = cli("check", solution_file(tmp_path, typed))
    assert "rounded away from zero, not to the nearest (0.4458083 to 4 decimals is 0.4458, not 0.4459)" in " ".join(out.split())
    assert "No known misconception explains it" not in out
    code, out, _ = practise(cli, typed + "\nquit\n", "single-head-3x4", "--steps", "weights")
    text = " ".join(out)
    assert "rounded away from zero, not to the nearest" in text and "No known mistake explains" not in text
