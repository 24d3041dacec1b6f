"""tutor.numeric against PyTorch 2.13 (CPU) itself - the production oracle.

torch is a test-only dependency.  Without it these tests skip, unless
ATTN_TUTOR_REQUIRE_TORCH=1 (set by .ci/run), when a missing torch fails the run.

Tolerances, per dtype (max over elements of |ours - torch| <= atol + rtol·|torch|):
  float64: rtol 1e-12, atol 1e-12 - PyTorch's CPU kernels (the flash SDPA kernel
           included) sum in another order, so results are not bit-identical;
  float32: rtol 1e-5, atol 1e-5 - float32 rounding (~6e-8 per operation)
           accumulated over projections and a softmax of O(1) values; the
           absolute part covers outputs that cancel to near zero.

PyTorch behaviours this file pins (each has a test):
  * SDPA's boolean attn_mask: True = may attend (our polarity); fully masked
    rows give zeros (since 2.5); is_causal is top-left aligned.
  * nn.MultiheadAttention's boolean attn_mask / key_padding_mask: True =
    blocked (the opposite); in_proj_weight [3E, E] in Q, K, V order applied as
    x @ W.T + b; per-head weights need average_attn_weights=False; fully masked
    rows are NaN with need_weights=True and on the fast path, and equal
    out_proj.bias with need_weights=False off the fast path.
"""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tutor.exercise.record import Exercise, Head, causal
from tutor.numeric import (
    MultiHeadAttention,
    causal_mask,
    combine_masks,
    run_exercise,
    scaled_dot_product_attention,
)


def require_torch():
    """``import torch``; skip without it, but fail when ATTN_TUTOR_REQUIRE_TORCH=1."""
    if os.environ.get("ATTN_TUTOR_REQUIRE_TORCH") == "1":
        try:
            import torch
        except ImportError as exc:
            pytest.fail(
                f"ATTN_TUTOR_REQUIRE_TORCH=1 but torch cannot be imported ({exc}); "
                "install it with: .venv/bin/python -m pip install torch==2.13.0",
                pytrace=False,
            )
        return torch
    return pytest.importorskip("torch", reason="PyTorch parity tests need torch==2.13.0 (test-only)")


torch = require_torch()
import torch.nn.functional as F

TOL = {np.float32: {"rtol": 1e-5, "atol": 1e-5}, np.float64: {"rtol": 1e-12, "atol": 1e-12}}
TORCH_DTYPE = {np.float32: torch.float32, np.float64: torch.float64}
# ATTN_TUTOR_EXAMPLES=2000 for a long soak; the default keeps the suite quick
HYPO = settings(max_examples=int(os.environ.get("ATTN_TUTOR_EXAMPLES", "80")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def _no_fastpath():
    """nn.MultiheadAttention's fast path returns NaN rows and nested tensors; off unless a test turns it on."""
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    with torch.inference_mode():
        yield
    torch.backends.mha.set_fastpath_enabled(before)


def test_torch_is_the_pinned_version():
    assert torch.__version__.split("+")[0] == "2.13.0", torch.__version__


def t(a):
    return torch.from_numpy(np.array(a, copy=True, order="C"))  # a writable copy


# --------------------------------------------------------------------------- #
# scaled_dot_product_attention vs F.scaled_dot_product_attention
# --------------------------------------------------------------------------- #
@HYPO
@given(
    B=st.integers(1, 3),
    H=st.integers(1, 3),
    L_q=st.integers(1, 7),
    L_k=st.integers(1, 7),
    d_k=st.integers(1, 8),
    d_v=st.integers(1, 6),
    mask_kind=st.sampled_from(["none", "causal", "random", "per-batch", "empty-rows"]),
    scale=st.sampled_from([None, 1.0, 0.3]),
    block=st.sampled_from([None, 1, 2, 3, 64]),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**32 - 1),
)
def test_sdpa_matches_torch(B, H, L_q, L_k, d_k, d_v, mask_kind, scale, block, dtype, seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, H, L_q, d_k)).astype(dtype)
    k = rng.standard_normal((B, H, L_k, d_k)).astype(dtype)
    v = rng.standard_normal((B, H, L_k, d_v)).astype(dtype)
    mask = None
    kwargs = {} if scale is None else {"scale": scale}
    if mask_kind == "causal":
        mask = causal_mask(L_q, L_k)
        ref = F.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=True, **kwargs)
    else:
        if mask_kind == "random":
            mask = rng.random((L_q, L_k)) > 0.3
        elif mask_kind == "per-batch":
            mask = rng.random((B, 1, L_q, L_k)) > 0.3
        elif mask_kind == "empty-rows":
            mask = rng.random((B, H, L_q, L_k)) > 0.3
            mask[..., rng.integers(L_q), :] = False  # every slice has a fully masked row
        ref = F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=None if mask is None else t(mask), **kwargs)
    ref = ref.numpy()
    out, w = scaled_dot_product_attention(q, k, v, mask, scale=scale, block_size=block)
    assert out.dtype == dtype and ref.dtype == dtype
    np.testing.assert_allclose(out, ref, **TOL[dtype])
    assert not np.isnan(ref).any()  # SDPA (>= 2.5): fully masked rows are zeros, not NaN
    if mask is not None:
        empty = ~np.broadcast_to(mask, (B, H, L_q, L_k)).any(axis=-1)
        assert (ref[empty] == 0).all() and (out[empty] == 0).all()
    if w is not None:  # the weights, against torch's own softmax of the masked scores
        s = t(q) @ t(k).transpose(-2, -1) * (scale if scale is not None else d_k**-0.5)
        if mask is not None:
            s = s.masked_fill(~t(np.broadcast_to(mask, s.shape)), float("-inf"))
        tw = torch.softmax(s, dim=-1).nan_to_num(0.0).numpy()
        np.testing.assert_allclose(w, tw, **TOL[dtype])


