"""The `sdpa` kata, PyTorch flavour: scaled dot-product attention that returns its weights too.

A file that imports torch at its top, as this one does, is checked as the PyTorch flavour.
"""

import math  # noqa: F401 -- math.sqrt

import torch  # noqa: F401

KATA = "sdpa"


def scaled_dot_product_attention(q, k, v, mask=None, is_causal=False):
    """softmax(Q Kᵀ / √d_k) V, and the weights (torch.nn.functional's function returns only out).

    q:    [B, H, L_q, d_k]  the queries (a tensor)
    k:    [B, H, L_k, d_k]  the keys
    v:    [B, H, L_k, d_v]  the values (d_v may differ from d_k)
    mask: torch.bool, broadcastable to [B, H, L_q, L_k] (e.g. [L_q, L_k] or [B, 1, 1, L_k]),
          True = the query may attend that key (SDPA's bool attn_mask); or None
    is_causal: query i attends only keys j <= i (aligned top-left, as SDPA's is_causal);
          never given together with mask
    returns (out [B, H, L_q, d_v], weights [B, H, L_q, L_k]) in the dtype of q.
    A query that may attend to no key gets zero weights and a zero row of out (no NaN).
    """
    # TODO 1. scores = Q Kᵀ / √d_k, over the last two axes: [B, H, L_q, L_k].
    # TODO 2. If is_causal, build the causal mask [L_q, L_k]: True on and below the diagonal.
    # TODO 3. Where the mask is False, set the score to -inf (masked_fill).
    # TODO 4. Softmax over the keys (dim=-1).
    # TODO 5. A row with no allowed key: zero weights, not NaN.
    # TODO 6. out = weights · V; return (out, weights).
    raise NotImplementedError
