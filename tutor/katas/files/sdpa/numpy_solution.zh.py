"""用 NumPy 实现缩放点积注意力：`sdpa` 编程练习的参考解答。"""

import math

import numpy as np

KATA = "sdpa"


def scaled_dot_product_attention(q, k, v, mask=None, is_causal=False):
    L_q, L_k = q.shape[-2], k.shape[-2]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # [B, H, L_q, L_k]
    if is_causal:
        mask = np.tril(np.ones((L_q, L_k), dtype=bool))  # [L_q, L_k]：键 j <= 查询 i
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)  # True = 可以关注；广播到 [B, H, L_q, L_k]
    row_max = scores.max(axis=-1, keepdims=True)  # [B, H, L_q, 1]
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)  # 没有可关注的键的行：让 exp() 保持有限
    e = np.exp(scores - row_max)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)  # 没有键：权重为零
    return weights @ v, weights  # [B, H, L_q, d_v], [B, H, L_q, L_k]
