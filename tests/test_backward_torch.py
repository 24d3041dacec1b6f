"""The backward pass against torch autograd (float64): every backward step of every bundled exercise.

Three engines, one answer: the exact backward (:func:`tutor.steps.solve` with
``backward=True``), the NumPy core's (:func:`tutor.production.layer_backward`,
:func:`~tutor.numeric.backward.scaled_dot_product_attention_backward`) and
torch's autograd through the same forward, to 1e-9.  A query row that may
attend to no key has zero weights (the contract, as SDPA since 2.5): the
oracle writes that row's softmax as zeros, so its gradients are zero too.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tutor.exercise.catalog import resolve
from tutor.numeric.backward import scaled_dot_product_attention_backward
from tutor.production import layer_backward
from tutor.steps import solve

from .conftest import EXERCISES, V1_BUNDLED
from .test_torch_parity import require_torch

torch = require_torch()

BUNDLED = sorted(p.stem for p in EXERCISES.glob("*.yaml"))
CASES = json.loads((Path(__file__).parent / "data" / "v2" / "v2-cases.json").read_text())["cases"]
TOL = 1e-9


def _t(m) -> torch.Tensor:
    return torch.tensor([[float(x) for x in row] for row in m], dtype=torch.float64)


def torch_grads(ex, upstream=None) -> dict[tuple[str, int | None], np.ndarray]:
    """Every backward step's value from torch autograd, keyed as the catalogue keys them."""
    x = _t(ex.x).requires_grad_()
    kv = _t(ex.x_kv).requires_grad_() if ex.is_cross else x
    allowed = None if ex.allowed() is None else torch.tensor(ex.allowed())
    leaves, tensors = {}, {}
    heads = []
    for h, hd in enumerate(ex.heads):
        p = {}
        for name in ("w_q", "w_k", "w_v", "b_q", "b_k", "b_v"):
            m = getattr(hd, name)
            if m is not None:
                p[name] = (_t(m) if name.startswith("w") else _t([m])[0]).requires_grad_()
                leaves[name, h] = p[name]
        q = x @ p["w_q"] + p.get("b_q", 0)
        k = kv @ p["w_k"] + p.get("b_k", 0)
        v = kv @ p["w_v"] + p.get("b_v", 0)
        scaled = q @ k.T / hd.d_k ** 0.5
        for name, tt in (("q", q), ("k", k), ("v", v), ("scaled", scaled)):
            tt.retain_grad()
            tensors[name, h] = tt
        S = scaled
        if allowed is not None:
            empty = ~allowed.any(dim=1, keepdim=True)
            S = torch.where(allowed, scaled, float("-inf"))
            S = torch.where(empty, 0.0, S)
        P = torch.softmax(S, dim=-1)
        if allowed is not None:
            P = P * (~empty)
        P.retain_grad()
        tensors["weights", h] = P
        out = P @ v
        out.retain_grad()
        tensors["head_output", h] = out
        heads.append(out)
    concat = torch.cat(heads, dim=1)
    concat.retain_grad()
    y = concat
    if ex.w_o is not None:
        w_o = _t(ex.w_o).requires_grad_()
        leaves["w_o", None] = w_o
        y = concat @ w_o
        if ex.b_o is not None:
            b_o = _t([ex.b_o])[0].requires_grad_()
            leaves["b_o", None] = b_o
            y = y + b_o
    G = torch.ones_like(y) if upstream is None else torch.tensor(upstream, dtype=torch.float64)
    y.backward(G)
    out = {("d_output", None): G.numpy(), ("d_x", None): x.grad.numpy()}
    if ex.is_cross:
        out["d_x_kv", None] = kv.grad.numpy()
    if ex.w_o is not None:
        out["d_concat", None] = concat.grad.numpy()
        out["d_w_o", None] = leaves["w_o", None].grad.numpy()
        if ex.b_o is not None:
            out["d_b_o", None] = leaves["b_o", None].grad.numpy()[None, :]
    for h in range(ex.num_heads):
        for step, name in (("d_head_output", "head_output"), ("d_weights", "weights"), ("d_scaled", "scaled"),
                           ("d_q", "q"), ("d_k", "k"), ("d_v", "v")):
            out[step, h] = tensors[name, h].grad.numpy()
        for step, name in (("d_w_q", "w_q"), ("d_w_k", "w_k"), ("d_w_v", "w_v"), ("d_b_q", "b_q"), ("d_b_k", "b_k"),
                           ("d_b_v", "b_v")):
            if (name, h) in leaves:
                g = leaves[name, h].grad.numpy()
                out[step, h] = g[None, :] if g.ndim == 1 else g
    return out


@pytest.mark.parametrize("name", V1_BUNDLED)
def test_every_backward_step_matches_torch_autograd(name):
    ex = resolve(name)
    sol = solve(ex, backward=True)
    want = torch_grads(ex)
    backward = [s for s in sol.steps if s.id.startswith("d_")]
    assert {s.key for s in backward} == set(want), name
    for s in backward:
        np.testing.assert_allclose(np.array(s.value), want[s.key], rtol=TOL, atol=TOL, err_msg=f"{name} {s.key}")


