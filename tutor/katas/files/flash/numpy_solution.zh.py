"""用 NumPy 实现 FlashAttention-2 的前向计算：`flash` 编程练习的参考解答（Dao 2023，Algorithm 1）。"""

import math

import numpy as np

KATA = "flash"


def flash_attention(q, k, v, block_size):
    L_k = k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    m_i = np.full(q.shape[:-1], -np.inf, dtype=q.dtype)          # 当前最大值 [B, H, L_q]
    l_i = np.zeros(q.shape[:-1], dtype=q.dtype)                   # 累计和 [B, H, L_q]
    acc = np.zeros((*q.shape[:-1], v.shape[-1]), dtype=q.dtype)  # 累加器 [B, H, L_q, d_v]
    for start in range(0, L_k, block_size):                      # 最后一块可能较小
        k_block = k[..., start:start + block_size, :]            # [B, H, n, d]
        v_block = v[..., start:start + block_size, :]            # [B, H, n, d_v]
        s = q @ k_block.swapaxes(-1, -2) * scale                 # [B, H, L_q, n]：一块注意力分数
        m_new = np.maximum(m_i, s.max(axis=-1))                  # [B, H, L_q]
        alpha = np.exp(m_i - m_new)                              # 重缩放：第一块时为 0（m_i = -inf）
        p = np.exp(s - m_new[..., None])                         # [B, H, L_q, n]
        l_i = alpha * l_i + p.sum(axis=-1)
        acc = alpha[..., None] * acc + p @ v_block
        m_i = m_new
    return acc / l_i[..., None], m_i + np.log(l_i)               # out [B, H, L_q, d_v], lse [B, H, L_q]
