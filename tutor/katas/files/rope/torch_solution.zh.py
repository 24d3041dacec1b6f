"""用 PyTorch 实现 RoPE 和带 RoPE 的解码步：`rope` 编程练习的参考解答。"""

import math

import torch

KATA = "rope"


def rotate_half(x):
    d = x.shape[-1]
    return torch.cat([-x[..., d // 2:], x[..., : d // 2]], dim=-1)


def rotate_every_two(x):
    return torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)


def apply_rope(x, positions, base=10000.0, pairing="half"):
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # [d/2]：θ_i = base^(−2i/d)
    angles = positions.to(torch.float64)[:, None] * theta[None, :]  # [L, d/2]：m·θ_i
    if pairing == "half":                                       # 配对 (i, i + d/2)
        emb = torch.cat([angles, angles], dim=-1)               # [L, d]：θ_0, θ_1, …, θ_0, θ_1, …
        out = x * emb.cos() + rotate_half(x) * emb.sin()
    else:                                                       # 配对 (2i, 2i + 1)
        emb = angles.repeat_interleave(2, dim=-1)               # [L, d]：θ_0, θ_0, θ_1, θ_1, …
        out = x * emb.cos() + rotate_every_two(x) * emb.sin()
    return out.to(x.dtype)


def rope_decode_step(q, k, v, k_cache, v_cache, base=10000.0, pairing="half"):
    T, d = q.shape[2], q.shape[3]
    P = k_cache.shape[2]                                        # 已在缓存中的词元数
    positions = torch.arange(P, P + T)                          # 新词元的位置从 P 接着往下数
    q_rot = apply_rope(q, positions, base, pairing)
    k_rot = apply_rope(k, positions, base, pairing)             # v 不旋转
    keys = torch.cat([k_cache, k_rot], dim=2)                   # [B, H, P + T, d]：缓存的键已经旋转过
    values = torch.cat([v_cache, v], dim=2)
    scores = q_rot @ keys.transpose(-2, -1) / math.sqrt(d)      # [B, H, T, P + T]
    allowed = torch.ones(T, P + T, dtype=torch.bool).tril(diagonal=P)  # 因果掩码，按右下角对齐
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ values, keys, values
