"""Held back for the tests: the `sdpa` NumPy solution with one bug (empty_row_nan): no guard for a row with no key: 0/0."""

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
    row_max = scores.max(axis=-1, keepdims=True)  # [B, H, L_q, 1]
    e = np.exp(scores - row_max)
    total = e.sum(axis=-1, keepdims=True)
    weights = e / total
    return weights @ v, weights  # [B, H, L_q, d_v], [B, H, L_q, L_k]
