"""`check` names every published mistake (issue 10, section 3).

Each solution file here is written from numbers computed independently in
the test: by PyTorch 2.13 running the mistaken code as published (a view
without the transpose, ``masked_fill(-1e9)``, dropout in training mode,
``nn.MultiheadAttention``'s averaged weights, a bool mask cast to float),
or by hand in plain Python (truncation, a wrong constant).  Then
``attn-tutor check --format json`` must name the mistake, by key and in
its sentence.
"""

from __future__ import annotations

import json
import math

import pytest

from tutor.base.messages import t
from tutor.exercise.catalog import resolve
from tutor.exercise.record import Exercise
from tutor.steps import solve

from .test_torch_parity import require_torch

torch = require_torch()
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

f64 = torch.float64


# --- the oracle: the exercise in torch, with the mistake made as published code makes it -----------


def T(m) -> torch.Tensor:
    return torch.tensor([[float(v) for v in row] for row in m], dtype=f64)


def heads_of(ex: Exercise, x: torch.Tensor | None = None) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """``(q, k, v)`` of every head, ``[L, d]`` each, computed in torch from the exercise's numbers."""
    x = T(ex.x) if x is None else x
    kv = T(ex.x_kv) if ex.x_kv is not None else x
    out = []
    for hd in ex.heads:
        def proj(inp, w, b):
            return inp @ T(w) + (torch.tensor([float(c) for c in b], dtype=f64) if b is not None else 0)
        out.append((proj(x, hd.w_q, hd.b_q), proj(kv, hd.w_k, hd.b_k), proj(kv, hd.w_v, hd.b_v)))
    return out


def allowed(ex: Exercise) -> torch.Tensor | None:
    return None if ex.allowed() is None else torch.tensor(ex.allowed(), dtype=torch.bool)


def text(v: float, places: int = 4) -> str:
    if math.isinf(v):
        return '"-inf"'
    return f"{v:.{places}f}"


def matrix(m, places: int = 4) -> str:
    rows = m.tolist() if isinstance(m, torch.Tensor) else m
    return "[" + ", ".join("[" + ", ".join(v if isinstance(v, str) else text(v, places) for v in row) + "]"
                           for row in rows) + "]"


def solution(tmp_path, exercise: str, per_head: list[dict[str, str]] | None = None, **layer: str) -> str:
    """A solution file: ``per_head`` a mapping of step to matrix text per head (one head: top level)."""
    lines = [f"exercise: {exercise}"]
    if per_head is not None and len(per_head) == 1:
        lines += [f"{k}: {v}" for k, v in per_head[0].items()]
    elif per_head is not None:
        lines.append("heads:")
        for steps in per_head:
            if not steps:
                lines.append("  - {}")  # a head with no step given keeps its place in the list
            first = True
            for k, v in steps.items():
                lines.append(f"  {'- ' if first else '  '}{k}: {v}")
                first = False
    lines += [f"{k}: {v}" for k, v in layer.items()]
    path = tmp_path / "solution.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def diagnoses(cli, path) -> dict[tuple[str, int | None], list[dict]]:
    code, out, err = cli("check", path, "--format", "json")
    assert code == 1, (out, err)
    doc = json.loads(out)
    return {(s["id"], s["head"]): s["diagnoses"] for s in doc["steps"] if s["verdict"] != "correct"}


def keys_at(found, step, head=0) -> list[str]:
    return [d["key"] for d in found[step, head]]


# --- a blocked score written as a large finite negative number --------------------------------------


@pytest.mark.parametrize(("fill", "written", "named"), [
    (-1e9, '"-1e9"', "-1e9"),
    (-10000.0, "-10000", "-10000"),
    (float(torch.finfo(torch.float16).min), "-65504", "torch.finfo(torch.float16).min"),
])
def test_a_large_negative_fill_is_named_and_its_uniform_row_too(cli, tmp_path, fill, written, named):
    ex = resolve("fully-masked-row-3x3")
    (q, k, v), = heads_of(ex)
    scaled = q @ k.T / math.sqrt(2)
    masked = scaled.masked_fill(~allowed(ex), fill)  # as published: masked_fill with a finite number
    weights = torch.softmax(masked, dim=-1)  # the fully masked row t3 comes out uniform
    assert torch.allclose(weights[2], torch.full((3,), 1 / 3, dtype=f64))
    rows = [[written if not allowed(ex)[i, j] else text(float(masked[i, j])) for j in range(3)] for i in range(3)]
    found = diagnoses(cli, solution(tmp_path, "fully-masked-row-3x3", [{"masked": matrix(rows), "weights": matrix(weights)}]))
    assert keys_at(found, "masked") == ["mask_large_negative"]
    message = found["masked", 0][0]["message"]
    assert written.strip('"') in message and named in message and "uniform" in message
    assert "empty_row_uniform" in keys_at(found, "weights")


