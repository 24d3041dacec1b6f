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
  * F.scaled_dot_product_attention: boolean attn_mask True = may attend; a
    float attn_mask is added to the scaled scores (ALiBi, relative bias);
    is_causal is top-left aligned (also L_q != L_k) and refuses an attn_mask
    too; enable_gqa repeats K/V heads in repeat_interleave order; scale is
    keyword-only; fully masked rows (boolean, or a float row of -inf) give
    zeros (since 2.5); dropout_p=0 is no dropout.
  * nn.MultiheadAttention: boolean attn_mask True = blocked, key_padding_mask
    True = padding (the opposite of SDPA); float masks are added; attn_mask
    [L, S] or [B·H, L, S] with entry b·H + h; is_causal is a hint that needs
    attn_mask; batch_first=False is [L, B, E]; unbatched inputs; weights
    averaged over heads by default (average_attn_weights=True), None with
    need_weights=False; kdim/vdim; no dropout in eval(); in_proj_weight
    [3E, E] in Q, K, V order applied as x @ W.T + b.  Fully masked rows are
    NaN (output and weights) with need_weights=True and on the fast path,
    and equal out_proj.bias with need_weights=False off the fast path; the
    NumPy layer gives zero weights and b_o for every setting.  A mask in the
    other polarity gives NaN rows there and ValueError here.
  * The production view's PyTorch spelling of an exercise's masks, parsed
    back from the text a learner reads, gives the exercise's numbers in both.
