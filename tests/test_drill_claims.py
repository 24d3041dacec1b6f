"""Every numeric claim of the concept bank's answers, measured.

A bank question lists its claims (``claims: [qk-variance]``); each claim is measured here by
the test registered for it with ``@measures``, and a meta-test checks that every claim the
bundled bank makes has its measurement (and that no measurement is left without a claim).
Monte-Carlo estimates are seeded; their tolerances come from their standard errors (4 standard
errors: a false failure about once in 16,000 runs of an honest claim), plus the rounding of
the number the answer states ("about 0.85": ±0.005).  Claims about PyTorch need torch 2.13
(they skip without it, unless ATTN_TUTOR_REQUIRE_TORCH=1).
"""

from __future__ import annotations

import inspect
import math
import os
import re
from collections.abc import Callable

import numpy as np
import pytest

from tutor.drills import counts
from tutor.drills.bank import load

MEASURED: dict[str, str] = {}


def measures(*claims: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register a test as the measurement of ``claims``."""

    def register(test: Callable[..., None]) -> Callable[..., None]:
        for claim in claims:
            MEASURED[claim] = test.__name__
        return test

    return register


def torch_or_skip():
    if os.environ.get("ATTN_TUTOR_REQUIRE_TORCH") == "1":
        import torch

        return torch
    return pytest.importorskip("torch", reason="claims about PyTorch need torch==2.13.0 (test-only)")


def within(estimate: float, stated: float, se: float, rounding: float = 0.0) -> bool:
    """The stated value lies within 4 standard errors (and the rounding of the statement) of the estimate."""
    return abs(estimate - stated) <= 4 * se + rounding


def softmax(s: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def attention(x: np.ndarray, w_q: np.ndarray, w_k: np.ndarray, w_v: np.ndarray) -> np.ndarray:
    q, k, v = x @ w_q, x @ w_k, x @ w_v  # [L, d]
    return softmax(q @ k.T / math.sqrt(q.shape[1])) @ v  # [L, d_v]


# --- scaling -------------------------------------------------------------------------------------


def _qk(n: int, d: int, L: int = 1, seed: int = 0) -> np.ndarray:
    """Scores q·k for independent, zero-mean, unit-variance entries: [n, L] (one query, L keys per row)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n, 1, d))
    k = rng.standard_normal((n, L, d))
    return (q * k).sum(-1)


@measures("qk-variance")
@pytest.mark.parametrize("d_k", [16, 64])
def test_the_variance_of_q_dot_k_is_d_k(d_k):
    """Var(q·k) = d_k (so for d_k = 64 a standard deviation of 8); the standard error of a sample variance
    is the standard deviation of the squared deviations over √n."""
    s = _qk(200_000, d_k).ravel()
    dev2 = (s - s.mean()) ** 2
    assert within(dev2.mean(), d_k, dev2.std() / math.sqrt(s.size))
    if d_k == 64:
        assert within(math.sqrt(dev2.mean()), 8, dev2.std() / math.sqrt(s.size) / (2 * 8))  # delta method


@measures("scaled-variance")
def test_scaling_by_root_d_k_brings_the_variance_back_to_one():
    for d_k in (4, 64, 256):
        s = _qk(100_000, d_k, seed=d_k).ravel() / math.sqrt(d_k)
        dev2 = (s - s.mean()) ** 2
        assert within(dev2.mean(), 1.0, dev2.std() / math.sqrt(s.size))


@measures("softmax-saturation", "softmax-jacobian-trace")
def test_unscaled_scores_saturate_the_softmax():
    """d_k = 64, 16 keys: largest weight about 0.85 unscaled (over half the rows above 0.9) and about 0.25
    scaled; Σ p_i(1 − p_i) about 0.22 unscaled and about 0.87 scaled."""
    s = _qk(100_000, 64, L=16, seed=3)
    for scores, top, trace in ((s, 0.85, 0.22), (s / 8, 0.25, 0.87)):
        p = softmax(scores)
        biggest = p.max(axis=1)
        tr = (p * (1 - p)).sum(axis=1)
        n = math.sqrt(len(p))
        assert within(biggest.mean(), top, biggest.std() / n, 0.005)
        assert within(tr.mean(), trace, tr.std() / n, 0.005)
    over = (softmax(s).max(axis=1) > 0.9)
    assert over.mean() - 4 * over.std() / math.sqrt(over.size) > 0.5


@measures("softmax-jacobian")
def test_the_softmax_jacobian_is_diag_p_minus_p_p_transposed():
    rng = np.random.default_rng(4)
    for _ in range(20):
        s = rng.standard_normal(6) * 3
        p = softmax(s)
        h = 1e-6
        numeric = np.stack([(softmax(s + h * e) - softmax(s - h * e)) / (2 * h) for e in np.eye(6)], axis=1)
        assert np.allclose(numeric, np.diag(p) - np.outer(p, p), atol=1e-8)
        assert (p * (1 - p)).max() <= 0.25
    assert softmax(np.array([0.0, 0.0]))[0] * (1 - 0.5) == 0.25  # the maximum, at p_i = 1/2
    peaked = softmax(np.array([20.0, 0, 0, 0]))
    assert np.abs(np.diag(peaked) - np.outer(peaked, peaked)).max() < 1e-8  # near one-hot: all entries near 0


# --- heads and W_O ----------------------------------------------------------------------------------


@measures("heads-same-cost")
def test_eight_heads_of_64_cost_what_one_head_of_512_costs():
    one, eight = counts.Layer(512, 1, 1, 512, 512), counts.Layer(512, 8, 8, 64, 64)
    assert counts.parameters(one) == counts.parameters(eight)
    for B, L in ((1, 128), (4, 1024)):
        assert counts.forward_flops(one, B, L, L) == counts.forward_flops(eight, B, L, L)


@measures("heads-weights-memory")
def test_eight_heads_keep_eight_times_the_weights():
    assert counts.weights_bytes(2, 8, 100, 100, 4) == 8 * counts.weights_bytes(2, 1, 100, 100, 4)


@measures("w-o-sum-over-heads", "w-o-fold-equal")
def test_w_o_mixes_the_heads_and_folds_into_w_v():
    rng = np.random.default_rng(5)
    L, D, H, d = 5, 8, 4, 2
    heads = [rng.standard_normal((L, d)) for _ in range(H)]
    w_o = rng.standard_normal((H * d, D))
    concat = np.concatenate(heads, axis=1) @ w_o
    assert np.allclose(concat, sum(h @ w_o[i * d:(i + 1) * d] for i, h in enumerate(heads)))
    x, w_v, weights = rng.standard_normal((L, D)), rng.standard_normal((D, d)), softmax(rng.standard_normal((L, L)))
    w_o_h = w_o[:d]
    assert np.allclose((weights @ (x @ w_v)) @ w_o_h, weights @ x @ (w_v @ w_o_h))  # one d_model × d_model map
    assert np.linalg.matrix_rank(w_v @ w_o_h) <= d
    # the cost of folding, with H·d_v = d_model: H·d_model² parameters against 2·d_model² for W_V and W_O
    # together, H/2 times as many; more than W_V and W_O once H > 2, fewer only with a single head
    assert H * d == D and H * D * D == (H / 2) * (D * (H * d) + (H * d) * D)
    folded_vs_factored = {heads: heads * D * D - 2 * D * D for heads in (1, 2, 3)}  # H·d_model² − 2·d_model²
    assert folded_vs_factored[1] < 0 == folded_vs_factored[2] < folded_vs_factored[3]
    # multiply-adds per token (L_q = L_k = L), from the shapes of the matmuls of each form
    factored_proj = L * D * (H * d) + L * (H * d) * D  # X·W_V, then concat·W_O
    factored_sum = H * L * L * d  # weights_h·V_h: rows of d_v features
    folded_proj = H * L * D * D  # X·(W_V^h·W_O^h) for every head
    folded_sum = H * L * L * D  # weights_h·(X·W_V^h·W_O^h): rows of d_model features
    assert folded_proj == (H / 2) * factored_proj and folded_sum == H * factored_sum


