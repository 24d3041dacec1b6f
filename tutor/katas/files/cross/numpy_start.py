"""The `cross` kata, NumPy flavour: multi-head cross-attention, the decoder's queries over the encoder's states."""

import math  # noqa: F401 -- math.sqrt

import numpy as np  # noqa: F401

KATA = "cross"


def cross_attention(x, memory, w_q, w_k, w_v, w_o, num_heads, key_padding_mask=None):
    """Multi-head attention with Q from x and K, V from memory; no biases.

    x:      [B, L_q, D]  the decoder's tokens: the queries
    memory: [B, L_k, D]  the encoder's states: the keys and the values (L_k may differ from L_q)
    w_q, w_k, w_v, w_o: [D, D] each, in nn.Linear's layout: y = t @ w.T
    num_heads: H; d_k = D // H; head h takes features h·d_k … (h+1)·d_k - 1 of Q, K and V
    key_padding_mask: bool [B, L_k], True = that memory position is padding; or None
    returns (out [B, L_q, D], weights [B, H, L_q, L_k]).
    """
    # TODO 1. Q = x @ w_q.T; K = memory @ w_k.T; V = memory @ w_v.T.
    # TODO 2. Split the heads: [B, L, D] -> [B, L, H, d_k] -> [B, H, L, d_k].
    # TODO 3. scores = Q Kᵀ / √d_k: [B, H, L_q, L_k].
    # TODO 4. Key padding: -inf in a padding key's column, [B, 1, 1, L_k].
    # TODO 5. Softmax over the keys (the last axis), stable.
    # TODO 6. weights · V, the heads merged back: [B, H, L_q, d_k] -> [B, L_q, H, d_k] -> [B, L_q, D].
    # TODO 7. out = merged @ w_o.T; return (out, weights).
    raise NotImplementedError
