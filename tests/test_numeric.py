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

from tutor.errors import ShapeError
from tutor.exercise.record import Exercise, Head, causal
from tutor.numeric import (
    DEFAULT_BLOCK_SIZE,
    MultiHeadAttention,
    TraceStep,
    causal_mask,
    combine_masks,
    exercise_trace,
    run_exercise,
    scaled_dot_product_attention,
    softmax,
)

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


def test_combine_masks_ands_causal_with_key_padding():
    T, f = True, False
    padding = np.array([[T, T, f], [T, T, T]])  # batch 0: key 3 is padding (False = padding)
    got = combine_masks(causal_mask(3, 3), padding)
    assert got.shape == (2, 1, 3, 3)
    np.testing.assert_array_equal(got[0, 0], [[T, f, f], [T, T, f], [T, T, f]])
    np.testing.assert_array_equal(got[1, 0], [[T, f, f], [T, T, f], [T, T, T]])


def test_combine_masks_shapes_alone():
    assert combine_masks() is None
    assert combine_masks(causal_mask(2, 3)).shape == (1, 1, 2, 3)
    assert combine_masks(np.ones((4, 2, 3), bool)).shape == (4, 1, 2, 3)
    assert combine_masks(None, np.ones((4, 3), bool)).shape == (4, 1, 1, 3)


def test_combine_masks_errors():
    with pytest.raises(ShapeError):
        combine_masks(causal_mask(2, 3), np.ones((2, 4), bool))  # L_k 3 vs 4
    with pytest.raises(ShapeError):
        combine_masks(np.ones((2, 2, 3, 3), bool))  # 4-D is not a mask form here
    with pytest.raises(ShapeError):
        combine_masks(None, np.ones(3, bool))  # key padding needs the batch axis
    with pytest.raises(TypeError):
        combine_masks(np.ones((2, 2)))  # a float mask (additive) is not accepted


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
    out, weights = scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(weights, w, rtol=1e-15)
    np.testing.assert_allclose(out, w @ v, rtol=1e-15)
    # an explicit scale replaces 1/sqrt(d_k): scale 1 gives softmax([1, 0])
    _, weights = scaled_dot_product_attention(q, k, v, scale=1.0)
    np.testing.assert_allclose(weights, [[E / (E + 1), 1 / (E + 1)]], rtol=1e-15)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
@pytest.mark.parametrize("block_size", [None, 1, 2, DEFAULT_BLOCK_SIZE])
def test_shared_vectors(case, block_size):
    q, k, v = (np.array(case[n], dtype=np.float64) for n in ("q", "k", "v"))
    mask = np.array(case["mask"]) if "mask" in case else None
    if case.get("causal"):
        mask = causal_mask(q.shape[0], k.shape[0])
    out, weights = scaled_dot_product_attention(q, k, v, mask, scale=case.get("scale"), block_size=block_size)
    np.testing.assert_allclose(out, case["output"], rtol=1e-12, atol=1e-15)
    if block_size is None:
        np.testing.assert_allclose(weights, case["weights"], rtol=1e-12, atol=1e-15)
    else:
        assert weights is None


def test_fully_masked_row_gives_zeros_and_no_warning():
    q = np.ones((3, 2))
    k = np.ones((4, 2))
    v = np.arange(8.0).reshape(4, 2)
    mask = np.array([[True] * 4, [False] * 4, [True, False, False, False]])
    with np.errstate(all="raise"):
        out, w = scaled_dot_product_attention(q, k, v, mask)
        out_b, _ = scaled_dot_product_attention(q, k, v, mask, block_size=2)
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
        out, w = scaled_dot_product_attention(q, k, v, scale=1.0)
        assert np.isfinite(out).all() and np.isfinite(w).all()
        np.testing.assert_array_equal(w, np.array([[1, 0]], dtype=dtype))  # the gap is astronomically large
        for bs in (1, 2):
            out_b, _ = scaled_dot_product_attention(q, k, v, scale=1.0, block_size=bs)
            np.testing.assert_array_equal(out_b, out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sdpa_preserves_dtype(dtype):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 4)).astype(dtype) for _ in range(3))
    out, w = scaled_dot_product_attention(q, k, v)
    assert out.dtype == dtype and w.dtype == dtype
    assert scaled_dot_product_attention(q, k, v, block_size=2)[0].dtype == dtype


