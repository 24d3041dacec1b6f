"""One decode step against a KV cache, in PyTorch: the reference solution with one bug (cache_returned_swapped_torch), as a learner would write it."""

import math

import torch

KATA = "kv-cache"


def decode_step(x_new, w_q, w_k, w_v, w_o, num_heads, k_cache, v_cache):
    B, T, D = x_new.shape
    d_k = D // num_heads
    P = k_cache.shape[2]                                   # tokens already in the cache

    def split(t):                                          # [B, T, D] -> [B, H, T, d_k]
        return t.view(B, T, num_heads, d_k).transpose(1, 2)

    q = split(x_new @ w_q.T)                               # only the new tokens are projected
    k = torch.cat([k_cache, split(x_new @ w_k.T)], dim=2)  # [B, H, P + T, d_k]: new rows appended
    v = torch.cat([v_cache, split(x_new @ w_v.T)], dim=2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)      # [B, H, T, P + T]
    # new token i sits at position P + i: it sees keys 0 … P + i (causal_lower_right)
    allowed = torch.ones(T, P + T, dtype=torch.bool, device=x_new.device).tril(diagonal=P)
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)                # [B, H, T, P + T]
    context = (weights @ v).transpose(1, 2).reshape(B, T, D)  # heads side by side: [B, T, D]
    return context @ w_o.T, v, k