"""

from __future__ import annotations

import ast
import os
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tutor.exercise.record import Exercise, Head, causal
from tutor.numeric import (
    MaskPolarityWarning,
    MultiHeadAttention,
    attention_with_weights,
    blocked_attention,
    causal_mask,
    scaled_dot_product_attention,
)
from tutor.production import layer_of, pytorch_masks, run_exercise

from .conftest import EXERCISES
from .oracle import require_torch

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
    H=st.integers(1, 4),
    kv_heads=st.sampled_from(["same", "gqa", "mqa", "broadcast"]),
    L_q=st.integers(1, 7),
    L_k=st.integers(1, 7),
    d_k=st.integers(1, 8),
    d_v=st.integers(1, 6),
    mask_kind=st.sampled_from(["none", "causal", "random", "per-batch", "empty-rows", "float", "float-inf", "alibi"]),
    scale=st.sampled_from([None, 1.0, 0.3]),
    block=st.sampled_from([1, 2, 3, 64]),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**32 - 1),
)
def test_sdpa_matches_torch(B, H, kv_heads, L_q, L_k, d_k, d_v, mask_kind, scale, block, dtype, seed):
    rng = np.random.default_rng(seed)
    H_kv = {"same": H, "gqa": max(1, H // 2) if H % 2 == 0 else H, "mqa": 1, "broadcast": 1}[kv_heads]
    gqa = kv_heads in ("gqa", "mqa")
    q = rng.standard_normal((B, H, L_q, d_k)).astype(dtype)
    k = rng.standard_normal((B, H_kv, L_k, d_k)).astype(dtype)
    v = rng.standard_normal((B, H_kv, L_k, d_v)).astype(dtype)
    mask = None
    if mask_kind == "random":
        mask = rng.random((L_q, L_k)) > 0.3
    elif mask_kind == "per-batch":
        mask = rng.random((B, 1, L_q, L_k)) > 0.3
    elif mask_kind == "empty-rows":
        mask = rng.random((B, H, L_q, L_k)) > 0.3
        mask[..., rng.integers(L_q), :] = False  # every slice has a fully masked row
    elif mask_kind.startswith("float"):
        mask = rng.standard_normal((B, 1, L_q, L_k)).astype(dtype)
        if mask_kind == "float-inf":
            mask[rng.random(mask.shape) > 0.6] = -np.inf
            mask[..., 0, :] = -np.inf  # a row of -inf: fully masked through the float mask
    elif mask_kind == "alibi":  # slope of head h of H: 2^(-8(h+1)/H), bias = slope·(j - i)
        slopes = 2.0 ** (-8.0 * (np.arange(H) + 1) / H)
        mask = (slopes[:, None, None] * (np.arange(L_k)[None, :] - np.arange(L_q)[:, None])).astype(dtype)  # [H, L, S]
    causal = mask_kind == "causal"
    kwargs = {"is_causal": causal, "enable_gqa": gqa} | ({} if scale is None else {"scale": scale})
    ref = F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=None if mask is None else t(mask), **kwargs).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MaskPolarityWarning)  # a small random mask may be all False: warned, computed
        out = scaled_dot_product_attention(q, k, v, mask, **kwargs)
        out_w, w = attention_with_weights(q, k, v, mask, **kwargs)
        out_b = blocked_attention(q, k, v, mask, block_size=block, **kwargs)
    assert out.dtype == dtype and ref.dtype == dtype and out.shape == ref.shape
    for got in (out, out_w, out_b):
        np.testing.assert_allclose(got, ref, **TOL[dtype])
    assert not np.isnan(ref).any()  # SDPA (>= 2.5): fully masked rows are zeros, not NaN
    if mask is not None:
        blocks = ~mask if mask.dtype == bool else mask == -np.inf
        empty = np.broadcast_to(blocks, (B, H, L_q, L_k)).all(axis=-1)
        assert (ref[empty] == 0).all() and (out[empty] == 0).all()
    # the weights, against torch's own softmax of the masked scores (the reference implementation)
    kt, vt = (t(k).repeat_interleave(H // H_kv, -3), None) if gqa else (t(k), None)
    s = t(q) @ kt.transpose(-2, -1) * (scale if scale is not None else d_k**-0.5)
    if causal:
        s = s.masked_fill(~torch.ones(L_q, L_k, dtype=torch.bool).tril(), float("-inf"))
    elif mask is not None and mask.dtype == bool:
        s = s.masked_fill(~t(np.broadcast_to(mask, s.shape)), float("-inf"))
    elif mask is not None:
        s = s + t(mask)
    tw = torch.softmax(s, dim=-1).nan_to_num(0.0).numpy()
    np.testing.assert_allclose(w, tw, **TOL[dtype])


def test_fully_masked_rows_are_zero_on_torchs_math_path_as_here():
    """The reference (math) backend too, not only the CPU flash kernel the default picks: zeros since 2.5."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rng = np.random.default_rng(12)
    q, k, v = rng.standard_normal((2, 4, 3, 5)), rng.standard_normal((2, 2, 6, 5)), rng.standard_normal((2, 2, 6, 7))
    bool_mask = rng.random((3, 6)) > 0.3
    bool_mask[1] = False
    float_mask = rng.standard_normal((3, 6))
    float_mask[2] = -np.inf
    for mask in (bool_mask, float_mask):
        with sdpa_kernel(SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=t(mask), enable_gqa=True).numpy()
        row = 1 if mask.dtype == bool else 2
        assert (ref[..., row, :] == 0).all()
        np.testing.assert_allclose(scaled_dot_product_attention(q, k, v, mask, enable_gqa=True), ref, **TOL[np.float64])


def test_sdpa_causal_is_top_left_in_torch_too():
    # L_q = 2 < L_k = 4, all scores equal: query i spreads over keys 0..i
    q, k = np.zeros((1, 2, 2)), np.zeros((1, 4, 2))
    v = np.eye(4)[None]
    ref = F.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=True).numpy()
    np.testing.assert_allclose(ref[0], [[1, 0, 0, 0], [0.5, 0.5, 0, 0]], rtol=1e-15)
    np.testing.assert_allclose(scaled_dot_product_attention(q, k, v, is_causal=True), ref, rtol=1e-15)
    np.testing.assert_allclose(scaled_dot_product_attention(q, k, v, causal_mask(2, 4)), ref, rtol=1e-15)
    # L_q = 4 > L_k = 2: queries 1..3 all see both keys
    ref = F.scaled_dot_product_attention(t(np.zeros((1, 4, 2))), t(k[:, :2]), t(v[:, :2, :2]), is_causal=True).numpy()
    np.testing.assert_allclose(ref[0], [[1, 0], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]], rtol=1e-15)
    np.testing.assert_allclose(scaled_dot_product_attention(np.zeros((1, 4, 2)), k[:, :2], v[:, :2, :2], is_causal=True),
                               ref, rtol=1e-15)


