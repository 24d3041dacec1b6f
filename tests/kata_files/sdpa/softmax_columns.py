"""Held back for the tests: the `sdpa` NumPy solution with one bug (softmax_columns): the softmax taken over the queries' axis (a column), guarded."""

import math

import numpy as np

KATA = "sdpa"


def scaled_dot_product_attention(q, k, v, mask=None, is_causal=False):
    L_q, L_k = q.shape[-2], k.shape[-2]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # [B, H, L_q, L_k]
    if is_causal:
        mask = np.tril(np.ones((L_q, L_k), dtype=bool))  # [L_q, L_k]: key j <= query i
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)  # True = may attend; broadcast to [B, H, L_q, L_k]
    row_max = scores.max(axis=-2, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)  # a row with no key: keep exp() finite
    e = np.exp(scores - row_max)
    total = e.sum(axis=-2, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)  # no key: zero weights
    return weights @ v, weights  # [B, H, L_q, d_v], [B, H, L_q, L_k]