def test_sdpa_promotes_ints_and_mixed_dtypes():
    q = np.array([[1, 0]])
    assert scaled_dot_product_attention(q, q, q)[0].dtype == np.float64
    q32 = q.astype(np.float32)
    assert scaled_dot_product_attention(q32, q32, q.astype(np.float64))[0].dtype == np.float64


def test_sdpa_broadcasts_batch_axes_and_mask():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 3, 4, 5))  # [B, H, L_q, d_k]
    k = rng.standard_normal((2, 1, 6, 5))  # shared over heads
    v = rng.standard_normal((6, 7))  # shared over everything
    mask = rng.random((2, 1, 4, 6)) > 0.3  # [B, 1, L_q, L_k]
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert out.shape == (2, 3, 4, 7) and w.shape == (2, 3, 4, 6)
    for b in range(2):  # each slice on its own, unbatched
        for h in range(3):
            o1, w1 = scaled_dot_product_attention(q[b, h], k[b, 0], v, mask[b, 0])
            np.testing.assert_allclose(out[b, h], o1, rtol=1e-14, atol=1e-15)
            np.testing.assert_allclose(w[b, h], w1, rtol=1e-14, atol=1e-15)
    # a mask with batch axes that q, k and v lack
    m2 = rng.random((3, 4, 6)) > 0.5
    out2, w2 = scaled_dot_product_attention(q[0, 0], k[0, 0], v, m2)
    assert out2.shape == (3, 4, 7) and w2.shape == (3, 4, 6)
    ob, _ = scaled_dot_product_attention(q[0, 0], k[0, 0], v, m2, block_size=3)
    np.testing.assert_allclose(ob, out2, rtol=1e-12, atol=1e-14)


def test_sdpa_shape_errors():
    a = np.ones((3, 4))
    with pytest.raises(ShapeError, match="d_k"):
        scaled_dot_product_attention(a, np.ones((3, 5)), np.ones((3, 2)))
    with pytest.raises(ShapeError, match="L_k"):
        scaled_dot_product_attention(a, np.ones((3, 4)), np.ones((2, 2)))
    with pytest.raises(ShapeError, match="broadcast"):
        scaled_dot_product_attention(np.ones((2, 3, 4)), np.ones((3, 3, 4)), np.ones((3, 3, 4)))
    with pytest.raises(ShapeError, match="mask"):
        scaled_dot_product_attention(a, a, a, np.ones((3, 2), bool))
    with pytest.raises(ShapeError):
        scaled_dot_product_attention(np.ones(4), a, a)
    with pytest.raises(TypeError):
        scaled_dot_product_attention(a, a, a, np.ones((3, 3)))  # not boolean
    with pytest.raises(ValueError):
        scaled_dot_product_attention(a, a, a, dropout_p=1.5)
    for bad in (0, -1, (2,), (2, 0), True, 1.5):
        with pytest.raises(ValueError):
            scaled_dot_product_attention(a, a, a, block_size=bad)


def test_shape_error_is_a_value_error_and_a_tutor_error():
    from tutor.errors import TutorError

    with pytest.raises(ValueError) as info:
        scaled_dot_product_attention(np.ones((1, 2)), np.ones((1, 3)), np.ones((1, 1)))
    assert isinstance(info.value, TutorError)


# --------------------------------------------------------------------------- #
# dropout
# --------------------------------------------------------------------------- #
def test_dropout_is_inverted_and_uses_the_generator():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 5, 3)) for _ in range(3))
    _, w = scaled_dot_product_attention(q, k, v)
    p = 0.4
    out, wd = scaled_dot_product_attention(q, k, v, dropout_p=p, rng=np.random.default_rng(7))
    keep = np.random.default_rng(7).random(w.shape) >= p  # the documented draw
    np.testing.assert_allclose(wd, w * keep / (1 - p), rtol=1e-15)
    np.testing.assert_allclose(out, wd @ v, rtol=1e-14)
    # one block covering everything draws the same keep mask as the plain path
    ob, _ = scaled_dot_product_attention(q, k, v, dropout_p=p, rng=np.random.default_rng(7), block_size=8)
    np.testing.assert_allclose(ob, out, rtol=1e-12)


