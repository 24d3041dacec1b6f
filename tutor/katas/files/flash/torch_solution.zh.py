"""用 PyTorch 实现 FlashAttention-2 的前向计算：`flash` 编程练习的参考解答（Dao 2023，Algorithm 1）。"""

import math

import torch

KATA = "flash"


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_size: int):
    L_k = k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    m_i = q.new_full(q.shape[:-1], float("-inf"))      # 当前最大值 [B, H, L_q]
    l_i = q.new_zeros(q.shape[:-1])                    # 累计和 [B, H, L_q]
    acc = q.new_zeros(*q.shape[:-1], v.shape[-1])      # 累加器 [B, H, L_q, d_v]
    for start in range(0, L_k, block_size):            # 最后一块可能较小
        k_block = k[..., start:start + block_size, :]  # [B, H, n, d]
        v_block = v[..., start:start + block_size, :]  # [B, H, n, d_v]
        s = q @ k_block.transpose(-2, -1) * scale      # [B, H, L_q, n]：一块注意力分数
        m_new = torch.maximum(m_i, s.amax(dim=-1))     # [B, H, L_q]
        alpha = torch.exp(m_i - m_new)                 # 重缩放：第一块时为 0（m_i = -inf）
        p = torch.exp(s - m_new.unsqueeze(-1))         # [B, H, L_q, n]
        l_i = alpha * l_i + p.sum(dim=-1)
        acc = alpha.unsqueeze(-1) * acc + p @ v_block
        m_i = m_new
    return acc / l_i.unsqueeze(-1), m_i + torch.log(l_i)  # out [B, H, L_q, d_v], lse [B, H, L_q]