# --- nn.MultiheadAttention's averaged weights -----------------------------------------------------


def _mha(ex: Exercise) -> nn.MultiheadAttention:
    """nn.MultiheadAttention holding the exercise's fused weights (in_proj_weight is [W_Q; W_K; W_V]ᵀ)."""
    E = ex.d_model
    mha = nn.MultiheadAttention(E, ex.num_heads, batch_first=True, dtype=f64)
    with torch.no_grad():
        w = [torch.cat([T(getattr(h, name)) for h in ex.heads], dim=1) for name in ("w_q", "w_k", "w_v")]
        mha.in_proj_weight.copy_(torch.cat(w, dim=1).T)
        mha.in_proj_bias.zero_()
        mha.out_proj.weight.copy_(T(ex.w_o).T)
        mha.out_proj.bias.zero_()
    return mha


def test_weights_averaged_over_heads_are_named(cli, tmp_path):
    ex = resolve("two-head-causal-3x4")
    mha = _mha(ex)
    x = T(ex.x)[None]
    blocked = torch.ones(3, 3, dtype=torch.bool).triu(1)  # nn.MultiheadAttention: True = blocked
    _, averaged = mha(x, x, x, attn_mask=blocked)  # the default: average_attn_weights=True
    _, per_head = mha(x, x, x, attn_mask=blocked, average_attn_weights=False)
    assert torch.allclose(averaged[0], per_head[0].mean(0))
    w = matrix(averaged[0])
    found = diagnoses(cli, solution(tmp_path, "two-head-causal-3x4", [{"weights": w}, {"weights": w}]))
    for h in (0, 1):
        assert keys_at(found, "weights", h) == ["heads_averaged"]
    assert "average_attn_weights=False" in found["weights", 0][0]["message"]


# --- the heads split, or merged, by a reshape without the transpose --------------------------------


def test_heads_split_without_the_transpose_are_named(cli, tmp_path):
    ex = resolve("two-head-causal-3x4")
    x = T(ex.x)[None]  # [B, L, D]
    B, L, H, d_k = 1, 3, 2, 2
    w_q = torch.cat([T(h.w_q) for h in ex.heads], dim=1)  # [D, H·d_k], fused
    q_right = (x @ w_q).view(B, L, H, d_k).transpose(1, 2)  # [B, H, L, d_k]
    q_wrong = (x @ w_q).view(B, H, L, d_k)  # as published: no transpose
    assert not torch.equal(q_right, q_wrong)
    per_head = [{"q": matrix(q_wrong[0, h])} for h in range(H)]
    found = diagnoses(cli, solution(tmp_path, "two-head-causal-3x4", per_head))
    assert keys_at(found, "q", 0) == ["heads_split_reshape"]
    assert "transpose(1, 2)" in found["q", 0][0]["message"]


def test_heads_merged_without_the_transpose_are_named(cli, tmp_path):
    ex = resolve("two-head-dk1-3x4")
    ctx = []
    for q, k, v in heads_of(ex):
        ctx.append(F.scaled_dot_product_attention(q[None], k[None], v[None])[0])  # [L, d_v]
    ctx_bhld = torch.stack(ctx)[None]  # [B, H, L, d_v]
    right = ctx_bhld.transpose(1, 2).reshape(1, 3, 2)
    wrong = ctx_bhld.reshape(1, 3, 2)  # as published: no transpose back
    assert not torch.allclose(right, wrong)
    found = diagnoses(cli, solution(tmp_path, "two-head-dk1-3x4", concat=matrix(wrong[0])))
    assert keys_at(found, "concat", None) == ["heads_merge_reshape"]


# --- dropout left on -------------------------------------------------------------------------------


