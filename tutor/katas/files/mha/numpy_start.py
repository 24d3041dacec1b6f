"""The `mha` kata, NumPy flavour: write multi-head self-attention as the interview asks.

Check it with:  attn-tutor code check THIS_FILE --watch
"""

import math

import numpy as np

KATA = "mha"


def multi_head_attention(x, qkv_weight, qkv_bias, out_weight, out_bias, num_heads, mask=None):
    """Multi-head self-attention: softmax(Q Kᵀ / √d_k) V per head, heads concatenated, then W_O.

    Shapes (B batch, L tokens, D = d_model, H = num_heads, d_k = D // H):
      x           [B, L, D]
      qkv_weight  [3·D, D]   nn.Linear's layout: qkv = x @ qkv_weight.T + qkv_bias -> [B, L, 3·D]
      qkv_bias    [3·D]      the columns of qkv are Q's D, then K's D, then V's D;
                             head h takes columns h·d_k ... (h+1)·d_k - 1 of each third
      out_weight  [D, D]     out = concat @ out_weight.T + out_bias
      out_bias    [D]
      mask        bool, broadcastable to [B, H, L, L]; True = the query (row) may attend to the key
                  (column); None = every query attends to every key
    Returns (out, weights):
      out         [B, L, D]
      weights     [B, H, L, L]   each row sums to 1 over the keys; a query that may attend to
                                 no key gets a row of zeros (and a zero context row)
    """
    B, L, D = x.shape
    d_k = D // num_heads
    # TODO 1: the fused projection: qkv [B, L, 3·D]
    # TODO 2: split Q, K, V and their heads: each [B, H, L, d_k]
    # TODO 3: scores [B, H, L, L], scaled by 1/√d_k
    # TODO 4: the mask: a blocked score takes no weight
    # TODO 5: softmax over the keys (a row with no key: zeros, not NaN)
    # TODO 6: context = weights @ V, heads merged back to [B, L, D]
    # TODO 7: the output projection
    raise NotImplementedError
