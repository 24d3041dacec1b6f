"""`check` names the backward pass's mistakes, on solution files whose wrong numbers torch computes here."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tutor.answers import parse_entry
from tutor.answers.grading import judge
from tutor.exercise.catalog import resolve
from tutor.steps import solve

from .conftest import BLOCK_BUNDLED, EXERCISES, MLA_BUNDLED, V1_BUNDLED
from .test_backward_torch import torch_grads
from .test_torch_parity import require_torch

torch = require_torch()


def _yaml(m: np.ndarray) -> str:
    return "[" + ", ".join("[" + ", ".join(f"{x:.6f}" for x in row) + "]" for row in np.atleast_2d(m)) + "]"


def _torch_parts(name: str, head: int = 0):
    """P, dP, Q, K (torch, float64, upstream all ones) of one head, and d_k."""
    ex = resolve(name)
    g = torch_grads(ex)
    sol = solve(ex)
    P = np.array(sol.step("weights", head).value)
    Q, K = np.array(sol.step("q", head).value), np.array(sol.step("k", head).value)
    return ex, g, P, g["d_weights", head], Q, K, ex.heads[head].d_k


def _check(cli, tmp_path, exercise: str, body: str) -> dict:
    path = tmp_path / "solution.yaml"
    path.write_text(f"exercise: {exercise}\n{body}")
    code, out, err = cli("check", str(path), "--format", "json")
    assert code == 1, (out, err)
    return json.loads(out)


def _keys(doc: dict, step: str) -> list[str]:
    return [d["key"] for s in doc["steps"] if s["id"] == step for d in s["diagnoses"]]


def test_softmax_treated_as_elementwise(cli, tmp_path):
    ex, g, P, dP, Q, K, d_k = _torch_parts("single-head-3x4")
    doc = _check(cli, tmp_path, "single-head-3x4", f"d_scaled: {_yaml(P * dP)}\n")
    assert "softmax_grad_elementwise" in _keys(doc, "d_scaled")


def test_scale_forgotten_in_d_q_and_d_k(cli, tmp_path):
    ex, g, P, dP, Q, K, d_k = _torch_parts("single-head-3x4")
    body = f"d_q: {_yaml(g['d_q', 0] * math.sqrt(d_k))}\nd_k: {_yaml(g['d_k', 0] * math.sqrt(d_k))}\n"
    doc = _check(cli, tmp_path, "single-head-3x4", body)
    assert "grad_no_scale" in _keys(doc, "d_q") and "grad_no_scale" in _keys(doc, "d_k")


def test_d_k_without_the_transpose(cli, tmp_path):
    ex, g, P, dP, Q, K, d_k = _torch_parts("single-head-3x4")
    dS = g["d_scaled", 0]
    doc = _check(cli, tmp_path, "single-head-3x4", f"d_k: {_yaml(dS @ Q / math.sqrt(d_k))}\n")
    assert "d_k_not_transposed" in _keys(doc, "d_k")


def test_a_masked_entry_of_d_scaled_left_non_zero(cli, tmp_path):
    ex, g, P, dP, Q, K, d_k = _torch_parts("two-head-causal-3x4")
    allowed = np.array(ex.allowed())
    D = (dP * P).sum(axis=1, keepdims=True)
    wrong = np.where(allowed, g["d_scaled", 0], dP - D)
    doc = _check(cli, tmp_path, "two-head-causal-3x4", f"heads:\n  - d_scaled: {_yaml(wrong)}\n")
    assert "masked_grad_leak" in _keys(doc, "d_scaled")


def test_the_bias_gradient_averaged_not_summed(cli, tmp_path):
    ex = resolve("two-head-fused-3x4")
    g = torch_grads(ex)
    bias = next(b for b in ("d_b_q", "d_b_k", "d_b_v") if (b, 0) in g)
    wrong = g[bias, 0] / ex.L
    doc = _check(cli, tmp_path, "two-head-fused-3x4", f"heads:\n  - {bias}: {_yaml(wrong)}\n")
    assert "bias_grad_mean" in _keys(doc, bias)


def test_the_right_backward_values_pass(cli, tmp_path):
    ex = resolve("single-head-3x4")
    g = torch_grads(ex)
    body = "".join(f"{id}: {_yaml(g[id, 0])}\n" for id in ("d_weights", "d_scaled", "d_v", "d_q", "d_k", "d_w_q"))
    body += f"d_x: {_yaml(g['d_x', None])}\n"
    path = tmp_path / "solution.yaml"
    path.write_text(f"exercise: single-head-3x4\n{body}")
    code, out, err = cli("check", str(path))
    assert code == 0, out + err


def test_a_negative_irrational_value_is_judged_with_its_sign():
    # d_scaled[t1, t1] = -0.193273: "-0.1933" holds it, "0.1933" does not
    e = solve(resolve("single-head-3x4"), backward=True).step("d_scaled", 0).exact[0][0]
    assert judge(parse_entry("-0.1933"), e).right
    assert not judge(parse_entry("0.1933"), e).right


BUNDLED = sorted(p.stem for p in EXERCISES.glob("*.yaml")  # refused: no backward pass (MLA, the pre-norm block)
                 if p.stem not in MLA_BUNDLED + BLOCK_BUNDLED)
V2_BUNDLED = sorted(set(BUNDLED) - set(V1_BUNDLED) - {e for e in BUNDLED if e.startswith("rope-")})  # v3's: RoPE


@pytest.mark.parametrize("name", BUNDLED)
def test_explain_backward_runs_and_its_json_holds_every_gradient(cli, name):
    code, out, err = cli("explain", name, "--backward", "--format", "json")
    assert code == 0, err
    steps = json.loads(out)["steps"]
    ids = {s["id"] for s in steps}
    assert {"d_output", "d_scaled", "d_q", "d_k", "d_v", "d_x"} <= ids
    ex = resolve(name)
    if ex.grouped:  # the K/V gradients once per K/V head, as k and v
        d_k = [s for s in steps if s["id"] == "d_k"]
        assert [(s["head"], s["kv_head"]) for s in d_k] == [(None, g) for g in range(ex.num_kv_heads)]
    code, out, err = cli("explain", name, "--backward", env={"PYTHONIOENCODING": "ascii"})
    assert code == 0, err


def test_the_v2_exercises_are_the_seven_with_v2_features():
    # causal + left padding (issue 12's sixth) is format v1's mask and padding; a sliding window on one
    # sequence (sliding-window-sinks-4x2) is a mask of format v1 too, over a cache one of v2
    assert V2_BUNDLED == ["alibi-causal-3x2", "alibi-three-heads-3x2", "decode-one-token-cache-3",
                          "decode-sliding-window-cache-3", "decode-two-tokens-alignment", "gqa-four-heads-2x4",
                          "mqa-two-heads-3x4"]


def test_a_k_v_gradient_from_one_query_head_is_named(cli, tmp_path):
    """MQA: both query heads read one K; d_K from head 1's share alone is the 'not summed' mistake (torch's numbers)."""
    from .test_backward_v2_torch import torch_grads_v2

    ex = resolve("mqa-two-heads-3x4")
    g = torch_grads_v2(ex)
    sol = solve(ex)
    Q = np.array(sol.step("q", 0).value)
    share = g["d_scaled", 0].T @ Q / math.sqrt(ex.heads[0].d_k)  # head 1's contribution only
    assert not np.allclose(share, g["d_k", 0])
    doc = _check(cli, tmp_path, "mqa-two-heads-3x4", f"heads:\n  - d_k: {_yaml(share)}\n")
    assert "kv_grad_not_summed" in _keys(doc, "d_k")
    P = np.array(sol.step("weights", 1).value)
    share_v = P.T @ g["d_head_output", 1]  # head 2's share of d_V
    doc = _check(cli, tmp_path, "mqa-two-heads-3x4", f"heads:\n  - {{}}\n  - d_v: {_yaml(share_v)}\n")
    assert "kv_grad_not_summed" in _keys(doc, "d_v")


@pytest.mark.parametrize("name", V2_BUNDLED)
def test_the_right_v2_backward_values_from_torch_pass(cli, tmp_path, name):
    """Every backward step of a v2 exercise, written by torch autograd to 6 places: check passes them all."""
    from .test_backward_v2_torch import torch_grads_v2

    ex = resolve(name)
    g = torch_grads_v2(ex)
    layer = "".join(f"{id}: {_yaml(v)}\n" for (id, h), v in g.items() if h is None)
    heads = "heads:\n" + "".join(
        "  - {" + ", ".join(f"{id}: {_yaml(v)}" for (id, hh), v in g.items() if hh == h) + "}\n"
        for h in range(ex.num_heads))
    path = tmp_path / "solution.yaml"
    path.write_text(f"exercise: {name}\n{layer}{heads}")
    code, out, err = cli("check", str(path))
    assert code == 0, out + err


def test_the_tiled_walk_of_a_row_with_no_key_says_so(cli):
    """causal-left-padding-4x2's PAD query may attend to no key: alpha is 0 with the reason (exp(−∞ − (−∞)) is no
    number; FlashAttention-2 takes 0), never worked out as exp(m_old − m), and o = 0 said as the 0/0
    convention, not as acc / l."""
    code, out, _ = cli("explain", "causal-left-padding-4x2", "--tiled", "--block-size", "2", env={"COLUMNS": "200"})
    assert code == 0
    pad = out.split("Query PAD:")[1].split("Query Hello")[0]
    assert "alpha = 0: m_old and m are both still −∞ (every key so far is masked)" in pad and "alpha = exp" not in pad
    assert "Query PAD may attend to no key: m stays −∞ and l = 0, so acc / l is 0/0; o = [0, 0] by convention" in pad
    assert "o = acc / l" not in pad and "the softmax's denominator" not in pad


def test_one_masked_entry_of_d_scaled_left_non_zero_is_named(cli, tmp_path):
    """The leak made at one masked entry only, every other entry right (torch's numbers): still named."""
    ex, g, P, dP, Q, K, d_k = _torch_parts("two-head-causal-3x4")
    D = (dP * P).sum(axis=1, keepdims=True)
    wrong = g["d_scaled", 0].copy()
    wrong[0, 1] = (dP - D)[0, 1]  # t1 may not attend to t2: its entry should be 0
    assert wrong[0, 1] != 0
    doc = _check(cli, tmp_path, "two-head-causal-3x4", f"heads:\n  - d_scaled: {_yaml(wrong)}\n")
    assert _keys(doc, "d_scaled") == ["masked_grad_leak"]
    wrong[0, 1] = 0.5  # not what the leak gives: no name
    doc = _check(cli, tmp_path, "two-head-causal-3x4", f"heads:\n  - d_scaled: {_yaml(wrong)}\n")
    assert "masked_grad_leak" not in _keys(doc, "d_scaled")


def test_a_right_value_that_is_not_0_never_reads_as_0(cli, tmp_path):
    """d_scaled[t2, t1] of two-head-causal-3x4 is about -1.2e-5: written as 0.0001 it is wrong, and the right
    value shown must not be '0' (4 places would round it there)."""
    ex, g, *_ = _torch_parts("two-head-causal-3x4")
    value = g["d_scaled", 0][1, 0]
    assert -2e-5 < value < -1e-5
    wrong = g["d_scaled", 0].copy()
    wrong[1, 0] = 1e-4
    path = tmp_path / "solution.yaml"
    path.write_text(f"exercise: two-head-causal-3x4\nheads:\n  - d_scaled: {_yaml(wrong)}\n")
    code, out, _ = cli("check", str(path), env={"COLUMNS": "200"})
    assert code == 1
    line = next(x for x in out.splitlines() if "[t2, t1]: you wrote" in x)
    assert line.strip() == "[t2, t1]: you wrote 0.000100, the right value is -0.000012", line


# --- issue 20, C: the softmax's Jacobian cut to its diagonal; d_K's factors in the wrong order -------------


def test_the_softmax_derivative_taken_element_wise_as_p_one_minus_p(cli, tmp_path):
    """P(1 − P)∘d_weights: each weight differentiated by its own score alone (the Jacobian's diagonal)."""
    ex, g, P, dP, Q, K, d_k = _torch_parts("single-head-3x4")
    wrong = P * (1 - P) * dP
    assert not np.allclose(wrong, g["d_scaled", 0])
    doc = _check(cli, tmp_path, "single-head-3x4", f"d_scaled: {_yaml(wrong)}\n")
    assert _keys(doc, "d_scaled") == ["softmax_grad_diagonal"]


def test_d_k_as_q_transposed_times_d_scaled_is_the_order_of_the_product(cli, tmp_path):
    """Qᵀ·d_scaled is d_K transposed ([d_k, L_k]): the named order, not a bare "transposed"."""
    ex, g, P, dP, Q, K, d_k = _torch_parts("single-head-3x4")
    wrong = Q.T @ g["d_scaled", 0] / math.sqrt(d_k)  # [2, 3]
    assert np.allclose(wrong, g["d_k", 0].T)
    doc = _check(cli, tmp_path, "single-head-3x4", f"d_k: {_yaml(wrong)}\n")
    assert _keys(doc, "d_k") == ["d_k_order_transposed"]


def test_d_k_as_q_times_d_scaled_transposed_is_named_where_the_product_exists(cli, tmp_path):
    """Q·d_scaledᵀ exists only when d_k = L_k: an exercise with three tokens and d_k = 3."""
    exercise = tmp_path / "square.yaml"
    exercise.write_text("id: square-3\ntitle: square\nx: [[1, 0, 1], [0, 1, 0], [1, 1, 0]]\n"
                        "heads:\n  - w_q: [[1, 0, 0], [0, 1, 1], [1, 0, 1]]\n"
                        "    w_k: [[0, 1, 0], [1, 0, 1], [1, 1, 0]]\n    w_v: [[1, 0, 1], [0, 1, 0], [0, 0, 1]]\n")
    from tutor.exercise.catalog import read_exercise_file

    ex = read_exercise_file(exercise).exercise
    g = torch_grads(ex)
    x = torch.tensor([[float(v) for v in r] for r in ex.x], dtype=torch.float64)
    Q = (x @ torch.tensor([[float(v) for v in r] for r in ex.heads[0].w_q], dtype=torch.float64)).numpy()
    wrong = Q @ g["d_scaled", 0].T / math.sqrt(3)  # [3, 3]
    assert not np.allclose(wrong, g["d_k", 0]) and not np.allclose(wrong, g["d_k", 0].T)
    path = tmp_path / "solution.yaml"
    path.write_text(f"exercise: square.yaml\nd_k: {_yaml(wrong)}\n")
    code, out, err = cli("check", str(path), "--format", "json")
    assert code == 1, (out, err)
    assert _keys(json.loads(out), "d_k") == ["d_k_order"]
