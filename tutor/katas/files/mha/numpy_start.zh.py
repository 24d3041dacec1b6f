"""`mha` 编程练习，NumPy 版：按面试的要求写出多头自注意力（multi-head self-attention）。

检查方法：  attn-tutor code check THIS_FILE --watch
"""

import math

import numpy as np

KATA = "mha"


def multi_head_attention(x, qkv_weight, qkv_bias, out_weight, out_bias, num_heads, mask=None):
    """多头自注意力：每个头计算 softmax(Q Kᵀ / √d_k) V，把各头拼接起来，再乘 W_O。

    形状（B 批量，L 词元数，D = d_model，H = num_heads，d_k = D // H）：
      x           [B, L, D]
      qkv_weight  [3·D, D]   nn.Linear 的布局：qkv = x @ qkv_weight.T + qkv_bias -> [B, L, 3·D]
      qkv_bias    [3·D]      qkv 的列依次是 Q 的 D 列、K 的 D 列、V 的 D 列；
                             第 h 个头取每一份中的第 h·d_k ... (h+1)·d_k - 1 列
      out_weight  [D, D]     out = concat @ out_weight.T + out_bias
      out_bias    [D]
      mask        bool，可广播到 [B, H, L, L]；True = 该查询（行）可以关注该键（列）；
                  None = 每个查询都关注所有键
    返回 (out, weights)：
      out         [B, L, D]
      weights     [B, H, L, L]   每行在键上求和为 1；没有可关注的键的查询
                                 得到全零的一行（上下文的那一行也为零）
    """
    B, L, D = x.shape
    d_k = D // num_heads
    # TODO 1: 融合投影：qkv [B, L, 3·D]
    # TODO 2: 拆出 Q、K、V 及各自的头：每个 [B, H, L, d_k]
    # TODO 3: 注意力分数 [B, H, L, L]，乘以 1/√d_k 缩放
    # TODO 4: 掩码：被掩码的分数不分得任何权重
    # TODO 5: 在键上做 softmax（没有可关注的键的行：全零，而不是 NaN）
    # TODO 6: context = weights @ V，把各头合并回 [B, L, D]
    # TODO 7: 输出投影
    raise NotImplementedError
