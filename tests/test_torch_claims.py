"""Every sentence about PyTorch that a learner reads, checked against torch 2.13 itself (issue 10, section 1).

Each test runs the API and setting a sentence names and asserts what the
sentence claims, then that the sentence (from the message catalogue, as
printed) states that claim -- so a test fails if torch changes or if the
sentence goes back to a coarser one.  torch is a test oracle only
(``require_torch`` as in tests/test_torch_parity.py).  The PyTorch spelling of
each mask is :func:`tutor.production.pytorch_masks`'s (issue 10, section 2),
run in torch in tests/test_torch_parity.py.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace

import numpy as np
import pytest

from tutor.base.messages import t
from tutor.exercise.catalog import resolve
from tutor.exercise.record import causal
from tutor.numeric.trace import merge_copies
from tutor.production import production_view
from tutor.steps import KINDS, solve, torch_empty_row

from .conftest import EXERCISES
from .test_torch_parity import require_torch

torch = require_torch()
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

BUNDLED = sorted(p.stem for p in EXERCISES.glob("*.yaml"))
f64 = torch.float64


def T(m) -> torch.Tensor:
    return torch.tensor([[float(v) for v in row] for row in m], dtype=f64)


# --- a query row that may attend to no key -------------------------------------------------


def _mha(batch_first: bool = True) -> nn.MultiheadAttention:
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(4, 2, batch_first=batch_first, dtype=f64)
    with torch.no_grad():
        mha.out_proj.bias.copy_(torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=f64))
    return mha


def _x(batch_first: bool = True) -> torch.Tensor:
    x = torch.randn(1, 3, 4, dtype=f64, generator=torch.Generator().manual_seed(1))
    return x if batch_first else x.transpose(0, 1)


BLOCK_LAST_ROW = torch.tensor([[False] * 3, [False] * 3, [True] * 3])  # nn.MultiheadAttention: True = blocked


def test_sdpa_returns_no_weights_and_a_zero_row():
    q, k, v = (torch.randn(1, 1, 3, 2, dtype=f64) for _ in range(3))
    keep = ~BLOCK_LAST_ROW  # SDPA: True = may attend
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    assert isinstance(out, torch.Tensor)  # the output alone: no weights
    assert torch.equal(out[0, 0, 2], torch.zeros(2, dtype=f64))
    assert t("torch.empty_row.sdpa") in torch_empty_row()


@pytest.mark.parametrize("dtype", [torch.float32, f64])
@pytest.mark.parametrize("additive", [False, True])
def test_the_zero_row_of_sdpa_is_measured_on_cpu_with_its_math_and_flash_backends(additive, dtype):
    """What the sentence says was checked, and where: CPU, the math and the flash backend, a boolean
    and a float mask.  Other backends are reported, not measured: the sentence names them as reports,
    with their public sources, and claims the zero row for none of them."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 1, 3, 4, dtype=dtype, generator=g) for _ in range(3))
    keep = ~BLOCK_LAST_ROW
    mask = torch.zeros(3, 3, dtype=dtype).masked_fill(~keep, -math.inf) if additive else keep
    assert q.device.type == "cpu"
    for backend in (SDPBackend.MATH, SDPBackend.FLASH_ATTENTION):
        with sdpa_kernel(backend):  # only this backend may run: an unsupported input raises, never falls back
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        assert torch.equal(out[0, 0, 2], torch.zeros(4, dtype=dtype)), backend
        assert torch.isfinite(out).all()
    sdpa, sentence = t("torch.empty_row.sdpa"), torch_empty_row()
    assert "with its math and its flash backend alike" in sdpa and "a boolean or a float mask" in sdpa
    assert "PyTorch 2.13 on CPU" in sentence
    for report in ("MPS before a July 2025 fix (pytorch/pytorch#156707)", "XPU (intel/torch-xpu-ops#1432)",
                   "CUDA with torch 2.13 on a B200 GPU (unslothai/unsloth#9848)"):
        assert report in sentence
        assert report in t("drill.masks.fact.sdpa_bool") and report in t("drill.masks.fact.sdpa_additive")
    assert "reported to give NaN" in sentence and "on CPU" in t("trace.decoder.weights")
    for exercise in ("fully-masked-row-3x3", "causal-left-padding-4x2"):  # the bundled files that state the rule
        assert "on CPU" in " ".join(resolve(exercise).description.split()), exercise


