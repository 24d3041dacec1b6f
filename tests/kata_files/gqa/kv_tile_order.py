"""Grouped-query attention in NumPy: the reference solution with one bug (kv_tile_order: K/V head h % G), as a learner would write it."""

import math

import numpy as np

KATA = "gqa"


def grouped_query_attention(q, k, v, is_causal=False):
    B, H, L, d_k = q.shape
    G = k.shape[1]
    kv_head = [h % G for h in range(H)]               # the K/V head of query head h
    k = k[:, kv_head]                                  # [B, H, L, d_k]
    v = v[:, kv_head]
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_k)  # [B, H, L, L]
    if is_causal:
        allowed = np.tril(np.ones((L, L), dtype=bool))  # query i sees keys j <= i
        scores = np.where(allowed, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)   # every row keeps its diagonal: the max is finite
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)            # [B, H, L, L], one row per query head
    out = weights @ v                                      # [B, H, L, d_v]
    return out, weights
