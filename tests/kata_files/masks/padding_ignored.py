"""Held back for the tests: the `masks` NumPy solution with one bug (padding_ignored): the key padding left out."""

import numpy as np

KATA = "masks"


def attention_masks(key_padding_mask, is_causal=True):
    B, L = key_padding_mask.shape
    allowed = np.ones((B, 1, 1, L), dtype=bool)     # [B, 1, 1, L]: every key
    if is_causal:
        causal = np.tril(np.ones((L, L), dtype=bool))  # [L, L]: key j <= query i
        allowed = allowed & causal                   # both must allow: AND
    allowed = np.broadcast_to(allowed, (B, 1, L, L)).copy()  # [B, 1, L, L]: one mask for every head
    additive = np.where(allowed, 0.0, -np.inf)      # [B, 1, L, L]: added to the scores before the softmax
    return allowed, additive
