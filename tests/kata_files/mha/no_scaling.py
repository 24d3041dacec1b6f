"""Multi-head attention in NumPy: a reference solution of the `mha` kata."""

import math

import numpy as np

KATA = "mha"


def multi_head_attention(x, qkv_weight, qkv_bias, out_weight, out_bias, num_heads, mask=None):
    B, L, D = x.shape
    d_k = D // num_heads
    qkv = x @ qkv_weight.T + qkv_bias                     # [B, L, 3·D]
    qkv = qkv.reshape(B, L, 3, num_heads, d_k)            # rows ordered Q, K, V; heads in order
    q, k, v = qkv.transpose(2, 0, 3, 1, 4)                # each [B, H, L, d_k]
    scores = q @ k.transpose(0, 1, 3, 2)   # [B, H, L, L]
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)  # a row with no key: keep exp() finite
    e = np.exp(scores - row_max)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)  # no key: zero weights
    context = weights @ v                                 # [B, H, L, d_k]
    context = context.transpose(0, 2, 1, 3).reshape(B, L, D)  # heads side by side: [B, L, D]
    out = context @ out_weight.T + out_bias               # [B, L, D]
    return out, weights
