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
