"""用 NumPy 手工实现注意力的反向传播：`backward` 编程练习的参考解答。"""

import math

import numpy as np

KATA = "backward"


def attention_backward(q, k, v, d_out, mask=None):
    scale = 1.0 / math.sqrt(q.shape[-1])
    # 再做一遍前向计算：S = q·kᵀ/√d，P = softmax(S)，沿键的方向
    scores = q @ k.swapaxes(-1, -2) * scale                     # S [B, H, L_q, L_k]
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)      # 没有可关注的键的行：让 exp() 保持有限
    e = np.exp(scores - row_max)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)  # P；没有键的行：全零
    # out = P·v
    d_v = weights.swapaxes(-1, -2) @ d_out                      # Pᵀ·dO [B, H, L_k, d_v]
    d_weights = d_out @ v.swapaxes(-1, -2)                      # dP = dO·vᵀ [B, H, L_q, L_k]
    # P = softmax(S)，逐行：dS = P ∘ (dP − Σ_j dP_j P_j)，P 为 0 处（被掩码）为 0
    row = (d_weights * weights).sum(axis=-1, keepdims=True)     # [B, H, L_q, 1]
    d_scores = weights * (d_weights - row)                      # dS [B, H, L_q, L_k]
    # S = q·kᵀ/√d
    d_q = d_scores @ k * scale                                  # [B, H, L_q, d]
    d_k = d_scores.swapaxes(-1, -2) @ q * scale                 # [B, H, L_k, d]
    return d_q, d_k, d_v, d_scores
