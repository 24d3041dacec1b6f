"""The `sdpa` kata, NumPy flavour: scaled dot-product attention that returns its weights too."""

import math  # noqa: F401 -- math.sqrt

import numpy as np  # noqa: F401

KATA = "sdpa"


def scaled_dot_product_attention(q, k, v, mask=None, is_causal=False):
    """softmax(Q Kᵀ / √d_k) V, and the weights.

    q:    [B, H, L_q, d_k]  the queries
    k:    [B, H, L_k, d_k]  the keys
    v:    [B, H, L_k, d_v]  the values (d_v may differ from d_k)
    mask: bool, broadcastable to [B, H, L_q, L_k] (e.g. [L_q, L_k] or [B, 1, 1, L_k]),
          True = the query may attend that key; or None
    is_causal: query i attends only keys j <= i (aligned top-left, as PyTorch's is_causal);
          never given together with mask
    returns (out [B, H, L_q, d_v], weights [B, H, L_q, L_k]) in the dtype of q.
    A query that may attend to no key gets zero weights and a zero row of out (no NaN).
    """
    # TODO 1. scores = Q Kᵀ / √d_k, over the last two axes: [B, H, L_q, L_k].
    # TODO 2. If is_causal, build the causal mask [L_q, L_k]: True on and below the diagonal.
    # TODO 3. Where the mask is False, set the score to -inf.
    # TODO 4. Softmax over the keys (the last axis), stable: subtract each row's max first.
    # TODO 5. A row with no allowed key: zero weights, not NaN.
    # TODO 6. out = weights · V; return (out, weights).
    raise NotImplementedError