@pytest.mark.parametrize(("p", "seed"), [(0.5, 0), (0.1, 3)])
def test_weights_with_dropout_left_on_are_named_with_their_rate(cli, tmp_path, p, seed):
    ex = resolve("single-head-dk4-2x4") if p == 0.5 else resolve("padding-4x2")
    (q, k, v), = heads_of(ex)
    mask = allowed(ex)
    w = torch.softmax((q @ k.T / math.sqrt(q.shape[1])).masked_fill(~mask, -math.inf) if mask is not None
                      else q @ k.T / math.sqrt(q.shape[1]), dim=-1)
    torch.manual_seed(seed)
    dropped = F.dropout(w, p=p, training=True)  # what nn.MultiheadAttention returns in train mode
    zeroed = (dropped == 0) & (w > 0)
    assert zeroed.any() and ((dropped == 0) | torch.isclose(dropped, w / (1 - p))).all()
    found = diagnoses(cli, solution(tmp_path, ex.id, [{"weights": matrix(dropped, 6)}]))
    assert keys_at(found, "weights") == ["dropout_on"]
    message = found["weights", 0][0]["message"]
    assert f"p = {p:g}" in message and "eval()" in message
    assert sorted(map(tuple, found["weights", 0][0]["cells"])) == sorted(map(tuple, zeroed.nonzero().tolist()))


def test_what_the_dropout_sentence_says_of_row_sums():
    """Each weight keeps its value in expectation, so a row sums to 1 on average (worked out exactly
    over every keep mask), to 1/(1 - p) only when nothing is dropped; the sentence says the former."""
    from fractions import Fraction
    from itertools import product

    w = [Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)]
    p = Fraction(1, 5)
    expected = Fraction(0)
    for keep in product([0, 1], repeat=3):
        prob = Fraction(1)
        for k in keep:
            prob *= (1 - p) if k else p
        expected += prob * sum(x / (1 - p) for x, k in zip(w, keep) if k)
    assert expected == 1
    message = t("diagnose.dropout_on", p="0.2", count=1, dropped="x", scale="1.25")
    assert "they do only on average" in message and "sums to 1/(1 - p)" not in message


# --- a boolean mask added as numbers ---------------------------------------------------------------


def test_a_boolean_mask_added_as_zero_one_is_named(cli, tmp_path):
    ex = resolve("two-head-causal-3x4")
    keep = allowed(ex)
    per_head = []
    for q, k, v in heads_of(ex):
        scaled = q @ k.T / math.sqrt(2)
        masked = scaled + keep.to(f64)  # the bool mask as a float attn_mask: +1 / +0
        out = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=keep.to(f64))[0]
        w = torch.softmax(masked, dim=-1)
        assert torch.allclose(out, w @ v)  # SDPA adds a float mask to the scores
        per_head.append({"masked": matrix(masked), "weights": matrix(w)})
    found = diagnoses(cli, solution(tmp_path, "two-head-causal-3x4", per_head))
    assert keys_at(found, "masked", 0) == ["mask_added"]
    assert "-inf" in found["masked", 0][0]["message"]


# --- the scores divided by another size of the exercise ------------------------------------------


@pytest.mark.parametrize(("exercise", "divisor", "named"), [
    ("single-head-3x4", math.sqrt(3), "√3, the square root of L = L_k = 3"),
    ("two-head-dk1-3x4", math.sqrt(2), "√2, the square root of num_heads = d_out = 2"),
    ("two-head-causal-3x4", 4.0, "by d_model = d_out = 4"),
])
def test_a_wrong_constant_is_named_by_the_sizes_it_equals(cli, tmp_path, exercise, divisor, named):
    ex = resolve(exercise)
    per_head = []
    for q, k, _ in heads_of(ex):  # by hand: the scores over the wrong constant
        per_head.append({"scaled": matrix((q @ k.T) / divisor)})
    found = diagnoses(cli, solution(tmp_path, exercise, per_head))
    assert keys_at(found, "scaled", 0) == ["scale_constant"]
    assert named in found["scaled", 0][0]["message"]


def test_mistakes_that_give_the_same_numbers_are_all_named(cli, tmp_path):
    """single-head-3x4: dividing by sqrt(d_model) = 2, by d_k = 2 and by d_v = d_out = 2 give the
    same scaled scores: the answer cannot tell them apart, so each is named."""
    scores = [[2, 4, 4], [4, 8, 8], [4, 8, 8]]
    found = diagnoses(cli, solution(tmp_path, "single-head-3x4", [{"scaled": matrix([[s / 2 for s in r] for r in scores])}]))
    assert keys_at(found, "scaled") == ["scale_sqrt_d_model", "scale_d_k", "scale_constant"]
    assert "by d_v = d_out = 2" in found["scaled", 0][2]["message"]


