"""Grouped-query attention in PyTorch: the reference solution with one bug (weights_per_kv_head), as a learner would write it.

A loop over the K/V heads, the weights kept in a tensor with one slot per K/V
head: the last query head of each group overwrites the others.
"""

import math

import torch

KATA = "gqa"


def grouped_query_attention(q, k, v, is_causal=False):
    B, H, L, d_k = q.shape
    G = k.shape[1]
    group = H // G
    out = q.new_zeros(B, H, L, v.shape[-1])
    weights = q.new_zeros(B, G, L, L)
    for h in range(H):
        g = h // group
        scores = q[:, h] @ k[:, g].transpose(-2, -1) / math.sqrt(d_k)
        if is_causal:
            scores = scores.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
        w = torch.softmax(scores, dim=-1)
        out[:, h] = w @ v[:, g]
        weights[:, g] = w
    return out, weights
