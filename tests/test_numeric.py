"""tutor.numeric against values worked out by hand, the shared bug-report vectors,
and itself (blocked vs plain, fused vs per-head).  PyTorch parity lives in
test_torch_parity.py; nothing here needs torch."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tutor.base.errors import ShapeError
from tutor.exercise.record import Exercise, Head, causal
from tutor.numeric import (
    DEFAULT_BLOCK_SIZE,
    MaskPolarityWarning,
    MultiHeadAttention,
    TraceStep,
    attention_with_weights,
    blocked_attention,
    causal_mask,
    scaled_dot_product_attention,
    softmax,
)
from tutor.numeric.masks import mha_masks
from tutor.production import exercise_trace, layer_of, run_exercise

REPO = Path(__file__).resolve().parent.parent
CASES = json.loads((Path(__file__).parent / "data" / "attention-cases.json").read_text())["cases"]
E = math.e
# ATTN_TUTOR_EXAMPLES=2000 for a long soak; the default keeps the suite quick
HYPO = settings(max_examples=int(os.environ.get("ATTN_TUTOR_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def F(*rows):
    """A Fraction matrix from rows of ints/strings: F([1, "1/2"]) -> ((1, 1/2),)."""
    return tuple(tuple(Fraction(v) for v in r) for r in rows)


# --------------------------------------------------------------------------- #
# softmax
# --------------------------------------------------------------------------- #
def test_softmax_hand_values():
    # softmax([0, ln 3]) = [1, 3] / 4
    np.testing.assert_allclose(softmax(np.array([0.0, math.log(3)])), [0.25, 0.75], rtol=1e-15)
    # a row of equal scores is uniform; along axis 0 too
    np.testing.assert_allclose(softmax(np.zeros((2, 4))), np.full((2, 4), 0.25))
    np.testing.assert_allclose(softmax(np.array([[0.0, 1.0], [0.0, 1.0]]), axis=0), np.full((2, 2), 0.5))
    # [1, 2] -> [1, e] / (1 + e)
    np.testing.assert_allclose(softmax(np.array([1.0, 2.0])), [1 / (1 + E), E / (1 + E)], rtol=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shift", [0.0, 1000.0, -1000.0, 1e6])
def test_softmax_is_shift_invariant_and_does_not_overflow(dtype, shift):
    x = np.array([0.0, 1.0, 2.0], dtype=dtype) + dtype(shift)
    with np.errstate(all="raise"):  # any overflow or NaN along the way fails the test
        got = softmax(x)
    z = 1 + E + E**2  # [1, e, e²] / z, by hand
    expected = np.array([1 / z, E / z, E**2 / z])
    tol = 1e-6 if dtype is np.float32 else 1e-15
    # at 1e6 in float32 the inputs themselves round (spacing 0.0625), so only check the sum
    if dtype is np.float32 and shift == 1e6:
        assert abs(got.sum() - 1) < 1e-6
    else:
        np.testing.assert_allclose(got, expected, rtol=tol)
    assert got.dtype == dtype


@pytest.mark.parametrize(
    "dtype, big", [(np.float32, np.finfo(np.float32).max), (np.float64, np.finfo(np.float64).max)]
)
def test_softmax_at_the_largest_finite_magnitudes(dtype, big):
    x = np.array([[big, big], [-big, big], [big, -big], [-big, -big]], dtype=dtype)
    got = softmax(x)
    np.testing.assert_array_equal(got, np.array([[0.5, 0.5], [0, 1], [1, 0], [0.5, 0.5]], dtype=dtype))
    assert got.dtype == dtype


def test_softmax_of_all_minus_inf_row_is_zeros_not_nan():
    x = np.array([[-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 0.0]])
    with np.errstate(all="raise"):
        got = softmax(x)
    np.testing.assert_array_equal(got, [[0, 0, 0], [0.5, 0, 0.5]])


def test_softmax_does_not_modify_its_input_and_promotes_ints():
    x = np.array([1.0, 2.0])
    softmax(x)
    np.testing.assert_array_equal(x, [1.0, 2.0])
    assert softmax(np.array([1, 2])).dtype == np.float64


def test_softmax_with_nan_gives_nan():
    assert np.isnan(softmax(np.array([0.0, np.nan]))).all()


# --------------------------------------------------------------------------- #
# masks
# --------------------------------------------------------------------------- #
def test_causal_mask_is_top_left_aligned():
    T, f = True, False
    np.testing.assert_array_equal(causal_mask(2, 4), [[T, f, f, f], [T, T, f, f]])
    np.testing.assert_array_equal(causal_mask(3, 2), [[T, f], [T, T], [T, T]])
    np.testing.assert_array_equal(causal_mask(3, 3), np.array(causal(3, 3)))  # the model's own
    assert causal_mask(2, 3).dtype == np.bool_
    with pytest.raises(ValueError):
        causal_mask(-1, 2)


def _mha(kpm=None, am=None, is_causal=False, B=2, H=2, L=3, S=3, batched=True):
    return mha_masks(kpm, am, is_causal, B=B, H=H, L=L, S=S, batched=batched, dtype=np.dtype(np.float64))


def test_mha_masks_turn_pytorch_polarity_into_may_attend():
    T, f = True, False
    kpm = np.array([[f, f, T], [f, f, f]])  # batch 0: key 3 is padding (True = padding, as PyTorch)
    allowed, bias = _mha(kpm, ~causal_mask(3, 3), is_causal=True)  # attn_mask True = blocked, as PyTorch
    assert bias is None and allowed.shape == (2, 1, 3, 3)
    np.testing.assert_array_equal(allowed[0, 0], [[T, f, f], [T, T, f], [T, T, f]])
    np.testing.assert_array_equal(allowed[1, 0], [[T, f, f], [T, T, f], [T, T, T]])
    assert _mha() == (None, None)
    assert _mha(kpm)[0].shape == (2, 1, 1, 3)
    # a 3-D attn_mask [B·H, L, S]: entry b·H + h
    am = np.zeros((4, 3, 3), bool)
    am[1, :, 0] = True  # batch 0, head 1
    allowed, _ = _mha(am=am)
    assert allowed.shape == (2, 2, 3, 3) and [(b, h) for b in range(2) for h in range(2) if not allowed[b, h, :, 0].any()] == [(0, 1)]


def test_mha_float_masks_are_added():
    kpm = np.array([[0.0, 0.0, -1.5], [0.0, -np.inf, 0.0]])
    am = np.array([[0.0, 1.0, 2.0]] * 3)
    allowed, bias = _mha(kpm, am)
    assert allowed is None and bias.shape == (2, 1, 3, 3)
    np.testing.assert_array_equal(bias[0, 0], [[0, 1, 0.5]] * 3)
    np.testing.assert_array_equal(bias[1, 0], [[0, -np.inf, 2]] * 3)
    with pytest.warns(UserWarning, match="mismatched key_padding_mask and attn_mask"):  # as PyTorch
        allowed, bias = _mha(np.array([[False, False, True]] * 2), am)
    assert allowed.shape == (2, 1, 1, 3) and bias.shape == (1, 1, 3, 3)


def test_mha_masks_in_the_opposite_polarity_are_refused():
    with pytest.raises(ValueError, match="True = blocked"):
        _mha(am=np.ones((3, 3), bool))  # blocks everything: an SDPA-style "attend everywhere"
    with pytest.raises(ValueError, match="scaled_dot_product_attention's polarity"):
        _mha(am=causal_mask(3, 3))  # SDPA's causal mask given to MHA
    with pytest.raises(ValueError, match="True = padding"):
        _mha(np.ones((2, 3), bool))  # the exercise file's key_padding (True = real) given as key_padding_mask
    _mha(np.array([[True] * 3, [False] * 3]))  # one sequence all padding is a batch PyTorch accepts (NaN rows)
    with pytest.warns(MaskPolarityWarning, match="only 0s and 1s"):
        _mha(am=np.ones((3, 3)) - np.eye(3))


def test_mha_is_causal_is_a_hint_that_needs_the_causal_mask():
    with pytest.raises(ValueError, match="needs attn_mask"):
        _mha(is_causal=True)
    with pytest.raises(ValueError, match="is not"):
        _mha(am=np.eye(3, dtype=bool), is_causal=True)
    _mha(am=np.where(causal_mask(3, 3), 0.0, -np.inf), is_causal=True)  # the float causal mask is one too
    with pytest.raises(ValueError, match="is not"):
        _mha(am=np.where(causal_mask(3, 3), 0.0, -1e9), is_causal=True)


def test_mha_mask_shapes_and_types():
    with pytest.raises(ShapeError, match="2-D attn_mask"):
        _mha(am=np.zeros((3, 4), bool))
    with pytest.raises(ShapeError, match=r"\[B·H, L, S\]"):
        _mha(am=np.zeros((2, 3, 3), bool))  # [H, L, S] is the unbatched form
    _mha(am=np.zeros((2, 3, 3), bool), B=1, batched=False)
    with pytest.raises(ShapeError, match="2-D or 3-D"):
        _mha(am=np.zeros((2, 2, 3, 3), bool))
    with pytest.raises(ShapeError, match="key_padding_mask"):
        _mha(np.zeros((2, 4), bool))
    with pytest.raises(ShapeError, match="key_padding_mask"):
        _mha(np.zeros((2, 3), bool), B=1, batched=False)
    with pytest.raises(TypeError, match="bool and floating"):
        _mha(am=np.zeros((3, 3), int))


# --------------------------------------------------------------------------- #
# scaled dot-product attention: hand values and the shared vectors
# --------------------------------------------------------------------------- #
def test_sdpa_hand_calculation():
    # q = [1, 0], keys [1, 0] and [0, 1]: scores [1, 0] / sqrt(2)
    q = np.array([[1.0, 0.0]])
    k = np.array([[1.0, 0.0], [0.0, 1.0]])
    v = np.array([[1.0, 2.0], [3.0, 4.0]])
    a = math.exp(1 / math.sqrt(2))
    w = np.array([[a / (a + 1), 1 / (a + 1)]])
    out, weights = attention_with_weights(q, k, v)
    np.testing.assert_allclose(weights, w, rtol=1e-15)
    np.testing.assert_allclose(out, w @ v, rtol=1e-15)
    np.testing.assert_array_equal(scaled_dot_product_attention(q, k, v), out)  # the output alone, as PyTorch
    # an explicit scale replaces 1/sqrt(d_k): scale 1 gives softmax([1, 0])
    _, weights = attention_with_weights(q, k, v, scale=1.0)
    np.testing.assert_allclose(weights, [[E / (E + 1), 1 / (E + 1)]], rtol=1e-15)


def test_sdpa_float_mask_is_added_to_the_scaled_scores():
    # scores [0, 0]; a bias of [ln 3, 0] gives weights [3, 1] / 4 (an ALiBi / relative bias)
    q, k = np.zeros((1, 2)), np.zeros((2, 2))
    v = np.array([[4.0], [8.0]])
    out, w = attention_with_weights(q, k, v, np.array([[math.log(3), 0.0]]))
    np.testing.assert_allclose(w, [[0.75, 0.25]], rtol=1e-15)
    np.testing.assert_allclose(out, [[5.0]], rtol=1e-15)
    # -inf in a float mask blocks; a row of -inf gives zeros, as a boolean mask
    out, w = attention_with_weights(q, k, v, np.array([[-np.inf, 0.0]]))
    np.testing.assert_array_equal(w, [[0, 1]])
    out, w = attention_with_weights(q, k, v, np.array([[-np.inf, -np.inf]]))
    np.testing.assert_array_equal(w, [[0, 0]])
    np.testing.assert_array_equal(out, [[0]])
    # a large finite negative number added to every score of a row changes nothing (softmax is shift-invariant)
    _, w = attention_with_weights(q, k, v, np.array([[-1e9, -1e9]]))
    np.testing.assert_allclose(w, [[0.5, 0.5]])


def test_sdpa_is_causal_equals_the_causal_mask_top_left():
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((2, 5)), rng.standard_normal((4, 5)), rng.standard_normal((4, 3))
    for L in (2, 4):  # L_q < L_k and L_q = L_k; query i sees keys j <= i
        out = scaled_dot_product_attention(q[:L] if L == 2 else np.vstack([q, q]), k, v, is_causal=True)
        ref = scaled_dot_product_attention(q[:L] if L == 2 else np.vstack([q, q]), k, v, causal_mask(L, 4))
        np.testing.assert_array_equal(out, ref)
    np.testing.assert_allclose(out[0], v[0], rtol=1e-15)  # query 0 sees key 0 only
    with pytest.raises(ValueError, match="is_causal"):
        scaled_dot_product_attention(q, k, v, causal_mask(2, 4), is_causal=True)  # one or the other, as PyTorch


def test_sdpa_gqa_repeats_kv_heads_in_repeat_interleave_order():
    rng = np.random.default_rng(4)
    q = rng.standard_normal((2, 4, 3, 5))  # [B, Hq=4, L, E]
    k, v = rng.standard_normal((2, 2, 6, 5)), rng.standard_normal((2, 2, 6, 7))  # [B, H=2, S, ·]
    out = scaled_dot_product_attention(q, k, v, enable_gqa=True)
    for h in range(4):  # query head h reads K/V head h // 2: 0, 0, 1, 1 (not 0, 1, 0, 1)
        np.testing.assert_allclose(out[:, h], scaled_dot_product_attention(q[:, h], k[:, h // 2], v[:, h // 2]),
                                   rtol=1e-14)
    one = scaled_dot_product_attention(q, k[:, :1], v[:, :1], enable_gqa=True)  # MQA: one K/V head
    np.testing.assert_allclose(one, scaled_dot_product_attention(q, k[:, :1], v[:, :1]), rtol=1e-14)
    np.testing.assert_allclose(blocked_attention(q, k, v, enable_gqa=True, block_size=2), out, rtol=1e-12)
    with pytest.raises(ShapeError, match="enable_gqa"):
        scaled_dot_product_attention(q, k, v)  # 4 vs 2 heads do not broadcast
    with pytest.raises(ShapeError, match="must divide"):
        scaled_dot_product_attention(q[:, :3], k, v, enable_gqa=True)
    with pytest.raises(ShapeError, match="head axis"):
        scaled_dot_product_attention(q[0, 0], k[0, 0], v[0, 0], enable_gqa=True)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
@pytest.mark.parametrize("block_size", [None, 1, 2, DEFAULT_BLOCK_SIZE])
def test_shared_vectors(case, block_size):
    q, k, v = (np.array(case[n], dtype=np.float64) for n in ("q", "k", "v"))
    mask = np.array(case["mask"]) if "mask" in case else None
    causal = bool(case.get("causal"))
    if block_size is None:
        out, weights = attention_with_weights(q, k, v, mask, is_causal=causal, scale=case.get("scale"))
        np.testing.assert_allclose(weights, case["weights"], rtol=1e-12, atol=1e-15)
    else:
        out = blocked_attention(q, k, v, mask, is_causal=causal, scale=case.get("scale"), block_size=block_size)
    np.testing.assert_allclose(out, case["output"], rtol=1e-12, atol=1e-15)


def test_fully_masked_row_gives_zeros_and_no_warning():
    q = np.ones((3, 2))
    k = np.ones((4, 2))
    v = np.arange(8.0).reshape(4, 2)
    mask = np.array([[True] * 4, [False] * 4, [True, False, False, False]])
    with np.errstate(all="raise"):
        out, w = attention_with_weights(q, k, v, mask)
        out_b = blocked_attention(q, k, v, mask, block_size=2)
    np.testing.assert_array_equal(w[1], 0)
    np.testing.assert_array_equal(out[1], 0)
    np.testing.assert_array_equal(out_b[1], 0)
    np.testing.assert_array_equal(w[2], [1, 0, 0, 0])
    np.testing.assert_array_equal(out[2], v[0])


def test_huge_scores_stay_finite():
    # scores around 1e30 (float64) and 1e4 * d (float32): max subtraction keeps them finite
    for dtype, mag in ((np.float64, 1e15), (np.float32, 1e4)):
        q = np.array([[mag, 0.0]], dtype=dtype)
        k = np.array([[mag, 0.0], [mag * (1 - 1e-3), 0.0]], dtype=dtype)
        v = np.array([[1.0], [2.0]], dtype=dtype)
        out, w = attention_with_weights(q, k, v, scale=1.0)
        assert np.isfinite(out).all() and np.isfinite(w).all()
        np.testing.assert_array_equal(w, np.array([[1, 0]], dtype=dtype))  # the gap is astronomically large
        for bs in (1, 2):
            np.testing.assert_array_equal(blocked_attention(q, k, v, scale=1.0, block_size=bs), out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sdpa_preserves_dtype(dtype):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 4)).astype(dtype) for _ in range(3))
    out, w = attention_with_weights(q, k, v)
    assert out.dtype == dtype and w.dtype == dtype
    assert scaled_dot_product_attention(q, k, v).dtype == dtype
    assert blocked_attention(q, k, v, block_size=2).dtype == dtype
    # a float32 float mask goes with a float64 query (PyTorch accepts float32 masks or the query's dtype)
    assert scaled_dot_product_attention(q, k, v, np.zeros((3, 3), np.float32)).dtype == dtype


def test_sdpa_dtypes_as_pytorch():
    q = np.array([[1, 0]])
    assert scaled_dot_product_attention(q, q, q).dtype == np.float64  # integers: computed in float64
    q32 = q.astype(np.float32)
    with pytest.raises(TypeError, match="one dtype"):  # PyTorch refuses mixed dtypes too
        scaled_dot_product_attention(q32, q32, q.astype(np.float64))
    with pytest.raises(TypeError, match="attn_mask"):
        scaled_dot_product_attention(q32, q32, q32, np.zeros((1, 1), np.float64))  # float64 mask, float32 query
    with pytest.raises(TypeError, match="attn_mask"):
        scaled_dot_product_attention(q32, q32, q32, np.zeros((1, 1), np.int64))


def test_sdpa_broadcasts_batch_axes_and_mask():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 3, 4, 5))  # [B, H, L_q, d_k]
    k = rng.standard_normal((2, 1, 6, 5))  # shared over heads
    v = rng.standard_normal((6, 7))  # shared over everything
    mask = rng.random((2, 1, 4, 6)) > 0.3  # [B, 1, L_q, L_k]
    out, w = attention_with_weights(q, k, v, mask)
    assert out.shape == (2, 3, 4, 7) and w.shape == (2, 3, 4, 6)
    for b in range(2):  # each slice on its own, unbatched
        for h in range(3):
            o1, w1 = attention_with_weights(q[b, h], k[b, 0], v, mask[b, 0])
            np.testing.assert_allclose(out[b, h], o1, rtol=1e-14, atol=1e-15)
            np.testing.assert_allclose(w[b, h], w1, rtol=1e-14, atol=1e-15)
    ob = blocked_attention(q, k, v, mask, block_size=3)
    np.testing.assert_allclose(ob, out, rtol=1e-12, atol=1e-14)
    # a mask may not add batch axes that query, key and value lack (PyTorch refuses it too)
    with pytest.raises(ShapeError, match="attn_mask"):
        scaled_dot_product_attention(q[0, 0], k[0, 0], v, rng.random((3, 4, 6)) > 0.5)


def test_sdpa_shape_errors():
    a = np.ones((3, 4))
    with pytest.raises(ShapeError, match="d_k"):
        scaled_dot_product_attention(a, np.ones((3, 5)), np.ones((3, 2)))
    with pytest.raises(ShapeError, match="L_k"):
        scaled_dot_product_attention(a, np.ones((3, 4)), np.ones((2, 2)))
    with pytest.raises(ShapeError, match="broadcast"):
        scaled_dot_product_attention(np.ones((2, 3, 4)), np.ones((3, 3, 4)), np.ones((3, 3, 4)))
    with pytest.raises(ShapeError, match="attn_mask"):
        scaled_dot_product_attention(a, a, a, np.ones((3, 2), bool))
    with pytest.raises(ShapeError):
        scaled_dot_product_attention(np.ones(4), a, a)
    with pytest.raises(ValueError):
        scaled_dot_product_attention(a, a, a, dropout_p=1.5)
    with pytest.raises(ValueError):
        scaled_dot_product_attention(a, a, a, dropout_p=-0.1)
    for bad in (0, -1, (2,), (2, 0), True, 1.5):
        with pytest.raises(ValueError):
            blocked_attention(a, a, a, block_size=bad)
    with pytest.raises(TypeError):
        scaled_dot_product_attention(a, a, a, None, 0.0, False, 0.5)  # scale is keyword-only, as in PyTorch


def test_sdpa_warns_about_masks_in_the_other_polarity():
    a = np.eye(3)
    with pytest.warns(MaskPolarityWarning, match="False everywhere"):
        out = scaled_dot_product_attention(a, a, a, np.zeros((3, 3), bool))
    np.testing.assert_array_equal(out, 0)  # still PyTorch's result: every row fully masked
    with pytest.warns(MaskPolarityWarning, match="above the diagonal"):
        scaled_dot_product_attention(a, a, a, ~causal_mask(3, 3))  # nn.MultiheadAttention's causal mask
    with pytest.warns(MaskPolarityWarning, match="only 0s and 1s"):
        scaled_dot_product_attention(a, a, a, causal_mask(3, 3).astype(np.float64))  # a keep-mask as numbers
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the right polarity warns about nothing
        scaled_dot_product_attention(a, a, a, causal_mask(3, 3))
        scaled_dot_product_attention(a, a, a, np.where(causal_mask(3, 3), 0.0, -np.inf))


def test_shape_error_is_a_value_error_and_a_tutor_error():
    from tutor.base.errors import TutorError

    with pytest.raises(ValueError) as info:
        scaled_dot_product_attention(np.ones((1, 2)), np.ones((1, 3)), np.ones((1, 1)))
    assert isinstance(info.value, TutorError)


# --------------------------------------------------------------------------- #
# dropout
# --------------------------------------------------------------------------- #
def test_dropout_is_inverted_and_uses_the_generator():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 5, 3)) for _ in range(3))
    _, w = attention_with_weights(q, k, v)
    p = 0.4
    out, wd = attention_with_weights(q, k, v, dropout_p=p, rng=np.random.default_rng(7))
    keep = np.random.default_rng(7).random(w.shape) >= p  # the documented draw
    np.testing.assert_allclose(wd, w * keep / (1 - p), rtol=1e-15)
    np.testing.assert_allclose(out, wd @ v, rtol=1e-14)
    np.testing.assert_allclose(scaled_dot_product_attention(q, k, v, None, p, rng=np.random.default_rng(7)), out)
    # one block covering everything draws the same keep mask as the plain path
    ob = blocked_attention(q, k, v, dropout_p=p, rng=np.random.default_rng(7), block_size=8)
    np.testing.assert_allclose(ob, out, rtol=1e-12)


def test_dropout_keeps_the_expectation():
    q = np.zeros((1, 4))
    k = np.zeros((8, 4))
    v = np.eye(8)
    rng = np.random.default_rng(3)
    outs = [scaled_dot_product_attention(q, k, v, dropout_p=0.5, rng=rng) for _ in range(4000)]
    # uniform weights 1/8; E[dropout(w)] = w; the std of the mean is ~ (1/8)/sqrt(4000) = 0.002
    np.testing.assert_allclose(np.mean(outs, axis=0), np.full((1, 8), 1 / 8), atol=0.01)


def test_dropout_one_zeroes_everything_and_zero_is_identity():
    a = np.eye(3)
    out, w = attention_with_weights(a, a, a, dropout_p=1.0, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(out, 0)
    np.testing.assert_array_equal(w, 0)
    np.testing.assert_array_equal(scaled_dot_product_attention(a, a, a, dropout_p=0.0), scaled_dot_product_attention(a, a, a))


# --------------------------------------------------------------------------- #
# blocked (online softmax) vs plain
# --------------------------------------------------------------------------- #
@HYPO
@given(
    batch=st.sampled_from([(), (1,), (2,), (2, 3)]),
    L_q=st.integers(1, 9),
    L_k=st.integers(1, 11),
    d_k=st.integers(1, 5),
    d_v=st.integers(1, 4),
    bq=st.integers(1, 12),
    bk=st.integers(1, 12),
    mask_kind=st.sampled_from(["none", "causal", "random", "random+empty-row", "all-false", "float", "float+bool"]),
    dtype=st.sampled_from([np.float64, np.float32]),
    magnitude=st.sampled_from([1.0, 30.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_blocked_equals_plain(batch, L_q, L_k, d_k, d_v, bq, bk, mask_kind, dtype, magnitude, seed):
    import warnings

    rng = np.random.default_rng(seed)
    q = (rng.standard_normal(batch + (L_q, d_k)) * magnitude).astype(dtype)
    k = (rng.standard_normal(batch + (L_k, d_k)) * magnitude).astype(dtype)
    v = rng.standard_normal(batch + (L_k, d_v)).astype(dtype)
    mask = None
    causal = mask_kind == "causal"
    if mask_kind.startswith("random"):
        mask = rng.random(batch + (L_q, L_k)) > 0.4
        if mask_kind.endswith("empty-row"):
            mask[..., rng.integers(L_q), :] = False
    elif mask_kind == "all-false":
        mask = np.zeros((L_q, L_k), bool)
    elif mask_kind.startswith("float"):  # an additive bias, with -inf where a boolean mask would block
        mask = (rng.standard_normal((L_q, L_k)) * 3).astype(dtype)
        if mask_kind.endswith("bool"):
            mask[rng.random((L_q, L_k)) > 0.6] = -np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MaskPolarityWarning)  # all-false is warned about: that is not under test here
        plain, w = attention_with_weights(q, k, v, mask, is_causal=causal)
        blocked = blocked_attention(q, k, v, mask, is_causal=causal, block_size=(bq, bk))
    assert blocked.dtype == dtype and blocked.shape == plain.shape
    if dtype is np.float64:
        np.testing.assert_allclose(blocked, plain, rtol=1e-12, atol=1e-12)
    else:
        # float32 rounds each score s to ~6e-8·|s| absolute, and the softmax turns an
        # absolute score error into a relative weight error: scale the bound by max |s|
        s_max = float(np.abs(q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2)).max()) / math.sqrt(d_k)
        s_max += float(np.abs(np.where(np.isinf(mask), 0, mask)).max()) if mask_kind.startswith("float") else 0.0
        np.testing.assert_allclose(blocked, plain, rtol=1e-5, atol=1e-6 * (1 + s_max) * float(np.abs(v).max()))
    if mask is not None:  # fully masked rows (every key False, or -inf) are exactly zero on both paths
        blocks = (mask == -np.inf) if mask.dtype != np.bool_ else ~mask
        empty = np.broadcast_to(blocks, w.shape).all(axis=-1)
        assert (blocked[empty] == 0).all() and (plain[empty] == 0).all() and (w[empty] == 0).all()


def test_blocked_path_never_forms_the_full_score_matrix():
    import tracemalloc

    L, d = 2048, 16
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((L, d)) for _ in range(3))
    tracemalloc.start()
    blocked_attention(q, k, v, block_size=128)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    full = L * L * 8  # one float64 [L, L] matrix: 32 MiB
    assert peak < full / 8, f"peak {peak} bytes is not bounded by the block size"


# --------------------------------------------------------------------------- #
# the multi-head layer
# --------------------------------------------------------------------------- #
def test_layer_hand_calculation_two_heads():
    # d_model 2, 2 heads of d_k = 1, identity projections: head 1 sees column 0,
    # head 2 column 1.  Worked by hand:
    #   head 1: q = k = v = [1, 0]  scores [[1, 0], [0, 0]]
    #           weights [[e, 1] / (e + 1), [1/2, 1/2]]   context [e/(e+1), 1/2]
    #   head 2: q = k = v = [0, 1]  scores [[0, 0], [0, 1]]
    #           weights [[1/2, 1/2], [1, e] / (1 + e)]   context [1/2, e/(1+e)]
    layer = MultiHeadAttention(np.eye(2), np.eye(2), np.eye(2), num_heads=2, batch_first=True)
    x = np.eye(2)[None]  # [1, 2, 2]
    out, w = layer(x, x, x, average_attn_weights=False)
    a, b = E / (E + 1), 1 / (E + 1)
    np.testing.assert_allclose(w[0, 0], [[a, b], [0.5, 0.5]], rtol=1e-15)
    np.testing.assert_allclose(w[0, 1], [[0.5, 0.5], [b, a]], rtol=1e-15)
    np.testing.assert_allclose(out[0], [[a, 0.5], [0.5, a]], rtol=1e-15)
    # the default, as PyTorch: weights averaged over the heads
    _, avg = layer(x, x, x)
    np.testing.assert_allclose(avg[0], [[(a + 0.5) / 2, (b + 0.5) / 2], [(0.5 + b) / 2, (0.5 + a) / 2]], rtol=1e-15)
    assert layer(x, x, x, need_weights=False)[1] is None
    # unbatched and sequence-first (batch_first=False, PyTorch's default) layouts give the same numbers
    seq_first = MultiHeadAttention(np.eye(2), np.eye(2), np.eye(2), num_heads=2)
    x2 = np.eye(2)
    np.testing.assert_allclose(seq_first(x2, x2, x2)[0], out[0], rtol=1e-15)
    xs = x.transpose(1, 0, 2)  # [L, B, E]
    o_s, w_s = seq_first(xs, xs, xs)
    assert o_s.shape == (2, 1, 2) and w_s.shape == (1, 2, 2)
    np.testing.assert_allclose(o_s[:, 0], out[0], rtol=1e-15)


def test_layer_key_padding_mask_true_is_padding_and_attn_mask_true_is_blocked():
    # one head, d = 1, q = k = 0 so every allowed key gets the same weight; v = [1, 2, 4]
    layer = MultiHeadAttention(np.zeros((1, 1)), np.zeros((1, 1)), np.eye(1), num_heads=1, batch_first=True)
    x = np.array([[[1.0], [2.0], [4.0]]])  # [1, 3, 1]
    out, _ = layer(x, x, x, key_padding_mask=np.array([[False, False, True]]))
    np.testing.assert_allclose(out[0, :, 0], [1.5] * 3)  # key 3 is padding: mean of 1 and 2
    out, _ = layer(x, x, x, attn_mask=~causal_mask(3, 3), is_causal=True)
    np.testing.assert_allclose(out[0, :, 0], [1, 1.5, 7 / 3])  # query i sees keys j <= i
    out, w = layer(x, x, x, attn_mask=np.array([[0.0, math.log(3), -np.inf]] * 3))  # float: added
    np.testing.assert_allclose(w[0], [[0.25, 0.75, 0]] * 3)
    np.testing.assert_allclose(out[0, :, 0], [1.75] * 3)


def _per_head_reference(x, x_k, x_v, wq, wk, wv, bq, bk, bv, wo, bo, H, allowed, bias):
    """Attention one batch element and one head at a time, with explicit loops and
    the softmax written out - the hand calculation, as an independent oracle.
    ``allowed`` [B, H, L, S] (True = may attend), ``bias`` [B, H, L, S] added to the scores."""
    B, L, _ = x.shape
    S = x_k.shape[1]
    d_k, d_v = wq.shape[1] // H, wv.shape[1] // H
    out = np.zeros((B, L, wo.shape[1] if wo is not None else H * d_v))
    weights = np.zeros((B, H, L, S))
    for b in range(B):
        heads = []
        for h in range(H):
            cq, cv = slice(h * d_k, (h + 1) * d_k), slice(h * d_v, (h + 1) * d_v)
            Q = x[b] @ wq[:, cq] + (bq[cq] if bq is not None else 0)
            K = x_k[b] @ wk[:, cq] + (bk[cq] if bk is not None else 0)
            V = x_v[b] @ wv[:, cv] + (bv[cv] if bv is not None else 0)
            ctx = np.zeros((L, d_v))
            for i in range(L):
                s = {j: float(Q[i] @ K[j]) / math.sqrt(d_k) + float(bias[b, h, i, j])
                     for j in range(S) if allowed[b, h, i, j]}
                s = {j: t for j, t in s.items() if t != -np.inf}
                if not s:
                    continue  # no key: zero weights, zero context
                top = max(s.values())
                e = {j: math.exp(t - top) for j, t in s.items()}
                for j in e:
                    weights[b, h, i, j] = e[j] / sum(e.values())
                ctx[i] = sum(weights[b, h, i, j] * V[j] for j in e)
            heads.append(ctx)
        merged = np.concatenate(heads, axis=1)
        out[b] = merged @ wo if wo is not None else merged
        if bo is not None:
            out[b] += bo
    return out, weights


@HYPO
@given(
    B=st.integers(1, 3),
    L=st.integers(1, 5),
    S=st.integers(1, 6),
    H=st.integers(1, 3),
    d_k=st.integers(1, 3),
    d_v=st.integers(1, 3),
    d_model=st.integers(1, 5),
    kdim=st.integers(1, 5),
    vdim=st.integers(1, 5),
    inputs=st.sampled_from(["self", "cross", "key-and-value"]),
    layout=st.sampled_from(["batch_first", "seq_first", "unbatched"]),
    biases=st.booleans(),
    out_proj=st.booleans(),
    attn=st.sampled_from(["none", "causal", "causal-hint", "bool-2d", "bool-3d", "float-2d", "float-3d"]),
    padding=st.sampled_from(["none", "bool", "float"]),
    need_weights=st.booleans(),
    average=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_layer_matches_per_head_loops(B, L, S, H, d_k, d_v, d_model, kdim, vdim, inputs, layout, biases, out_proj,
                                      attn, padding, need_weights, average, seed):
    rng = np.random.default_rng(seed)
    if inputs == "self":
        S, kdim, vdim = L, d_model, d_model
    elif inputs == "cross":
        vdim = kdim
    if layout == "unbatched":
        B = 1
    r = lambda *s: rng.standard_normal(s)
    wq, wk, wv = r(d_model, H * d_k), r(kdim, H * d_k), r(vdim, H * d_v)
    bq, bk, bv = (r(H * d_k), r(H * d_k), r(H * d_v)) if biases else (None, None, None)
    wo, bo = (r(H * d_v, 4), r(4)) if out_proj else (None, None)
    x = r(B, L, d_model)
    x_k = x if inputs == "self" else r(B, S, kdim)
    x_v = x_k if inputs != "key-and-value" else r(B, S, vdim)

    # PyTorch's masks, and what they mean written out here: allowed (True = may attend) and bias, [B, H, L, S]
    allowed, bias = np.ones((B, H, L, S), bool), np.zeros((B, H, L, S))
    attn_mask = kpm = None
    is_causal = attn == "causal-hint"
    if attn in ("causal", "causal-hint"):
        attn_mask = ~causal_mask(L, S)  # True = blocked
        allowed &= causal_mask(L, S)
    elif attn != "none":  # [L, S], or [B·H, L, S] with entry b·H + h for batch b, head h
        shape = (L, S) if attn.endswith("2d") else (B * H, L, S)
        if attn.startswith("bool"):
            attn_mask = rng.random(shape) > 0.7  # True = blocked
            allowed &= ~attn_mask if attn.endswith("2d") else ~attn_mask.reshape(B, H, L, S)
        else:
            attn_mask = rng.standard_normal(shape)
            attn_mask[rng.random(shape) > 0.8] = -np.inf
            bias += attn_mask if attn.endswith("2d") else attn_mask.reshape(B, H, L, S)
    if padding == "bool":
        kpm = rng.random((B, S)) > 0.7  # True = padding
        allowed &= ~kpm[:, None, None, :]
    elif padding == "float":
        kpm = rng.standard_normal((B, S))
        bias += kpm[:, None, None, :]

    layer = MultiHeadAttention(wq, wk, wv, H, b_q=bq, b_k=bk, b_v=bv, w_o=wo, b_o=bo, batch_first=(layout == "batch_first"))
    def lay(a):
        return a[0] if layout == "unbatched" else (a.transpose(1, 0, 2) if layout == "seq_first" else a)

    args = [lay(x)] * 3 if inputs == "self" else [lay(x), lay(x_k), lay(x_k) if inputs == "cross" else lay(x_v)]
    if inputs == "cross":
        args[2] = args[1]  # the same array object: key is value
    if layout == "unbatched":
        kpm = None if kpm is None else kpm[0]
        if attn.endswith("3d"):
            attn_mask = attn_mask.reshape(H, L, S)
    refused = (attn_mask is not None and attn_mask.dtype == bool and attn_mask.all()
               or attn.startswith("bool") and L > 1 and S > 1 and np.array_equal(
                   attn_mask, np.broadcast_to(causal_mask(L, S), attn_mask.shape))
               or padding == "bool" and np.asarray(kpm).all())
    call = lambda: layer(*args, key_padding_mask=kpm, need_weights=need_weights, attn_mask=attn_mask,
                         average_attn_weights=average, is_causal=is_causal)
    if refused:  # a mask that can only be meant in the other polarity
        with pytest.raises(ValueError, match="True = (blocked|padding)|polarity"):
            call()
        return
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # mixed bool/float masks warn, as in PyTorch
        out, w = call()
    ref_out, ref_w = _per_head_reference(x, x_k, x_v, wq, wk, wv, bq, bk, bv, wo, bo, H, allowed, bias)
    np.testing.assert_allclose(out, lay(ref_out), rtol=1e-10, atol=1e-10)
    if not need_weights:
        assert w is None
        return
    ref_w = ref_w.mean(axis=1) if average else ref_w
    np.testing.assert_allclose(w, ref_w[0] if layout == "unbatched" else ref_w, rtol=1e-10, atol=1e-12)


def test_layer_fully_masked_row_outputs_the_output_bias():
    rng = np.random.default_rng(2)
    layer = MultiHeadAttention(rng.standard_normal((4, 4)), rng.standard_normal((4, 4)),
                               rng.standard_normal((4, 4)), 2,
                               w_o=rng.standard_normal((4, 3)), b_o=np.array([1.0, 2.0, 3.0]), batch_first=True)
    x = rng.standard_normal((2, 3, 4))
    kpm = np.array([[False, False, False], [True, True, True]])  # batch 1: nothing to attend to
    out, w = layer(x, x, x, key_padding_mask=kpm, average_attn_weights=False)
    np.testing.assert_array_equal(w[1], 0)
    np.testing.assert_array_equal(out[1], np.tile([1.0, 2.0, 3.0], (3, 1)))
    assert np.isfinite(out).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_preserves_dtype(dtype):
    rng = np.random.default_rng(0)
    w = [rng.standard_normal((4, 4)).astype(dtype) for _ in range(4)]
    layer = MultiHeadAttention(w[0], w[1], w[2], 2, w_o=w[3], batch_first=True)
    assert layer.dtype == dtype and layer.w_qkv.dtype == dtype
    x = rng.standard_normal((1, 3, 4)).astype(dtype)
    out, weights = layer(x, x, x, attn_mask=~causal_mask(3, 3))
    assert out.dtype == dtype and weights.dtype == dtype
    kv = rng.standard_normal((1, 2, 4)).astype(dtype)
    out, _ = layer(x, kv, kv)
    assert out.dtype == dtype


def test_layer_weights_are_read_only_copies():
    w = np.eye(2)
    layer = MultiHeadAttention(w, w, w, 1)
    w[0, 0] = 5.0
    assert layer.w_q[0, 0] == 1.0
    with pytest.raises(ValueError):
        layer.w_q[0, 0] = 2.0


def test_layer_shape_errors():
    layer = MultiHeadAttention(np.ones((4, 4)), np.ones((3, 4)), np.ones((5, 4)), 2, batch_first=True)  # kdim 3, vdim 5
    assert (layer.kdim, layer.vdim, layer.w_qkv) == (3, 5, None)
    x = np.ones((2, 5, 4))
    k, v = np.ones((2, 6, 3)), np.ones((2, 6, 5))
    layer(x, k, v)  # fits
    with pytest.raises(ShapeError, match="kdim"):
        layer(x, x, x)  # K needs width 3, V width 5: self-attention is impossible
    with pytest.raises(ShapeError, match="kdim"):
        layer(x, k, k)
    with pytest.raises(ShapeError, match="batch"):
        layer(x, np.ones((3, 6, 3)), np.ones((3, 6, 5)))  # batch differs
    with pytest.raises(ShapeError, match="key and value"):
        layer(x, k, np.ones((2, 7, 5)))  # S differs
    with pytest.raises(ShapeError, match="d_model"):
        layer(np.ones((2, 5, 3)), k, v)
    with pytest.raises(ShapeError, match="2-D too"):
        layer(np.ones((5, 4)), k, v)  # unbatched query, batched key
    with pytest.raises(ShapeError, match="3-D"):
        layer(np.ones((1, 2, 5, 4)), k, v)
    with pytest.raises(ShapeError, match="key_padding_mask"):
        layer(x, k, v, key_padding_mask=np.zeros((2, 5), bool))
    with pytest.raises(ShapeError, match="attn_mask"):
        layer(x, k, v, attn_mask=np.zeros((5, 5), bool))
    with pytest.raises(ShapeError, match="attn_mask"):
        layer(x, k, v, attn_mask=np.zeros((2, 5, 6), bool))  # [B, L, S]: PyTorch wants [B·H, L, S]
    with pytest.raises(ShapeError):
        MultiHeadAttention(np.ones((4, 5)), np.ones((4, 5)), np.ones((4, 4)), 2)  # 5 columns, 2 heads
    with pytest.raises(ShapeError):
        MultiHeadAttention(np.ones((4, 4)), np.ones((4, 2)), np.ones((4, 4)), 2)  # q, k widths differ
    with pytest.raises(ShapeError):
        MultiHeadAttention(np.ones((4, 4)), np.ones((4, 4)), np.ones((4, 4)), 2, w_o=np.ones((3, 4)))
    with pytest.raises(ShapeError):
        MultiHeadAttention(np.ones((4, 4)), np.ones((4, 4)), np.ones((4, 4)), 2, b_q=np.ones(3))
    with pytest.raises(ValueError):
        MultiHeadAttention(np.ones((4, 4)), np.ones((4, 4)), np.ones((4, 4)), 0)


def test_from_torch_layout_reads_rows_as_output_features():
    # in_proj_weight [3E, E]: rows 0..E-1 are W_Q as nn.Linear stores it (x @ W.T)
    E_, H = 4, 2
    rng = np.random.default_rng(5)
    ipw, ipb = rng.standard_normal((3 * E_, E_)), rng.standard_normal(3 * E_)
    opw, opb = rng.standard_normal((E_, E_)), rng.standard_normal(E_)
    layer = MultiHeadAttention.from_torch_layout(ipw, ipb, opw, opb, H, batch_first=True)
    assert layer.batch_first and not MultiHeadAttention.from_torch_layout(ipw, ipb, opw, opb, H).batch_first
    np.testing.assert_array_equal(layer.w_q, ipw[:E_].T)
    np.testing.assert_array_equal(layer.w_k, ipw[E_:2 * E_].T)
    np.testing.assert_array_equal(layer.b_v, ipb[2 * E_:])
    np.testing.assert_array_equal(layer.w_o, opw.T)
    x = rng.standard_normal((1, 3, E_))
    q = x[0] @ ipw[:E_].T + ipb[:E_]  # nn.Linear by hand
    np.testing.assert_allclose(run_trace_values(layer, x)["permute"][0, 0].transpose(1, 0, 2).reshape(3, E_), q)
    with pytest.raises(ShapeError):
        MultiHeadAttention.from_torch_layout(np.ones((4, 4)), None, None, None, 2)
    with pytest.raises(ShapeError):
        MultiHeadAttention.from_torch_layout(ipw, np.ones(5), opw, opb, 2)
    with pytest.raises(ShapeError):
        MultiHeadAttention.from_torch_layout(ipw, ipb, opw, opb, 3)  # 4 does not split into 3
    with pytest.raises(ShapeError):
        MultiHeadAttention.from_torch_layout(None, None, None, None, 2)


def run_trace_values(layer, x, x_kv=None, allowed=None):
    """The forward's named intermediate arrays (copies), in order; ``allowed`` True = may attend."""
    seen = {}
    kv = x if x_kv is None else x_kv
    layer._forward(x, kv, kv, allowed, None, lambda name, a: seen.setdefault(name, a.copy()))
    return seen


