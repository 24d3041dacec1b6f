"""The `cross` kata, PyTorch flavour: multi-head cross-attention, the decoder's queries over the encoder's states.

A file that imports torch at its top, as this one does, is checked as the PyTorch flavour.
"""

import math  # noqa: F401 -- math.sqrt

import torch  # noqa: F401

KATA = "cross"


def cross_attention(x, memory, w_q, w_k, w_v, w_o, num_heads, key_padding_mask=None):
    """Multi-head attention with Q from x and K, V from memory; no biases.

    x:      [B, L_q, D]  the decoder's tokens: the queries (a tensor)
    memory: [B, L_k, D]  the encoder's states: the keys and the values (L_k may differ from L_q)
    w_q, w_k, w_v, w_o: [D, D] each, in nn.Linear's layout: y = t @ w.T (F.linear(t, w))
    num_heads: H; d_k = D // H; head h takes features h·d_k … (h+1)·d_k - 1 of Q, K and V
    key_padding_mask: torch.bool [B, L_k], True = that memory position is padding
                      (nn.MultiheadAttention's polarity); or None
    returns (out [B, L_q, D], weights [B, H, L_q, L_k]): what nn.MultiheadAttention(D, H, bias=False,
    batch_first=True) returns for (x, memory, memory) with average_attn_weights=False.
    """
    # TODO 1. Q = x @ w_q.T; K = memory @ w_k.T; V = memory @ w_v.T.
    # TODO 2. Split the heads: [B, L, D] -> view(B, L, H, d_k) -> transpose(1, 2): [B, H, L, d_k].
    # TODO 3. scores = Q Kᵀ / √d_k: [B, H, L_q, L_k].
    # TODO 4. Key padding: -inf in a padding key's column, [B, 1, 1, L_k].
    # TODO 5. Softmax over the keys (dim=-1).
    # TODO 6. weights · V, the heads merged back: transpose(1, 2), then reshape to [B, L_q, D].
    # TODO 7. out = merged @ w_o.T; return (out, weights).
    raise NotImplementedError
