"""Grouped-query attention in PyTorch: the reference solution with one bug (kv_tile_order_torch), as a learner would write it."""

import math

import torch

KATA = "gqa"


def grouped_query_attention(q, k, v, is_causal=False):
    B, H, L, d_k = q.shape
    group = H // k.shape[1]                                    # query heads per K/V head
    k = k.repeat(1, group, 1, 1)                               # [B, H, L, d_k]
    v = v.repeat(1, group, 1, 1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)          # [B, H, L, L]
    if is_causal:
        allowed = torch.ones(L, L, dtype=torch.bool, device=q.device).tril()  # query i sees keys j <= i
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)                    # [B, H, L, L], one row per query head
    out = weights @ v                                          # [B, H, L, d_v]
    return out, weights
