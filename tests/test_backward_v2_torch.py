"""The backward pass of format v2 (grouped K/V heads, a KV cache, an additive bias) against torch autograd.

The oracle builds each exercise's forward in torch float64 from its own
numbers, as a decoder runs it: one ``W_K``/``W_V`` leaf per K/V head (query
head h reads K/V head h // (num_heads / num_kv_heads)), the cache's rows as
constants before the new ones, the bias added to the scaled scores, then
``y.backward(upstream)``.  The K/V gradients of a group come out summed
because autograd adds the contributions of every head that reads a leaf:
nothing in the oracle sums them by hand.  Every backward step of the exact
engine and of the NumPy core must equal it to 1e-9.
"""

from __future__ import annotations

import numpy as np
import pytest

from tutor.exercise import exercise_from_data
from tutor.exercise.catalog import resolve
from tutor.numeric.backward import scaled_dot_product_attention_backward
from tutor.production import layer_backward
from tutor.steps import solve

from .conftest import BLOCK_BUNDLED, EXERCISES, MLA_BUNDLED, V1_BUNDLED
from .test_torch_parity import require_torch

torch = require_torch()

V2_BUNDLED = sorted(set(p.stem for p in EXERCISES.glob("*.yaml")) - set(V1_BUNDLED) - set(MLA_BUNDLED) - set(BLOCK_BUNDLED)
                    - {p.stem for p in EXERCISES.glob("*.yaml") if "rope:" in p.read_text(encoding="utf-8")})  # RoPE's: tests/test_rope_backward.py
TOL = 1e-9


def _t(m) -> torch.Tensor:
    return torch.tensor([[float(x) for x in row] for row in m], dtype=torch.float64)


def _vec(b) -> torch.Tensor:
    return torch.tensor([float(x) for x in b], dtype=torch.float64)


def torch_grads_v2(ex, upstream=None) -> dict[tuple[str, int | None], np.ndarray]:
    """Every backward step's value from torch autograd, keyed as the catalogue keys them."""
    x = _t(ex.x).requires_grad_()
    kv = _t(ex.x_kv).requires_grad_() if ex.is_cross else x
    allowed = None if ex.allowed() is None else torch.tensor(ex.allowed())
    leaves: dict = {}
    K, V = {}, {}
    for g in range(ex.num_kv_heads):
        hd = ex.heads[ex.sharing(g)[0]]  # the K/V weights of K/V head g
        for name in ("w_k", "w_v", "b_k", "b_v"):
            m = getattr(hd, name)
            if m is not None:
                leaves[name, g] = (_t(m) if name.startswith("w") else _vec(m)).requires_grad_()
        k = kv @ leaves["w_k", g] + leaves.get(("b_k", g), 0)
        v = kv @ leaves["w_v", g] + leaves.get(("b_v", g), 0)
        if ex.cache is not None:  # constants: no requires_grad
            k = torch.cat([_t(ex.cache[g].k), k])
            v = torch.cat([_t(ex.cache[g].v), v])
        k.retain_grad()
        v.retain_grad()
        K[g], V[g] = k, v
    tensors, heads = {}, []
    for h, hd in enumerate(ex.heads):
        w_q = leaves["w_q", h] = _t(hd.w_q).requires_grad_()
        if hd.b_q is not None:
            leaves["b_q", h] = _vec(hd.b_q).requires_grad_()
        q = x @ w_q + leaves.get(("b_q", h), 0)
        g = ex.kv_head(h)
        scaled = q @ K[g].T / hd.d_k ** 0.5
        scaled.retain_grad()
        S = scaled + (_t(ex.bias[h]) if ex.bias is not None else 0)
        if allowed is not None:
            empty = ~allowed.any(dim=1, keepdim=True)
            S = torch.where(allowed, S, float("-inf"))
            S = torch.where(empty, 0.0, S)
        P = torch.softmax(S, dim=-1)
        if allowed is not None:
            P = P * (~empty)
        P.retain_grad()
        out = P @ V[g]
        out.retain_grad()
        tensors.update({("q", h): q, ("scaled", h): scaled, ("weights", h): P, ("head_output", h): out})
        q.retain_grad()
        heads.append(out)
    concat = torch.cat(heads, dim=1)
    concat.retain_grad()
    y = concat
    if ex.w_o is not None:
        w_o = leaves["w_o", None] = _t(ex.w_o).requires_grad_()
        y = concat @ w_o
        if ex.b_o is not None:
            leaves["b_o", None] = _vec(ex.b_o).requires_grad_()
            y = y + leaves["b_o", None]
    G = torch.ones_like(y) if upstream is None else torch.tensor(upstream, dtype=torch.float64)
    y.backward(G)

    def grad(name, key):
        a = leaves[name, key].grad.numpy()
        return a[None, :] if a.ndim == 1 else a

    out = {("d_output", None): G.numpy(), ("d_x", None): x.grad.numpy()}
    if ex.is_cross:
        out["d_x_kv", None] = kv.grad.numpy()
    if ex.w_o is not None:
        out["d_concat", None] = concat.grad.numpy()
        out["d_w_o", None] = grad("w_o", None)
        if ex.b_o is not None:
            out["d_b_o", None] = grad("b_o", None)
    for h in range(ex.num_heads):
        g = ex.kv_head(h)
        for step, name in (("d_head_output", "head_output"), ("d_weights", "weights"), ("d_scaled", "scaled"),
                           ("d_q", "q")):
            out[step, h] = tensors[name, h].grad.numpy()
        out["d_k", h], out["d_v", h] = K[g].grad.numpy(), V[g].grad.numpy()  # the K/V head's, every head of the group
        out["d_w_q", h] = grad("w_q", h)
        if ("b_q", h) in leaves:
            out["d_b_q", h] = grad("b_q", h)
        for step, name in (("d_w_k", "w_k"), ("d_w_v", "w_v"), ("d_b_k", "b_k"), ("d_b_v", "b_v")):
            if (name, g) in leaves:
                out[step, h] = grad(name, g)
    return out


