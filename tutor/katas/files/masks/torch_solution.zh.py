"""用 PyTorch 实现因果掩码和键填充：`masks` 编程练习的参考解答。

`allowed` 就是 scaled_dot_product_attention 接受的布尔 attn_mask（True = 可以关注）；
`additive` 是它接受的浮点 attn_mask，与 nn.Transformer.generate_square_subsequent_mask 的约定相同。
"""

import torch

KATA = "masks"


def attention_masks(key_padding_mask, is_causal=True):
    B, L = key_padding_mask.shape
    real = ~key_padding_mask                        # [B, L]：True = 真实的键（输入中 True = 填充）
    allowed = real[:, None, None, :]                # [B, 1, 1, L]：填充遮蔽一个键所在的列，每一行都是
    if is_causal:
        causal = torch.ones(L, L, dtype=torch.bool, device=key_padding_mask.device).tril()  # 键 j <= 查询 i
        allowed = allowed & causal                   # 两者都允许才行：AND
    allowed = allowed.expand(B, 1, L, L).clone()    # [B, 1, L, L]：所有头共用一个掩码
    additive = torch.zeros(B, 1, L, L, device=allowed.device).masked_fill(~allowed, float("-inf"))
    return allowed, additive
