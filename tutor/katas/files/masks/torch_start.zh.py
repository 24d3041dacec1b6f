"""`masks` 编程练习，PyTorch 版：因果掩码（causal mask）和键填充（key padding），分别写成布尔掩码和加性掩码。

像这个文件一样在开头 import torch 的文件，会按 PyTorch 版检查。
"""

import torch  # noqa: F401

KATA = "masks"


def attention_masks(key_padding_mask, is_causal=True):
    """一个批量的注意力所需的掩码，写成 scaled_dot_product_attention 接受的两种形式。

    key_padding_mask: torch.bool [B, L]，True = 该键是填充（nn.MultiheadAttention 的极性）
    is_causal: 查询 i 只能关注 j <= i 的键（左上角对齐）
    返回 (allowed, additive)：
      allowed:  torch.bool [B, 1, L, L]，True = 查询 i 可以关注键 j（即 SDPA 的布尔 attn_mask）：
                满足因果条件（当 is_causal 时）且该键不是填充；第 1 个轴是头的轴（大小为 1）
      additive: float [B, 1, L, L]，允许处为 0.0，不允许处为 -inf（即 SDPA 的浮点 attn_mask）
    """
    # TODO 1. 真实的键：key_padding_mask 为 False 的位置为 True。  [B, L]
    # TODO 2. 填充遮蔽的是键所在的列：把键放到最后一个轴上。  [B, 1, 1, L]
    # TODO 3. 如果 is_causal，构造因果掩码 [L, L]：对角线及其下方为 True；用 AND 组合。
    # TODO 4. allowed：expand 到 [B, 1, L, L]。
    # TODO 5. additive：允许处为 0.0，不允许处为 -inf。
    raise NotImplementedError
