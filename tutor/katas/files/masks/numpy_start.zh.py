"""`masks` 编程练习，NumPy 版：因果掩码（causal mask）和键填充（key padding），分别写成布尔掩码和加性掩码。"""

import numpy as np  # noqa: F401

KATA = "masks"


def attention_masks(key_padding_mask, is_causal=True):
    """一个批量的注意力所需的掩码，写成 SDPA 接受的两种形式。

    key_padding_mask: bool [B, L]，True = 该键是填充（nn.MultiheadAttention 的极性）
    is_causal: 查询 i 只能关注 j <= i 的键（左上角对齐）
    返回 (allowed, additive)：
      allowed:  bool [B, 1, L, L]，True = 查询 i 可以关注键 j：满足因果条件（当 is_causal 时）
                且该键不是填充；第 1 个轴是头的轴（大小为 1：每个头都一样）
      additive: float [B, 1, L, L]，允许处为 0.0，不允许处为 -inf（加到注意力分数上）
    """
    # TODO 1. 真实的键：key_padding_mask 为 False 的位置为 True。  [B, L]
    # TODO 2. 填充遮蔽的是键所在的列：把键放到最后一个轴上。  [B, 1, 1, L]
    # TODO 3. 如果 is_causal，构造因果掩码 [L, L]：对角线及其下方为 True；用 AND 组合。
    # TODO 4. allowed：广播到 [B, 1, L, L]。
    # TODO 5. additive：允许处为 0.0，不允许处为 -inf。
    raise NotImplementedError
