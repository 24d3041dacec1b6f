"""用 PyTorch 实现多头注意力在键值缓存（KV cache）上的一个解码步：`kv-cache` 编程练习。

写出 `decode_step`，然后运行 `attn-tutor code check <本文件>`。
正是因为在文件开头 import 了 torch，这个文件才是 PyTorch 版。
"""

import math  # noqa: F401 -- 用于 math.sqrt

import torch  # noqa: F401

KATA = "kv-cache"


def decode_step(x_new, w_q, w_k, w_v, w_o, num_heads, k_cache, v_cache):
    """让 T 个新词元关注缓存中的键和值以及它们自己的键和值，并把缓存加长。

    x_new:   [B, T, D]        T >= 1 个新词元的输入
    w_q, w_k, w_v, w_o: [D, D]，采用 nn.Linear 的布局：y = x @ w.T（没有偏置）
    num_heads: H；d_k = D // H
    k_cache: [B, H, P, d_k]   前面 P 个词元的键，已经投影并拆分成各头
                              （第 h 个头：第 h·d_k … (h+1)·d_k − 1 列）；P 可以为 0
    v_cache: [B, H, P, d_k]   它们的值，格式相同

    第 i 个新词元（在新词元中从 0 开始计数）位于位置 P + i，关注
    键 0 … P + i：即按右下角对齐的因果掩码
    （torch.nn.attention.bias.causal_lower_right），而不是像 is_causal=True 那样左上角对齐。

    返回 (out, k_cache, v_cache)：
    out:     [B, T, D]          各头重新并排合并，再 @ w_o.T
    k_cache: [B, H, P + T, d_k] 在旧的行之后追加了新词元的键的缓存
    v_cache: [B, H, P + T, d_k] 值的缓存，同样处理
    """
    # 1. 只投影新词元：q, k_new, v_new = x_new @ w.T，每个 [B, T, D]。
    # 2. 把每个拆分成各头：view(B, T, H, d_k).transpose(1, 2) -> [B, H, T, d_k]。
    # 3. 把 k_new 和 v_new 追加到缓存的行之后：torch.cat(..., dim=2) -> [B, H, P + T, d_k]。
    # 4. 注意力分数 q @ kᵀ / √d_k：[B, H, T, P + T]。
    # 5. 掩码：只有当 j <= P + i 时，第 i 个新词元才能关注键 j（其余位置用 masked_fill 填入 -inf）。
    # 6. 在键上做 softmax（dim=-1）；context = weights @ v：[B, H, T, d_k]。
    # 7. 合并各头：transpose(1, 2).reshape(B, T, D)；out = context @ w_o.T。
    # 8. 返回 (out, 加长后的 k 缓存, 加长后的 v 缓存)。
    raise NotImplementedError
