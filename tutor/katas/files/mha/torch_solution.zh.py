"""用 PyTorch 实现多头注意力：`mha` 编程练习的参考解答（面试要求写的那个模块）。"""

import math

import torch
from torch import nn

KATA = "mha"


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        assert d_model % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)  # 用模块实现：调用 .eval() 后即关闭

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        b, l, d = x.shape
        qkv = self.qkv(x).view(b, l, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)                          # 每个 [B, H, L, d_k]
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # [B, H, L, L]
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        weights = torch.nan_to_num(weights, nan=0.0)  # 没有可关注的键的行：0/0 -> 权重为零
        context = self.dropout(weights) @ v                          # [B, H, L, d_k]
        context = context.transpose(1, 2).contiguous().view(b, l, d)
        return self.out_proj(context), weights