# --------------------------------------------------------------------------- #
# the shape trace
# --------------------------------------------------------------------------- #
def _eval_dim(expr, sizes):
    n = 1
    for f in expr.split("·"):
        n *= int(f) if f.isdigit() else sizes[f]
    return n


@HYPO
@given(
    B=st.integers(1, 3), L=st.integers(1, 4), L_k=st.integers(1, 5), H=st.integers(1, 3),
    d_k=st.integers(1, 3), d_v=st.integers(1, 3), d_kv=st.integers(1, 4),
    cross=st.booleans(), masked=st.booleans(), out_proj=st.booleans(),
)
def test_trace_is_what_forward_does(B, L, L_k, H, d_k, d_v, d_kv, cross, masked, out_proj):
    d_model = 3
    if not cross:
        L_k, d_kv = L, d_model
    rng = np.random.default_rng(0)
    layer = MultiHeadAttention(
        rng.standard_normal((d_model, H * d_k)), rng.standard_normal((d_kv, H * d_k)),
        rng.standard_normal((d_kv, H * d_v)), H, w_o=rng.standard_normal((H * d_v, 2)) if out_proj else None,
        batch_first=True,
    )
    trace = layer.shape_trace(B, L, L_k if cross else None, cross=cross, masked=masked)
    seen = run_trace_values(
        layer, rng.standard_normal((B, L, d_model)), rng.standard_normal((B, L_k, d_kv)) if cross else None,
        allowed=causal_mask(L, L_k) if masked else None,
    )
    assert [s.name for s in trace] == list(seen)
    assert [s.shape for s in trace] == [a.shape for a in seen.values()]
    sizes = {"B": B, "L": L, "L_k": L_k, "D": d_model, "D_kv": d_kv, "H": H,
             "d_k": d_k, "d_v": d_v, "d_out": layer.d_out}
    for step in trace:
        assert step.shape == tuple(_eval_dim(d, sizes) for d in step.dims), step
        assert step.note
    fused = not cross and d_k == d_v
    assert ("permute" in seen) == fused
    assert ("masked" in seen) == masked


