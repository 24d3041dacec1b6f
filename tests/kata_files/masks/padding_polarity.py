"""Held back for the tests: the `masks` NumPy solution with one bug (padding_polarity): key_padding_mask read as True = keep."""

import numpy as np

KATA = "masks"


def attention_masks(key_padding_mask, is_causal=True):
    B, L = key_padding_mask.shape
    real = key_padding_mask                         # [B, L]: True = a real key (the input's True = padding)
    allowed = real[:, None, None, :]                # [B, 1, 1, L]: padding blocks a key's column, in every row
    if is_causal:
        causal = np.tril(np.ones((L, L), dtype=bool))  # [L, L]: key j <= query i
        allowed = allowed & causal                   # both must allow: AND
    allowed = np.broadcast_to(allowed, (B, 1, L, L)).copy()  # [B, 1, L, L]: one mask for every head
    additive = np.where(allowed, 0.0, -np.inf)      # [B, 1, L, L]: added to the scores before the softmax
    return allowed, additive
