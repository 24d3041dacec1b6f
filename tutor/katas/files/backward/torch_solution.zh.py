"""用 PyTorch 手工实现注意力的反向传播（不用 autograd）：`backward` 编程练习的参考解答。"""

import math

import torch

KATA = "backward"


def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, d_out: torch.Tensor,
                       mask: torch.Tensor | None = None):
    scale = 1.0 / math.sqrt(q.shape[-1])
    # 再做一遍前向计算：S = q·kᵀ/√d，P = softmax(S)，沿键的方向
    scores = q @ k.transpose(-2, -1) * scale                    # S [B, H, L_q, L_k]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)                # 没有可关注的键的行：0/0 -> 全零
    # out = P·v
    d_v = weights.transpose(-2, -1) @ d_out                     # Pᵀ·dO [B, H, L_k, d_v]
    d_weights = d_out @ v.transpose(-2, -1)                     # dP = dO·vᵀ [B, H, L_q, L_k]
    # P = softmax(S)，逐行：dS = P ∘ (dP − Σ_j dP_j P_j)，P 为 0 处（被掩码）为 0
    row = (d_weights * weights).sum(dim=-1, keepdim=True)       # [B, H, L_q, 1]
    d_scores = weights * (d_weights - row)                      # dS [B, H, L_q, L_k]
    # S = q·kᵀ/√d
    d_q = d_scores @ k * scale                                  # [B, H, L_q, d]
    d_k = d_scores.transpose(-2, -1) @ q * scale                # [B, H, L_k, d]
    return d_q, d_k, d_v, d_scores