def test_dropout_keeps_the_expectation():
    q = np.zeros((1, 4))
    k = np.zeros((8, 4))
    v = np.eye(8)
    rng = np.random.default_rng(3)
    outs = [scaled_dot_product_attention(q, k, v, dropout_p=0.5, rng=rng)[0] for _ in range(4000)]
    # uniform weights 1/8; E[dropout(w)] = w; the std of the mean is ~ (1/8)/sqrt(4000) = 0.002
    np.testing.assert_allclose(np.mean(outs, axis=0), np.full((1, 8), 1 / 8), atol=0.01)


def test_dropout_one_zeroes_everything_and_zero_is_identity():
    a = np.eye(3)
    out, w = scaled_dot_product_attention(a, a, a, dropout_p=1.0, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(out, 0)
    np.testing.assert_array_equal(w, 0)
    np.testing.assert_array_equal(
        scaled_dot_product_attention(a, a, a, dropout_p=0.0)[0], scaled_dot_product_attention(a, a, a)[0]
    )


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
    mask_kind=st.sampled_from(["none", "causal", "random", "random+empty-row", "all-false"]),
    dtype=st.sampled_from([np.float64, np.float32]),
    magnitude=st.sampled_from([1.0, 30.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_blocked_equals_plain(batch, L_q, L_k, d_k, d_v, bq, bk, mask_kind, dtype, magnitude, seed):
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal(batch + (L_q, d_k)) * magnitude).astype(dtype)
    k = (rng.standard_normal(batch + (L_k, d_k)) * magnitude).astype(dtype)
    v = rng.standard_normal(batch + (L_k, d_v)).astype(dtype)
    mask = None
    if mask_kind == "causal":
        mask = causal_mask(L_q, L_k)
    elif mask_kind.startswith("random"):
        mask = rng.random(batch + (L_q, L_k)) > 0.4
        if mask_kind.endswith("empty-row"):
            mask[..., rng.integers(L_q), :] = False
    elif mask_kind == "all-false":
        mask = np.zeros((L_q, L_k), bool)
    plain, w = scaled_dot_product_attention(q, k, v, mask)
    blocked, none = scaled_dot_product_attention(q, k, v, mask, block_size=(bq, bk))
    assert none is None and blocked.dtype == dtype and blocked.shape == plain.shape
    if dtype is np.float64:
        np.testing.assert_allclose(blocked, plain, rtol=1e-12, atol=1e-12)
    else:
        # float32 rounds each score s to ~6e-8·|s| absolute, and the softmax turns an
        # absolute score error into a relative weight error: scale the bound by max |s|
        s_max = float(np.abs(q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2)).max()) / math.sqrt(d_k)
        np.testing.assert_allclose(blocked, plain, rtol=1e-5, atol=1e-6 * (1 + s_max) * float(np.abs(v).max()))
    if mask is not None:  # fully masked rows are exactly zero on both paths
        empty = ~np.broadcast_to(mask, w.shape).any(axis=-1)
        assert (blocked[empty] == 0).all() and (plain[empty] == 0).all()


def test_blocked_path_never_forms_the_full_score_matrix():
    import tracemalloc

    L, d = 2048, 16
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((L, d)) for _ in range(3))
    tracemalloc.start()
    scaled_dot_product_attention(q, k, v, block_size=128)
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
    layer = MultiHeadAttention(np.eye(2), np.eye(2), np.eye(2), num_heads=2)
    x = np.eye(2)[None]  # [1, 2, 2]
    out, w = layer(x)
    a, b = E / (E + 1), 1 / (E + 1)
    np.testing.assert_allclose(w[0, 0], [[a, b], [0.5, 0.5]], rtol=1e-15)
    np.testing.assert_allclose(w[0, 1], [[0.5, 0.5], [b, a]], rtol=1e-15)
    np.testing.assert_allclose(out[0], [[a, 0.5], [0.5, a]], rtol=1e-15)


