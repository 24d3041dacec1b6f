"""Grouped-query attention in PyTorch: the reference solution with one bug (mask_inverted_torch), as a learner would write it."""

import math

import torch

KATA = "gqa"


def grouped_query_attention(q, k, v, is_causal=False):
    B, H, L, d_k = q.shape
    group = H // k.shape[1]                                    # query heads per K/V head
    k = k.repeat_interleave(group, dim=1)                      # [B, H, L, d_k]: heads A, A, B, B (as enable_gqa=True)
    v = v.repeat_interleave(group, dim=1)                      # [B, H, L, d_v]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)          # [B, H, L, L]
    if is_causal:
        allowed = torch.ones(L, L, dtype=torch.bool, device=q.device).tril()  # query i sees keys j <= i
        scores = scores.masked_fill(allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)                    # [B, H, L, L], one row per query head
    out = weights @ v                                          # [B, H, L, d_v]
    return out, weights