# --- truncation ------------------------------------------------------------------------------------


def test_weights_truncated_before_multiplying_by_v_are_named(cli, tmp_path):
    ex = resolve("single-head-3x4")
    (q, k, v), = heads_of(ex)
    w = torch.softmax(q @ k.T / math.sqrt(2), dim=-1)
    out = torch.trunc(w * 100) / 100 @ v  # cut to 2 places, then used
    found = diagnoses(cli, solution(tmp_path, "single-head-3x4", [{"head_output": matrix(out)}]))
    assert "truncated_weights" in keys_at(found, "head_output")


# --- one mistake, and one more slip on top ---------------------------------------------------------


def test_a_worked_example_with_one_extra_rounding_slip_names_the_mistake_and_the_slip(cli, tmp_path):
    """Unscaled weights (forgot √d_k), rounded to 4 places, with one entry rounded the wrong way."""
    scores = [[2, 4, 4], [4, 8, 8], [4, 8, 8]]  # the classic's Q·Kᵀ, by hand
    w = []
    for row in scores:
        z = sum(math.exp(s) for s in row)
        w.append([math.exp(s) / z for s in row])
    written = [[f"{x:.4f}" for x in row] for row in w]
    assert written[0][0] == "0.0634"
    written[0][0] = "0.0633"  # the slip: one entry one unit off in the last place
    found = diagnoses(cli, solution(tmp_path, "single-head-3x4", [{"weights": matrix(written)}]))
    assert keys_at(found, "weights") == ["no_scaling"]
    d = found["weights", 0][0]
    assert d["cells"] == [[0, 0]]
    assert "every entry but one" in d["message"] and "weights[t1, t1] (you wrote 0.0633" in d["message"]
    assert t("diagnose.no_scaling", d_k=2) in d["message"]


def test_a_slip_in_the_only_wrong_entry_is_still_a_slip(cli, tmp_path):
    sol = solve(resolve("single-head-3x4"))
    written = [[f"{x:.4f}" for x in row] for row in sol.step("weights", 0).value]
    written[1][1] = "0.4865"
    found = diagnoses(cli, solution(tmp_path, "single-head-3x4", [{"weights": matrix(written)}]))
    assert keys_at(found, "weights") == ["single_entry"]


def test_scaled_scores_truncated_before_the_softmax_are_named(cli, tmp_path):
    ex = resolve("single-head-3x4")
    (q, k, v), = heads_of(ex)
    scaled = q @ k.T / math.sqrt(2)
    cut = torch.trunc(scaled * 100) / 100  # 2.8284 -> 2.82, where rounding gives 2.83
    assert not torch.equal(cut, torch.round(scaled, decimals=2))
    w = torch.softmax(cut, dim=-1)
    found = diagnoses(cli, solution(tmp_path, "single-head-3x4", [{"weights": matrix(w)}]))
    assert keys_at(found, "weights") == ["truncated_scaled"]
    assert "cut, not even rounded" in found["weights", 0][0]["message"]


def test_mistakes_that_fit_equally_but_for_one_slip_are_all_named(cli, tmp_path):
    """single-head-3x4 divided by 2 (sqrt(d_model) = d_k = d_v = 2), one entry then mistyped: each
    mistake that gives those numbers explains all entries but that one, so each is named with it."""
    scores = [[2, 4, 4], [4, 8, 8], [4, 8, 8]]  # the classic's Q·Kᵀ, by hand
    w = []
    for row in scores:
        z = sum(math.exp(s / 2) for s in row)
        w.append([f"{math.exp(s / 2) / z:.4f}" for s in row])
    assert w[1][0] == "0.0634"
    w[1][0] = "0.0643"  # the slip: two digits swapped
    found = diagnoses(cli, solution(tmp_path, "single-head-3x4", [{"weights": matrix(w)}]))
    assert keys_at(found, "weights") == ["scale_sqrt_d_model", "scale_d_k", "scale_constant"]
    for d in found["weights", 0]:
        assert d["cells"] == [[1, 0]] and "every entry but one" in d["message"]
        assert "weights[t2, t1] (you wrote 0.0643" in d["message"]
