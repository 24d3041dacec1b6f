"""The `flash` kata in NumPy with one bug (held back for the tests): no_scaling."""

import numpy as np

KATA = "flash"


def flash_attention(q, k, v, block_size):
    L_k = k.shape[-2]
    m_i = np.full(q.shape[:-1], -np.inf, dtype=q.dtype)          # running max [B, H, L_q]
    l_i = np.zeros(q.shape[:-1], dtype=q.dtype)                   # running sum [B, H, L_q]
    acc = np.zeros((*q.shape[:-1], v.shape[-1]), dtype=q.dtype)  # accumulator [B, H, L_q, d_v]
    for start in range(0, L_k, block_size):                      # the last block may be smaller
        k_block = k[..., start:start + block_size, :]            # [B, H, n, d]
        v_block = v[..., start:start + block_size, :]            # [B, H, n, d_v]
        s = q @ k_block.swapaxes(-1, -2)                         # [B, H, L_q, n]: one block of scores
        m_new = np.maximum(m_i, s.max(axis=-1))                  # [B, H, L_q]
        alpha = np.exp(m_i - m_new)                              # rescale: 0 at the first block (m_i = -inf)
        p = np.exp(s - m_new[..., None])                         # [B, H, L_q, n]
        l_i = alpha * l_i + p.sum(axis=-1)
        acc = alpha[..., None] * acc + p @ v_block
        m_i = m_new
    return acc / l_i[..., None], m_i + np.log(l_i)               # out [B, H, L_q, d_v], lse [B, H, L_q]
