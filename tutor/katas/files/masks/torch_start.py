"""The `masks` kata, PyTorch flavour: the causal mask and the key padding, as booleans and as an additive mask.

A file that imports torch at its top, as this one does, is checked as the PyTorch flavour.
"""

import torch  # noqa: F401

KATA = "masks"


def attention_masks(key_padding_mask, is_causal=True):
    """The mask a batch's attention needs, in the two forms scaled_dot_product_attention takes.

    key_padding_mask: torch.bool [B, L], True = that key is padding (nn.MultiheadAttention's polarity)
    is_causal: query i may attend only keys j <= i (aligned top-left)
    returns (allowed, additive):
      allowed:  torch.bool [B, 1, L, L], True = query i may attend key j (SDPA's bool attn_mask):
                causal (when is_causal) AND the key is not padding; axis 1 is the heads' (size 1)
      additive: float [B, 1, L, L], 0.0 where allowed, -inf where not (SDPA's float attn_mask)
    """
    # TODO 1. The real keys: True where key_padding_mask is False.  [B, L]
    # TODO 2. Padding blocks key columns: put the keys on the last axis.  [B, 1, 1, L]
    # TODO 3. If is_causal, the causal mask [L, L]: True on and below the diagonal; combine with AND.
    # TODO 4. allowed: expand to [B, 1, L, L].
    # TODO 5. additive: 0.0 where allowed, -inf where not.
    raise NotImplementedError
