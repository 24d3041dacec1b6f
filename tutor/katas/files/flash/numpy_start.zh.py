"""`flash` 编程练习，NumPy 版：FlashAttention-2 的前向计算，按块读取键（在线 softmax）。

检查方法：  attn-tutor code check THIS_FILE --watch
（有一个用例是 L_q = L_k = 2048、每块 64 个键：在这个用例上，你的代码分配的内存最多不能
超过一个 [L_q, L_k] 矩阵的四分之一，所以绝不能构造完整的注意力分数矩阵。）
"""

import math

import numpy as np

KATA = "flash"


def flash_attention(q, k, v, block_size):
    """softmax(q·kᵀ/√d)·v 以及每一行的 log-sum-exp，按块遍历键（Dao 2023，FlashAttention-2，
    Algorithm 1；`attn-tutor explain single-head-3x4 --tiled` 会逐行手算一遍）。

    形状：
      q           [B, H, L_q, d]
      k           [B, H, L_k, d]
      v           [B, H, L_k, d_v]
      block_size  每块的键（和值）的个数，一个 >= 1 的整数；最后一块可以较小
    返回 (out, lse)：
      out         [B, H, L_q, d_v]   与普通注意力（无掩码）的数值相同
      lse         [B, H, L_q]        每个查询行缩放后的注意力分数 s = q·kᵀ/√d 的 log Σ_j exp(s_j)
                                     （自然对数）
    """
    # TODO 1: 每个查询行的运行状态：最大值 m_i = -inf，和 l_i = 0（[B, H, L_q]），
    #         累加器 acc = 0（[B, H, L_q, d_v]）
    # TODO 2: 对每一块 k[..., start:start + block_size, :]（以及 v 的相同行）：它的注意力分数
    #         s [B, H, L_q, n]，新的当前最大值 m_new = max(m_i, 该块每行的最大值)
    # TODO 3: 重缩放因子 alpha = exp(m_i − m_new)（第一块时为 0，因为那时 m_i = -inf）；
    #         p = exp(s − m_new)；l_i = alpha·l_i + rowsum(p)；acc = alpha·acc + p·v_block；m_i = m_new
    # TODO 4: out = acc / l_i，lse = m_i + log(l_i)
    raise NotImplementedError
