"""`sdpa` 编程练习，NumPy 版：缩放点积注意力（scaled dot-product attention），同时返回注意力权重。"""

import math  # noqa: F401 -- math.sqrt

import numpy as np  # noqa: F401

KATA = "sdpa"


def scaled_dot_product_attention(q, k, v, mask=None, is_causal=False):
    """softmax(Q Kᵀ / √d_k) V，以及注意力权重。

    q:    [B, H, L_q, d_k]  查询
    k:    [B, H, L_k, d_k]  键
    v:    [B, H, L_k, d_v]  值（d_v 可以不等于 d_k）
    mask: bool，可广播到 [B, H, L_q, L_k]（例如 [L_q, L_k] 或 [B, 1, 1, L_k]），
          True = 该查询可以关注该键；或 None
    is_causal: 查询 i 只关注 j <= i 的键（左上角对齐，与 PyTorch 的 is_causal 相同）；
          不会与 mask 同时给出
    返回 (out [B, H, L_q, d_v], weights [B, H, L_q, L_k])，dtype 与 q 相同。
    没有可关注的键的查询，其注意力权重为零，out 中对应的行也为零（不出现 NaN）。
    """
    # TODO 1. scores = Q Kᵀ / √d_k，作用在最后两个轴上：[B, H, L_q, L_k]。
    # TODO 2. 如果 is_causal，构造因果掩码 [L_q, L_k]：对角线及其下方为 True。
    # TODO 3. 掩码为 False 的位置，把注意力分数设为 -inf。
    # TODO 4. 在键上（最后一个轴）做数值稳定的 softmax：先减去每行的最大值。
    # TODO 5. 没有允许关注的键的行：权重为零，而不是 NaN。
    # TODO 6. out = weights · V；返回 (out, weights)。
    raise NotImplementedError
