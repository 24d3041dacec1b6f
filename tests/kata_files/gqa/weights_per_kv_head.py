"""Grouped-query attention in NumPy: the reference solution with one bug (weights_per_kv_head), as a learner would write it.

The query heads are grouped by the K/V head they read (no copy of K and V), and
the weights are returned averaged over each group: one [L, L] per K/V head.
"""

import math

import numpy as np

KATA = "gqa"


def grouped_query_attention(q, k, v, is_causal=False):
    B, H, L, d_k = q.shape
    G = k.shape[1]
    group = H // G
    qg = q.reshape(B, G, group, L, d_k)                         # query heads grouped by their K/V head
    scores = qg @ k[:, :, None].transpose(0, 1, 2, 4, 3) / math.sqrt(d_k)  # [B, G, group, L, L]
    if is_causal:
        scores = np.where(np.tril(np.ones((L, L), dtype=bool)), scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    out = (weights @ v[:, :, None]).reshape(B, H, L, v.shape[-1])  # [B, H, L, d_v]
    return out, weights.mean(axis=2)                             # [B, G, L, L]