@pytest.mark.parametrize("training", [True, False])
def test_mha_gives_nan_with_need_weights_true_its_default(training):
    mha = _mha().train(training)
    x = _x()
    out, w = mha(x, x, x, attn_mask=BLOCK_LAST_ROW)  # need_weights left at its default
    assert torch.isnan(out[0, 2]).all() and torch.isnan(w[0, 2]).all()
    assert not torch.isnan(out[0, :2]).any()
    assert t("torch.empty_row.mha_nan") in torch_empty_row()


def test_mha_gives_nan_on_its_fast_path_and_out_proj_bias_off_it():
    x = _x()
    with torch.no_grad():  # eval(), no gradients, batch_first=True, even num_heads, query is key is value
        out, _ = _mha().eval()(x, x, x, attn_mask=BLOCK_LAST_ROW, need_weights=False)
    assert torch.isnan(out[0, 2]).all()
    mha = _mha(batch_first=False).eval()  # the same, but batch_first=False: off the fast path
    xs = _x(batch_first=False)
    with torch.no_grad():
        out, _ = mha(xs, xs, xs, attn_mask=BLOCK_LAST_ROW, need_weights=False)
    assert torch.equal(out[2, 0], mha.out_proj.bias)
    sentence = torch_empty_row()
    assert t("torch.empty_row.mha_fast") in sentence
    for condition in ("eval()", "torch.no_grad()", "batch_first=True", "even num_heads"):
        assert condition in t("torch.empty_row.mha_fast")


def test_the_fast_path_conditions_the_sentence_names():
    """Frozen parameters take the fast path without torch.no_grad(); a float mask, bias=False or key
    not the same tensor as query leave it (the row is then out_proj.bias, or 0 with no bias)."""
    x = _x()
    mha = _mha().eval()
    for p in mha.parameters():
        p.requires_grad_(False)
    out, _ = mha(x, x, x, attn_mask=BLOCK_LAST_ROW, need_weights=False)  # gradient mode on, nothing to track
    assert torch.isnan(out[0, 2]).all()
    additive = torch.zeros(3, 3, dtype=f64).masked_fill(BLOCK_LAST_ROW, -math.inf)
    with torch.no_grad():
        mha = _mha().eval()
        out, _ = mha(x, x, x, attn_mask=additive, need_weights=False)  # a float mask: off the fast path
        assert torch.equal(out[0, 2], mha.out_proj.bias)
        out, _ = mha(x, x.clone(), x.clone(), attn_mask=BLOCK_LAST_ROW, need_weights=False)
        assert torch.equal(out[0, 2], mha.out_proj.bias)
        torch.manual_seed(0)
        plain = nn.MultiheadAttention(4, 2, batch_first=True, dtype=f64, bias=False).eval()
        out, _ = plain(x, x, x, attn_mask=BLOCK_LAST_ROW, need_weights=False)
        assert torch.equal(out[0, 2], torch.zeros(4, dtype=f64))  # no in_proj_bias: off the fast path, no bias
    fast, off = t("torch.empty_row.mha_fast"), t("torch.empty_row.mha_bias")
    for condition in ("every parameter frozen", "bool masks, not float ones", "bias=True", "among them"):
        assert condition in fast
    assert "float mask" in off and "0 with bias=False" in off


@pytest.mark.parametrize("training", [True, False])
def test_mha_row_is_out_proj_bias_with_need_weights_false_and_gradients(training):
    mha = _mha().train(training)
    x = _x()
    out, w = mha(x, x, x, attn_mask=BLOCK_LAST_ROW, need_weights=False)  # gradients on
    assert w is None
    assert torch.equal(out[0, 2], mha.out_proj.bias)
    assert t("torch.empty_row.mha_bias") in torch_empty_row()
    assert "out_proj.bias" in t("torch.empty_row.mha_bias") and "need_weights=False" in t("torch.empty_row.mha_bias")


def test_every_sentence_on_such_a_row_gives_the_setting_of_each_outcome(cli):
    """The masked step and `check`'s NaN note both carry the per-API facts, never a bare "MHA gives NaN"."""
    _, out, _ = cli("explain", "fully-masked-row-3x3", "--format", "json")
    doc = json.loads(out)
    why = {s["id"]: " ".join(s["why"]) for s in doc["steps"]}
    assert torch_empty_row() in why["masked"]
    assert torch_empty_row() in t("check.nan.empty_row.one", step="weights", rows="t3", torch=torch_empty_row())


