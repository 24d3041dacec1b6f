"""用 PyTorch 实现旋转位置编码（RoPE），再用它在键值缓存（KV cache）上做注意力：`rope` 编程练习。

先写 `apply_rope`，再写（调用它的）`rope_decode_step`，然后运行
`attn-tutor code check <本文件>`。在文件开头 import torch，
本文件就按 PyTorch 版检查。

RoPE（Su et al. 2021，RoFormer，第 3.4.2 节）把位置 m 上的查询或键的第 i 对
（i = 0 … d/2 − 1）旋转角度 m·θ_i，θ_i = base^(−2i/d)：
    [a, b] -> [a·cos(m·θ_i) − b·sin(m·θ_i), a·sin(m·θ_i) + b·cos(m·θ_i)]
哪两个维度构成第 i 对，有两种约定，面试两种都会问：
  pairing="half"：       (i, i + d/2)。GPT-NeoX 和 Hugging Face 的 LLaMA：
                         x·cos + rotate_half(x)·sin，其中 rotate_half(x) =
                         concat(−x[..., d/2:], x[..., :d/2])，cos、sin 取自
                         角度与自身的拼接：
                         [θ_0, θ_1, …, θ_0, θ_1, …]。
  pairing="interleaved"：(2i, 2i + 1)。RoFormer、GPT-J 和 Meta 的 LLaMA 代码；
                         后者把每一对看作一个复数 a + ib，
                         再乘以 e^(i·m·θ_i)。
同一个 x 在两种约定下得到的数不同：用一种约定训练的检查点，
要把 q、k 的权重重新排列，才能按另一种约定运行。
"""

import math  # noqa: F401

import torch  # noqa: F401

KATA = "rope"


def apply_rope(x, positions, base=10000.0, pairing="half"):
    """把 x 的每一行按它的位置旋转。

    x:         [..., L, d]  d 为偶数；前面可以有任意多个轴（批、头）
    positions: [L]          整数：每一行的位置（顺序任意，不必从 0 开始）
    base:      θ_i = base ** (−2i / d)，i = 0 … d/2 − 1
    pairing:   "half" 或 "interleaved"（见本文件开头）

    返回 x_rot：[..., L, d]，形状和 dtype 都与 x 相同。
    """
    # 1. theta = base ** (−2i / d)，i = 0 … d/2 − 1：[d/2]（torch.arange(0, d, 2)）。
    # 2. angles = positions[:, None] * theta[None, :]：[L, d/2]；再取它们的 cos 和 sin。
    # 3. pairing 为 "half"：a = x[..., :d/2]，b = x[..., d/2:]；
    #    pairing 为 "interleaved"：a = x[..., 0::2]，b = x[..., 1::2]。
    # 4. 旋转每一对：a·cos − b·sin 和 a·sin + b·cos，放回 a 和 b 原来的位置。
    # 5. 按 x 的 dtype 返回。
    raise NotImplementedError


def rope_decode_step(q, k, v, k_cache, v_cache, base=10000.0, pairing="half"):
    """让 T 个新词元带着 RoPE 关注缓存中的键和值以及它们自己的键和值，并把缓存加长。

    q, k, v: [B, H, T, d]  新词元的查询、键和值，已经投影并拆分成各头，
                           还没有旋转
    k_cache: [B, H, P, d]  前面 P 个词元的键，存入时已按各自的位置
                           0 … P − 1 旋转过（P 可以为 0：即预填充）
    v_cache: [B, H, P, d]  它们的值（值从不旋转）

    第 i 个新词元（在新词元中从 0 开始计数）位于位置 P + i：它的查询和键
    按这个位置旋转；缓存中的键不再旋转。它用 softmax(q·kᵀ / √d) 关注
    键 0 … P + i（因果掩码，按右下角对齐）。

    返回 (out, k_cache, v_cache)：
    out:     [B, H, T, d]      每个头的注意力权重乘以值
    k_cache: [B, H, P + T, d]  追加了（旋转后的）新键的缓存
    v_cache: [B, H, P + T, d]  追加了新值的缓存
    """
    # 1. positions = P, P + 1, …, P + T − 1（P = k_cache.shape[2]）。
    # 2. q_rot = apply_rope(q, positions, ...)，k_rot = apply_rope(k, positions, ...)；v 保持原样。
    # 3. 追加：keys = torch.cat([k_cache, k_rot], dim=2)，values = torch.cat([v_cache, v], dim=2)。
    # 4. 注意力分数 q_rot @ keys.transpose(-2, -1) / √d：[B, H, T, P + T]；键 j > P + i 处为 -inf。
    # 5. 在键上做 torch.softmax（dim=-1）；out = weights @ values：[B, H, T, d]。
    # 6. 返回 (out, keys, values)。
    raise NotImplementedError
