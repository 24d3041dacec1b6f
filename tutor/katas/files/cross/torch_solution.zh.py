"""用 PyTorch 实现交叉注意力：`cross` 编程练习的参考解答。

它与 nn.MultiheadAttention(D, H, bias=False, batch_first=True) 是同一个层，其中
in_proj_weight = cat(w_q, w_k, w_v)，out_proj.weight = w_o，调用方式为
mha(x, memory, memory, key_padding_mask=..., average_attn_weights=False)。
"""

import math

import torch
import torch.nn.functional as F

KATA = "cross"


def cross_attention(x, memory, w_q, w_k, w_v, w_o, num_heads, key_padding_mask=None):
    B, L_q, D = x.shape
    d_k = D // num_heads

    def heads(t):  # [B, L, D] -> [B, H, L, d_k]：第 h 个头取第 h·d_k … (h+1)·d_k - 1 个特征
        return t.view(B, t.size(1), num_heads, d_k).transpose(1, 2)

    q = heads(F.linear(x, w_q))       # 查询来自解码器（x @ w_q.T）：[B, H, L_q, d_k]
    k = heads(F.linear(memory, w_k))  # 键和值来自编码器：[B, H, L_k, d_k]
    v = heads(F.linear(memory, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # [B, H, L_q, L_k]
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))  # 填充键所在的列
    weights = torch.softmax(scores, dim=-1)            # [B, H, L_q, L_k]
    weights = torch.nan_to_num(weights, nan=0.0)       # 某个样本全是填充：0/0 -> 权重为零
    context = (weights @ v).transpose(1, 2).reshape(B, L_q, D)  # 各头并排：[B, L_q, D]
    return F.linear(context, w_o), weights              # [B, L_q, D], [B, H, L_q, L_k]