# --- causal alignment ------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Lower right causal bias")
@pytest.mark.parametrize(("L", "L_k"), [(2, 4), (3, 3), (4, 2)])
def test_causal_is_is_causal_top_left_and_a_decode_needs_bottom_right(L, L_k):
    from torch.nn.attention.bias import causal_lower_right

    q, k = torch.randn(1, 1, L, 3, dtype=f64), torch.randn(1, 1, L_k, 3, dtype=f64)
    eye = torch.eye(L_k, dtype=f64)[None, None]  # v = I: the output is the weights
    w = F.scaled_dot_product_attention(q, k, eye, is_causal=True)[0, 0]
    ours = torch.tensor(causal(L, L_k))
    if L <= L_k:
        assert torch.equal(w > 0, ours)  # top-left: query i sees keys j <= i
    shift = L_k - L
    bottom_right = torch.tensor([[j <= i + shift for j in range(L_k)] for i in range(L)])
    assert torch.equal(causal_lower_right(L, L_k)._materialize(), bottom_right)
    ex = replace(resolve("cross-attention-2x3"), mask_kind="causal", mask=causal(2, 3))
    _, notes = production_view(ex)
    assert t("explain.causal.offset", L=2, L_k=3, shift=1) in notes
    assert "causal_lower_right" in t("explain.causal.offset", L=2, L_k=3, shift=1)
    assert "j ≤ i + 1" in t("explain.causal.offset", L=2, L_k=3, shift=1)


DECODES = ["decode-one-token-cache-3", "decode-two-tokens-alignment"]


@pytest.mark.filterwarnings("ignore:Lower right causal bias")
@pytest.mark.parametrize("name", DECODES)
def test_a_decode_step_is_the_full_forwards_last_rows_and_says_so(cli, name):
    """Issue 20, D: the decode exercises claim their rows are the full causal forward's last rows.  From the
    file itself (not the loader): the cache is past_x projected with the head's own W_K, W_V; torch's SDPA over
    all the tokens with is_causal=True gives, as its last rows, what the decode step gives with the cache and
    causal_lower_right, and what the engine gives; explain shows those rows; top-left alignment would not."""
    import yaml
    from torch.nn.attention.bias import causal_lower_right

    data = yaml.safe_load((EXERCISES / f"{name}.yaml").read_text(encoding="utf-8"))
    head = data["heads"][0]
    w_q, w_k, w_v = (T(head[n]) for n in ("w_q", "w_k", "w_v"))
    past, x = T(data["past_x"]), T(data["x"])
    cache_k, cache_v = T(data["cache"][0]["k"]), T(data["cache"][0]["v"])
    assert torch.equal(past @ w_k, cache_k) and torch.equal(past @ w_v, cache_v)
    every = torch.cat([past, x])  # [L_k, d_model]
    full = F.scaled_dot_product_attention(*(every @ w for w in (w_q, w_k, w_v)), is_causal=True)  # [L_k, d_v]
    L, L_k = len(x), len(every)
    k, v = torch.cat([cache_k, x @ w_k]), torch.cat([cache_v, x @ w_v])  # [L_k, d]
    decode = F.scaled_dot_product_attention(x @ w_q, k, v, attn_mask=causal_lower_right(L, L_k))  # [L, d_v]
    torch.testing.assert_close(decode, full[-L:], rtol=0, atol=1e-15)
    engine = torch.tensor(solve(resolve(name)).final.value, dtype=f64)
    torch.testing.assert_close(engine, full[-L:], rtol=0, atol=1e-14)
    top_left = F.scaled_dot_product_attention(x @ w_q, k, v, is_causal=True)
    assert (top_left - full[-L:]).abs().max() > 0.1  # the alignment exercise's claim: top-left would not match
    code, out, _ = cli("explain", name, "--format", "markdown")
    note = next(line for line in out.splitlines() if "The full forward over all" in line).replace("\\", "")
    rows = "; ".join("[" + ", ".join(f"{float(e):.4f}" for e in row) + "]" for row in full[-L:])
    assert code == 0 and f"exactly {'these rows' if L > 1 else 'this row'} of head_1: {rows}" in note, note


def test_causal_alignment_is_said_only_where_it_matters():
    for name in BUNDLED:
        ex = resolve(name)
        _, notes = production_view(ex)
        offset = ex.mask_kind == "causal" and ex.L != ex.L_k
        assert any("causal_lower_right" in n for n in notes) == offset, name