def test_trace_of_production_self_attention_reads_as_documented():
    layer = MultiHeadAttention(np.ones((512, 512)), np.ones((512, 512)), np.ones((512, 512)), 8,
                               w_o=np.ones((512, 512)))
    trace = layer.shape_trace(4, 128, masked=True)
    assert all(isinstance(s, TraceStep) for s in trace)
    got = [(s.name, s.symbolic, s.concrete) for s in trace]
    assert got == [
        ("x", "[B, L, D]", "[4, 128, 512]"),
        ("qkv", "[B, L, 3·H·d_k]", "[4, 128, 1536]"),
        ("view", "[B, L, 3, H, d_k]", "[4, 128, 3, 8, 64]"),
        ("permute", "[3, B, H, L, d_k]", "[3, 4, 8, 128, 64]"),
        ("scores", "[B, H, L, L]", "[4, 8, 128, 128]"),
        ("masked", "[B, H, L, L]", "[4, 8, 128, 128]"),
        ("weights", "[B, H, L, L]", "[4, 8, 128, 128]"),
        ("context", "[B, H, L, d_v]", "[4, 8, 128, 64]"),
        ("transpose", "[B, L, H, d_v]", "[4, 128, 8, 64]"),
        ("merge", "[B, L, H·d_v]", "[4, 128, 512]"),
        ("out_proj", "[B, L, d_out]", "[4, 128, 512]"),
    ]
    assert "permute(2, 0, 3, 1, 4)" in trace[3].note
    with pytest.raises(ValueError):
        layer.shape_trace(1, 3, cross=True)  # L_k missing
    with pytest.raises(ValueError):
        layer.shape_trace(1, 3, 4)  # self-attention has L_k = L


