"""Format v2 against PyTorch 2.13 (CPU, float64): grouped K/V heads, a KV cache, causal alignment, an additive bias.

Every step the exact engine gives for a v2 exercise is recomputed here in
torch, the way production code computes it -- projections per query head and
per K/V head, ``torch.cat`` of the cache and the new rows, K/V heads
repeated with ``repeat_interleave`` (and SDPA's ``enable_gqa=True``), the
causal masks of ``torch.nn.attention.bias`` (``causal_lower_right``,
``causal_upper_left``), the bias as a float ``attn_mask`` -- and must agree
to 1e-9.  The cases of ``/work/shared/vectors/v2-cases.json`` (computed by
PyTorch elsewhere) are tests too; and a decode step's output row must equal
the last row of the full causal forward over every token.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tutor.exercise.catalog import resolve
from tutor.exercise.load import parse_exercise
from tutor.steps import solve

from .conftest import EXERCISES
from .test_torch_parity import require_torch

torch = require_torch()
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention.bias import causal_lower_right, causal_upper_left  # noqa: E402

TOL = 1e-9
VECTORS = Path(__file__).parent / "data" / "v2-cases.json"
HEAD = "id: case\ntitle: a v2 case\n"

MQA = HEAD + "num_heads: 2\nnum_kv_heads: 1\nx: [[1, 2], [0, 1]]\nw_q: [[1, 0], [0, 1]]\nw_k: [[1], [1]]\nw_v: [[1], [0]]\n"
GQA_BIAS = HEAD + """\
num_heads: 4
num_kv_heads: 2
x: [[1, 0, 1], [0, 1, "1/2"], [1, 1, 0]]
w_q: [[1, 0, 0, 1, 1, 0, 0, 1], [0, 1, 1, 0, 0, 1, 1, 0], [1, 1, 0, 0, 1, 0, 1, 1]]
w_k: [[1, 0, 0, 1], [0, 1, 1, 1], [1, 0, 1, 0]]
w_v: [[1, 2, 0, 1], [0, 1, 1, 0], [2, 0, 1, 1]]
b_k: [0, 1, "1/2", 0]
w_o: [[1, 0], [0, 1], [1, 1], [0, 1], [1, 0], [0, 0], [1, 1], [1, 0]]
attn_bias: [[0, -1, 2], ["1/2", 0, -1], [1, 1, 0]]
mask: causal
"""
DECODE2 = HEAD + """\
num_heads: 2
num_kv_heads: 1
past_tokens: [a, b]
cache:
  - {k: [[1, 0], [0, 1]], v: [[1, 1], [0, 2]]}