def _assert_exact_engine_matches(ex, want, label):
    sol = solve(ex, backward=True)
    backward = [s for s in sol.steps if s.id.startswith("d_")]
    assert {s.key for s in backward} == set(want), label
    for s in backward:
        np.testing.assert_allclose(np.array(s.value), want[s.key], rtol=TOL, atol=TOL, err_msg=f"{label} {s.key}")


def _assert_numpy_matches(ex, want, label):
    g = layer_backward(ex)
    for h in range(ex.num_heads):
        for id in ("d_weights", "d_scaled", "d_q", "d_k", "d_v", "d_w_q", "d_w_k", "d_w_v"):
            np.testing.assert_allclose(getattr(g, id)[h], want[id, h], rtol=TOL, atol=TOL, err_msg=f"{label} {id} {h}")
    np.testing.assert_allclose(g.d_x, want["d_x", None], rtol=TOL, atol=TOL, err_msg=label)


def test_the_v2_bundled_exercises_are_the_five_v2_features():
    ex = {n: resolve(n) for n in V2_BUNDLED}
    assert any(e.grouped for e in ex.values()) and any(e.has_cache for e in ex.values())
    assert any(e.has_bias for e in ex.values())


@pytest.mark.parametrize("name", V2_BUNDLED)
def test_every_v2_backward_step_matches_torch_autograd(name):
    ex = resolve(name)
    _assert_exact_engine_matches(ex, torch_grads_v2(ex), name)


@pytest.mark.parametrize("name", V2_BUNDLED)
def test_the_numpy_v2_backward_matches_torch_autograd(name):
    ex = resolve(name)
    _assert_numpy_matches(ex, torch_grads_v2(ex), name)


def test_the_oracle_agrees_with_the_v1_oracle_on_a_v1_exercise():
    """The v2 oracle is not a second opinion only on v2 files: on a v1 file it gives the v1 oracle's values."""
    from .test_backward_torch import torch_grads

    ex = resolve("two-head-causal-3x4")
    a, b = torch_grads_v2(ex), torch_grads(ex)
    assert set(a) == set(b)
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-12, atol=1e-12, err_msg=str(key))


def test_grouped_kv_gradients_are_sums_not_one_heads_share():
    """With MQA both query heads read one K: d_K is the sum of both heads' d_scaledᵀ·Q/√d_k, not one of them."""
    ex = resolve("mqa-two-heads-3x4")
    sol = solve(ex, backward=True)
    one = [np.array(sol.step("d_scaled", h).value).T @ np.array(sol.step("q", h).value) / np.sqrt(2) for h in (0, 1)]
    d_k = np.array(sol.step("d_k", 0).value)
    np.testing.assert_allclose(d_k, one[0] + one[1], rtol=TOL, atol=TOL)
    assert not np.allclose(d_k, one[0])
    assert sol.step("d_k", 0).kv_head == 0 and sol.step("d_k", 1).shared == (0, 1)


def test_cached_rows_do_not_reach_the_weights():
    """d_K has a row per key, cached ones too; d_W_K is Xᵀ·(the new rows) only."""
    ex = resolve("decode-two-tokens-alignment")
    sol = solve(ex, backward=True)
    d_k = np.array(sol.step("d_k", 0).value)
    assert d_k.shape == (ex.L_k, 2)
    x = np.array(ex.x, dtype=float)
    np.testing.assert_allclose(np.array(sol.step("d_w_k", 0).value), x.T @ d_k[ex.L_past:], rtol=TOL, atol=TOL)
    assert np.abs(d_k[:ex.L_past]).sum() > 0  # the cached rows have a gradient; it goes no further


def _frac(rng, r, c):
    return [[f"{int(n)}/{int(d)}" for n, d in zip(rn, rd)]
            for rn, rd in zip(rng.integers(-3, 4, (r, c)), rng.integers(1, 4, (r, c)))]


