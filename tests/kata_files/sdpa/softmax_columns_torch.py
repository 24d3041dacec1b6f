"""Held back for the tests: the `sdpa` PyTorch solution with one bug (softmax_columns): torch.softmax over dim=-2."""

import math

import torch

KATA = "sdpa"


def scaled_dot_product_attention(q, k, v, mask=None, is_causal=False):
    L_q, L_k = q.size(-2), k.size(-2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # [B, H, L_q, L_k]
    if is_causal:
        mask = torch.ones(L_q, L_k, dtype=torch.bool, device=q.device).tril()  # key j <= query i
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # True = may attend
    weights = torch.softmax(scores, dim=-2)  # a row of only -inf gives NaN (0/0) ...
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)  # ... zero weights instead
    return weights @ v, weights  # [B, H, L_q, d_v], [B, H, L_q, L_k]