x: [[1, 0], [1, 1]]
w_q: [[1, 0, 0, 1], [0, 1, 1, 1]]
w_k: [[1, 1], [0, 1]]
w_v: [[2, 0], [1, 1]]
mask: causal_lower_right
key_padding_mask: [false, true, false, false]
alibi: true
"""
CROSS_LOWER = HEAD + "x: [[1, 2]]\nx_kv: [[1, 0], [0, 1], [1, 1]]\nmask: causal_lower_right\n" \
    "heads:\n  - {w_q: [[1, 0], [0, 1]], w_k: [[1, 0], [0, 1]], w_v: [[1, 0], [0, 1]]}\n"
UPPER = HEAD + "x: [[1, 2], [2, 0]]\nx_kv: [[1, 0], [0, 1], [1, 1]]\nmask: causal_upper_left\n" \
    "heads:\n  - {w_q: [[1, 0], [0, 1]], w_k: [[1, 0], [0, 1]], w_v: [[1, 0], [0, 1]]}\n"
CASES = {"mqa": MQA, "gqa-bias-causal": GQA_BIAS, "decode-2-alibi-padding": DECODE2, "cross-lower-right": CROSS_LOWER,
         "cross-upper-left": UPPER}


def _bundled_v2() -> list[str]:
    out = []
    for path in sorted(EXERCISES.glob("*.yaml")):
        ex = resolve(path.stem)
        if ex.is_v2 or ex.mask_kind == "causal_lower_right":
            out.append(path.stem)
    return out


def _exercise(name: str):
    return parse_exercise(CASES[name]) if name in CASES else resolve(name)


def T(m) -> torch.Tensor:  # noqa: N802
    return torch.tensor(np.array(m, dtype=object).astype(np.float64), dtype=torch.float64)


def torch_steps(ex) -> dict:
    """Every step of ``ex`` computed in torch as a decoder does it: ``{(id, head): array}``."""
    H, G = ex.num_heads, ex.num_kv_heads
    x, kv = T(ex.x), T(ex.kv)
    out: dict = {}
    first = [ex.sharing(g)[0] for g in range(G)]
    q = torch.stack([x @ T(h.w_q) + (T(h.b_q) if h.b_q is not None else 0) for h in ex.heads])  # [H, L, d_k]
    k_new = torch.stack([kv @ T(ex.heads[h].w_k) + (T(ex.heads[h].b_k) if ex.heads[h].b_k is not None else 0)
                         for h in first])  # [G, L_new, d_k]
    v_new = torch.stack([kv @ T(ex.heads[h].w_v) + (T(ex.heads[h].b_v) if ex.heads[h].b_v is not None else 0)
                         for h in first])  # [G, L_new, d_v]
    if ex.cache is not None:
        k = torch.cat([torch.stack([T(c.k) for c in ex.cache]), k_new], dim=-2)  # [G, L_k, d_k]
        v = torch.cat([torch.stack([T(c.v) for c in ex.cache]), v_new], dim=-2)
    else:
        k, v = k_new, v_new
    L, L_k = q.shape[1], k.shape[1]
    # the masks as torch builds them: causal_lower_right / causal_upper_left of torch.nn.attention.bias
    if ex.mask_kind == "causal_lower_right":
        allowed = causal_lower_right(L, L_k)._materialize()
    elif ex.mask_kind == "causal":
        allowed = causal_upper_left(L, L_k)._materialize()
    elif ex.mask is not None:
        allowed = torch.tensor(ex.mask)
    else:
        allowed = torch.ones(L, L_k, dtype=torch.bool)
    if ex.key_padding is not None:
        allowed = allowed & ~torch.tensor(ex.key_padding_mask)[None, :]  # key_padding_mask: True = padding
    k_rep = k.repeat_interleave(H // G, dim=0)  # [H, L_k, d_k]
    v_rep = v.repeat_interleave(H // G, dim=0)
    d_k = q.shape[-1]
    scores = q @ k_rep.transpose(-1, -2)  # [H, L, L_k]
    scaled = scores / math.sqrt(d_k)
    bias = torch.stack([T(b) for b in ex.bias]) if ex.bias is not None else torch.zeros(H, L, L_k, dtype=torch.float64)
    biased = scaled + bias
    masked = biased.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(masked, dim=-1).nan_to_num(0.0)  # a row with no key: zeros, as SDPA
    head_out = weights @ v_rep  # [H, L, d_v]
    # SDPA itself: the float attn_mask holds the bias and -inf; K/V heads given once each with enable_gqa=True
    float_mask = bias.masked_fill(~allowed, float("-inf"))
    sdpa = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=float_mask[None], enable_gqa=True)[0]
    np.testing.assert_allclose(sdpa.numpy(), head_out.numpy(), rtol=1e-12, atol=1e-12)
    for h in range(H):
        g = ex.kv_head(h)
        out.update({("q", h): q[h], ("k", h): k[g], ("v", h): v[g], ("k_new", h): k_new[g], ("v_new", h): v_new[g],
                    ("scores", h): scores[h], ("scaled", h): scaled[h], ("biased", h): biased[h],
                    ("masked", h): masked[h], ("weights", h): weights[h], ("head_output", h): head_out[h]})
    concat = head_out.transpose(0, 1).reshape(L, -1)  # [L, H·d_v]
    out["concat", None] = concat
    if ex.w_o is not None:
        out["output", None] = concat @ T(ex.w_o) + (T(ex.b_o) if ex.b_o is not None else 0)
    return {key: val.numpy() for key, val in out.items()}


@pytest.mark.parametrize("name", list(CASES) + _bundled_v2())
def test_every_step_matches_torch_float64(name):
    ex = _exercise(name)
    expected = torch_steps(ex)
    sol = solve(ex)
    for step in sol.steps:
        got = np.array(step.value, dtype=np.float64)
        want = expected[step.key]
        assert got.shape == want.shape, step.key
        assert np.array_equal(np.isneginf(got), np.isneginf(want)), step.key
        np.testing.assert_allclose(np.where(np.isinf(got), 0, got), np.where(np.isinf(want), 0, want),
                                   rtol=TOL, atol=TOL, err_msg=str(step.key))


def test_causal_bias_objects_work_with_sdpa_and_gqa():
    """``attn_mask=causal_lower_right(L_q, L_k)`` in SDPA with ``enable_gqa=True`` is the materialised mask on
    repeated K/V heads - what the production view tells the learner to write."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, 2, 3, dtype=torch.float64, generator=g)
    k = torch.randn(1, 2, 5, 3, dtype=torch.float64, generator=g)
    v = torch.randn(1, 2, 5, 3, dtype=torch.float64, generator=g)
    for bias in (causal_lower_right(2, 5), causal_upper_left(2, 5)):
        got = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, enable_gqa=True)
        want = F.scaled_dot_product_attention(q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1),
                                              attn_mask=bias._materialize())
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    assert causal_lower_right(2, 5)._materialize().tolist() == [[True] * 4 + [False], [True] * 5]
    assert causal_upper_left(2, 5)._materialize().tolist() == [[True] + [False] * 4, [True, True] + [False] * 3]
    # is_causal=True is the top-left one
    np.testing.assert_allclose(F.scaled_dot_product_attention(q[:, :2], k, v, is_causal=True).numpy(),
                               F.scaled_dot_product_attention(q[:, :2], k, v, attn_mask=causal_upper_left(2, 5)).numpy())


