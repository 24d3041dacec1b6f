"""用 PyTorch 实现缩放点积注意力：`sdpa` 编程练习的参考解答。

torch.nn.functional.scaled_dot_product_attention 算出的 `out` 与此相同（但它不返回
注意力权重）：在那里，没有可关注的键的查询同样得到全零的一行（CPU，PyTorch 2.5 起）。
"""

import math

import torch

KATA = "sdpa"


def scaled_dot_product_attention(q, k, v, mask=None, is_causal=False):
    L_q, L_k = q.size(-2), k.size(-2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # [B, H, L_q, L_k]
    if is_causal:
        mask = torch.ones(L_q, L_k, dtype=torch.bool, device=q.device).tril()  # 键 j <= 查询 i
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # True = 可以关注
    weights = torch.softmax(scores, dim=-1)  # 一行全是 -inf 时得到 NaN（0/0）……
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)  # ……改为权重为零
    return weights @ v, weights  # [B, H, L_q, d_v], [B, H, L_q, L_k]
