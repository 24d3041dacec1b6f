"""用 PyTorch 实现分组查询注意力：`gqa` 编程练习的参考解答。"""

import math

import torch

KATA = "gqa"


def grouped_query_attention(q, k, v, is_causal=False):
    B, H, L, d_k = q.shape
    group = H // k.shape[1]                                    # 每个 K/V 头对应的查询头数
    k = k.repeat_interleave(group, dim=1)                      # [B, H, L, d_k]：头的顺序 A, A, B, B（与 enable_gqa=True 相同）
    v = v.repeat_interleave(group, dim=1)                      # [B, H, L, d_v]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)          # [B, H, L, L]
    if is_causal:
        allowed = torch.ones(L, L, dtype=torch.bool, device=q.device).tril()  # 查询 i 看得到 j <= i 的键
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)                    # [B, H, L, L]，每个查询头各自一组行
    out = weights @ v                                          # [B, H, L, d_v]
    return out, weights