# --- the shared vectors --------------------------------------------------------------------------------------


def _vectors() -> list[dict]:
    if not VECTORS.exists():
        return []
    cases = json.loads(VECTORS.read_text())["cases"]
    return [c for c in cases if "yaml" in c]  # the MQA, decode and ALiBi cases (the others are issue 13's)


@pytest.mark.skipif(not VECTORS.exists(), reason="the shared vectors are not on this machine")
@pytest.mark.parametrize("case", _vectors(), ids=lambda c: c["name"][:40])
def test_shared_vectors(case):
    ex = parse_exercise(HEAD + case["yaml"])
    sol = solve(ex)
    want = case["expected"]

    def close(got, expected, what):
        np.testing.assert_allclose(np.array(got, dtype=np.float64), np.array(expected), rtol=TOL, atol=TOL, err_msg=what)

    if "heads" in want:
        for h, steps in enumerate(want["heads"]):
            for id, value in steps.items():
                close(sol.step(id, h).value, value, f"{id} {h}")
    for id in ("k", "v", "head_output", "concat"):
        if id in want:
            close(sol.step(id, None if id == "concat" else 0).value, want[id], id)
    if "bias" in want:
        close(ex.bias[0], want["bias"], "bias")
    if "head_output_if_top_left" in want:  # the same decode with mask: causal (top-left)
        top_left = parse_exercise(HEAD + case["yaml"].replace("causal_lower_right", "causal"))
        close(solve(top_left).step("head_output", 0).value, want["head_output_if_top_left"], "top-left")


# --- a decode step is the last row of the full forward ---------------------------------------------------------

FULL = HEAD + """\
num_heads: 2
num_kv_heads: 1
x: [[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 2, 1]]
w_q: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 1]]
w_k: [[1, 0], [0, 1], [1, 1]]
w_v: [[2, 0], [1, 1], [0, 1]]
w_o: [[1, 0], [0, 1], [1, 1], [1, 0]]
mask: causal
"""


def test_a_decode_step_gives_the_last_row_of_the_full_causal_forward():
    full = parse_exercise(FULL)
    x_past, x_new = full.x[:3], full.x[3:]
    w_k, w_v = full.kv_heads[0].w_k, full.kv_heads[0].w_v

    def rows(m):
        return "[" + ", ".join("[" + ", ".join(str(e) for e in r) + "]" for r in m) + "]"

    from tutor.exact.engine import matmul
    k_cache, v_cache = matmul(x_past, w_k), matmul(x_past, w_v)  # the cache: x·W_K, x·W_V of the three earlier tokens
    decode = FULL.replace("x: [[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 2, 1]]", f"x: {rows(x_new)}").replace(
        "mask: causal", f"mask: causal_lower_right\ncache:\n  - {{k: {rows(k_cache)}, v: {rows(v_cache)}}}")
    dec = parse_exercise(decode)
    assert dec.L == 1 and dec.L_k == 4
    last_full = solve(full).step("output").exact[-1]
    step = solve(dec).step("output").exact[0]
    assert [str(e) for e in step] == [str(e) for e in last_full]  # the same exact forms
    np.testing.assert_allclose([e.value() for e in step], [e.value() for e in last_full], rtol=1e-15, atol=1e-15)
    # and torch's full causal forward agrees with the decode step's row
    want = torch_steps(full)["output", None][-1]
    np.testing.assert_allclose([e.value() for e in step], want, rtol=TOL, atol=TOL)
    # with top-left alignment the new token would see only the first key: a different row
    wrong = solve(parse_exercise(decode.replace("causal_lower_right", "causal"))).step("output").exact[0]
    assert not np.allclose([e.value() for e in wrong], want)