def test_sdpa_causal_is_top_left_in_torch_too():
    # L_q = 2 < L_k = 4, all scores equal: query i spreads over keys 0..i
    q, k = np.zeros((1, 2, 2)), np.zeros((1, 4, 2))
    v = np.eye(4)[None]
    ref = F.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=True).numpy()
    np.testing.assert_allclose(ref[0], [[1, 0, 0, 0], [0.5, 0.5, 0, 0]], rtol=1e-15)
    np.testing.assert_allclose(scaled_dot_product_attention(q, k, v, causal_mask(2, 4))[0], ref, rtol=1e-15)


def test_sdpa_boolean_mask_polarity_is_true_means_attend():
    q = np.zeros((1, 1, 2))
    k = np.zeros((1, 3, 2))
    v = np.array([[[1.0], [2.0], [30.0]]])
    mask = np.array([[True, True, False]])
    ref = F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=t(mask)).numpy()
    np.testing.assert_allclose(ref, [[[1.5]]], rtol=1e-15)  # the flipped mask would give 30
    np.testing.assert_allclose(scaled_dot_product_attention(q, k, v, mask)[0], ref, rtol=1e-15)


# --------------------------------------------------------------------------- #
# MultiHeadAttention vs nn.MultiheadAttention
# --------------------------------------------------------------------------- #
def _torch_mha(E, H, bias, kdim, dtype, rng):
    """An nn.MultiheadAttention with random weights (biases non-zero) and the same layer in numpy."""
    m = torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=True, kdim=kdim, vdim=kdim,
                                    dtype=TORCH_DTYPE[dtype]).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(t(rng.standard_normal(tuple(p.shape)).astype(dtype) * 0.5))
    as_np = lambda p: None if p is None else p.detach().numpy()
    out_b = m.out_proj.bias if bias else None
    if m._qkv_same_embed_dim:
        layer = MultiHeadAttention.from_torch_layout(
            as_np(m.in_proj_weight), as_np(m.in_proj_bias), as_np(m.out_proj.weight), as_np(out_b), H)
    else:
        layer = MultiHeadAttention.from_torch_layout(
            None, as_np(m.in_proj_bias), as_np(m.out_proj.weight), as_np(out_b), H,
            q_proj_weight=as_np(m.q_proj_weight), k_proj_weight=as_np(m.k_proj_weight),
            v_proj_weight=as_np(m.v_proj_weight))
    return m, layer