@pytest.mark.parametrize("seed", range(16))
def test_random_v2_exercises_backward_matches_torch(seed):
    """Random small v2 exercises, every combination of grouped K/V heads (per-head form), a KV cache
    (causal_lower_right) and a bias (ALiBi or a given attn_bias) twice over, with projection biases, W_O
    and an upstream: every backward step of both engines against autograd."""
    rng = np.random.default_rng(100 + seed)
    grouped, cached, biased = seed % 2 == 0, (seed // 2) % 2 == 1, (seed // 4) % 2 == 1
    H = int(rng.choice([2, 4])) if grouped else int(rng.choice([1, 2]))
    G = int(rng.choice([g for g in (1, 2) if g < H and H % g == 0])) if grouped else H
    d_model, d_k = int(rng.integers(2, 4)), int(rng.integers(1, 3))
    L = int(rng.integers(1, 4))
    past = int(rng.integers(1, 3)) if cached else 0
    L_k = past + L
    data = {"id": f"random-v2-{seed}", "title": "random v2", "x": _frac(rng, L, d_model), "num_heads": H,
            "heads": [{"w_q": _frac(rng, d_model, d_k), **({"b_q": _frac(rng, 1, d_k)[0]} if seed % 3 == 0 else {})}
                      for _ in range(H)]}
    kv_heads = [{"w_k": _frac(rng, d_model, d_k), "w_v": _frac(rng, d_model, d_k),
                 **({"b_k": _frac(rng, 1, d_k)[0], "b_v": _frac(rng, 1, d_k)[0]} if seed % 3 == 1 else {})}
                for _ in range(G)]
    if G < H:
        data["num_kv_heads"], data["kv_heads"] = G, kv_heads
    else:
        for h in range(H):
            data["heads"][h].update(kv_heads[h])
    if past:
        data["past_tokens"] = [f"p{j}" for j in range(past)]
        data["cache"] = [{"k": _frac(rng, past, d_k), "v": _frac(rng, past, d_k)} for _ in range(G)]
        data["mask"] = "causal_lower_right"
    if biased and seed >= 8:
        data["alibi"] = True
    elif biased:
        data["attn_bias"] = [[f"{int(n)}/4" for n in row] for row in rng.integers(-2, 3, (L, L_k))]
    d_out = H * d_k
    if seed % 2 == 0:
        d_out = int(rng.integers(1, 4))
        data["w_o"], data["b_o"] = _frac(rng, H * d_k, d_out), _frac(rng, 1, d_out)[0]
    up = rng.integers(-2, 3, (L, d_out))
    data["upstream"] = up.tolist()
    ex = exercise_from_data(data)
    want = torch_grads_v2(ex, up.astype(float).tolist())
    _assert_exact_engine_matches(ex, want, ex.id)
    _assert_numpy_matches(ex, want, ex.id)


@pytest.mark.parametrize("seed", range(3))
def test_the_functional_sdpa_backward_with_enable_gqa_matches_torch(seed):
    rng = np.random.default_rng(seed)
    B, Hq, Hkv, L, S, E = 2, 4, [1, 2, 4][seed], 3, 5, 2
    q, k, v = rng.normal(size=(B, Hq, L, E)), rng.normal(size=(B, Hkv, S, E)), rng.normal(size=(B, Hkv, S, E))
    dO = rng.normal(size=(B, Hq, L, E))
    bias = rng.normal(size=(L, S))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.tensor(bias), enable_gqa=True)
    out.backward(torch.tensor(dO))
    ours = scaled_dot_product_attention_backward(q, k, v, dO, bias, enable_gqa=True)
    for a, t in zip(ours, (tq, tk, tv)):
        assert a.shape == tuple(t.shape)
        np.testing.assert_allclose(a, t.grad.numpy(), rtol=TOL, atol=TOL)


def test_the_claim_about_enable_gqa_gradients_holds_in_torch():
    """step.d_kv.why.grouped: with enable_gqa=True, key.grad has the K/V heads' shape, each the sum over its
    group of what the query heads would give a repeated (repeat_interleave) copy."""
    from tutor.base.messages import t

    assert "enable_gqa=True" in t("step.d_kv.why.grouped", kv=1, heads="1, 2")
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, 3, 2, dtype=torch.float64, generator=g, requires_grad=True)
    k, v = (torch.randn(1, 2, 3, 2, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(2))
    torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True).sum().backward()
    k2, v2 = (a.detach().repeat_interleave(2, dim=1).requires_grad_() for a in (k, v))
    torch.nn.functional.scaled_dot_product_attention(q.detach(), k2, v2).sum().backward()
    assert k.grad.shape == (1, 2, 3, 2)
    torch.testing.assert_close(k.grad, k2.grad.view(1, 2, 2, 3, 2).sum(dim=2))
    torch.testing.assert_close(v.grad, v2.grad.view(1, 2, 2, 3, 2).sum(dim=2))
