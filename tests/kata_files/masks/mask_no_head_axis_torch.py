"""Held back for the tests: the `masks` PyTorch solution with one bug (mask_no_head_axis): [B, L, L]: no head axis."""

import torch

KATA = "masks"


def attention_masks(key_padding_mask, is_causal=True):
    B, L = key_padding_mask.shape
    real = ~key_padding_mask                        # [B, L]: True = a real key (the input's True = padding)
    allowed = real[:, None, :]                      # [B, 1, L]: padding blocks a key's column, in every row
    if is_causal:
        causal = torch.ones(L, L, dtype=torch.bool, device=key_padding_mask.device).tril()  # key j <= query i
        allowed = allowed & causal                   # both must allow: AND
    allowed = allowed.expand(B, L, L).clone()    # [B, 1, L, L]: one mask for every head
    additive = torch.zeros(B, L, L, device=allowed.device).masked_fill(~allowed, float("-inf"))
    return allowed, additive
