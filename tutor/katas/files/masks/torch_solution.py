"""The causal mask and key padding in PyTorch: a reference solution of the `masks` kata.

`allowed` is what scaled_dot_product_attention takes as a bool attn_mask (True = may attend);
`additive` what it takes as a float one, the convention of nn.Transformer.generate_square_subsequent_mask.
"""

import torch

KATA = "masks"


def attention_masks(key_padding_mask, is_causal=True):
    B, L = key_padding_mask.shape
    real = ~key_padding_mask                        # [B, L]: True = a real key (the input's True = padding)
    allowed = real[:, None, None, :]                # [B, 1, 1, L]: padding blocks a key's column, in every row
    if is_causal:
        causal = torch.ones(L, L, dtype=torch.bool, device=key_padding_mask.device).tril()  # key j <= query i
        allowed = allowed & causal                   # both must allow: AND
    allowed = allowed.expand(B, 1, L, L).clone()    # [B, 1, L, L]: one mask for every head
    additive = torch.zeros(B, 1, L, L, device=allowed.device).masked_fill(~allowed, float("-inf"))
    return allowed, additive
