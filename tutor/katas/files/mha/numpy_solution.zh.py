"""用 NumPy 实现多头注意力：`mha` 编程练习的参考解答。"""

import math

import numpy as np

KATA = "mha"


def multi_head_attention(x, qkv_weight, qkv_bias, out_weight, out_bias, num_heads, mask=None):
    B, L, D = x.shape
    d_k = D // num_heads
    qkv = x @ qkv_weight.T + qkv_bias                     # [B, L, 3·D]
    qkv = qkv.reshape(B, L, 3, num_heads, d_k)            # 行按 Q、K、V 排列；头按顺序排列
    q, k, v = qkv.transpose(2, 0, 3, 1, 4)                # 每个 [B, H, L, d_k]
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_k)  # [B, H, L, L]
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)  # 没有可关注的键的行：让 exp() 保持有限
    e = np.exp(scores - row_max)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)  # 没有键：权重为零
    context = weights @ v                                 # [B, H, L, d_k]
    context = context.transpose(0, 2, 1, 3).reshape(B, L, D)  # 各头并排：[B, L, D]
    out = context @ out_weight.T + out_bias               # [B, L, D]
    return out, weights
