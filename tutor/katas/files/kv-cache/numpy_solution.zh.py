"""用 NumPy 实现在键值缓存上的一个解码步：`kv-cache` 编程练习的参考解答。"""

import math

import numpy as np

KATA = "kv-cache"


def decode_step(x_new, w_q, w_k, w_v, w_o, num_heads, k_cache, v_cache):
    B, T, D = x_new.shape
    d_k = D // num_heads
    P = k_cache.shape[2]                                   # 已在缓存中的词元数

    def split(t):                                          # [B, T, D] -> [B, H, T, d_k]
        return t.reshape(B, T, num_heads, d_k).transpose(0, 2, 1, 3)

    q = split(x_new @ w_q.T)                               # 只投影新词元
    k = np.concatenate([k_cache, split(x_new @ w_k.T)], axis=2)  # [B, H, P + T, d_k]：新的行追加在后面
    v = np.concatenate([v_cache, split(x_new @ w_v.T)], axis=2)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d_k)  # [B, H, T, P + T]
    i = np.arange(T)[:, None]                              # 第 i 个新词元位于位置 P + i
    j = np.arange(P + T)[None, :]
    scores = np.where(j <= P + i, scores, -np.inf)         # 因果掩码，按右下角对齐
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)            # [B, H, T, P + T]
    context = weights @ v                                  # [B, H, T, d_k]
    context = context.transpose(0, 2, 1, 3).reshape(B, T, D)  # 各头并排：[B, T, D]
    return context @ w_o.T, k, v