@HYPO
@given(
    B=st.integers(1, 3),
    L=st.integers(1, 6),
    L_k=st.integers(1, 7),
    H=st.sampled_from([1, 2, 4]),
    d_h=st.integers(1, 4),
    cross=st.sampled_from(["self", "cross-same-width", "cross-other-width"]),
    d_kv=st.integers(1, 6),
    bias=st.booleans(),
    causal_=st.booleans(),
    random_mask=st.booleans(),
    padding=st.booleans(),
    empty=st.sampled_from(["none", "row", "batch"]),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**32 - 1),
)
def test_layer_matches_nn_multihead_attention(
    B, L, L_k, H, d_h, cross, d_kv, bias, causal_, random_mask, padding, empty, dtype, seed
):
    rng = np.random.default_rng(seed)
    E = H * d_h
    if cross == "self":
        L_k, d_kv = L, E
    elif cross == "cross-same-width":
        d_kv = E
    m, layer = _torch_mha(E, H, bias, None if d_kv == E else d_kv, dtype, rng)
    x = rng.standard_normal((B, L, E)).astype(dtype)
    x_kv = x if cross == "self" else rng.standard_normal((B, L_k, d_kv)).astype(dtype)

    mask = causal_mask(L, L_k) if causal_ else None  # [L, L_k], True = may attend
    if random_mask:
        r = rng.random((L, L_k)) > 0.3
        mask = r if mask is None else mask & r
    kp = rng.random((B, L_k)) > 0.25 if padding else None  # [B, L_k], True = real key
    if empty == "row":
        mask = np.ones((L, L_k), bool) if mask is None else mask.copy()
        mask[rng.integers(L)] = False
    elif empty == "batch":
        kp = np.ones((B, L_k), bool) if kp is None else kp.copy()
        kp[rng.integers(B)] = False
    allowed = combine_masks(mask, kp)
    empty_rows = (np.zeros((B, L), bool) if allowed is None
                  else ~np.broadcast_to(allowed[:, 0], (B, L, L_k)).any(axis=-1))  # [B, L]

    out, w = layer(x, None if cross == "self" else x_kv, mask=mask, key_padding=kp)
    assert out.dtype == dtype and w.dtype == dtype and w.shape == (B, H, L, L_k)

    # torch: True = blocked, so pass the complements
    t_mask = None if mask is None else t(~mask)
    t_kp = None if kp is None else t(~kp)
    ref, ref_w = m(t(x), t(x_kv), t(x_kv), attn_mask=t_mask, key_padding_mask=t_kp,
                   need_weights=True, average_attn_weights=False)
    ref, ref_w = ref.numpy(), ref_w.numpy()
    # fully masked query rows: NaN in torch (output and weights), finite here
    assert np.isnan(ref[empty_rows]).all() and not np.isnan(ref[~empty_rows]).any()
    assert np.isnan(ref_w.transpose(0, 2, 1, 3)[empty_rows]).all()
    np.testing.assert_allclose(out[~empty_rows], ref[~empty_rows], **TOL[dtype])
    np.testing.assert_allclose(w.transpose(0, 2, 1, 3)[~empty_rows],
                               ref_w.transpose(0, 2, 1, 3)[~empty_rows], **TOL[dtype])
    assert (w.transpose(0, 2, 1, 3)[empty_rows] == 0).all()

    # need_weights=False off the fast path goes through SDPA: those rows become out_proj.bias - as ours
    ref2, none = m(t(x), t(x_kv), t(x_kv), attn_mask=t_mask, key_padding_mask=t_kp, need_weights=False)
    assert none is None
    np.testing.assert_allclose(out, ref2.numpy(), **TOL[dtype])
    bias_row = m.out_proj.bias.detach().numpy() if bias else np.zeros(E, dtype)
    np.testing.assert_allclose(out[empty_rows], np.broadcast_to(bias_row, out[empty_rows].shape), **TOL[dtype])


def test_mha_averages_weights_over_heads_unless_told_not_to():
    rng = np.random.default_rng(4)
    m, layer = _torch_mha(4, 2, True, None, np.float64, rng)
    x = rng.standard_normal((2, 3, 4))
    _, avg = m(t(x), t(x), t(x))  # the default: need_weights=True, averaged
    _, w = layer(x)
    assert avg.shape == (2, 3, 3)
    np.testing.assert_allclose(w.mean(axis=1), avg.numpy(), **TOL[np.float64])


def test_mha_fast_path_gives_nan_rows():
    rng = np.random.default_rng(6)
    m, layer = _torch_mha(8, 2, True, None, np.float32, rng)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    kp = np.array([[True, True, False], [False, False, False]])  # batch 1: all padding
    xt = t(x)  # the fast path needs query is key is value (self-attention)
    torch.backends.mha.set_fastpath_enabled(True)
    fast, _ = m(xt, xt, xt, key_padding_mask=t(~kp), need_weights=False)
    torch.backends.mha.set_fastpath_enabled(False)
    slow, _ = m(xt, xt, xt, key_padding_mask=t(~kp), need_weights=False)
    out, _ = layer(x, key_padding=kp)
    assert np.isnan(fast.numpy()[1]).all()
    np.testing.assert_allclose(fast.numpy()[0], out[0], **TOL[np.float32])
    np.testing.assert_allclose(slow.numpy(), out, **TOL[np.float32])
    np.testing.assert_allclose(out[1], np.tile(m.out_proj.bias.detach().numpy(), (3, 1)), **TOL[np.float32])


# --------------------------------------------------------------------------- #
# an exercise built by hand (Fractions) through from_exercise and through torch
# --------------------------------------------------------------------------- #
def Fm(*rows):
    return tuple(tuple(Fraction(v) for v in r) for r in rows)


def Fv(*vals):
    return tuple(Fraction(v) for v in vals)