# --------------------------------------------------------------------------- #
# exercises
# --------------------------------------------------------------------------- #
def _hand_exercise(**changes) -> Exercise:
    """Two heads of d_k = 1 over identity-like weights (the hand calculation above)."""
    fields = {
        "id": "hand-2-heads",
        "title": "two heads by hand",
        "x": F([1, 0], [0, 1]),
        "heads": (
            Head(w_q=F([1], [0]), w_k=F([1], [0]), w_v=F([1], [0])),
            Head(w_q=F([0], [1]), w_k=F([0], [1]), w_v=F([0], [1])),
        ),
    }
    fields.update(changes)
    return Exercise(**fields)


def test_run_exercise_hand_values():
    run = run_exercise(_hand_exercise())
    a, b = E / (E + 1), 1 / (E + 1)
    np.testing.assert_allclose(run.weights, [[[a, b], [0.5, 0.5]], [[0.5, 0.5], [b, a]]], rtol=1e-15)
    np.testing.assert_allclose(run.output, [[a, 0.5], [0.5, a]], rtol=1e-15)
    np.testing.assert_array_equal(run.scores, [[[1, 0], [0, 0]], [[0, 0], [0, 1]]])
    np.testing.assert_array_equal(run.q, [[[1], [0]], [[0], [1]]])
    np.testing.assert_allclose(run.context, run.output)  # no w_o: output = merged heads
    assert run.output.dtype == np.float64