# --- where the scale is applied ------------------------------------------------------------------


def _muls(graph) -> list[tuple[str, float]]:
    """``(argument name, constant)`` of every multiplication by a number in a traced graph."""
    out = []
    for node in graph.graph.nodes:
        if node.op == "call_function" and "mul" in str(node.target) and isinstance(node.args[1], float):
            out.append((str(node.args[0]), node.args[1]))
    return out


def test_sdpa_math_path_scales_q_and_k_and_mha_with_weights_scales_q():
    from torch.fx.experimental.proxy_tensor import make_fx

    d_k = 4
    q, k, v = (torch.randn(1, 1, 3, d_k) for _ in range(3))
    g = make_fx(lambda q, k, v: torch.ops.aten._scaled_dot_product_attention_math(q, k, v))(q, k, v)
    muls = _muls(g)
    assert len(muls) == 2 and all(math.isclose(c, d_k ** -0.25) for _, c in muls)  # q and kᵀ, d_k^(-1/4) each
    assert {"q_1", "transpose"} == {name for name, _ in muls}
    assert any("_safe_softmax" in str(n.target) for n in g.graph.nodes)  # a row of -inf gives 0, not NaN
    mha = nn.MultiheadAttention(d_k, 1, batch_first=True, bias=False)
    x = torch.randn(1, 3, d_k)
    g = make_fx(lambda x: mha(x, x, x, need_weights=True)[0])(x)
    muls = _muls(g)
    assert len(muls) == 1 and math.isclose(muls[0][1], d_k ** -0.5)  # q alone, d_k^(-1/2)
    note = t("trace.scores")
    assert "d_k^(-1/4) each" in note and "multiplies q by d_k^(-1/2)" in note
    assert "Mathematically the scores are divided by √d_k" in note


# --- merging the heads: a view or a copy ----------------------------------------------------------


def test_merging_the_heads_copies_only_with_several_heads_tokens_and_columns():
    for B, H, L, d in itertools.product([1, 2, 3], repeat=4):
        c = torch.randn(B, H, L, d)
        m = c.transpose(1, 2).reshape(B, L, H * d)
        a = np.random.default_rng(0).random((B, H, L, d))
        view_np = np.shares_memory(a, a.transpose(0, 2, 1, 3).reshape(B, L, H * d))
        view_torch = m.data_ptr() == c.data_ptr() and m._base is c
        assert view_np == view_torch == (not merge_copies(H, L, d)), (B, H, L, d)


@pytest.mark.parametrize("name", BUNDLED)
def test_the_merge_note_says_what_reshape_does_on_the_exercise(name):
    ex = resolve(name)
    steps, _ = production_view(ex)
    merge = next(s for s in steps if s.name == "merge")
    _, H, L, d_v = 1, ex.num_heads, ex.L, ex.heads[0].d_v
    c = torch.randn(1, H, L, d_v)
    is_view = c.transpose(1, 2).reshape(1, L, H * d_v).data_ptr() == c.data_ptr()
    assert merge.key == ("trace.merge.view" if is_view else "trace.merge.copy")
    assert ("a view here" in merge.note) == is_view and ("a copy here" in merge.note) == (not is_view)


# --- W_O is linear; the layer is not -------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in BUNDLED if resolve(n).w_o is not None])
def test_the_layer_is_not_linear_in_x_though_w_o_is(name):
    ex = resolve(name)

    def layer(scale: float) -> torch.Tensor:
        x = T(ex.x) * scale
        kv = (T(ex.x_kv) if ex.x_kv is not None else T(ex.x)) * scale
        heads = []
        for hd in ex.heads:
            proj = [inp @ T(w) + (torch.tensor([float(v) for v in b], dtype=f64) if b is not None else 0)
                    for inp, w, b in ((x, hd.w_q, hd.b_q), (kv, hd.w_k, hd.b_k), (kv, hd.w_v, hd.b_v))]
            mask = torch.tensor(ex.allowed(), dtype=torch.bool) if ex.has_mask else None
            heads.append(F.scaled_dot_product_attention(*(p[None, None] for p in proj), attn_mask=mask)[0, 0])
        return torch.cat(heads, -1) @ T(ex.w_o)

    assert not torch.allclose(layer(2.0), 2 * layer(1.0))  # attention(2X) ≠ 2·attention(X)
    c = torch.randn(ex.L, len(ex.w_o), dtype=f64)
    assert torch.allclose((2 * c) @ T(ex.w_o), 2 * (c @ T(ex.w_o)))  # W_O itself is linear
    x = T(ex.x)
    hd = ex.heads[0]
    scores = (x @ T(hd.w_q)) @ (x @ T(hd.w_k)).T  # without biases the scores are quadratic in X
    if hd.b_q is None and hd.b_k is None:
        assert torch.allclose(((2 * x) @ T(hd.w_q)) @ ((2 * x) @ T(hd.w_k)).T, 4 * scores)
    why = " ".join(map(str, KINDS["output"].why(solve(ex).step("output", None), ex)))
    assert "not linear in X" in why and "attention(2X)" in why and "no non-linearity" not in why
    assert "the scores Q·Kᵀ are quadratic in X" in why and "the softmax makes" not in why  # not the softmax alone


