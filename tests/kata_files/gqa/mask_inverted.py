"""Grouped-query attention in NumPy: the reference solution with one bug (mask_inverted), as a learner would write it."""

import math

import numpy as np

KATA = "gqa"


def grouped_query_attention(q, k, v, is_causal=False):
    B, H, L, d_k = q.shape
    G = k.shape[1]
    group = H // G                                     # query heads per K/V head
    k = np.repeat(k, group, axis=1)                    # [B, H, L, d_k]: K/V head g serves heads g·group … g·group + group − 1
    v = np.repeat(v, group, axis=1)                    # [B, H, L, d_v]  (repeat_interleave order: A, A, B, B)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_k)  # [B, H, L, L]
    if is_causal:
        causal = np.tril(np.ones((L, L), dtype=bool))
        scores = np.where(causal, -1e9, scores)
    scores = scores - scores.max(axis=-1, keepdims=True)   # every row keeps its diagonal: the max is finite
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)            # [B, H, L, L], one row per query head
    out = weights @ v                                      # [B, H, L, d_v]
    return out, weights
