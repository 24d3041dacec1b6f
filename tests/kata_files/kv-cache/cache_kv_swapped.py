"""One decode step against a KV cache, in NumPy: the reference solution with one bug (cache_kv_swapped), as a learner would write it."""

import math

import numpy as np

KATA = "kv-cache"


def decode_step(x_new, w_q, w_k, w_v, w_o, num_heads, v_cache, k_cache):
    B, T, D = x_new.shape
    d_k = D // num_heads
    P = k_cache.shape[2]                                   # tokens already in the cache

    def split(t):                                          # [B, T, D] -> [B, H, T, d_k]
        return t.reshape(B, T, num_heads, d_k).transpose(0, 2, 1, 3)

    q = split(x_new @ w_q.T)                               # only the new tokens are projected
    k = np.concatenate([k_cache, split(x_new @ w_k.T)], axis=2)  # [B, H, P + T, d_k]: new rows appended
    v = np.concatenate([v_cache, split(x_new @ w_v.T)], axis=2)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_k)  # [B, H, T, P + T]
    i = np.arange(T)[:, None]                              # new token i sits at position P + i
    j = np.arange(P + T)[None, :]
    scores = np.where(j <= P + i, scores, -np.inf)         # causal, aligned bottom-right
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)            # [B, H, T, P + T]
    context = weights @ v                                  # [B, H, T, d_k]
    context = context.transpose(0, 2, 1, 3).reshape(B, T, D)  # heads side by side: [B, T, D]
    return context @ w_o.T, k, v