def test_in_cross_attention_the_softmax_is_what_makes_the_layer_not_linear_in_x():
    """With K and V from X_kv, the scores are linear in X: there the softmax is the non-linearity in X,
    and the sentence says so (not 'quadratic')."""
    base = resolve("cross-attention-2x3")
    d_v = sum(h.d_v for h in base.heads)
    ex = replace(base, w_o=tuple(tuple(int(i == j) for j in range(d_v)) for i in range(d_v)))
    hd = ex.heads[0]
    x, kv = T(ex.x), T(ex.x_kv)

    def layer(scale: float) -> torch.Tensor:
        q, k, v = (scale * x) @ T(hd.w_q), kv @ T(hd.w_k), kv @ T(hd.w_v)
        return F.scaled_dot_product_attention(q[None, None], k[None, None], v[None, None])[0, 0] @ T(ex.w_o)

    assert hd.b_q is None and torch.allclose(((2 * x) @ T(hd.w_q)) @ (kv @ T(hd.w_k)).T,
                                              2 * (x @ T(hd.w_q)) @ (kv @ T(hd.w_k)).T)  # scores: linear in X
    assert not torch.allclose(layer(2.0), 2 * layer(1.0))
    why = " ".join(map(str, KINDS["output"].why(solve(ex).step("output", None), ex)))
    assert "the scores Q·Kᵀ are linear in X (K and V come from X_kv), but the softmax of them is not" in why
    assert "quadratic" not in why


# --- exact values ----------------------------------------------------------------------------------


def test_two_output_entries_of_the_fused_exercise_are_exactly_three_halves():
    sol = solve(resolve("two-head-fused-3x4"))
    out = sol.step("output", None)
    assert [str(e) for e in out.exact[2][:2]] == ["3/2", "3/2"]
    ex = resolve("two-head-fused-3x4")
    x = T(ex.x)
    heads = []
    for hd in ex.heads:
        q, k, v = (x @ T(w) + (torch.tensor([float(c) for c in b], dtype=f64) if b is not None else 0)
                   for w, b in ((hd.w_q, hd.b_q), (hd.w_k, hd.b_k), (hd.w_v, hd.b_v)))
        heads.append(F.scaled_dot_product_attention(q[None], k[None], v[None])[0])
    o = torch.cat(heads, -1) @ T(ex.w_o) + torch.tensor([float(c) for c in ex.b_o], dtype=f64)
    assert abs(float(o[2, 0]) - 1.5) < 1e-15 and abs(float(o[2, 1]) - 1.5) < 1e-15


# --- dropout and the module's mode (issue 20, D) ------------------------------------------------------


def test_the_dropout_diagnosis_says_eval_does_not_reach_sdpa():
    """'Compute the weights with dropout off': eval() switches nn.MultiheadAttention's dropout off, not
    F.scaled_dot_product_attention's, which applies dropout_p inside a module in eval() too."""
    class Layer(nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)

    g = torch.Generator().manual_seed(4)
    q, k = (torch.randn(1, 1, 3, 4, dtype=f64, generator=g) for _ in range(2))
    eye = torch.eye(3, dtype=f64)[None, None]  # v = I: the output is the weights
    torch.manual_seed(0)
    assert (Layer().eval()(q, k, eye) == 0).any()  # eval() did not turn SDPA's dropout off
    mha = nn.MultiheadAttention(4, 1, dropout=0.5, batch_first=True, dtype=f64).eval()
    x = torch.randn(1, 3, 4, dtype=f64, generator=g)
    assert torch.equal(mha(x, x, x)[1], mha(x, x, x)[1])  # it did turn nn.MultiheadAttention's off
    said = t("diagnose.dropout_on", p="1/2", count=1, dropped="w", scale="2")
    assert "eval() turns it off in nn.Dropout and nn.MultiheadAttention" in said
    assert "F.scaled_dot_product_attention applies dropout_p whatever the module's mode" in said
    assert "model.eval()" not in said


