"""用 NumPy 实现因果掩码和键填充：`masks` 编程练习的参考解答。"""

import numpy as np

KATA = "masks"


def attention_masks(key_padding_mask, is_causal=True):
    B, L = key_padding_mask.shape
    real = ~key_padding_mask                        # [B, L]：True = 真实的键（输入中 True = 填充）
    allowed = real[:, None, None, :]                # [B, 1, 1, L]：填充遮蔽一个键所在的列，每一行都是
    if is_causal:
        causal = np.tril(np.ones((L, L), dtype=bool))  # [L, L]：键 j <= 查询 i
        allowed = allowed & causal                   # 两者都允许才行：AND
    allowed = np.broadcast_to(allowed, (B, 1, L, L)).copy()  # [B, 1, L, L]：所有头共用一个掩码
    additive = np.where(allowed, 0.0, -np.inf)      # [B, 1, L, L]：在 softmax 之前加到注意力分数上
    return allowed, additive
