"""Held back for the tests: the `cross` NumPy solution with one bug (no_out_proj): w_o never applied."""

import math

import numpy as np

KATA = "cross"


def cross_attention(x, memory, w_q, w_k, w_v, w_o, num_heads, key_padding_mask=None):
    B, L_q, D = x.shape
    d_k = D // num_heads

    def heads(t):  # [B, L, D] -> [B, H, L, d_k]: head h takes features h·d_k … (h+1)·d_k - 1
        return t.reshape(B, t.shape[1], num_heads, d_k).transpose(0, 2, 1, 3)

    q = heads(x @ w_q.T)         # the queries from the decoder: [B, H, L_q, d_k]
    k = heads(memory @ w_k.T)    # the keys and values from the encoder: [B, H, L_k, d_k]
    v = heads(memory @ w_v.T)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_k)  # [B, H, L_q, L_k]
    if key_padding_mask is not None:
        blocked = key_padding_mask[:, None, None, :]       # [B, 1, 1, L_k]: a padding key's column
        scores = np.where(blocked, -np.inf, scores)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)  # a row with no key: keep exp() finite
    e = np.exp(scores - row_max)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)  # [B, H, L_q, L_k]
    context = weights @ v                                   # [B, H, L_q, d_k]
    context = context.transpose(0, 2, 1, 3).reshape(B, L_q, D)  # heads side by side: [B, L_q, D]
    return context, weights                         # [B, L_q, D], [B, H, L_q, L_k]
