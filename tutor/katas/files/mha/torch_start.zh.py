"""`mha` 编程练习，PyTorch 版：面试要求写的那个模块。

检查方法：  attn-tutor code check THIS_FILE --watch
（检查器会把每个用例的权重加载到 `qkv` 和 `out_proj` 中，调用 .eval()，
并在 torch.no_grad() 下运行 forward。）
"""

import math

import torch
from torch import nn

KATA = "mha"


class MultiHeadAttention(nn.Module):
    """多头自注意力：每个头计算 softmax(Q Kᵀ / √d_k) V，把各头拼接起来，再乘 W_O。

    子模块（请保留这些名字：检查器要加载它们的权重）：
      qkv       nn.Linear(d_model, 3 * d_model)   其输出的最后一个轴：Q 的 d_model、K 的、V 的；
                                                   第 h 个头取每一份中的 h·d_k ... (h+1)·d_k - 1
      out_proj  nn.Linear(d_model, d_model)
    forward(x, mask=None) -> (out, weights)
      x        [B, L, D]
      mask     bool，可广播到 [B, H, L, L]；True = 该查询（行）可以关注该键
      out      [B, L, D]
      weights  [B, H, L, L]；没有可关注的键的查询，其注意力权重为零
    dropout 只在训练时作用于注意力权重（检查器会用 dropout=0.5 构造一些用例，
    并调用 .eval()）。
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        # TODO 1: 各头的大小；self.qkv 和 self.out_proj；dropout
        raise NotImplementedError

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        # TODO 2: qkv -> Q、K、V，每个 [B, H, L, d_k]
        # TODO 3: 注意力分数乘以 1/√d_k 缩放、加掩码、在键上做 softmax（没有键的行不能出现 NaN）
        # TODO 4: context，把各头合并为 [B, L, D]，再经过 out_proj
        raise NotImplementedError
