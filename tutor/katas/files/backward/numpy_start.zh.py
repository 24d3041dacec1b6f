"""`backward` 编程练习，NumPy 版：手工推导缩放点积注意力的梯度（反向传播）。

检查方法：  attn-tutor code check THIS_FILE --watch
"""

import math

import numpy as np

KATA = "backward"


def attention_backward(q, k, v, d_out, mask=None):
    """已知 ∂loss/∂out，求注意力的 ∂loss/∂q、∂loss/∂k、∂loss/∂v 和 ∂loss/∂S（Dao 2023，FlashAttention-2，
    Algorithm 2；`attn-tutor explain single-head-3x4 --backward` 会手算一遍）。

    前向计算：
      S    = q·kᵀ/√d    [B, H, L_q, L_k]，掩码为 False 处为 -inf
      P    = softmax(S)，沿键的方向（没有可关注的键的查询：全零的一行）
      out  = P·v        [B, H, L_q, d_v]
    形状：
      q         [B, H, L_q, d]
      k         [B, H, L_k, d]
      v         [B, H, L_k, d_v]
      d_out     [B, H, L_q, d_v]   ∂loss/∂out
      mask      bool，可广播到 [B, H, L_q, L_k]；True = 该查询（行）可以关注该键（列）；
                None = 每个查询都关注所有键
    返回 (d_q, d_k, d_v, d_scores)，dtype 与输入相同：
      d_q       [B, H, L_q, d]
      d_k       [B, H, L_k, d]
      d_v       [B, H, L_k, d_v]
      d_scores  [B, H, L_q, L_k]   ∂loss/∂S，缩放后注意力分数的梯度（还没乘上 d_q 和 d_k
                                   要乘的 1/√d）；掩码为 False 处为 0
    """
    # TODO 1: 再做一遍前向计算：S（加掩码），P = softmax(S)，在键上（没有键的行：全零）
    # TODO 2: 由 out = P·v 求 d_v 和 dP = ∂loss/∂P（注意哪个因子要转置）
    # TODO 3: 由 P = softmax(S) 求 d_scores：每个权重都依赖于它所在的整行注意力分数
    # TODO 4: 由 S = q·kᵀ/√d 求 d_q 和 d_k（注意 1/√d，以及哪个因子要转置）
    raise NotImplementedError
