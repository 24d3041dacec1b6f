"""The `backward` kata in PyTorch with one bug (held back for the tests): d_scores_scaled."""

import math

import torch

KATA = "backward"


def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, d_out: torch.Tensor,
                       mask: torch.Tensor | None = None):
    scale = 1.0 / math.sqrt(q.shape[-1])
    # the forward pass again: S = q·kᵀ/√d, P = softmax(S) along the keys
    scores = q @ k.transpose(-2, -1) * scale                    # S [B, H, L_q, L_k]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)                # a row with no key: 0/0 -> zeros
    # out = P·v
    d_v = weights.transpose(-2, -1) @ d_out                     # Pᵀ·dO [B, H, L_k, d_v]
    d_weights = d_out @ v.transpose(-2, -1)                     # dP = dO·vᵀ [B, H, L_q, L_k]
    # P = softmax(S) row by row: dS = P ∘ (dP − Σ_j dP_j P_j), 0 where P is 0 (masked)
    row = (d_weights * weights).sum(dim=-1, keepdim=True)       # [B, H, L_q, 1]
    d_scores = weights * (d_weights - row) * scale              # the 1/√d folded in here
    # S = q·kᵀ/√d
    d_q = d_scores @ k                                          # [B, H, L_q, d]
    d_k = d_scores.transpose(-2, -1) @ q                        # [B, H, L_k, d]
    return d_q, d_k, d_v, d_scores