@measures("w-o-fold-batched")
def test_the_folded_value_maps_still_run_as_one_batched_matmul():
    """Folding W_V^h·W_O^h per head loses no batching: the H maps stacked [H, D, D] run in one batched
    matmul (np.matmul over the head axis) and give the layer's output; only the size grows."""
    rng = np.random.default_rng(18)
    L, D, H, d = 5, 8, 4, 2
    x, w_v, w_o = rng.standard_normal((L, D)), rng.standard_normal((H, D, d)), rng.standard_normal((H * d, D))
    weights = softmax(rng.standard_normal((H, L, L)))  # [H, L, L]
    factored = np.concatenate([weights[h] @ x @ w_v[h] for h in range(H)], axis=1) @ w_o  # [L, D]
    folded = w_v @ w_o.reshape(H, d, D)  # [H, D, d] @ [H, d, D] -> [H, D, D]: one batched matmul
    batched = np.matmul(weights @ x, folded).sum(axis=0)  # [H, L, D] @ [H, D, D] -> [H, L, D], summed over heads
    assert folded.shape == (H, D, D) and np.allclose(batched, factored, rtol=1e-12, atol=1e-12)
    assert folded.size == H * D * D == (H / 2) * (w_v.size + w_o.size)  # the cost: num_heads/2 times the entries


@measures("attention-nonlinear")
def test_attention_is_not_linear_in_x():
    rng = np.random.default_rng(6)
    x, w_q, w_k, w_v = (rng.standard_normal(s) for s in ((4, 6), (6, 3), (6, 3), (6, 3)))
    assert not np.allclose(attention(2 * x, w_q, w_k, w_v), 2 * attention(x, w_q, w_k, w_v))


@measures("attention-cubic")
def test_without_a_softmax_attention_is_cubic_in_x():
    """(X·W_Q)(X·W_K)ᵀ(X·W_V): doubling X multiplies it by 8, so it is not linear before any softmax."""
    rng = np.random.default_rng(16)
    x, w_q, w_k, w_v = (rng.standard_normal(s) for s in ((4, 6), (6, 3), (6, 3), (6, 3)))

    def no_softmax(x: np.ndarray) -> np.ndarray:
        return (x @ w_q) @ (x @ w_k).T @ (x @ w_v)  # [L, L] · [L, d_v]

    assert np.allclose(no_softmax(2 * x), 8 * no_softmax(x), rtol=1e-13, atol=0)
    assert not np.allclose(no_softmax(2 * x), 2 * no_softmax(x))


@measures("tied-qk-symmetric")
def test_tying_w_q_and_w_k_makes_the_scores_symmetric():
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((5, 6)), rng.standard_normal((6, 3))
    tied = (x @ w) @ (x @ w).T
    assert np.allclose(tied, tied.T)
    untied = (x @ w) @ (x @ rng.standard_normal((6, 3))).T
    assert not np.allclose(untied, untied.T)


@measures("fused-equals-separate")
def test_a_fused_projection_equals_three_separate_ones():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 5, 8))
    w_q, w_k, w_v = (rng.standard_normal((8, n)) for n in (8, 4, 4))  # grouped K/V: unequal parts
    q, k, v = np.split(x @ np.concatenate([w_q, w_k, w_v], axis=1), [8, 12], axis=-1)
    assert np.allclose(q, x @ w_q, rtol=1e-13, atol=1e-13) and np.allclose(k, x @ w_k) and np.allclose(v, x @ w_v)


@measures("mha-in-proj-layout")
def test_multiheadattention_stores_a_fused_in_proj_weight_only_for_equal_widths():
    torch = torch_or_skip()
    same = torch.nn.MultiheadAttention(16, 4)
    assert tuple(same.in_proj_weight.shape) == (48, 16) and same.q_proj_weight is None
    other = torch.nn.MultiheadAttention(16, 4, kdim=12, vdim=12)
    assert other.in_proj_weight is None
    assert tuple(other.k_proj_weight.shape) == (16, 12) and tuple(other.q_proj_weight.shape) == (16, 16)


# --- masks -------------------------------------------------------------------------------------------


@measures("mask-polarity-torch")
def test_sdpa_and_multiheadattention_read_boolean_masks_with_opposite_polarity():
    torch = torch_or_skip()
    torch.manual_seed(0)
    x = torch.randn(1, 3, 4, dtype=torch.float64)
    mha = torch.nn.MultiheadAttention(4, 1, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(4).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(4))
    allowed = torch.tensor([[True, False, True], [True, True, False], [False, True, True]])
    sdpa = torch.nn.functional.scaled_dot_product_attention(x[:, None], x[:, None], x[:, None], attn_mask=allowed)
    out, _ = mha(x, x, x, attn_mask=~allowed)
    assert torch.allclose(sdpa[:, 0], out)
    additive = torch.zeros(3, 3, dtype=torch.float64).masked_fill(~allowed, float("-inf"))
    assert torch.allclose(mha(x, x, x, attn_mask=additive)[0], out)


@measures("mask-combine-shape")
def test_causal_and_padding_combine_to_b_1_lq_lk():
    torch = torch_or_skip()
    B, L = 2, 4
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    kpm = torch.tensor([[False] * 4, [False, False, True, True]])
    combined = causal & ~kpm[:, None, None, :]
    assert tuple(combined.shape) == (B, 1, L, L)
    q = torch.randn(B, 3, L, 2)
    assert torch.isfinite(torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=combined)).all()


@measures("softmax-all-inf-nan")
def test_the_softmax_of_an_all_minus_inf_row_is_nan():
    with np.errstate(invalid="ignore"):
        assert np.isnan(softmax(np.full(4, -np.inf))).all()
    torch = torch_or_skip()
    assert torch.isnan(torch.full((4,), float("-inf")).softmax(-1)).all()


@measures("fully-masked-torch")
def test_what_each_api_gives_for_a_fully_masked_row():
    torch_or_skip()
    from .test_drill_masks_torch import outcome_of

    for fact, result in (("sdpa_bool", "zeros"), ("manual_inf", "nan"), ("manual_1e9", "mean_v"),
                         ("mha_need_weights", "nan"), ("mha_train_no_weights", "bias"), ("mha_fast_path", "nan")):
        assert outcome_of(fact) == result, fact


@measures("neg-1e9-float16")
def test_minus_1e9_does_not_fit_float16():
    assert np.finfo(np.float16).max == 65504
    with np.errstate(over="ignore"):
        assert np.float16(-1e9) == -np.inf
    torch_or_skip()
    from .test_drill_masks_torch import outcome_of

    assert outcome_of("f16_masked_fill") == "error" and outcome_of("f16_mask_tensor") == "neg_inf"
    assert outcome_of("f32_fully_masked") == "mean_v"
    torch = torch_or_skip()
    assert torch.tensor(-1e9, dtype=torch.bfloat16).item() == -998244352  # bfloat16 rounds it, and holds it
    torch.manual_seed(0)
    blocked = torch.tensor([[False, False, True, True, False, True]] * 3)
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        scores = (torch.randn(3, 6) * 3).to(dtype)
        assert torch.exp(torch.tensor(-1e9, dtype=dtype) - scores.max()).item() == 0
        with_1e9, with_inf = (scores.masked_fill(blocked, fill).softmax(-1) for fill in (-1e9, float("-inf")))
        assert torch.equal(with_1e9, with_inf)


@measures("finfo-min-sum")
def test_two_finfo_min_masks_add_up_to_minus_inf():
    for dtype in (np.float16, np.float32):
        m = np.finfo(dtype).min
        with np.errstate(over="ignore"):
            assert np.array([m], dtype=dtype) + np.array([m], dtype=dtype) == -np.inf
    torch_or_skip()
    from .test_drill_masks_torch import outcome_of

    assert outcome_of("finfo_min_sum") == "neg_inf"  # float32, float16 and bfloat16


@measures("cross-shapes")
def test_cross_attention_shapes_follow_the_queries():
    torch = torch_or_skip()
    mha = torch.nn.MultiheadAttention(64, 8, kdim=32, vdim=32, batch_first=True)
    out, weights = mha(torch.randn(2, 5, 64), torch.randn(2, 7, 32), torch.randn(2, 7, 32),
                       key_padding_mask=torch.zeros(2, 7, dtype=torch.bool), average_attn_weights=False)
    assert tuple(weights.shape) == (2, 8, 5, 7) and tuple(out.shape) == (2, 5, 64)


# --- cost, FlashAttention, the stable softmax ---------------------------------------------------------