def _per_head_reference(x, x_kv, wq, wk, wv, bq, bk, bv, wo, bo, H, allowed):
    """Attention one batch element and one head at a time, with explicit loops and
    the softmax written out - the hand calculation, as an independent oracle."""
    B, L, _ = x.shape
    L_k = x_kv.shape[1]
    d_k, d_v = wq.shape[1] // H, wv.shape[1] // H
    out = np.zeros((B, L, wo.shape[1] if wo is not None else H * d_v))
    weights = np.zeros((B, H, L, L_k))
    for b in range(B):
        heads = []
        for h in range(H):
            cq, cv = slice(h * d_k, (h + 1) * d_k), slice(h * d_v, (h + 1) * d_v)
            Q = x[b] @ wq[:, cq] + (bq[cq] if bq is not None else 0)
            K = x_kv[b] @ wk[:, cq] + (bk[cq] if bk is not None else 0)
            V = x_kv[b] @ wv[:, cv] + (bv[cv] if bv is not None else 0)
            ctx = np.zeros((L, d_v))
            for i in range(L):
                ok = [j for j in range(L_k) if allowed is None or allowed[b, i, j]]
                if not ok:
                    continue  # no key: zero weights, zero context
                s = [float(Q[i] @ K[j]) / math.sqrt(d_k) for j in ok]
                top = max(s)
                e = [math.exp(t - top) for t in s]
                for j, ej in zip(ok, e):
                    weights[b, h, i, j] = ej / sum(e)
                ctx[i] = sum(weights[b, h, i, j] * V[j] for j in ok)
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
    L_k=st.integers(1, 6),
    H=st.integers(1, 3),
    d_k=st.integers(1, 3),
    d_v=st.integers(1, 3),
    d_model=st.integers(1, 5),
    d_kv=st.integers(1, 5),
    cross=st.booleans(),
    biases=st.booleans(),
    out_proj=st.booleans(),
    mask_kind=st.sampled_from(["none", "causal", "random", "padding", "causal+padding"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_layer_matches_per_head_loops(B, L, L_k, H, d_k, d_v, d_model, d_kv, cross, biases, out_proj, mask_kind, seed):
    rng = np.random.default_rng(seed)
    if not cross:
        L_k, d_kv = L, d_model
    r = lambda *s: rng.standard_normal(s)
    wq, wk, wv = r(d_model, H * d_k), r(d_kv, H * d_k), r(d_kv, H * d_v)
    bq, bk, bv = (r(H * d_k), r(H * d_k), r(H * d_v)) if biases else (None, None, None)
    wo, bo = (r(H * d_v, 4), r(4)) if out_proj else (None, None)
    x, x_kv = r(B, L, d_model), r(B, L_k, d_kv)
    mask = padding = None
    if "causal" in mask_kind:
        mask = causal_mask(L, L_k)
    if mask_kind == "random":
        mask = rng.random((B, L, L_k)) > 0.4
    if "padding" in mask_kind:
        padding = rng.random((B, L_k)) > 0.3
    allowed = combine_masks(mask, padding)
    allowed = None if allowed is None else np.broadcast_to(allowed[:, 0], (B, L, L_k))
    layer = MultiHeadAttention(wq, wk, wv, H, b_q=bq, b_k=bk, b_v=bv, w_o=wo, b_o=bo)
    out, w = layer(x, x_kv if cross else None, mask=mask, key_padding=padding)
    ref_out, ref_w = _per_head_reference(x, x_kv if cross else x, wq, wk, wv, bq, bk, bv, wo, bo, H, allowed)
    np.testing.assert_allclose(w, ref_w, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out, ref_out, rtol=1e-10, atol=1e-10)


def test_layer_fully_masked_row_outputs_the_output_bias():
    rng = np.random.default_rng(2)
    layer = MultiHeadAttention(rng.standard_normal((4, 4)), rng.standard_normal((4, 4)),
                               rng.standard_normal((4, 4)), 2,
                               w_o=rng.standard_normal((4, 3)), b_o=np.array([1.0, 2.0, 3.0]))
    x = rng.standard_normal((2, 3, 4))
    padding = np.array([[True, True, True], [False, False, False]])  # batch 1: nothing to attend to
    out, w = layer(x, key_padding=padding)
    np.testing.assert_array_equal(w[1], 0)
    np.testing.assert_array_equal(out[1], np.tile([1.0, 2.0, 3.0], (3, 1)))
    assert np.isfinite(out).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_preserves_dtype(dtype):
    rng = np.random.default_rng(0)
    w = [rng.standard_normal((4, 4)).astype(dtype) for _ in range(4)]
    layer = MultiHeadAttention(w[0], w[1], w[2], 2, w_o=w[3])
    assert layer.dtype == dtype and layer.w_qkv.dtype == dtype
    out, weights = layer(rng.standard_normal((1, 3, 4)).astype(dtype), mask=causal_mask(3, 3))
    assert out.dtype == dtype and weights.dtype == dtype
    out, _ = layer(rng.standard_normal((1, 3, 4)).astype(dtype), rng.standard_normal((1, 2, 4)).astype(dtype))
    assert out.dtype == dtype


def test_layer_weights_are_read_only_copies():
    w = np.eye(2)
    layer = MultiHeadAttention(w, w, w, 1)
    w[0, 0] = 5.0
    assert layer.w_q[0, 0] == 1.0
    with pytest.raises(ValueError):
        layer.w_q[0, 0] = 2.0


def test_layer_shape_errors():
    layer = MultiHeadAttention(np.ones((4, 4)), np.ones((3, 4)), np.ones((3, 4)), 2)  # d_kv = 3
    x = np.ones((2, 5, 4))
    with pytest.raises(ShapeError, match="x_kv"):
        layer(x)  # K, V need width 3: self-attention impossible
    with pytest.raises(ShapeError, match="x_kv"):
        layer(x, np.ones((2, 6, 4)))
    with pytest.raises(ShapeError, match="x_kv"):
        layer(x, np.ones((3, 6, 3)))  # batch differs
    with pytest.raises(ShapeError, match="d_model"):
        layer(np.ones((2, 5, 3)), np.ones((2, 6, 3)))
    with pytest.raises(ShapeError, match="d_model"):
        layer(np.ones((5, 4)), np.ones((2, 6, 3)))  # no batch axis
    with pytest.raises(ShapeError, match="key_padding"):
        layer(x, np.ones((2, 6, 3)), key_padding=np.ones((2, 5), bool))
    with pytest.raises(ShapeError, match="mask"):
        layer(x, np.ones((2, 6, 3)), mask=np.ones((5, 5), bool))
    with pytest.raises(ShapeError, match="mask"):
        layer(x, np.ones((2, 6, 3)), mask=np.ones((3, 5, 6), bool), key_padding=np.ones((2, 6), bool))
    with pytest.raises(ShapeError):
        MultiHeadAttention(np.ones((4, 5)), np.ones((4, 5)), np.ones((4, 4)), 2)  # 5 columns, 2 heads
    with pytest.raises(ShapeError):
        MultiHeadAttention(np.ones((4, 4)), np.ones((4, 2)), np.ones((4, 4)), 2)  # q, k widths differ
    with pytest.raises(ShapeError):
        MultiHeadAttention(np.ones((4, 4)), np.ones((4, 4)), np.ones((3, 4)), 2)  # k, v rows differ
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
    layer = MultiHeadAttention.from_torch_layout(ipw, ipb, opw, opb, H)
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


def run_trace_values(layer, x, x_kv=None, mask=None, key_padding=None):
    """The forward's named intermediate arrays (copies), in order."""
    seen = {}
    layer._forward(x, x_kv, mask, key_padding, lambda name, a: seen.setdefault(name, a.copy()))
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
    )
    trace = layer.shape_trace(B, L, L_k if cross else None, cross=cross, masked=masked)
    seen = run_trace_values(
        layer, rng.standard_normal((B, L, d_model)), rng.standard_normal((B, L_k, d_kv)) if cross else None,
        mask=causal_mask(L, L_k) if masked else None,
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
        MultiHeadAttention.from_exercise(ex)
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
    out_t, w_t = numeric.scaled_dot_product_attention(q, k, v, mask)
    blk_t, _ = numeric.scaled_dot_product_attention(q, k, v, mask, block_size=64)
    assert calls == [8, 8]
    monkeypatch.setattr(_common, "_PARALLEL_MIN_SCORES", 1 << 60)  # now everything runs in one call
    out_1, w_1 = numeric.scaled_dot_product_attention(q, k, v, mask)
    blk_1, _ = numeric.scaled_dot_product_attention(q, k, v, mask, block_size=64)
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
