"""Grouped-query attention in NumPy: the `gqa` kata.

Write `grouped_query_attention`, then run `attn-tutor code check <this file>`.
Only numpy (and math) may be imported.
"""

import math  # noqa: F401 -- for math.sqrt

import numpy as np  # noqa: F401

KATA = "gqa"


def grouped_query_attention(q, k, v, is_causal=False):
    """Scaled dot-product attention with H query heads sharing G K/V heads.

    q: [B, H, L, d_k]   the queries, one set per query head
    k: [B, G, L, d_k]   the keys, one set per K/V head (G divides H; G = 1 is multi-query attention)
    v: [B, G, L, d_v]   the values, one set per K/V head
    is_causal: query i may attend to keys j <= i only (top-left, as torch's is_causal=True)

    Query head h reads K/V head h // (H // G): the K/V heads expanded in
    repeat_interleave order [A, A, B, B], as torch's
    scaled_dot_product_attention(..., enable_gqa=True) does (not tiled as [A, B, A, B]).

    Returns (out, weights):
    out:     [B, H, L, d_v]
    weights: [B, H, L, L]   the attention weights, one row per query of each query head
    """
    # 1. The group size: how many query heads share one K/V head (H // G).
    # 2. Expand k and v from G heads to H heads, each K/V head repeated for its consecutive query heads.
    # 3. The scores q·kᵀ / √d_k: [B, H, L, L].
    # 4. If is_causal, block key j for query i when j > i (fill with -inf before the softmax).
    # 5. Softmax along the keys' axis (the last), subtracting each row's max first.
    # 6. out = weights · v; return (out, weights).
    raise NotImplementedError
