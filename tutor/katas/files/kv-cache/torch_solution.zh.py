"""用 PyTorch 实现在键值缓存上的一个解码步：`kv-cache` 编程练习的参考解答。"""

import math

import torch

KATA = "kv-cache"


def decode_step(x_new, w_q, w_k, w_v, w_o, num_heads, k_cache, v_cache):
    B, T, D = x_new.shape
    d_k = D // num_heads
    P = k_cache.shape[2]                                   # 已在缓存中的词元数

    def split(t):                                          # [B, T, D] -> [B, H, T, d_k]
        return t.view(B, T, num_heads, d_k).transpose(1, 2)

    q = split(x_new @ w_q.T)                               # 只投影新词元
    k = torch.cat([k_cache, split(x_new @ w_k.T)], dim=2)  # [B, H, P + T, d_k]：新的行追加在后面
    v = torch.cat([v_cache, split(x_new @ w_v.T)], dim=2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)      # [B, H, T, P + T]
    # 第 i 个新词元位于位置 P + i：它看得到键 0 … P + i（causal_lower_right）
    allowed = torch.ones(T, P + T, dtype=torch.bool, device=x_new.device).tril(diagonal=P)
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)                # [B, H, T, P + T]
    context = (weights @ v).transpose(1, 2).reshape(B, T, D)  # 各头并排：[B, T, D]
    return context @ w_o.T, k, v