def _cross_exercise() -> Exercise:
    """Cross-attention, d_model 4 -> 2 heads of d_k = d_v = 2, x_kv of width 3,
    biases on every projection, w_o [4, 4] with b_o, a causal (top-left) mask
    AND key padding that pads key 1 - so query 1 has no key at all."""
    return Exercise(
        id="hand-cross-2-heads",
        title="cross-attention by hand",
        x=Fm([1, 0, "1/2", 0], [0, 1, 0, "-1/2"], [1, 1, 0, 0]),  # [L=3, d_model=4]
        x_kv=Fm([1, 0, 0], [0, 1, 0], [0, 0, 1], [1, "1/3", "-1"]),  # [L_k=4, d_kv=3]
        heads=(
            Head(
                w_q=Fm([1, 0], [0, 1], ["1/2", 0], [0, "1/2"]),
                w_k=Fm([1, "1/2"], [0, 1], ["-1", 0]),
                w_v=Fm([2, 0], [0, 1], [1, 1]),
                b_q=Fv("1/4", 0), b_k=Fv(0, "-1/4"), b_v=Fv(1, "1/2"),
            ),
            Head(
                w_q=Fm([0, 1], [1, 0], [0, 0], [1, 1]),
                w_k=Fm(["1/3", 0], [1, 1], [0, "2/3"]),
                w_v=Fm([0, 1], [1, "-1"], ["1/2", 0]),
                b_q=Fv(0, "1/2"), b_k=Fv("1/5", 0), b_v=Fv(0, 0),
            ),
        ),
        w_o=Fm([1, 0, 0, "1/2"], [0, 1, 0, 0], [0, 0, 1, 0], ["-1/2", 0, 0, 1]),
        b_o=Fv("1/10", 0, "-1/10", "1/2"),
        mask_kind="causal",
        mask=causal(3, 4),
        key_padding=(False, True, True, True),
    )


def _to_torch(ex: Exercise):
    """nn.MultiheadAttention with the exercise's weights: W.T per nn.Linear, heads stacked by rows."""
    f = lambda m: np.array(m, dtype=object).astype(np.float64)
    E, H = ex.d_model, ex.num_heads
    m = torch.nn.MultiheadAttention(E, H, batch_first=True, kdim=len(ex.x_kv[0]), vdim=len(ex.x_kv[0]),
                                    dtype=torch.float64).eval()
    with torch.no_grad():
        m.q_proj_weight.copy_(t(np.concatenate([f(h.w_q) for h in ex.heads], axis=1).T))
        m.k_proj_weight.copy_(t(np.concatenate([f(h.w_k) for h in ex.heads], axis=1).T))
        m.v_proj_weight.copy_(t(np.concatenate([f(h.w_v) for h in ex.heads], axis=1).T))
        m.in_proj_bias.copy_(t(np.concatenate([f([h.b_q for h in ex.heads]).ravel(),
                                               f([h.b_k for h in ex.heads]).ravel(),
                                               f([h.b_v for h in ex.heads]).ravel()])))
        m.out_proj.weight.copy_(t(f(ex.w_o).T))
        m.out_proj.bias.copy_(t(f(ex.b_o)))
    return m


def test_hand_built_exercise_matches_torch():
    ex = _cross_exercise()
    run = run_exercise(ex)
    m = _to_torch(ex)
    x = t(np.array(ex.x, dtype=object).astype(np.float64)[None])
    kv = t(np.array(ex.x_kv, dtype=object).astype(np.float64)[None])
    blocked = t(~np.array(ex.allowed()))  # torch: True = blocked
    ref, ref_w = m(x, kv, kv, attn_mask=blocked, need_weights=True, average_attn_weights=False)
    ref, ref_w = ref.numpy()[0], ref_w.numpy()[0]
    # query 0 may see key 0 only (causal), and key 0 is padding: torch gives NaN, we give zeros / b_o
    assert np.isnan(ref[0]).all() and np.isnan(ref_w[:, 0]).all()
    np.testing.assert_array_equal(run.weights[:, 0], 0)
    np.testing.assert_allclose(run.output[1:], ref[1:], **TOL[np.float64])
    np.testing.assert_allclose(run.weights[:, 1:], ref_w[:, 1:], **TOL[np.float64])
    ref2, _ = m(x, kv, kv, attn_mask=blocked, need_weights=False)
    np.testing.assert_allclose(run.output, ref2.numpy()[0], **TOL[np.float64])
    np.testing.assert_allclose(run.output[0], [0.1, 0, -0.1, 0.5], rtol=1e-15)  # = b_o
    # row 1 sees keys 0..1 minus padding: key 1 alone, weight exactly 1
    np.testing.assert_array_equal(run.weights[:, 1], [[0, 1, 0, 0]] * 2)
    # and the layer from the exercise, driven with the mask/padding split as production passes them
    layer = MultiHeadAttention.from_exercise(ex)
    out, w = layer(x.numpy(), kv.numpy(), mask=causal_mask(3, 4), key_padding=np.array([ex.key_padding]))
    np.testing.assert_array_equal(out[0], run.output)
    np.testing.assert_array_equal(w[0], run.weights)
