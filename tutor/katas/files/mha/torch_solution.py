"""Multi-head attention in PyTorch: a reference solution of the `mha` kata (the module an interview asks for)."""

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
        self.dropout = nn.Dropout(dropout)  # a module: off after .eval()

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None):
        b, l, d = x.shape
        qkv = self.qkv(x).view(b, l, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)                          # each [B, H, L, d_k]
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # [B, H, L, L]
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        weights = torch.nan_to_num(weights, nan=0.0)  # a row with no key: 0/0 -> zero weights
        context = self.dropout(weights) @ v                          # [B, H, L, d_k]
        context = context.transpose(1, 2).contiguous().view(b, l, d)
        return self.out_proj(context), weights
