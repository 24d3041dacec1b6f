"""The `backward` kata in NumPy with one bug (held back for the tests): d_k_order."""

import math

import numpy as np

KATA = "backward"


def attention_backward(q, k, v, d_out, mask=None):
    scale = 1.0 / math.sqrt(q.shape[-1])
    # the forward pass again: S = q·kᵀ/√d, P = softmax(S) along the keys
    scores = q @ k.swapaxes(-1, -2) * scale                     # S [B, H, L_q, L_k]
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)      # a row with no key: keep exp() finite
    e = np.exp(scores - row_max)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)  # P; a row with no key: zeros
    # out = P·v
    d_v = weights.swapaxes(-1, -2) @ d_out                      # Pᵀ·dO [B, H, L_k, d_v]
    d_weights = d_out @ v.swapaxes(-1, -2)                      # dP = dO·vᵀ [B, H, L_q, L_k]
    # P = softmax(S) row by row: dS = P ∘ (dP − Σ_j dP_j P_j), 0 where P is 0 (masked)
    row = (d_weights * weights).sum(axis=-1, keepdims=True)     # [B, H, L_q, 1]
    d_scores = weights * (d_weights - row)                      # dS [B, H, L_q, L_k]
    # S = q·kᵀ/√d
    d_q = d_scores @ k * scale                                  # [B, H, L_q, d]
    d_k = q @ d_scores.swapaxes(-1, -2) * scale                 # [B, H, L_k, d]
    return d_q, d_k, d_v, d_scores