def test_sdpa_boolean_mask_polarity_is_true_means_attend():
    q = np.zeros((1, 1, 2))
    k = np.zeros((1, 3, 2))
    v = np.array([[[1.0], [2.0], [30.0]]])
    mask = np.array([[True, True, False]])
    ref = F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=t(mask)).numpy()
    np.testing.assert_allclose(ref, [[[1.5]]], rtol=1e-15)  # the flipped mask would give 30
    np.testing.assert_allclose(scaled_dot_product_attention(q, k, v, mask), ref, rtol=1e-15)


def test_sdpa_refuses_what_torch_refuses():
    a = np.ones((2, 3, 4))
    with pytest.raises(RuntimeError, match="is_causal"):
        F.scaled_dot_product_attention(t(a), t(a), t(a), attn_mask=t(np.ones((3, 3), bool)), is_causal=True)
    with pytest.raises(ValueError, match="is_causal"):
        scaled_dot_product_attention(a, a, a, np.ones((3, 3), bool), is_causal=True)
    with pytest.raises(TypeError):  # scale is keyword-only in both
        F.scaled_dot_product_attention(t(a), t(a), t(a), None, 0.0, False, 0.5)
    with pytest.raises(TypeError):
        scaled_dot_product_attention(a, a, a, None, 0.0, False, 0.5)
    with pytest.raises(RuntimeError, match="same dtype"):
        F.scaled_dot_product_attention(t(a.astype(np.float32)), t(a), t(a))
    with pytest.raises(TypeError, match="one dtype"):
        scaled_dot_product_attention(a.astype(np.float32), a, a)
    with pytest.raises(RuntimeError, match="attn_mask dtype"):
        F.scaled_dot_product_attention(t(a), t(a), t(a), attn_mask=t(np.ones((3, 3), np.int64)))
    with pytest.raises(TypeError, match="attn_mask"):
        scaled_dot_product_attention(a, a, a, np.ones((3, 3), np.int64))
    with pytest.raises(RuntimeError):  # a mask with more batch axes than the output
        F.scaled_dot_product_attention(t(a[0]), t(a[0]), t(a[0]), attn_mask=t(np.ones((2, 3, 3), bool)))
    with pytest.raises(ValueError, match="attn_mask"):
        scaled_dot_product_attention(a[0], a[0], a[0], np.ones((2, 3, 3), bool))
    with pytest.raises(RuntimeError, match="must divide"):
        F.scaled_dot_product_attention(t(np.ones((3, 3, 4))), t(np.ones((2, 3, 4))), t(np.ones((2, 3, 4))), enable_gqa=True)
    with pytest.raises(ValueError, match="must divide"):
        scaled_dot_product_attention(np.ones((3, 3, 4)), np.ones((2, 3, 4)), np.ones((2, 3, 4)), enable_gqa=True)
    with pytest.raises(RuntimeError, match="dropout"):
        F.scaled_dot_product_attention(t(a), t(a), t(a), dropout_p=1.5)
    with pytest.raises(ValueError, match="dropout"):
        scaled_dot_product_attention(a, a, a, dropout_p=1.5)


def test_sdpa_dropout_zero_and_dropout_one_as_torch():
    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal((2, 3, 4)) for _ in range(3))
    np.testing.assert_allclose(scaled_dot_product_attention(q, k, v, dropout_p=0.0),
                               F.scaled_dot_product_attention(t(q), t(k), t(v), dropout_p=0.0).numpy(), **TOL[np.float64])
    np.testing.assert_array_equal(scaled_dot_product_attention(q, k, v, dropout_p=1.0), 0)
    np.testing.assert_array_equal(F.scaled_dot_product_attention(t(q), t(k), t(v), dropout_p=1.0).numpy(), 0)