def test_run_exercise_with_fractions_biases_w_o_and_causal_mask():
    half = Fraction(1, 2)
    ex = _hand_exercise(
        heads=(
            Head(w_q=F([1], [0]), w_k=F([1], [0]), w_v=F([1], [0]), b_v=(half,)),
            Head(w_q=F([0], [1]), w_k=F([0], [1]), w_v=F([0], [1])),  # no bias: zeros
        ),
        w_o=F([2, 0], [0, 1]),
        b_o=F([1, "-1/3"])[0],
        mask_kind="causal",
        mask=causal(2, 2),
    )
    run = run_exercise(ex)
    # causal: row 0 sees only key 0; row 1 sees both (the unmasked values above)
    a = E / (E + 1)
    w1 = np.array([[[1, 0], [0.5, 0.5]], [[1, 0], [1 - a, a]]])
    np.testing.assert_allclose(run.weights, w1, rtol=1e-15)
    v1, v2 = np.array([1.5, 0.5]), np.array([0.0, 1.0])  # v of head 1 with b_v = 1/2; head 2
    ctx = np.stack([w1[0] @ v1, w1[1] @ v2], axis=1)
    np.testing.assert_allclose(run.context, ctx, rtol=1e-15)
    np.testing.assert_allclose(run.output, ctx @ [[2, 0], [0, 1]] + [1, -1 / 3], rtol=1e-15)
    # mask_kind "causal" without the matrix means the same mask
    again = run_exercise(_hand_exercise(heads=ex.heads, w_o=ex.w_o, b_o=ex.b_o, mask_kind="causal"))
    np.testing.assert_array_equal(again.output, run.output)