@pytest.mark.parametrize("name", V1_BUNDLED)
def test_the_numpy_backward_matches_torch_autograd(name):
    ex = resolve(name)
    g = layer_backward(ex)
    want = torch_grads(ex)
    for h in range(ex.num_heads):
        for id in ("d_weights", "d_scaled", "d_q", "d_k", "d_v", "d_w_q", "d_w_k", "d_w_v"):
            np.testing.assert_allclose(getattr(g, id)[h], want[id, h], rtol=TOL, atol=TOL, err_msg=f"{name} {id} {h}")
    np.testing.assert_allclose(g.d_x, want["d_x", None], rtol=TOL, atol=TOL)


def test_an_upstream_gradient_from_the_file_is_used(tmp_path):
    from tutor.exercise import load_exercise

    text = (EXERCISES / "two-head-causal-3x4.yaml").read_text() + "\nupstream: [[1, -2, 0, 3], ['1/2', 0, 1, 1], [0, 0, 2, -1]]\n"
    path = tmp_path / "up.yaml"
    path.write_text(text)
    ex = load_exercise(str(path))
    sol = solve(ex, backward=True)
    want = torch_grads(ex, [[1, -2, 0, 3], [0.5, 0, 1, 1], [0, 0, 2, -1]])
    for s in sol.steps:
        if s.id.startswith("d_"):
            np.testing.assert_allclose(np.array(s.value), want[s.key], rtol=TOL, atol=TOL, err_msg=str(s.key))


def test_the_classic_backward_case_computed_by_pytorch():
    case = next(c for c in CASES if c["name"].startswith("classic backward"))
    ex = resolve(case["exercise"])
    sol = solve(ex, backward=True)
    assert np.array_equal(np.array(sol.step("d_output").value), np.array(case["upstream"]))
    for id, value in case["expected"].items():
        step = sol.step(id, None if id == "d_x" else 0)
        np.testing.assert_allclose(np.array(step.value), np.array(value), rtol=TOL, atol=TOL, err_msg=id)


@pytest.mark.parametrize("seed", range(4))
def test_the_functional_sdpa_backward_matches_torch(seed):
    rng = np.random.default_rng(seed)
    B, H, L, S, E, Ev = 2, 3, 5, 7, 4, 6
    q, k, v = rng.normal(size=(B, H, L, E)), rng.normal(size=(B, H, S, E)), rng.normal(size=(B, H, S, Ev))
    dO = rng.normal(size=(B, H, L, Ev))
    mask = rng.random((L, S)) < 0.7
    mask[:, 0] = True  # no fully masked row: torch's SDPA math backward is then well defined
    for kwargs in ({}, {"attn_mask": mask}, {"is_causal": True}, {"scale": 0.3}):
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
        tkw = dict(kwargs)
        if "attn_mask" in tkw:
            tkw["attn_mask"] = torch.tensor(mask)
        out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **tkw)
        out.backward(torch.tensor(dO))
        ours = scaled_dot_product_attention_backward(q, k, v, dO, **kwargs)
        for a, t in zip(ours, (tq, tk, tv)):
            np.testing.assert_allclose(a, t.grad.numpy(), rtol=TOL, atol=TOL, err_msg=str(kwargs))


@pytest.mark.parametrize("seed", range(8))
def test_random_exercises_backward_matches_torch(seed):
    """Small random exercises (heads, biases, W_O and b_O, masks, cross-attention, an upstream): every backward step."""
    from tutor.exercise import exercise_from_data

    rng = np.random.default_rng(seed)

    def m(r, c):
        return [[f"{int(x)}/{int(d)}" for x, d in zip(row, den)] for row, den in
                zip(rng.integers(-3, 4, (r, c)), rng.integers(1, 4, (r, c)))]

    L, L_k, d_model, H, d_k = (int(x) for x in (rng.integers(1, 5), rng.integers(1, 5), rng.integers(2, 5),
                                                   rng.integers(1, 3), rng.integers(1, 4)))
    cross = bool(seed % 2)
    if not cross:
        L_k = L
    d_kv = d_model if not cross else int(rng.integers(2, 4))
    data = {"id": f"random-{seed}", "title": "random", "x": m(L, d_model), "num_heads": H,
            "w_q": m(d_model, H * d_k), "w_k": m(d_kv, H * d_k), "w_v": m(d_kv, H * d_k),
            "b_q": m(1, H * d_k)[0], "b_v": m(1, H * d_k)[0]}
    if cross:
        data["x_kv"] = m(L_k, d_kv)
    d_out = H * d_k
    if seed % 3:
        d_out = int(rng.integers(1, 4))
        data["w_o"], data["b_o"] = m(H * d_k, d_out), m(1, d_out)[0]
    if seed % 4 == 0:
        data["mask"] = [[bool(x) for x in row] for row in rng.integers(0, 2, (L, L_k))]
    up = rng.integers(-2, 3, (L, d_out)).astype(float)
    data["upstream"] = up.astype(int).tolist()
    ex = exercise_from_data(data)
    sol = solve(ex, backward=True)
    want = torch_grads(ex, up.tolist())
    for s in sol.steps:
        if s.id.startswith("d_"):
            np.testing.assert_allclose(np.array(s.value), want[s.key], rtol=TOL, atol=TOL, err_msg=f"{seed} {s.key}")
    from tutor.production.verify import verify

    verify(sol)  # and the NumPy core's backward agrees with the exact one