# --------------------------------------------------------------------------- #
# MultiHeadAttention vs nn.MultiheadAttention
# --------------------------------------------------------------------------- #
def _torch_mha(E, H, bias, kdim, dtype, rng, vdim=None, batch_first=True, dropout=0.0):
    """An nn.MultiheadAttention with random weights (biases non-zero) and the same layer in numpy."""
    m = torch.nn.MultiheadAttention(E, H, dropout=dropout, bias=bias, batch_first=batch_first, kdim=kdim,
                                    vdim=kdim if vdim is None else vdim, dtype=TORCH_DTYPE[dtype]).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(t(rng.standard_normal(tuple(p.shape)).astype(dtype) * 0.5))
    as_np = lambda p: None if p is None else p.detach().numpy()
    out_b = m.out_proj.bias if bias else None
    if m._qkv_same_embed_dim:
        layer = MultiHeadAttention.from_torch_layout(
            as_np(m.in_proj_weight), as_np(m.in_proj_bias), as_np(m.out_proj.weight), as_np(out_b), H,
            batch_first=batch_first)
    else:
        layer = MultiHeadAttention.from_torch_layout(
            None, as_np(m.in_proj_bias), as_np(m.out_proj.weight), as_np(out_b), H,
            q_proj_weight=as_np(m.q_proj_weight), k_proj_weight=as_np(m.k_proj_weight),
            v_proj_weight=as_np(m.v_proj_weight), batch_first=batch_first)
    return m, layer