def test_run_exercise_float32():
    assert run_exercise(_hand_exercise(), dtype=np.float32).output.dtype == np.float32


def test_unequal_heads_are_refused_with_a_shape_error():
    ex = _hand_exercise(
        heads=(
            Head(w_q=F([1], [0]), w_k=F([1], [0]), w_v=F([1], [0])),
            Head(w_q=F([0, 1], [1, 0]), w_k=F([0, 1], [1, 0]), w_v=F([0], [1])),  # d_k = 2
        )
    )
    with pytest.raises(ShapeError, match="differ in size"):
        layer_of(ex)
    with pytest.raises(ShapeError):
        run_exercise(ex)


def test_exercise_trace_names_cross_attention_steps():
    ex = _hand_exercise(
        x_kv=F([1, 0, 0], [0, 1, 0], [0, 0, 1]),
        heads=(
            Head(w_q=F([1], [0]), w_k=F([1], [0], [0]), w_v=F([1], [0], [0])),
            Head(w_q=F([0], [1]), w_k=F([0], [1], [0]), w_v=F([0], [1], [0])),
        ),
        key_padding=(True, True, False),
    )
    trace = exercise_trace(ex)
    names = [s.name for s in trace]
    assert names == ["x", "x_kv", "q", "k", "v", "q_view", "k_view", "v_view", "q_heads", "k_heads",
                     "v_heads", "scores", "masked", "weights", "context", "transpose", "merge"]
    byname = {s.name: s for s in trace}
    assert byname["scores"].symbolic == "[B, H, L, L_k]" and byname["scores"].shape == (1, 2, 2, 3)
    assert byname["x_kv"].shape == (1, 3, 3)
    run = run_exercise(ex)
    np.testing.assert_array_equal(run.weights[:, :, 2], 0)  # the padding key gets nothing
    assert run.weights.shape == (2, 2, 3)