@measures("cost-quadratic", "cost-crossover")
def test_the_core_is_quadratic_in_l_and_overtakes_the_projections_past_2_d_model():
    D, H = 512, 8
    layer = counts.Layer(D, H, H, D // H, D // H, False)

    def split(L: int) -> tuple[int, int]:
        f = counts.forward_flops(layer, 1, L, L)
        return f["q_proj"] + f["k_proj"] + f["v_proj"] + f["output"], f["scores"] + f["head_outputs"]

    for L in (64, 256, 4096):
        proj, core = split(L)
        assert proj == 8 * L * D * D and core == 4 * L * L * D
        assert split(2 * L)[1] == 4 * core
        assert counts.weights_bytes(1, H, 2 * L, 2 * L, 2) == 4 * counts.weights_bytes(1, H, L, L, 2)
    assert split(2 * D)[0] == split(2 * D)[1]
    assert split(2 * D - 1)[0] > split(2 * D - 1)[1] and split(2 * D + 1)[0] < split(2 * D + 1)[1]


@measures("weights-memory-example")
def test_weights_at_32k_tokens_and_32_heads_in_float16_take_64_gib():
    assert counts.weights_bytes(1, 32, 32_768, 32_768, 2) == 64 * 2**30


@measures("online-softmax-exact")
def test_the_online_softmax_over_blocks_equals_the_full_softmax():
    rng = np.random.default_rng(9)
    for _ in range(10):
        s = rng.standard_normal((3, 37)) * 5  # [L_q, L_k] scores
        v = rng.standard_normal((37, 4))  # [L_k, d_v]
        m = np.full((3, 1), -np.inf)
        total = np.zeros((3, 1))
        o = np.zeros((3, 4))
        for start in range(0, 37, 8):  # blocks of 8 keys
            block = s[:, start:start + 8]
            m_new = np.maximum(m, block.max(axis=1, keepdims=True))
            scale = np.exp(m - m_new)
            e = np.exp(block - m_new)
            total = total * scale + e.sum(axis=1, keepdims=True)
            o = o * scale + e @ v[start:start + 8]
            m = m_new
        assert np.allclose(o / total, softmax(s) @ v, rtol=1e-12, atol=1e-12)


@measures("softmax-shift-invariant")
def test_the_softmax_does_not_change_when_a_constant_is_subtracted():
    rng = np.random.default_rng(10)
    s = rng.standard_normal(8) * 4
    plain = np.exp(s) / np.exp(s).sum()
    shifted = s - s.max()
    assert shifted.max() == 0 and np.exp(shifted).max() == 1  # every exponent at most 0, the largest term exp(0) = 1
    for c in (s.max(), 3.0, -7.5):
        assert np.allclose(softmax(s - c), plain, rtol=1e-14)


@measures("exp-overflow")
def test_exp_overflows_float32_past_88_and_float16_past_11():
    with np.errstate(over="ignore"):
        assert np.isfinite(np.exp(np.float32(88))) and np.isinf(np.exp(np.float32(89)))
        assert np.isfinite(np.exp(np.float16(11))) and np.isinf(np.exp(np.float16(12)))


# --- inference -----------------------------------------------------------------------------------------


@measures("kv-cache-example")
def test_the_kv_cache_example_of_the_bank():
    elements = 2 * 32 * 1 * 4096 * 8 * 128
    assert elements == 268_435_456
    assert counts.kv_cache_bytes(32, 1, 4096, 8, 128, 128, 2) == 536_870_912 == 512 * 2**20
    assert counts.kv_cache_bytes(32, 1, 4096, 32, 128, 128, 2) == 2 * 2**30  # 32 K/V heads: 2 GiB
    assert counts.kv_cache_bytes(32, 1, 4096, 8, 128, 128, 2) // 2 == 256 * 2**20  # K or V alone


@measures("gqa-savings")
def test_grouped_kv_heads_shrink_the_cache_by_num_heads_over_num_kv_heads():
    mha = counts.kv_cache_bytes(32, 1, 4096, 32, 128, 128, 2)
    assert mha == 4 * counts.kv_cache_bytes(32, 1, 4096, 8, 128, 128, 2)
    assert mha == 32 * counts.kv_cache_bytes(32, 1, 4096, 1, 128, 128, 2)
    full = counts.parameters(counts.Layer(4096, 32, 32, 128, 128, False))
    grouped = counts.parameters(counts.Layer(4096, 32, 8, 128, 128, False))
    assert full["W_K"] == 4 * grouped["W_K"] and full["W_Q"] == grouped["W_Q"]
    B, L = 1, 1024
    assert counts.forward_flops(counts.Layer(4096, 32, 8, 128, 128), B, L, L)["scores"] == \
        counts.forward_flops(counts.Layer(4096, 32, 32, 128, 128), B, L, L)["scores"]


@measures("gqa-repeat-interleave")
def test_query_head_h_meets_kv_head_h_over_the_group_size():
    torch = torch_or_skip()
    torch.manual_seed(2)
    q, k, v = torch.randn(1, 8, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    gqa = torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    for h in range(8):
        alone = torch.nn.functional.scaled_dot_product_attention(q[:, h:h + 1], k[:, h // 4:h // 4 + 1],
                                                                 v[:, h // 4:h // 4 + 1])
        assert torch.allclose(gqa[:, h:h + 1], alone, atol=1e-6)


@measures("causal-bottom-right")
def test_cached_decoding_needs_the_bottom_right_causal_mask():
    torch = torch_or_skip()
    from torch.nn.attention.bias import causal_lower_right, causal_upper_left

    for L_q, L_k in ((1, 5), (2, 5), (3, 4)):
        lower = causal_lower_right(L_q, L_k)._materialize()
        assert lower.tolist() == [[j <= i + L_k - L_q for j in range(L_k)] for i in range(L_q)]
        upper = causal_upper_left(L_q, L_k)._materialize()
        assert upper.tolist() == [[j <= i for j in range(L_k)] for i in range(L_q)]
        assert (lower.sum(-1) - upper.sum(-1)).tolist() == [L_k - L_q] * L_q  # every query: L_k − L_q keys fewer
        # as the bank counts them, from 1: query i sees keys 1 to i, and 1 to i + L_k − L_q
        assert upper.tolist() == [[j <= i for j in range(1, L_k + 1)] for i in range(1, L_q + 1)]
        assert lower.tolist() == [[j <= i + L_k - L_q for j in range(1, L_k + 1)] for i in range(1, L_q + 1)]
    q, k, v = torch.randn(1, 1, 1, 4), torch.randn(1, 1, 5, 4), torch.randn(1, 1, 5, 4)
    one = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(one, v[:, :, :1])  # is_causal with one query: it sees the first key only
    assert causal_lower_right(1, 5)._materialize().all()  # bottom-right: every key


@measures("rope-relative", "rope-frequencies")
def test_rotary_embeddings_make_the_score_depend_on_the_offset():
    d = 64
    theta = 10000.0 ** (-2 * np.arange(d // 2) / d)
    assert theta[0] == 1 and 1e-4 < theta[-1] < 2e-4  # from 1 down towards 1/10000

    def rotate(x: np.ndarray, m: int) -> np.ndarray:
        pairs = x.reshape(-1, 2)
        c, s = np.cos(m * theta), np.sin(m * theta)
        return np.stack([pairs[:, 0] * c - pairs[:, 1] * s, pairs[:, 0] * s + pairs[:, 1] * c], axis=1).ravel()

    rng = np.random.default_rng(11)
    q, k = rng.standard_normal(d), rng.standard_normal(d)
    for m, n in ((3, 1), (10, 4), (0, 7)):
        score = rotate(q, m) @ rotate(k, n)
        assert np.isclose(score, rotate(q, m + 25) @ rotate(k, n + 25))
        assert np.isclose(score, q @ rotate(k, n - m))
    assert not np.isclose(rotate(q, 3) @ rotate(k, 1), rotate(q, 3) @ rotate(k, 2))


@measures("alibi-slopes")
def test_alibi_slopes_for_eight_heads():
    """Press et al. 2022: the slopes are the geometric sequence starting at 2^(−8/n) with ratio 2^(−8/n)."""
    n = 8
    slopes = [2 ** (-8 * (i + 1) / n) for i in range(n)]
    assert slopes == [1 / 2 ** (i + 1) for i in range(8)]
    assert slopes[0] == 0.5 and slopes[-1] == 1 / 256


# --- training and checking -------------------------------------------------------------------------------


@measures("dropout-scale")
def test_dropout_scales_kept_weights_and_keeps_row_sums_at_one_on_average():
    torch = torch_or_skip()
    torch.manual_seed(3)
    p = 0.1
    w = torch.randn(20_000, 16, dtype=torch.float64).softmax(-1)
    d = torch.nn.functional.dropout(w, p=p, training=True)
    kept = d != 0
    assert torch.allclose(d[kept], w[kept] / (1 - p))
    sums = d.sum(-1)
    assert within(sums.mean().item(), 1.0, sums.std().item() / math.sqrt(sums.numel()))
    assert (sums != 1).any()
    assert torch.equal(torch.nn.functional.dropout(w, p=p, training=False), w)


@measures("dropout-mode")
def test_eval_turns_dropout_off_in_the_modules_but_not_in_sdpa():
    """nn.Dropout and nn.MultiheadAttention read their training flag; F.scaled_dot_product_attention has none:
    inside a module in eval(), even under torch.no_grad(), dropout_p = 0.5 still zeroes and scales weights."""
    torch = torch_or_skip()
    F, nn = torch.nn.functional, torch.nn
    f64 = torch.float64

    class Layer(nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)

    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 4, 8, dtype=f64), torch.randn(1, 1, 4, 8, dtype=f64)
    eye = torch.eye(4, dtype=f64)[None, None]  # v = I: the output is the weights
    layer = Layer().eval()
    with torch.no_grad():
        w = layer(q, k, eye)[0, 0]
    plain = F.scaled_dot_product_attention(q, k, eye)[0, 0]
    assert not layer.training and (w == 0).any()  # weights dropped in eval()
    assert torch.allclose(w[w != 0], plain[w != 0] / 0.5)  # and the kept ones scaled by 1/(1 - p)
    x = torch.randn(1, 4, 8, dtype=f64)
    mha = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True, dtype=f64).eval()
    assert torch.equal(mha(x, x, x)[1], mha(x, x, x)[1])  # eval(): the same weights every call, no dropout
    assert torch.allclose(mha(x, x, x)[1].sum(-1), torch.ones(1, 4, dtype=f64))
    mha.train()
    assert not torch.equal(mha(x, x, x)[1], mha(x, x, x)[1])  # training: dropped at random
    assert torch.equal(nn.Dropout(0.5).eval()(x), x)


@measures("llama-warmup")
def test_the_warm_up_of_a_pre_norm_model_is_the_papers():
    """Not a measurement but a citation, checked both ways: LLaMA (Touvron et al. 2023) normalises each
    sub-layer's input with RMSNorm (section 2.2, "Pre-normalization") and uses "2,000 warmup steps"
    (section 2.3, "Optimizer"); the answer states that number and cites those sections, and does not say
    pre-LN needs no warm-up."""
    q = next(c.q for c in load().concepts if c.q.id == "pre-post-ln")
    text = " ".join([q.model_answer, q.short_answer, *q.key_points])
    assert "LLaMA" in text and "2,000 steps" in text
    assert any("Touvron et al. 2023" in s and "2.2" in s and "2.3" in s and "2,000" in s for s in q.sources)
    assert "little or no" not in text and "without warm-up" not in text
    assert any("need no learning-rate warm-up" in w.answer for w in q.wrong_answers)


@measures("flash-loop-order")
def test_the_loop_order_of_each_flashattention_is_the_papers():
    """A citation, checked both ways: FlashAttention (Dao et al. 2022, Algorithm 1) loops over K/V blocks
    outside and query blocks inside; FlashAttention-2 (Dao 2023, section 3.1, Algorithm 1) the other way
    round.  The answer says which is which and cites both algorithms; the order changes no number (the
    blocked mirror, query blocks outside, is the plain softmax·V whatever the blocks)."""
    q = next(c.q for c in load().concepts if c.q.id == "flash-attention")
    text = " ".join(q.model_answer.split())
    assert "FlashAttention-2 loads a block of queries and loops over the blocks of keys and values" in text
    assert "the first FlashAttention had the loops the other way round, K/V blocks outside and query blocks inside" in text
    assert any("Dao et al. 2022" in s and "Algorithm 1 (K/V blocks in the outer loop" in s for s in q.sources)
    assert any("Dao 2023" in s and "Algorithm 1 (query blocks in the outer loop" in s for s in q.sources)
    from tutor.numeric.functional import blocked_attention, scaled_dot_product_attention

    rng = np.random.default_rng(17)
    x = [rng.standard_normal((1, 1, 5, 3)) for _ in range(3)]
    plain = scaled_dot_product_attention(*x)
    assert np.allclose(blocked_attention(*x, block_size=(2, 2)), plain, rtol=1e-12, atol=1e-14)


@measures("dtype-limits")
def test_the_limits_of_16_bit_floats():
    f16, f32 = np.finfo(np.float16), np.finfo(np.float32)
    assert f16.max == 65504 and f16.nmant + 1 == 11 and f16.nexp == 5
    assert f16.eps == 2**-10 and f"{f16.eps:.1e}" == "9.8e-04"  # about 9.8e-4
    assert f"{f32.eps:.1e}" == "1.2e-07"  # about 1.2e-7
    assert 8000 <= f16.eps / f32.eps <= 8200  # about 8000 times
    assert round(1e-2 / f32.eps, -3) == 84_000  # a fixed tolerance of 1e-2: about 84,000 times float32's epsilon
    torch = torch_or_skip()
    bf16 = torch.finfo(torch.bfloat16)
    assert bf16.eps == 2**-7 and f"{bf16.eps:.1e}" == "7.8e-03"  # about 7.8e-3
    assert abs(bf16.max / torch.finfo(torch.float32).max - 1) < 0.01  # float32's range


@measures("assert-close-defaults")
def test_assert_close_default_tolerances_per_dtype():
    torch = torch_or_skip()

    def passes(expected: float, actual: float, dtype) -> bool:
        try:
            torch.testing.assert_close(torch.tensor([actual], dtype=dtype), torch.tensor([expected], dtype=dtype))
        except AssertionError:
            return False
        return True

    # float16 (rtol 1e-3, atol 1e-5): at 1024 the tolerance is about 1.02, and the spacing is 1
    assert passes(1024, 1025, torch.float16) and not passes(1024, 1026, torch.float16)
    # bfloat16 (rtol 1.6e-2): at 256 the tolerance is about 4.1, and the spacing is 2
    assert passes(256, 260, torch.bfloat16) and not passes(256, 262, torch.bfloat16)
    # float32 (rtol 1.3e-6, atol 1e-5): at 1000 the tolerance is about 1.31e-3
    assert passes(1000, 1000.00122, torch.float32) and not passes(1000, 1000.0014, torch.float32)


@measures("float16-attention-error")
def test_float16_attention_rounds_many_times_so_a_failed_default_tolerance_is_no_verdict():
    """2e-3 at 1 is more than one float16 rounding and fails assert_close's float16 defaults, yet plain
    float16 attention ends that far off on its own; torch's SDPA in float16 stays under 1e-3 (CPU)."""
    torch = torch_or_skip()
    x = torch.linspace(0.75, 1.99, 200_001, dtype=torch.float32)  # float32 -> float16 is one rounding
    err = (x.half().double() - x.double()).abs()  # (torch takes float64 -> float16 through float32: two)
    assert err.max() <= 2**-11 and f"{2**-11:.1e}" == "4.9e-04"  # one rounding near 1: at most about 4.9e-4
    assert f"{2**-10:.1e}" == "9.8e-04" and (torch.tensor(1 + 2**-10, dtype=torch.float16) - 1).item() == 2**-10

    def passes(actual, expected, **options) -> bool:
        try:
            torch.testing.assert_close(actual, expected, **options)
        except AssertionError:
            return False
        return True

    one = torch.tensor([1.0], dtype=torch.float64)
    assert not passes(torch.tensor([1.0], dtype=torch.float16), one)  # float16 against float64: check_dtype=False
    assert passes(torch.tensor([1.001], dtype=torch.float16), one, check_dtype=False)  # about 1e-3 allowed at 1
    assert not passes(torch.tensor([1.002], dtype=torch.float16), one, check_dtype=False)  # 2e-3 fails
    assert not passes(torch.tensor([1.002], dtype=torch.float16), one.half())
    eight = torch.tensor(8.0, dtype=torch.float16)
    assert (torch.nextafter(eight, eight + 1) - eight).item() == 2**-7 and f"{2**-7:.1e}" == "7.8e-03"
    assert (torch.nextafter(eight * 2, eight) - eight * 2).item() == -(2**-7)  # the same spacing up to 16

    torch.manual_seed(0)
    L, d = 1024, 64
    q, k = ((torch.randn(1, 4, L, d) * 2).half() for _ in range(2))
    v = (1 + 0.5 * torch.randn(1, 4, L, d)).half()

    def plain(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1) @ v

    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(d)
    assert abs(scores.std().item() - 4) < 0.1  # scores of standard deviation 4
    ref = plain(q.double(), k.double(), v.double())  # float64 from the same float16 inputs
    near = (ref - 1).abs() < 0.25  # outputs near 1
    plain_error = (plain(q, k, v).double() - ref).abs()[near].max().item()
    sdpa_error = (torch.nn.functional.scaled_dot_product_attention(q, k, v).double() - ref).abs()[near].max().item()
    assert 2e-3 < plain_error < 1e-2  # "a few times 1e-3"
    assert sdpa_error < 1e-3


@measures("gradcheck-defaults")
def test_gradcheck_steps_by_1e_6_and_needs_float64():
    torch = torch_or_skip()
    defaults = inspect.signature(torch.autograd.gradcheck).parameters
    assert (defaults["eps"].default, defaults["atol"].default, defaults["rtol"].default) == (1e-6, 1e-5, 1e-3)
    assert f"{torch.finfo(torch.float64).eps:.1e}" == "2.2e-16"  # about 2.2e-16
    f32_eps, f64_eps = torch.finfo(torch.float32).eps, torch.finfo(torch.float64).eps
    assert f"{f32_eps:.1e}" == "1.2e-07" and 8 < 1e-6 / f32_eps < 9  # about 8 units of float32 rounding at 1
    assert 1e-6 / f64_eps > 4e9  # over 4e9 units of float64 rounding

    def quotient_errors(dtype):  # the central difference gradcheck takes, against the exact derivative
        torch.manual_seed(4)
        x = torch.randn(10_000, dtype=dtype)
        fd = ((x + 1e-6) ** 3 - (x - 1e-6) ** 3) / (2 * 1e-6)
        exact = 3 * x.double() ** 2
        return ((fd.double() - exact).abs() / exact).sort().values

    e32, e64 = quotient_errors(torch.float32), quotient_errors(torch.float64)
    assert 1e-2 < e32.median() and e32.max() < f32_eps / 1e-6  # percent-level, up to eps/step ≈ 0.1
    assert (e32 > 1e-3).float().mean() > 0.9  # far above rtol 1e-3 almost everywhere
    assert e64.median() < 1e-9 and e64.quantile(0.99) < 1e-8  # of order 1e-10
    f = lambda t: (t ** 3).sum()  # noqa: E731
    torch.manual_seed(4)
    assert torch.autograd.gradcheck(f, (torch.randn(5, dtype=torch.float64, requires_grad=True),))
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not torch.autograd.gradcheck(f, (torch.randn(5, requires_grad=True),), raise_exception=False)
    assert any("not a double precision" in str(w.message) and "will likely fail" in str(w.message) for w in caught)


@measures("permutation-equivariance")
def test_permuting_the_tokens_permutes_the_outputs():
    rng = np.random.default_rng(12)
    x, w_q, w_k, w_v = (rng.standard_normal(s) for s in ((6, 4), (4, 3), (4, 3), (4, 3)))
    perm = rng.permutation(6)
    assert np.allclose(attention(x[perm], w_q, w_k, w_v), attention(x, w_q, w_k, w_v)[perm])

    def biased(x: np.ndarray, bias: np.ndarray, rotate: bool = False) -> np.ndarray:
        q, k, v = x @ w_q, x @ w_k, x @ w_v
        if rotate:  # RoPE: features 0 and 1 turned by an angle proportional to the position (the row index)
            angle = np.arange(len(x))[:, None] * np.array([[0.7]])
            c, s = np.cos(angle), np.sin(angle)
            q = np.concatenate([q[:, :1] * c - q[:, 1:2] * s, q[:, :1] * s + q[:, 1:2] * c, q[:, 2:]], axis=1)
            k = np.concatenate([k[:, :1] * c - k[:, 1:2] * s, k[:, :1] * s + k[:, 1:2] * c, k[:, 2:]], axis=1)
        return softmax(q @ k.T / math.sqrt(3) + bias) @ v

    i = np.arange(6)
    no_bias, alibi = np.zeros((6, 6)), -0.5 * abs(i[:, None] - i[None, :])
    causal = np.where(i[None, :] <= i[:, None], 0.0, -np.inf)
    assert np.allclose(biased(x[perm], no_bias), biased(x, no_bias)[perm])
    for bias, rotate in ((causal, False), (alibi, False), (no_bias, True)):  # a mask, ALiBi, RoPE: not equivariant
        assert not np.allclose(biased(x[perm], bias, rotate), biased(x, bias, rotate)[perm])
    torch = torch_or_skip()
    torch.manual_seed(12)
    mha = torch.nn.MultiheadAttention(4, 2, dropout=0.5, batch_first=True, dtype=torch.float64)
    t, p = torch.from_numpy(x)[None], torch.from_numpy(perm)
    with torch.no_grad():
        mha.eval()  # dropout off
        assert torch.allclose(mha(t[:, p], t[:, p], t[:, p])[0], mha(t, t, t)[0][:, p])
        mha.train()  # dropout on
        assert not torch.allclose(mha(t[:, p], t[:, p], t[:, p])[0], mha(t, t, t)[0][:, p])


# --- every claim of the bank has its measurement ------------------------------------------------------------


def test_every_claim_of_the_bundled_bank_is_measured_here():
    bank = load()
    claimed = {claim for c in bank.concepts for claim in c.q.claims}
    assert claimed == set(MEASURED), (claimed - set(MEASURED), set(MEASURED) - claimed)


def test_every_answer_that_states_a_number_lists_its_claims():
    """A digit in a model answer, a key point or a short answer is a numeric claim: its question lists claims."""
    for c in load().concepts:
        text = " ".join([c.q.model_answer, c.q.short_answer, *c.q.key_points, *(w.why for w in c.q.wrong_answers)])
        if re.search(r"\d", text):
            assert c.q.claims, c.id


# --- issue 23: the concept cards on what follows one attention layer ----------------------------------------------


def _card(qid: str):
    return next(c.q for c in load().concepts if c.q.id == qid)


def _said(qid: str) -> str:
    """A card's English words, model answer, short answer, key points and reasons, on one line."""
    q = _card(qid)
    return " ".join(" ".join([q.model_answer, q.short_answer, *q.key_points, *(w.why for w in q.wrong_answers)]).split())


def _cited(qid: str, *needles: str) -> bool:
    """Some source of the card names all of ``needles``."""
    return any(all(n in s for n in needles) for s in _card(qid).sources)


@measures("rmsnorm-torch")
def test_rmsnorm_is_x_over_its_root_mean_square_and_torch_defaults_eps_to_float32s_epsilon():
    """torch.nn.RMSNorm (torch 2.13): x / sqrt(mean(x²) + eps) · weight over the last axis, a weight of ones and no
    bias; eps=None uses float32's epsilon for float16, bfloat16 and float32 inputs (float64's for float64), so
    features of 1e-4 (mean square 1e-8) come out at about 0.28, not 1.  Invariant to re-scaling, not to shifting;
    equal to LayerNorm without bias on a zero-mean input."""
    torch = torch_or_skip()
    torch.manual_seed(3)
    x = torch.randn(5, 8, dtype=torch.float64)
    norm = torch.nn.RMSNorm(8, dtype=torch.float64)
    assert [name for name, _ in norm.named_parameters()] == ["weight"] and torch.equal(norm.weight, torch.ones(8, dtype=torch.float64))
    assert norm.eps is None
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 2, 8, dtype=torch.float64))
        by_hand = x / torch.sqrt((x**2).mean(-1, keepdim=True) + torch.finfo(torch.float64).eps) * norm.weight
        assert torch.allclose(norm(x), by_hand, rtol=1e-14, atol=0)
        assert torch.allclose(norm(3.5 * x), norm(x), rtol=1e-12, atol=1e-12)  # re-scaling invariance
        assert not torch.allclose(norm(x + 1), norm(x), atol=1e-3)  # no re-centering invariance
        centred = x - x.mean(-1, keepdim=True)
        layer = torch.nn.functional.layer_norm(centred, (8,), eps=0.0)
        assert torch.allclose(torch.nn.RMSNorm(8, eps=0.0, dtype=torch.float64)(centred), layer, rtol=1e-12, atol=1e-12)
    tiny = torch.full((1, 4), 1e-4)
    eps32 = torch.finfo(torch.float32).eps
    assert f"{eps32:.1e}" == "1.2e-07"
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        out = torch.nn.RMSNorm(4, dtype=dtype)(tiny.to(dtype)).float()
        assert torch.allclose(out, torch.full((1, 4), 1e-4 / math.sqrt(1e-8 + eps32)), rtol=1e-2), dtype
    assert f"{1e-4 / math.sqrt(1e-8 + eps32):.2f}" == "0.28"
    assert "0.28 instead of 1" in _said("rmsnorm") and "float16, bfloat16 and float32" in _said("rmsnorm")


@measures("rmsnorm-speedup")
def test_the_running_time_rmsnorm_saves_is_the_papers():
    """A citation, checked both ways: Zhang and Sennrich 2019 report "7%~64%" less running time (abstract)."""
    assert "7% to 64% less running time" in _said("rmsnorm")
    assert _cited("rmsnorm", "Zhang and Sennrich 2019", "7%~64%")


@measures("paged-blocks-example")
def test_paged_blocks_waste_at_most_one_partly_filled_block():
    """Block size 16, 1,000 tokens: 63 blocks, 1,008 slots, 8 empty; a contiguous reservation for 2,048 tokens
    leaves 1,048 unused; a request never wastes more than B − 1 slots, whatever its length."""
    B = 16
    blocks = -(-1000 // B)
    assert (blocks, blocks * B, blocks * B - 1000, 2048 - 1000) == (63, 1008, 8, 1048)
    assert max(-(-n // B) * B - n for n in range(1, 5000)) == B - 1
    text = _said("paged-attention")
    assert "a request of 1,000 tokens takes 63 blocks, 1,008 slots, 8 of them empty" in text
    assert "2,048 tokens leaves 1,048 slots unused" in text


@measures("paged-attention-throughput")
def test_the_throughput_of_vllm_is_the_papers():
    """A citation, checked both ways: Kwon et al. 2023, abstract: 2-4× the throughput of FasterTransformer and
    Orca at the same level of latency."""
    assert "2-4× the throughput of FasterTransformer and Orca at the same latency" in _said("paged-attention")
    assert _cited("paged-attention", "Kwon et al. 2023", "2-4×", "FasterTransformer and Orca")


def _iterations(needs: list[int], slots: int, continuous: bool) -> int:
    """Iterations to finish requests needing ``needs`` steps each, in arrival order, with ``slots`` slots."""
    waiting, running, t = list(needs), [], 0
    while waiting or running:
        if continuous or not running:  # request-level: a new batch only when the last one has drained
            while waiting and len(running) < slots:
                running.append(waiting.pop(0))
        t += 1
        running = [r - 1 for r in running if r > 1]
    return t


@measures("continuous-batching-example")
def test_iteration_level_scheduling_finishes_the_example_in_10_iterations_not_14():
    needs = [10, 2, 2, 2, 2]
    assert _iterations(needs, 2, continuous=False) == 14 == 10 + 2 + 2
    assert _iterations(needs, 2, continuous=True) == 10
    assert _iterations([3, 3], 2, continuous=False) == _iterations([3, 3], 2, continuous=True) == 3  # no gain when equal
    assert "10 + 2 + 2 = 14 iterations" in _said("continuous-batching") and "done after 10" in _said("continuous-batching")


@measures("kv-quant-int8-error")
def test_symmetric_int8_errs_by_at_most_half_a_scale():
    rng = np.random.default_rng(23)
    x = rng.standard_normal((64, 128)) * rng.uniform(0.1, 10, (64, 1))  # tokens of very different sizes
    s = np.abs(x).max(axis=1, keepdims=True) / 127  # per token
    q = np.round(x / s)
    assert q.min() >= -127 and q.max() <= 127
    err = np.abs(q * s - x)
    assert (err <= s / 2 + 1e-12).all() and (err > 0.45 * s).any()  # the bound is reached, not loose
    per_tensor = np.abs(x).max() / 127  # one scale: the small tokens round to a few levels
    small = np.argmin(np.abs(x).max(axis=1))
    assert len(np.unique(np.round(x[small] / per_tensor))) < len(np.unique(q[small])) / 4
    assert "s = max|x| / 127" in _said("kv-cache-quantization") and "at most s/2" in _said("kv-cache-quantization")


@measures("kv-quant-scale-bits")
def test_the_scales_are_counted_in_the_bits_per_element():
    bits = 4 + 16 / 32
    assert bits == 4.5 and f"{16 / bits:.1f}" == "3.6" and 16 / bits != 4
    assert 4 + (16 + 16) / 32 == 5 and 16 / 5 == 3.2
    text = _said("kv-cache-quantization")
    assert "4 + 16/32 = 4.5 bits" in text and "3.6 times" in text and "5 bits, 3.2 times" in text


@measures("kivi-granularity")
def test_kivis_granularity_is_the_papers():
    """A citation, checked both ways (Liu et al. 2024, abstract): keys per channel, values per token, 2 bits."""
    text = _said("kv-cache-quantization")
    assert "quantizes keys per channel and values per token, to 2 bits" in text
    assert _cited("kv-cache-quantization", "Liu et al. 2024", "keys per channel, values per token")


@measures("tree-mask-branches")
def test_the_tree_mask_gives_every_node_the_output_of_its_branch_alone():
    """A prefix of 3 cached tokens, then the tree a → {b, c}, b → d laid out as [a, b, c, d]: with the tree mask
    and positions by depth (RoPE on q and k), each node's output from SDPA equals attention over its own branch;
    a causal mask over the flat order, or positions by flat index, does not."""
    torch = torch_or_skip()
    F = torch.nn.functional
    torch.manual_seed(5)
    d, P = 4, 3
    parent = {0: None, 1: 0, 2: 0, 3: 1}  # a, b, c, d

    def ancestors(i: int) -> list[int]:
        out = []
        while i is not None:
            out.append(i)
            i = parent[i]
        return out[::-1]

    depth = [len(ancestors(i)) - 1 for i in range(4)]
    assert depth == [0, 1, 1, 2]
    mask = torch.ones(4, P + 4, dtype=torch.bool)
    mask[:, P:] = False
    for i in range(4):
        for j in ancestors(i):
            mask[i, P + j] = True
    assert [[j for j in range(4) if mask[i, P + j]] for i in range(4)] == [[0], [0, 1], [0, 2], [0, 1, 3]]

    theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)

    def rope(x, pos):
        a = pos[:, None].double() * theta
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * a.cos() - x2 * a.sin(), x1 * a.sin() + x2 * a.cos()], -1).flatten(-2)

    qs, ks, vs = (torch.randn(P + 4, d, dtype=torch.float64) for _ in range(3))
    pos = torch.tensor(list(range(P)) + [P + t for t in depth])
    tree = F.scaled_dot_product_attention(rope(qs[P:], pos[P:]), rope(ks, pos), vs, attn_mask=mask)
    for i in range(4):
        keep = list(range(P)) + [P + j for j in ancestors(i)]
        alone_pos = torch.arange(len(keep))  # the branch decoded on its own: positions 0, 1, 2, ...
        alone = F.scaled_dot_product_attention(rope(qs[P + i:P + i + 1], alone_pos[-1:]), rope(ks[keep], alone_pos), vs[keep])
        assert torch.allclose(tree[i], alone[0], atol=1e-12), i
    causal = torch.ones(4, P + 4, dtype=torch.bool).tril(P)
    flat = F.scaled_dot_product_attention(rope(qs[P:], pos[P:]), rope(ks, pos), vs, attn_mask=causal)
    assert not torch.allclose(flat[2], tree[2])  # c would see its sibling b
    by_index = torch.arange(P + 4)
    wrong = F.scaled_dot_product_attention(rope(qs[P:], by_index[P:]), rope(ks, by_index), vs, attn_mask=mask)
    assert not torch.allclose(wrong[3], tree[3])  # d at flat index 3 is not at depth 2
    assert "{a}, {a, b}, {a, c} and {a, b, d}" in _said("speculative-tree-mask")


@measures("mla-absorb-exact")
def test_absorbing_w_uk_and_w_uv_gives_the_same_scores_and_outputs():
    """Latent width d_c = 2, 3 heads of width 4: q·(W_UK·c) = (W_UKᵀ·q)·c, and W_O·concat(W_UV·Σ a·c) equals
    Σ_h (W_O^h·W_UV^h)·(Σ a·c): exact in integers (no rounding at all)."""
    rng = np.random.default_rng(7)
    d_model, d_c, H, d_h, L = 6, 2, 3, 4, 5
    h = rng.integers(-3, 4, (L, d_model))
    W_DKV = rng.integers(-2, 3, (d_c, d_model))
    W_UK, W_UV = rng.integers(-2, 3, (H, d_h, d_c)), rng.integers(-2, 3, (H, d_h, d_c))
    W_Q = rng.integers(-2, 3, (H, d_h, d_model))
    W_O = rng.integers(-2, 3, (d_model, H * d_h))
    c = h @ W_DKV.T  # [L, d_c]: all that is cached
    q = np.einsum("hed,ld->hle", W_Q, h)  # [H, L, d_h]
    k = np.einsum("hec,lc->hle", W_UK, c)
    explicit = q @ k.transpose(0, 2, 1)  # [H, L, L]
    absorbed = np.einsum("ld,hdc,mc->hlm", h, np.einsum("hed,hec->hdc", W_Q, W_UK), c)  # (W_UKᵀ·q)·c
    assert np.array_equal(explicit, absorbed)
    a = rng.integers(0, 4, (H, L, L))  # any weights: the value side is linear in them
    v = np.einsum("hec,lc->hle", W_UV, c)
    out = (a @ v).transpose(1, 0, 2).reshape(L, H * d_h) @ W_O.T
    W_O_abs = np.einsum("mhe,hec->hmc", W_O.reshape(d_model, H, d_h), W_UV)  # W_O^h·W_UV^h: [H, d_model, d_c]
    assert np.array_equal(out, np.einsum("hmc,hlc->lm", W_O_abs, a @ c))
    assert "q·(W_UK·c) = (W_UKᵀ·q)·c" in _said("mla")


@measures("mla-cache-count")
def test_the_cache_of_mla_per_token_is_the_papers():
    """DeepSeek-V2 (section 2.1.4): d_c = 4·d_h = 512, d_R = d_h/2 = 64 with 128 heads of d_h = 128; MLA caches
    d_c + d_R = 576 elements per token and layer, GQA caches 2·groups·d_h: 576 for 2.25 groups; MHA 32,768."""
    d_h, n_h = 128, 128
    d_c, d_R = 4 * d_h, d_h // 2
    assert (d_c, d_R, d_c + d_R) == (512, 64, 576)
    assert 2 * n_h * d_h == 32_768 and 2 * 2.25 * d_h == d_c + d_R
    assert round(32_768 / 576) == 57
    text = _said("mla")
    assert "512 + 64 = 576" in text and "2·128·128 = 32,768" in text and "about 57 times less" in text
    assert "2.25 groups" in text and _cited("mla", "DeepSeek-AI 2024", "d_c = 4·d_h = 512", "2.25 groups")


def _band(L: int, W: int, sinks: int = 0) -> np.ndarray:
    """The boolean mask (True = may attend) of a causal window of W keys, and the first ``sinks`` keys."""
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    return (j <= i) & ((i - W < j) | (j < sinks))


@measures("sliding-window-torch")
def test_sdpa_takes_the_window_as_a_boolean_mask():
    """torch 2.13's SDPA has no window argument; the band i − W < j ≤ i as a boolean attn_mask gives attention over
    the last W keys only, and with W = L the causal mask."""
    torch = torch_or_skip()
    import inspect

    F = torch.nn.functional
    assert "window" not in (F.scaled_dot_product_attention.__doc__ or "").split("\n\n")[0]
    assert not any("window" in p for p in _sdpa_parameters(F.scaled_dot_product_attention, inspect))
    torch.manual_seed(1)
    L, W, d = 7, 3, 4
    q, k, v = (torch.randn(1, 1, L, d, dtype=torch.float64) for _ in range(3))
    band = torch.from_numpy(_band(L, W))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=band)
    for i in range(L):
        keys = slice(max(0, i - W + 1), i + 1)
        w = torch.softmax(q[0, 0, i] @ k[0, 0, keys].T / math.sqrt(d), -1)
        assert torch.allclose(out[0, 0, i], w @ v[0, 0, keys], atol=1e-12)
    assert torch.allclose(F.scaled_dot_product_attention(q, k, v, attn_mask=torch.from_numpy(_band(L, L))),
                          F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-12)
    assert "no window argument" in _said("sliding-window")


def _sdpa_parameters(fn, inspect) -> list[str]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):  # a builtin without a signature: read the one in its docstring
        return re.findall(r"(\w+)=", (fn.__doc__ or "").split(")")[0])


@measures("rolling-cache-equal")
def test_a_rolling_buffer_of_w_slots_decodes_what_the_window_computes():
    """Decoding token by token with a cache of W slots (position i in slot i mod W) gives the outputs of
    sliding-window attention over the whole sequence, though the slots are out of order once it wraps."""
    from tutor.numeric.functional import scaled_dot_product_attention

    rng = np.random.default_rng(9)
    L, W, d = 11, 4, 3
    q, k, v = (rng.standard_normal((L, d)) for _ in range(3))
    whole = scaled_dot_product_attention(q, k, v, attn_mask=_band(L, W))
    K, V, filled = np.zeros((W, d)), np.zeros((W, d)), np.zeros(W, dtype=bool)
    wrapped = False
    for i in range(L):
        K[i % W], V[i % W], filled[i % W] = k[i], v[i], True
        slots_positions = [p for p in range(max(0, i - W + 1), i + 1)]
        wrapped |= [p % W for p in slots_positions] != sorted(p % W for p in slots_positions)
        out = scaled_dot_product_attention(q[i:i + 1], K[filled], V[filled])
        assert np.allclose(out[0], whole[i], atol=1e-12), i
    assert wrapped  # the buffer did wrap: its slots were out of position order


@measures("mistral-window-span")
def test_the_window_of_mistral_reaches_131k_tokens_and_saves_8x_on_32k():
    """Jiang et al. 2023, section 2: W = 4096 and 32 layers give a theoretical span of about 131K tokens; on a
    32k-token sequence the rolling buffer uses 8 times less cache.  And the span itself, measured: with k layers
    of a window W, token i depends on tokens back to i − k·(W − 1) in this project's convention (W keys)."""
    assert 32 * 4096 == 131_072 and 32 * 1024 // 4096 == 8
    L, W = 40, 4
    reach = _band(L, W).astype(int)
    for k in (1, 2, 3):
        seen = np.linalg.matrix_power(reach, k) > 0
        assert seen[L - 1].argmax() == L - 1 - k * (W - 1)  # "about k·W": k·(W − 1) with W keys per window
    text = _said("sliding-window")
    assert "W = 4096 and 32 layers, about 131K tokens" in text and "8 times less memory" in text
    assert _cited("sliding-window", "Jiang et al. 2023", "131K", "8 times less cache on 32K")


@measures("sink-mask")
def test_the_sink_mask_keeps_the_first_s_keys_and_the_window():
    """Query i sees keys j < S and i − W < j ≤ i: never an empty row; with S = 0 it is the window; positions in
    the cache: the cached tokens 0, 1, 2, 3, 6, 7, 8 and token 9 take positions 0 to 7."""
    m = _band(12, 3, sinks=4)
    assert m.any(axis=1).all()
    assert [int(j) for j in np.flatnonzero(m[9])] == [0, 1, 2, 3, 7, 8, 9]
    assert np.array_equal(_band(12, 3, sinks=0), _band(12, 3))
    cached = [0, 1, 2, 3, 6, 7, 8, 9]
    assert list(range(len(cached))) == [0, 1, 2, 3, 4, 5, 6, 7]
    text = _said("attention-sinks")
    assert "keys j < S and i − W < j ≤ i" in text and "0, 1, 2, 3, 6, 7, 8 and token 9" in text and "0 to 7" in text


@measures("streaming-llm-numbers")
def test_the_numbers_of_streamingllm_are_the_papers():
    """A citation, checked both ways: Xiao et al. 2024, abstract: 4 million tokens, up to 22.2× speedup over the
    sliding window with recomputation; section 3.2: four initial tokens."""
    text = _said("attention-sinks")
    assert "up to 4 million tokens, up to 22.2 times faster" in text and "four were enough" in text
    assert _cited("attention-sinks", "Xiao et al. 2024", "4 million tokens", "22.2×", "four initial tokens")


@measures("linear-attention-associativity")
def test_linear_attention_reorders_exactly_and_runs_as_an_rnn():
    """(φ(Q)·φ(K)ᵀ)·V = φ(Q)·(φ(K)ᵀ·V) with φ(x) = elu(x) + 1; the causal form equals running sums of a d×d_v
    state; and the result is not softmax attention."""
    rng = np.random.default_rng(4)
    L, d, d_v = 9, 3, 2
    Q, K, V = rng.standard_normal((L, d)), rng.standard_normal((L, d)), rng.standard_normal((L, d_v))

    def phi(x):
        return np.where(x > 0, x + 1, np.exp(x))  # elu(x) + 1

    assert (phi(Q) > 0).all()
    A = phi(Q) @ phi(K).T
    quadratic = (A @ V) / A.sum(-1, keepdims=True)
    linear = (phi(Q) @ (phi(K).T @ V)) / (phi(Q) @ phi(K).sum(0))[:, None]
    assert np.allclose(quadratic, linear, rtol=1e-12)
    causal = (np.tril(A) @ V) / np.tril(A).sum(-1, keepdims=True)
    S, z, rnn = np.zeros((d, d_v)), np.zeros(d), []
    for i in range(L):
        S, z = S + np.outer(phi(K[i]), V[i]), z + phi(K[i])
        rnn.append(phi(Q[i]) @ S / (phi(Q[i]) @ z))
    assert S.shape == (d, d_v) and np.allclose(np.array(rnn), causal, rtol=1e-12)
    assert not np.allclose(quadratic, softmax(Q @ K.T / math.sqrt(d)) @ V, atol=1e-3)


@measures("linear-attention-cost")
def test_the_reordered_product_costs_2_l_d_squared_and_wins_when_l_exceeds_d():
    def quadratic(L, d, d_v):  # (φQ·φKᵀ)·V: L·L·d, then L·L·d_v multiply-adds
        return L * L * d + L * L * d_v

    def linear(L, d, d_v):  # φKᵀ·V: d·d_v·L, then φQ·(...): L·d·d_v
        return 2 * L * d * d_v

    for d in (16, 64, 128):
        assert quadratic(4096, d, d) == 2 * 4096**2 * d and linear(4096, d, d) == 2 * 4096 * d**2
        assert all((linear(L, d, d) < quadratic(L, d, d)) == (L > d) for L in range(1, 3 * d))
    assert "4000 times faster" in _said("linear-attention") and _cited("linear-attention", "Katharopoulos et al. 2020", "4000×")


def _thetas(d: int, base: float = 10000.0) -> np.ndarray:
    return base ** (-2 * np.arange(d // 2) / d)


@measures("rope-pi-range")
def test_position_interpolation_keeps_every_angle_in_the_trained_range():
    L, s, d = 4096, 8, 128
    theta = _thetas(d)
    trained = np.arange(L)[:, None] * theta
    extended = np.arange(s * L)[:, None] * theta
    assert (extended.max(0) > trained.max(0)).all()  # extrapolation: every pair goes past its trained angle
    pi = (np.arange(s * L)[:, None] / s) * theta
    assert (pi.max(0) < L * theta).all()  # positions m/s < L: inside the interval [0, L) trained on
    assert (pi.max(0) - trained.max(0) < theta).all()  # at most one position's step past the last trained angle
    assert L * theta[0] / (2 * np.pi) > 600 and L * theta[-1] / (2 * np.pi) < 0.1  # fast pairs turn many times, slow ones a fraction
    assert "32,768 tokens within 1,000 steps" in _said("rope-context-extension")


@measures("rope-ntk-base")
def test_the_ntk_aware_base_slows_the_last_pair_by_exactly_s_and_keeps_the_first():
    for d, s in ((64, 4), (128, 8), (128, 32)):
        theta, ntk = _thetas(d), _thetas(d, 10000.0 * s ** (d / (d - 2)))
        assert ntk[0] == theta[0] == 1
        assert np.isclose(theta[-1] / ntk[-1], s, rtol=1e-12)
        ratio = theta / ntk
        assert (np.diff(ratio) > 0).all() and (ratio >= 1).all() and (ratio <= s * (1 + 1e-12)).all()
    assert "b' = b·s^(d/(d−2))" in _said("rope-context-extension")


@measures("yarn-ramp-temperature")
def test_yarn_interpolates_by_wavelength_and_sharpens_with_its_temperature():
    """NTK-by-parts with α = 1, β = 32: r = L / wavelength; r < α: θ/s (as PI), r > β: θ unchanged, a linear ramp
    between; √(1/t) = 0.1·ln(s) + 1 > 1 for s > 1, so 1/t > 1 multiplies the logits (sharper)."""
    L, s, d, alpha, beta = 4096, 16, 128, 1, 32
    theta = _thetas(d)
    r = L / (2 * np.pi / theta)
    gamma = np.clip((r - alpha) / (beta - alpha), 0, 1)
    yarn = (1 - gamma) * theta / s + gamma * theta
    assert np.allclose(yarn[r > beta], theta[r > beta]) and np.allclose(yarn[r < alpha], theta[r < alpha] / s)
    between = (r >= alpha) & (r <= beta)
    assert between.any() and ((yarn[between] >= theta[between] / s) & (yarn[between] <= theta[between])).all()
    root = 0.1 * math.log(s) + 1
    assert f"{root:.3f}" == "1.277" and root**2 > 1
    text = _said("rope-context-extension")
    assert "√(1/t) = 0.1·ln(s) + 1" in text and "α = 1, β = 32" in text


@measures("rope-extension-numbers")
def test_the_numbers_of_pi_and_yarn_are_the_papers():
    """Citations, checked both ways: Chen et al. 2023 (32768 tokens within 1000 steps), Peng et al. 2023 (10x fewer
    tokens, 2.5x fewer training steps; α = 1, β = 32)."""
    text = _said("rope-context-extension")
    assert "10 times fewer tokens and 2.5 times fewer training steps" in text
    assert _cited("rope-context-extension", "Chen et al. 2023", "32768 tokens within 1000 steps")
    assert _cited("rope-context-extension", "Peng et al. 2023", "α = 1, β = 32", "10x fewer tokens, 2.5x fewer training steps")


@measures("flash2-deferred-rescale")
def test_flashattention_2_divides_by_the_row_sum_once_and_gets_the_same_output():
    """The online softmax over key blocks, normalising at every block (as FlashAttention's Algorithm 1 writes its
    output) or once at the end with the logsumexp kept (FlashAttention-2, section 3.1), gives the same output; the
    second divides L_q·d_v times instead of L_q·d_v per block."""
    rng = np.random.default_rng(12)
    L_q, L_k, d, Bk = 4, 10, 3, 3
    q, k, v = rng.standard_normal((L_q, d)), rng.standard_normal((L_k, d)), rng.standard_normal((L_k, d))
    ref = softmax(q @ k.T / math.sqrt(d)) @ v
    m, ell, o_norm, o_raw, divisions = np.full(L_q, -np.inf), np.zeros(L_q), np.zeros((L_q, d)), np.zeros((L_q, d)), [0, 0]
    for start in range(0, L_k, Bk):
        s = q @ k[start:start + Bk].T / math.sqrt(d)
        m_new = np.maximum(m, s.max(1))
        p = np.exp(s - m_new[:, None])
        ell_new = np.exp(m - m_new) * ell + p.sum(1)
        o_norm = ((ell * np.exp(m - m_new))[:, None] * o_norm + p @ v[start:start + Bk]) / ell_new[:, None]
        divisions[0] += o_norm.size
        o_raw = np.exp(m - m_new)[:, None] * o_raw + p @ v[start:start + Bk]
        m, ell = m_new, ell_new
    out2 = o_raw / ell[:, None]
    divisions[1] += out2.size
    logsumexp = m + np.log(ell)
    assert np.allclose(o_norm, ref, rtol=1e-12) and np.allclose(out2, ref, rtol=1e-12)
    assert np.allclose(logsumexp, np.log(np.exp(q @ k.T / math.sqrt(d)).sum(1)), rtol=1e-12)
    assert divisions == [-(-L_k // Bk) * L_q * d, L_q * d]


@measures("flash-versions-numbers")
def test_the_numbers_of_flashattention_2_and_3_are_the_papers():
    """Citations, checked both ways: Dao 2023 (about 2×, 50-73% of A100 peak), Shah et al. 2024 (FlashAttention-2 at
    35% on H100; 1.5-2.0×, 740 TFLOPs/s in FP16 at 75%, close to 1.2 PFLOPs/s in FP8, 2.6× lower FP8 error)."""
    text = _said("flash-attention-2-3")
    for said in ("about 2 times FlashAttention's speed and 50% to 73%", "On the H100 it reached only 35%",
                 "1.5 to 2.0 times faster than FlashAttention-2, up to 740 TFLOPs/s in FP16 (75% utilisation)",
                 "close to 1.2 PFLOPs/s in FP8", "2.6 times lower"):
        assert said in text, said
    assert _cited("flash-attention-2-3", "Dao 2023", "50-73%")
    assert _cited("flash-attention-2-3", "Shah et al. 2024", "35%", "1.5-2.0×", "740 TFLOPs/s", "75%", "1.2 PFLOPs/s", "2.6×")