@HYPO
@given(
    B=st.integers(1, 3),
    L=st.integers(1, 6),
    S=st.integers(1, 7),
    H=st.sampled_from([1, 2, 4]),
    d_h=st.integers(1, 4),
    inputs=st.sampled_from(["self", "cross-same-width", "cross-other-width", "key-and-value"]),
    kdim=st.integers(1, 6),
    vdim=st.integers(1, 6),
    bias=st.booleans(),
    layout=st.sampled_from(["batch_first", "seq_first", "unbatched"]),
    attn=st.sampled_from(["none", "causal", "causal-hint", "bool-2d", "bool-3d", "float-2d", "float-3d"]),
    padding=st.sampled_from(["none", "bool", "float"]),
    empty=st.sampled_from(["none", "row", "batch"]),
    need_weights=st.booleans(),
    average=st.booleans(),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**32 - 1),
)
def test_layer_matches_nn_multihead_attention(
    B, L, S, H, d_h, inputs, kdim, vdim, bias, layout, attn, padding, empty, need_weights, average, dtype, seed
):
    rng = np.random.default_rng(seed)
    E = H * d_h
    if inputs == "self":
        S, kdim, vdim = L, E, E
    elif inputs == "cross-same-width":
        kdim = vdim = E
    elif inputs == "cross-other-width":
        vdim = kdim
    if layout == "unbatched":
        B = 1
    m, layer = _torch_mha(E, H, bias, None if kdim == vdim == E else kdim, dtype, rng,
                          vdim=None if kdim == vdim == E else vdim, batch_first=layout == "batch_first")
    x = rng.standard_normal((B, L, E)).astype(dtype)
    x_k = x if inputs == "self" else rng.standard_normal((B, S, kdim)).astype(dtype)
    x_v = rng.standard_normal((B, S, vdim)).astype(dtype) if inputs == "key-and-value" else x_k

    # the masks, in PyTorch's polarity, passed unchanged to both; what they mean, written out for the test
    blocked = np.zeros((B, H, L, S), bool)  # True = may not attend
    attn_mask = kpm = None
    is_causal = attn == "causal-hint"
    if attn in ("causal", "causal-hint"):
        attn_mask = ~causal_mask(L, S)  # nn.MultiheadAttention: True = blocked above the diagonal
    elif attn.startswith("bool"):
        attn_mask = rng.random((L, S) if attn.endswith("2d") else (B * H, L, S)) > 0.7
    elif attn.startswith("float"):
        attn_mask = (rng.standard_normal((L, S) if attn.endswith("2d") else (B * H, L, S)) * 2).astype(dtype)
    if empty == "row" and attn_mask is not None and not is_causal:
        attn_mask[..., rng.integers(L), :] = True if attn_mask.dtype == bool else -np.inf
    if padding == "bool":
        kpm = rng.random((B, S)) > 0.75  # True = padding
    elif padding == "float":
        kpm = (rng.standard_normal((B, S)) * 2).astype(dtype)
    if empty == "batch" and kpm is not None:
        kpm[rng.integers(B)] = True if kpm.dtype == bool else -np.inf
    if attn_mask is not None:
        a4 = attn_mask[None, None] if attn_mask.ndim == 2 else attn_mask.reshape(B, H, L, S)
        blocked |= a4 if a4.dtype == bool else a4 == -np.inf
    if kpm is not None:
        blocked |= (kpm if kpm.dtype == bool else kpm == -np.inf)[:, None, None, :]
    empty_rows = blocked.all(axis=-1)  # [B, H, L]

    def lay(a):  # [B, L, E] to the layout under test
        return a[0] if layout == "unbatched" else (a.transpose(1, 0, 2).copy() if layout == "seq_first" else a)

    args_np = [lay(x), lay(x_k), lay(x_v)]
    if inputs == "self":
        args_np = [args_np[0]] * 3
    elif inputs != "key-and-value":
        args_np[2] = args_np[1]
    xt = {id(a): t(a) for a in args_np}  # the same tensor where the same array: query is key is value
    args_t = [xt[id(a)] for a in args_np]
    kpm_u = None if kpm is None else (kpm[0] if layout == "unbatched" else kpm)
    am_u = None if attn_mask is None else (attn_mask.reshape(H, L, S) if layout == "unbatched" and attn_mask.ndim == 3
                                           else attn_mask)
    kw_np = {"key_padding_mask": kpm_u, "attn_mask": am_u, "is_causal": is_causal, "need_weights": need_weights,
             "average_attn_weights": average}
    kw_t = kw_np | {"key_padding_mask": None if kpm_u is None else t(kpm_u),
                    "attn_mask": None if am_u is None else t(am_u)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # mixed bool/float masks warn, in both
        ref, ref_w = m(*args_t, **kw_t)
        refused = (attn_mask is not None and attn_mask.dtype == bool and (attn_mask.all() or L > 1 and S > 1 and np.array_equal(
                   attn_mask, np.broadcast_to(causal_mask(L, S), attn_mask.shape)))
                   or padding == "bool" and kpm.all())
        if refused:  # a mask that can only be meant in the other polarity: torch gives NaN rows, we refuse it
            with pytest.raises(ValueError, match="polarity|True = blocked|True = padding"):
                layer(*args_np, **kw_np)
            return
        out, w = layer(*args_np, **kw_np)
    ref = ref.numpy()
    assert out.dtype == dtype and out.shape == ref.shape
    back = lambda a: a[None] if layout == "unbatched" else (a.transpose(1, 0, 2) if layout == "seq_first" else a)
    out_b, ref_b = back(out), back(ref)  # [B, L, E]
    row_empty = empty_rows.any(axis=1)  # [B, L]: a query row with an empty head
    bias_row = m.out_proj.bias.detach().numpy() if bias else np.zeros(E, dtype)
    if not need_weights:  # through SDPA: the rows of an empty head are zeros, as ours
        assert ref_w is None and w is None
        np.testing.assert_allclose(out_b, ref_b, **TOL[dtype])
        return
    # need_weights=True: fully masked rows are NaN in torch (output and weights), finite here
    assert np.isnan(ref_b[row_empty]).all() and not np.isnan(ref_b[~row_empty]).any()
    np.testing.assert_allclose(out_b[~row_empty], ref_b[~row_empty], **TOL[dtype])
    whole_row_empty = empty_rows.all(axis=1)  # every head empty: the output row is out_proj.bias
    np.testing.assert_allclose(out_b[whole_row_empty], np.broadcast_to(bias_row, out_b[whole_row_empty].shape),
                               **TOL[dtype])
    ref_w = ref_w.numpy()
    w_b, ref_wb = (w[None], ref_w[None]) if layout == "unbatched" else (w, ref_w)
    if average:  # [B, L, S], the mean over heads: NaN in torch where any head's row is empty
        assert w_b.shape == (B, L, S)
        np.testing.assert_allclose(w_b[~row_empty], ref_wb[~row_empty], **TOL[dtype])
        assert np.isnan(ref_wb[row_empty]).all()
    else:  # [B, H, L, S]
        assert w_b.shape == (B, H, L, S)
        np.testing.assert_allclose(w_b[~empty_rows], ref_wb[~empty_rows], **TOL[dtype])
        assert np.isnan(ref_wb[empty_rows]).all() and (w_b[empty_rows] == 0).all()


def test_mha_averages_weights_over_heads_unless_told_not_to():
    rng = np.random.default_rng(4)
    m, layer = _torch_mha(4, 2, True, None, np.float64, rng)
    x = rng.standard_normal((2, 3, 4))
    _, avg = m(t(x), t(x), t(x))  # the default: need_weights=True, averaged
    _, ours = layer(x, x, x)
    _, per_head = layer(x, x, x, average_attn_weights=False)
    assert avg.shape == ours.shape == (2, 3, 3) and per_head.shape == (2, 2, 3, 3)
    np.testing.assert_allclose(ours, avg.numpy(), **TOL[np.float64])
    np.testing.assert_allclose(per_head.mean(axis=1), avg.numpy(), **TOL[np.float64])


def test_mha_dropout_is_off_in_eval_as_the_numpy_layer():
    rng = np.random.default_rng(9)
    m, layer = _torch_mha(4, 2, True, None, np.float64, rng, dropout=0.5)  # .eval(): dropout does nothing
    x = rng.standard_normal((2, 3, 4))
    ref, ref_w = m(t(x), t(x), t(x), average_attn_weights=False)
    out, w = layer(x, x, x, average_attn_weights=False)
    np.testing.assert_allclose(out, ref.numpy(), **TOL[np.float64])
    np.testing.assert_allclose(w, ref_w.numpy(), **TOL[np.float64])


def test_mha_fast_path_gives_nan_rows():
    rng = np.random.default_rng(6)
    m, layer = _torch_mha(8, 2, True, None, np.float32, rng)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    kpm = np.array([[False, False, True], [True, True, True]])  # batch 1: all padding
    xt = t(x)  # the fast path needs query is key is value (self-attention)
    torch.backends.mha.set_fastpath_enabled(True)
    fast, _ = m(xt, xt, xt, key_padding_mask=t(kpm), need_weights=False)
    torch.backends.mha.set_fastpath_enabled(False)
    slow, _ = m(xt, xt, xt, key_padding_mask=t(kpm), need_weights=False)
    out, _ = layer(x, x, x, key_padding_mask=kpm, need_weights=False)
    assert np.isnan(fast.numpy()[1]).all()
    np.testing.assert_allclose(fast.numpy()[0], out[0], **TOL[np.float32])
    np.testing.assert_allclose(slow.numpy(), out, **TOL[np.float32])
    np.testing.assert_allclose(out[1], np.tile(m.out_proj.bias.detach().numpy(), (3, 1)), **TOL[np.float32])


def test_masks_in_the_other_polarity_give_nan_in_torch_and_an_error_here():
    rng = np.random.default_rng(10)
    m, layer = _torch_mha(4, 2, True, None, np.float64, rng)
    x = rng.standard_normal((1, 3, 4))
    xt = t(x)
    sdpa_causal = causal_mask(3, 3)  # True = may attend: SDPA's polarity
    ref, _ = m(xt, xt, xt, attn_mask=t(sdpa_causal))  # read as True = blocked: the last query sees nothing
    assert np.isnan(ref.numpy()[0, 2]).all()
    with pytest.raises(ValueError, match="scaled_dot_product_attention's polarity"):
        layer(x, x, x, attn_mask=sdpa_causal)
    real = np.ones((1, 3), bool)  # an exercise file's key_padding: True = a real token
    ref, _ = m(xt, xt, xt, key_padding_mask=t(real))
    assert np.isnan(ref.numpy()).all()
    with pytest.raises(ValueError, match="True = padding"):
        layer(x, x, x, key_padding_mask=real)
    with pytest.raises(ValueError, match="True = blocked"):
        layer(x, x, x, attn_mask=np.ones((3, 3), bool))
    # the right polarity: the same numbers as torch
    ref, _ = m(xt, xt, xt, attn_mask=t(~sdpa_causal))
    np.testing.assert_allclose(layer(x, x, x, attn_mask=~sdpa_causal)[0], ref.numpy(), **TOL[np.float64])


def test_mha_is_causal_hint_as_torch():
    rng = np.random.default_rng(11)
    m, layer = _torch_mha(4, 2, True, None, np.float64, rng)
    x = rng.standard_normal((2, 3, 4))
    xt = t(x)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        m(xt, xt, xt, is_causal=True)
    with pytest.raises(ValueError, match="needs attn_mask"):
        layer(x, x, x, is_causal=True)
    # a wrong hint: torch uses the mask on one path and the causal mask on the other
    other = np.zeros((3, 3), bool)
    other[:, 0] = True
    with_weights, _ = m(xt, xt, xt, attn_mask=t(other), is_causal=True, need_weights=True)
    without, _ = m(xt, xt, xt, attn_mask=t(other), is_causal=True, need_weights=False)
    assert not torch.allclose(with_weights, without)
    with pytest.raises(ValueError, match="is not"):
        layer(x, x, x, attn_mask=other, is_causal=True)
    # the right hint: both torch paths and the layer agree
    for nw in (True, False):
        ref, _ = m(xt, xt, xt, attn_mask=t(~causal_mask(3, 3)), is_causal=True, need_weights=nw)
        np.testing.assert_allclose(layer(x, x, x, attn_mask=~causal_mask(3, 3), is_causal=True)[0], ref.numpy(),
                                   **TOL[np.float64])


# --------------------------------------------------------------------------- #
# an exercise's masks as the production view spells them, run through torch
# --------------------------------------------------------------------------- #
def _spelled(mask):
    """The value a learner reads in ``mask.code()`` (``attn_mask=torch.tensor([[False, True]])``), parsed back."""
    code = mask.code()
    if mask.argument == "is_causal":
        assert code == "is_causal=True"
        return True
    prefix = f"{mask.argument}=torch.tensor("
    assert code.startswith(prefix) and code.endswith(")"), code
    return ast.literal_eval(code[len(prefix):-1])


def _exercises_with_masks():
    from tutor.exercise import load_exercise

    bundled = [load_exercise(str(EXERCISES / f"{n}.yaml")) for n in ("two-head-causal-3x4", "padding-4x2",
                                                                      "fully-masked-row-3x3")]
    return bundled + [_cross_exercise()]


@pytest.mark.parametrize("index", range(4))
def test_production_mask_spellings_run_in_torch(index):
    ex = _exercises_with_masks()[index]
    run = run_exercise(ex)
    spelled = pytorch_masks(ex)
    assert spelled
    mha_kw = {m.argument: t(np.array(_spelled(m))) for m in spelled if m.api == "mha"}
    sdpa = {m.argument: _spelled(m) for m in spelled if m.api == "sdpa"}
    assert set(mha_kw) <= {"attn_mask", "key_padding_mask"} and len(sdpa) == 1
    # F.scaled_dot_product_attention on the exercise's per-head Q, K, V (a batch of one): the head outputs
    sdpa_t = {k: (v if k == "is_causal" else t(np.array(v))) for k, v in sdpa.items()}
    ref = F.scaled_dot_product_attention(t(run.q[None]), t(run.k[None]), t(run.v[None]), **sdpa_t).numpy()[0]
    ctx = run.context.reshape(ex.L, ex.num_heads, -1).transpose(1, 0, 2)  # [H, L, d_v]
    np.testing.assert_allclose(ref, ctx, **TOL[np.float64])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the spelled masks set off no polarity warning
        sdpa_np = {k: (v if k == "is_causal" else np.array(v)) for k, v in sdpa.items()}
        ours = scaled_dot_product_attention(run.q[None], run.k[None], run.v[None], **sdpa_np)
    np.testing.assert_allclose(ours[0], ctx, **TOL[np.float64])
    # nn.MultiheadAttention with the exercise's weights and the spelled attn_mask / key_padding_mask
    if ex.heads[0].d_k * ex.num_heads != ex.d_model or ex.heads[0].d_k != ex.heads[0].d_v:
        return  # nn.MultiheadAttention needs d_k = d_v = d_model / num_heads
    f = lambda a: np.array(a, dtype=object).astype(np.float64)
    x = f(ex.x)[None]
    kv = x if ex.x_kv is None else f(ex.x_kv)[None]
    m = _to_torch(ex)
    ref, _ = m(t(x), t(kv), t(kv), need_weights=False, **mha_kw)  # off the fast path: fully masked rows as ours
    layer = layer_of(ex, batch_first=True)
    out, _ = layer(x, kv, kv, need_weights=False, **{k: v.numpy() for k, v in mha_kw.items()})
    expected = run.output
    np.testing.assert_allclose(ref.numpy()[0], expected, **TOL[np.float64])
    np.testing.assert_allclose(out[0], expected, **TOL[np.float64])


# --------------------------------------------------------------------------- #
# an exercise built by hand (Fractions) through layer_of and through torch
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
    """nn.MultiheadAttention with the exercise's weights: W.T per nn.Linear, heads stacked by rows (zeros for
    missing biases; the identity for a missing W_O)."""
    f = lambda m: np.array(m, dtype=object).astype(np.float64)
    E, H = ex.d_model, ex.num_heads
    kdim = len(ex.kv[0])
    m = torch.nn.MultiheadAttention(E, H, batch_first=True, kdim=kdim, vdim=kdim, dtype=torch.float64).eval()
    w = {n: np.concatenate([f(getattr(h, n)) for h in ex.heads], axis=1).T for n in ("w_q", "w_k", "w_v")}
    b = {n: np.concatenate([f(getattr(h, n)) if getattr(h, n) is not None else np.zeros(h.d_k) for h in ex.heads])
         for n in ("b_q", "b_k", "b_v")}
    with torch.no_grad():
        if m._qkv_same_embed_dim:
            m.in_proj_weight.copy_(t(np.vstack([w["w_q"], w["w_k"], w["w_v"]])))
        else:
            m.q_proj_weight.copy_(t(w["w_q"]))
            m.k_proj_weight.copy_(t(w["w_k"]))
            m.v_proj_weight.copy_(t(w["w_v"]))
        m.in_proj_bias.copy_(t(np.concatenate([b["b_q"], b["b_k"], b["b_v"]])))
        m.out_proj.weight.copy_(t(f(ex.w_o).T if ex.w_o is not None else np.eye(E)))
        m.out_proj.bias.copy_(t(f(ex.b_o) if ex.b_o is not None else np.zeros(E)))
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
    # and the layer from the exercise, driven with the mask/padding split as production passes them (True = blocked)
    layer = layer_of(ex, batch_first=True)
    out, w = layer(x.numpy(), kv.numpy(), kv.numpy(), attn_mask=~causal_mask(3, 4),
                   key_padding_mask=~np.array([ex.key_padding]), average_attn_weights=False)
    np.testing.assert_array_equal(out[0], run.output)
    np.testing.assert_array_equal(w[0], run.weights)
    ref3, _ = m(x, kv, kv, attn_mask=t(~causal_mask(3, 4)), key_padding_mask=t(~np.array([ex.key_padding])),
                need_weights=False)
    np.testing.assert_allclose(out[0], ref3.numpy()[0], **TOL[np.float64])