# --- the online softmax of a row with no key (issue 20, D) --------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, f64])
def test_the_lse_of_an_empty_row_is_minus_inf_exactly_and_a_number_in_a_kernel(dtype):
    """log Σ_j exp(s_j) over no key is −∞ (torch.logsumexp says so); torch's CPU flash kernel, which returns
    its lse, stores 0 there (m taken as 0, l as 1) and a zero output row.  FlashAttention-2's CUDA kernel
    (flash-attn, normalize_softmax_lse: `sum == 0 ? INFINITY`) stores +∞: cited, not run (no GPU here)."""
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 1, 3, 4, dtype=dtype, generator=g) for _ in range(3))
    blocked = torch.zeros(3, 3, dtype=dtype).masked_fill(BLOCK_LAST_ROW, -math.inf)  # row 3: no key
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=blocked)
    assert lse[0, 0, 2].item() == 0.0 and torch.equal(out[0, 0, 2], torch.zeros(4, dtype=dtype))
    scores = (q @ k.transpose(-1, -2))[0, 0] / 2 + blocked  # [3, 3], d_k = 4
    assert torch.logsumexp(scores, -1)[2].item() == -math.inf
    torch.testing.assert_close(lse[0, 0, :2], torch.logsumexp(scores, -1)[:2])  # the other rows: the true lse
    for key in ("tiled.empty", "tiled.practice.why.lse.empty"):
        said = t(key, query="q", o="[0]")
        assert "−∞ exactly" in said and "+∞" in said and "torch's CPU flash kernel 0 (checked with torch 2.13)" in said


# --- the shape of the boolean mask the production view names (issue 20, D) ------------------------------


@pytest.mark.parametrize(("name", "shape"), [("padding-4x2", "[B, 1, 1, L_k]"), ("fully-masked-row-3x3", "[1, 1, L, L_k]"),
                                             ("causal-left-padding-4x2", "[B, 1, L, L_k]")])
def test_the_masked_step_names_the_shape_of_what_it_masks_with(name, shape):
    """Key padding alone is per sequence and per key: [B, 1, 1, L_k] (it was called [B, 1, L, L_k]); a mask
    alone is shared by the sequences, [1, 1, L, L_k]; both together are [B, 1, L, L_k].  In torch, with a
    batch of two sequences that differ in their padding, each form broadcasts over [B, H, L, L_k] scores and
    masks them as the mask AND the padding."""
    ex = resolve(name)
    steps, _ = production_view(ex)
    note = next(s.note for s in steps if s.name == "masked")
    assert shape in note and (shape == "[B, 1, L, L_k]") == ("[B, 1, L, L_k]" in note)
    B, H, L, L_k = 2, 2, ex.L, ex.L_k
    padding = torch.tensor([[not real for real in (ex.key_padding or [True] * L_k)], [False] * L_k])  # [B, L_k]
    mask = torch.tensor(ex.mask) if ex.mask is not None else None  # [L, L_k]
    allowed = ~padding[:, None, None, :] if mask is None else mask[None, None] if ex.key_padding is None \
        else mask[None, None] & ~padding[:, None, None, :]
    want = {"[B, 1, 1, L_k]": (B, 1, 1, L_k), "[1, 1, L, L_k]": (1, 1, L, L_k), "[B, 1, L, L_k]": (B, 1, L, L_k)}[shape]
    assert tuple(allowed.shape) == want
    scores = torch.zeros(B, H, L, L_k, dtype=f64).masked_fill(~allowed, -math.inf)  # broadcast over what is 1
    full = torch.ones(L, L_k, dtype=torch.bool) if mask is None else mask
    for b in range(B):
        if ex.key_padding is None and b == 1:
            continue
        keep = full & ~padding[b][None, :] if ex.key_padding is not None else full
        assert torch.equal(scores[b, 0] == 0, keep) and torch.equal(scores[b, 1], scores[b, 0])
