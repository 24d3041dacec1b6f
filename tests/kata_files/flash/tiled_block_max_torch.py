"""The `flash` kata in PyTorch with one bug (held back for the tests): tiled_block_max."""

import math

import torch

KATA = "flash"


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_size: int):
    L_k = k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    m_i = q.new_full(q.shape[:-1], float("-inf"))      # running max [B, H, L_q]
    l_i = q.new_zeros(q.shape[:-1])                    # running sum [B, H, L_q]
    acc = q.new_zeros(*q.shape[:-1], v.shape[-1])      # accumulator [B, H, L_q, d_v]
    for start in range(0, L_k, block_size):            # the last block may be smaller
        k_block = k[..., start:start + block_size, :]  # [B, H, n, d]
        v_block = v[..., start:start + block_size, :]  # [B, H, n, d_v]
        s = q @ k_block.transpose(-2, -1) * scale      # [B, H, L_q, n]: one block of scores
        m_new = torch.maximum(m_i, s.amax(dim=-1))     # [B, H, L_q]
        alpha = torch.exp(m_i - m_new)                 # rescale: 0 at the first block (m_i = -inf)
        p = torch.exp(s - s.amax(dim=-1, keepdim=True))  # [B, H, L_q, n]
        l_i = alpha * l_i + p.sum(dim=-1)
        acc = alpha.unsqueeze(-1) * acc + p @ v_block
        m_i = m_new
    return acc / l_i.unsqueeze(-1), m_i + torch.log(l_i)  # out [B, H, L_q, d_v], lse [B, H, L_q]
