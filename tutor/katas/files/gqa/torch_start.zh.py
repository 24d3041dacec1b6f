"""用 PyTorch 实现分组查询注意力（GQA）：`gqa` 编程练习。

写出 `grouped_query_attention`，然后运行 `attn-tutor code check <本文件>`。
正是因为在文件开头 import 了 torch，这个文件才是 PyTorch 版。
"""

import math  # noqa: F401 -- 用于 math.sqrt

import torch  # noqa: F401

KATA = "gqa"


def grouped_query_attention(q, k, v, is_causal=False):
    """缩放点积注意力，H 个查询头共享 G 个 K/V 头，要亲手写出来
    （不要调用 F.scaled_dot_product_attention：它不返回注意力权重）。

    q: [B, H, L, d_k]   查询，每个查询头一组
    k: [B, G, L, d_k]   键，每个 K/V 头一组（G 整除 H；G = 1 即多查询注意力（MQA））
    v: [B, G, L, d_v]   值，每个 K/V 头一组
    is_causal: 查询 i 只能关注 j <= i 的键（左上角对齐，与 torch 的 is_causal=True 相同）

    第 h 个查询头读取第 h // (H // G) 个 K/V 头：K/V 头按 repeat_interleave 的顺序
    [A, A, B, B] 展开，与
    F.scaled_dot_product_attention(..., enable_gqa=True) 一样（而不是平铺成 [A, B, A, B]）。

    返回 (out, weights)：
    out:     [B, H, L, d_v]
    weights: [B, H, L, L]   注意力权重，每个查询头的每个查询一行
    """
    # 1. 分组大小：多少个查询头共享一个 K/V 头（H // G）。
    # 2. 把 k 和 v 从 G 个头扩展到 H 个头，每个 K/V 头为它对应的那几个相邻查询头重复。
    # 3. 注意力分数 q·kᵀ / √d_k：[B, H, L, L]。
    # 4. 如果 is_causal，当 j > i 时对查询 i 遮蔽键 j（在 softmax 之前用 masked_fill 填入 -inf）。
    # 5. 沿键的轴做 softmax（dim=-1）。
    # 6. out = weights @ v；返回 (out, weights)。
    raise NotImplementedError
