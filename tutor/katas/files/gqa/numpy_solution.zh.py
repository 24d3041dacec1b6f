"""用 NumPy 实现分组查询注意力：`gqa` 编程练习的参考解答。"""

import math

import numpy as np

KATA = "gqa"


def grouped_query_attention(q, k, v, is_causal=False):
    B, H, L, d_k = q.shape
    G = k.shape[1]
    group = H // G                                     # 每个 K/V 头对应的查询头数
    k = np.repeat(k, group, axis=1)                    # [B, H, L, d_k]：第 g 个 K/V 头服务第 g·group … g·group + group − 1 个头
    v = np.repeat(v, group, axis=1)                    # [B, H, L, d_v]  （repeat_interleave 的顺序：A, A, B, B）
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_k)  # [B, H, L, L]
    if is_causal:
        allowed = np.tril(np.ones((L, L), dtype=bool))  # 查询 i 看得到 j <= i 的键
        scores = np.where(allowed, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)   # 每行都保留了对角线：最大值是有限的
    e = np.exp(scores)
    weights = e / e.sum(axis=-1, keepdims=True)            # [B, H, L, L]，每个查询头各自一组行
    out = weights @ v                                      # [B, H, L, d_v]
    return out, weights
