"""用 NumPy 实现交叉注意力：`cross` 编程练习的参考解答。"""

import math

import numpy as np

KATA = "cross"


def cross_attention(x, memory, w_q, w_k, w_v, w_o, num_heads, key_padding_mask=None):
    B, L_q, D = x.shape
    d_k = D // num_heads

    def heads(t):  # [B, L, D] -> [B, H, L, d_k]：第 h 个头取第 h·d_k … (h+1)·d_k - 1 个特征
        return t.reshape(B, t.shape[1], num_heads, d_k).transpose(0, 2, 1, 3)

    q = heads(x @ w_q.T)         # 查询来自解码器：[B, H, L_q, d_k]
    k = heads(memory @ w_k.T)    # 键和值来自编码器：[B, H, L_k, d_k]
    v = heads(memory @ w_v.T)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_k)  # [B, H, L_q, L_k]
    if key_padding_mask is not None:
        blocked = key_padding_mask[:, None, None, :]       # [B, 1, 1, L_k]：填充键所在的列
        scores = np.where(blocked, -np.inf, scores)
    row_max = scores.max(axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)  # 没有可关注的键的行：让 exp() 保持有限
    e = np.exp(scores - row_max)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)  # [B, H, L_q, L_k]
    context = weights @ v                                   # [B, H, L_q, d_k]
    context = context.transpose(0, 2, 1, 3).reshape(B, L_q, D)  # 各头并排：[B, L_q, D]
    return context @ w_o.T, weights                         # [B, L_q, D], [B, H, L_q, L_k]
