"""Issue 11 against PyTorch 2.13: the arithmetic `explain` prints, the mistakes the new exercise tells apart,
and fresh exercises, recomputed with torch (float64).  torch is a test oracle only."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest

from .test_torch_parity import require_torch

torch = require_torch()

from .test_explain_torch import check  # noqa: E402  (after the gate that decides skip or fail)


def T(rows) -> torch.Tensor:
    return torch.tensor([[float(Fraction(v)) for v in row] for row in rows], dtype=torch.float64)


def test_the_classic_row_t1_arithmetic_is_what_torch_computes(cli):
    """exp of each scaled score (torch.exp), their sum, and torch.softmax's weights, as `explain` prints them."""
    out = cli("explain", "single-head-3x4").out
    x = T([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]])
    w = T([[1, 0], [1, 0], [0, 1], [0, 1]])
    q = k = x @ w
    scaled = (q @ k.T) / math.sqrt(2)
    e = torch.exp(scaled[0])
    weights = torch.softmax(scaled, dim=-1)[0]
    line = next(line.strip() for line in out.splitlines() if line.strip().startswith("t1: exp("))
    assert line == f"t1: exp(√2) ≈ {e[0]:.4f},  exp(2√2) ≈ {e[1]:.4f},  exp(2√2) ≈ {e[2]:.4f}"
    # the sum of the terms as printed, which here is torch's sum to 4 places too
    assert f"Σ ≈ {e[0]:.4f} + {e[1]:.4f} + {e[2]:.4f} = {e.sum():.4f}" in out and f"{e.sum():.4f}" == "37.9509"
    assert f"{e[0]:.4f} / {e.sum():.4f} ≈ {weights[0]:.4f}" in out


def test_each_classic_mistake_changes_the_asymmetric_exercise_in_torch(cli):
    ex = json.loads(cli("explain", "single-head-asym-3x4", "--format", "json").out)["exercise"]
    x, h = T(ex["x"]), ex["heads"][0]
    q, k, v = x @ T(h["w_q"]), x @ T(h["w_k"]), x @ T(h["w_v"])
    w_o = T(ex["w_o"])
    d_k, d_model = q.shape[1], x.shape[1]
    scores = q @ k.T
    weights = torch.softmax(scores / math.sqrt(d_k), dim=-1)
    assert not torch.allclose(k @ q.T, scores)                                          # K·Qᵀ
    assert not torch.allclose(torch.softmax(scores / math.sqrt(d_k), dim=0), weights)   # softmax over dim 0
    assert not torch.allclose(torch.softmax(scores, dim=-1), weights)                   # no scaling
    assert not torch.allclose(torch.softmax(scores / math.sqrt(d_model), dim=-1), weights)  # √d_model
    assert not torch.allclose(weights @ v @ w_o.T, weights @ v @ w_o)                   # W_Oᵀ
    assert not torch.allclose(weights @ k, weights @ v)                                  # weights·K


@pytest.mark.parametrize("exercise_id, seed", [("two-head-causal-3x4", 3), ("two-head-fused-3x4", 1),
                                                ("padding-4x2", 2), ("cross-attention-2x3", 4)])
def test_a_fresh_exercise_explains_as_torch_computes_it(cli, tmp_path, exercise_id, seed):
    text = cli("new", "--like", exercise_id, "--seed", str(seed)).out
    path = tmp_path / "fresh.yaml"
    path.write_text(text, encoding="utf-8")
    ex = json.loads(cli("explain", str(path), "--format", "json").out)["exercise"]
    F = lambda m: None if m is None else [[Fraction(v) for v in row] for row in m]  # noqa: E731
    Fv = lambda v: None if v is None else [Fraction(x) for x in v]  # noqa: E731
    spec = {"x": F(ex["x"]), "x_kv": F(ex["x_kv"]), "w_o": F(ex["w_o"]), "b_o": Fv(ex["b_o"]),
            "key_padding": ex["key_padding"],
            "heads": [{k: (F(v) if k.startswith("w") else Fv(v)) for k, v in h.items()} for h in ex["heads"]]}
    if ex["mask"] == "causal":
        spec["mask"] = "causal"
    check(cli, tmp_path, text, spec)