# --------------------------------------------------------------------------- #
# the package stays torch-free; the parity gate fails instead of skipping
# --------------------------------------------------------------------------- #
def test_numeric_imports_neither_torch_nor_sympy():
    code = "import sys, tutor.numeric; bad = {'torch', 'sympy'} & set(sys.modules); sys.exit(str(bad) if bad else 0)"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture
def no_torch(tmp_path):
    """A PYTHONPATH under which ``import torch`` fails, as on a machine without it."""
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "torch.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    return str(fake)


@pytest.mark.parametrize("required, expect_fail", [("1", True), ("", False)])
def test_parity_tests_fail_without_torch_only_when_required(no_torch, required, expect_fail):
    env = dict(os.environ, PYTHONPATH=no_torch, ATTN_TUTOR_REQUIRE_TORCH=required)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_torch_parity.py"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    text = done.stdout + done.stderr
    if expect_fail:
        assert done.returncode != 0, text
        assert "ATTN_TUTOR_REQUIRE_TORCH" in text
    else:
        assert done.returncode in (0, 5), text  # 5: the whole module skipped, nothing collected
        assert "SKIPPED" in text and "torch==2.13.0" in text and "passed" not in text


# --- the thread-pool path (large batches) -------------------------------------------

def test_large_batches_run_on_threads_and_match_the_single_threaded_result(monkeypatch):
    """Batch slices of a large problem run on a thread pool; results equal one thread's."""
    from tutor import numeric
    from tutor.numeric import _common

    monkeypatch.setattr(_common, "_workers", lambda: 2)  # a pool even on a one-core machine
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((4, 2, 256, 16)) for _ in range(3))  # 4·2·256·256 scores: above the threshold
    mask = rng.random((4, 1, 256, 256)) > 0.2
    mask[0, 0, 3] = False  # a fully masked row on the threaded path too
    assert 4 * 2 * 256 * 256 >= _common._PARALLEL_MIN_SCORES
    calls = []
    real = _common._in_parallel
    monkeypatch.setattr(_common, "_in_parallel", lambda n, work, **kw: (calls.append(n), real(n, work, **kw)))
    out_t, w_t = numeric.attention_with_weights(q, k, v, mask)
    blk_t = numeric.blocked_attention(q, k, v, mask, block_size=64)
    assert calls == [8, 8]
    monkeypatch.setattr(_common, "_PARALLEL_MIN_SCORES", 1 << 60)  # now everything runs in one call
    out_1, w_1 = numeric.attention_with_weights(q, k, v, mask)
    blk_1 = numeric.blocked_attention(q, k, v, mask, block_size=64)
    np.testing.assert_allclose(out_t, out_1, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(w_t, w_1, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(blk_t, blk_1, rtol=1e-12, atol=1e-12)
    assert np.all(w_t[0, :, 3] == 0) and np.all(out_t[0, :, 3] == 0)
    # and independently of the core: a plain float64 softmax written here
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / 4.0
    s = np.where(mask, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m[np.isinf(m)] = 0
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    z[z == 0] = 1
    np.testing.assert_allclose(w_t, e / z, rtol=1e-12, atol=1e-12)


def test_a_worker_error_reaches_the_caller(monkeypatch):
    from tutor.numeric import _common

    monkeypatch.setattr(_common, "_workers", lambda: 2)  # a pool even on a one-core machine
    def work(a, b):
        if a > 0:
            raise ValueError("boom in a worker")

    with pytest.raises(ValueError, match="boom in a worker"):
        _common._in_parallel(4, work)