@pytest.mark.parametrize("name", list(CASES))
def test_the_engines_agree_on_v2_exercises(name):
    """verify (the exact engine against the NumPy decoder path) and the float walk, on each case."""
    from tutor.production.verify import verify
    from tutor.steps import replay

    sol = solve(_exercise(name))
    verify(sol)
    values = replay(sol.exercise).values
    assert set(values) == {s.key for s in sol.steps}
    for s in sol.steps:
        np.testing.assert_allclose(values[s.key], np.array(s.value), rtol=1e-12, atol=1e-12, err_msg=str(s.key))


# --- the production view: every PyTorch spelling runs in torch and gives the head outputs ------------------------


def _spelled_kwargs(ex) -> dict:
    """The keyword arguments of SDPA the production view spells, parsed back from the text a learner reads."""
    import ast
    import re

    from tutor.production import pytorch_masks

    kw: dict = {}
    for m in pytorch_masks(ex):
        code = m.code()
        if m.api == "mha":
            continue  # nn.MultiheadAttention's spelling: tests/test_torch_parity.py runs it
        if m.api == "cache":
            assert code == "k = torch.cat([k_cache, k_new], dim=-2); v = torch.cat([v_cache, v_new], dim=-2)"
            continue
        name, _, value = code.partition("=")
        if value == "True":
            kw[name] = True
        elif match := re.fullmatch(r"causal_lower_right\((\d+), (\d+)\)", value):
            kw[name] = causal_lower_right(int(match[1]), int(match[2]))
        elif value.startswith("torch.tensor(") and value.endswith(", dtype=torch.float64)"):
            literal = value[len("torch.tensor("):-len(", dtype=torch.float64)")].replace("float('-inf')", "None")
            kw[name] = torch.tensor(np.array(ast.literal_eval(literal), dtype=float).tolist(), dtype=torch.float64)
            kw[name] = torch.nan_to_num(kw[name], nan=float("-inf"))
        elif value.startswith("torch.tensor("):
            kw[name] = torch.tensor(ast.literal_eval(value[len("torch.tensor("):-1]))
        else:
            raise AssertionError(code)
    return kw


@pytest.mark.parametrize("name", list(CASES) + _bundled_v2())
def test_the_production_spelling_runs_in_torch(name):
    from tutor.production import run_exercise

    ex = _exercise(name)
    run = run_exercise(ex)
    kw = _spelled_kwargs(ex)
    assert kw.get("enable_gqa", False) == ex.grouped
    G = ex.num_kv_heads
    first = [ex.sharing(g)[0] for g in range(G)]
    k = torch.tensor(run.k[first])[None]  # [1, G, L_k, d_k]: the K/V heads once each
    v = torch.tensor(run.v[first])[None]
    got = F.scaled_dot_product_attention(torch.tensor(run.q)[None], k, v, **kw)[0]  # [H, L, d_v]
    want = np.stack([np.array(solve(ex).step("head_output", h).value) for h in range(ex.num_heads)])
    np.testing.assert_allclose(got.numpy(), want, rtol=TOL, atol=TOL)


@pytest.mark.parametrize("name", list(CASES) + _bundled_v2())
def test_the_decoder_trace_has_the_shapes_the_run_makes(name):
    from tutor.production import exercise_trace, run_exercise

    ex = _exercise(name)
    if not ex.is_v2:
        return
    run = run_exercise(ex)
    shapes = {s.name: s.shape for s in exercise_trace(ex)}
    assert shapes["q_heads"] == (1, *run.q.shape)
    assert shapes["scores"] == (1, *run.scores.shape) == (1, *run.weights.shape)
    assert shapes["merge"] == (1, *run.context.shape)
    G = ex.num_kv_heads
    assert shapes["k_heads"] == (1, G, ex.L, run.k.shape[-1])
    if ex.has_cache:
        assert shapes["k"] == (1, G, *run.k.shape[1:])
    if ex.grouped:
        assert shapes["k_repeated"] == (1, *run.k.shape)
