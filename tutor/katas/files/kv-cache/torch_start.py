"""One decode step of multi-head attention against a KV cache, in PyTorch: the `kv-cache` kata.

Write `decode_step`, then run `attn-tutor code check <this file>`.
Importing torch at the top of the file is what makes this the PyTorch flavour.
"""

import math  # noqa: F401 -- for math.sqrt

import torch  # noqa: F401

KATA = "kv-cache"


def decode_step(x_new, w_q, w_k, w_v, w_o, num_heads, k_cache, v_cache):
    """Attend T new tokens over the cached keys and values and their own, and grow the cache.

    x_new:   [B, T, D]        the inputs of the T >= 1 new tokens
    w_q, w_k, w_v, w_o: [D, D] in nn.Linear's layout: y = x @ w.T (no biases)
    num_heads: H; d_k = D // H
    k_cache: [B, H, P, d_k]   the keys of the P earlier tokens, already projected and split
                              into heads (head h: columns h·d_k … (h+1)·d_k − 1); P may be 0
    v_cache: [B, H, P, d_k]   their values, the same way

    New token i (0-based among the new ones) sits at position P + i and attends
    keys 0 … P + i: the causal mask aligned bottom-right
    (torch.nn.attention.bias.causal_lower_right), not top-left as is_causal=True is.

    Returns (out, k_cache, v_cache):
    out:     [B, T, D]          the heads merged back side by side, then @ w_o.T
    k_cache: [B, H, P + T, d_k] the cache with the new tokens' keys appended after the old rows
    v_cache: [B, H, P + T, d_k] the same for the values
    """
    # 1. Project the new tokens only: q, k_new, v_new = x_new @ w.T, each [B, T, D].
    # 2. Split each into heads: view(B, T, H, d_k).transpose(1, 2) -> [B, H, T, d_k].
    # 3. Append k_new and v_new after the cached rows: torch.cat(..., dim=2) -> [B, H, P + T, d_k].
    # 4. Scores q @ kᵀ / √d_k: [B, H, T, P + T].
    # 5. Mask: new token i may attend to key j only when j <= P + i (masked_fill with -inf elsewhere).
    # 6. Softmax over the keys (dim=-1); context = weights @ v: [B, H, T, d_k].
    # 7. Merge the heads: transpose(1, 2).reshape(B, T, D); out = context @ w_o.T.
    # 8. Return (out, the grown k cache, the grown v cache).
    raise NotImplementedError
