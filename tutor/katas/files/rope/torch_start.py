"""Rotary position embedding (RoPE), then attention with it over a KV cache, in PyTorch: the `rope` kata.

Write `apply_rope`, then `rope_decode_step` (which calls it), then run
`attn-tutor code check <this file>`.  Importing torch at the top of the file is
what makes this the PyTorch flavour.

RoPE (Su et al. 2021, RoFormer, section 3.4.2) turns pair i (i = 0 … d/2 − 1)
of the query or key at position m by the angle m·θ_i, θ_i = base^(−2i/d):
    [a, b] -> [a·cos(m·θ_i) − b·sin(m·θ_i), a·sin(m·θ_i) + b·cos(m·θ_i)]
Two conventions say which dimensions make pair i; interviewers ask both:
  pairing="half":        (i, i + d/2).  GPT-NeoX and Hugging Face's LLaMA:
                         x·cos + rotate_half(x)·sin, where rotate_half(x) =
                         concat(−x[..., d/2:], x[..., :d/2]) and cos, sin are
                         of the angles concatenated with themselves:
                         [θ_0, θ_1, …, θ_0, θ_1, …].
  pairing="interleaved": (2i, 2i + 1).  RoFormer, GPT-J, and Meta's LLaMA code,
                         which views each pair as one complex number a + ib and
                         multiplies it by e^(i·m·θ_i).
The two give different numbers on the same x: a checkpoint trained with one needs
its q and k weights permuted to run with the other.
"""

import math  # noqa: F401

import torch  # noqa: F401

KATA = "rope"


def apply_rope(x, positions, base=10000.0, pairing="half"):
    """Turn every row of x by its position.

    x:         [..., L, d]  d even; any leading axes (batch, heads)
    positions: [L]          integers: the position of each row (any order, need not start at 0)
    base:      θ_i = base ** (−2i / d) for i = 0 … d/2 − 1
    pairing:   "half" or "interleaved" (see the top of this file)

    Returns x_rot: [..., L, d], the same shape and dtype as x.
    """
    # 1. theta = base ** (−2i / d) for i = 0 … d/2 − 1: [d/2] (torch.arange(0, d, 2)).
    # 2. angles = positions[:, None] * theta[None, :]: [L, d/2]; cos and sin of them.
    # 3. pairing "half": a = x[..., :d/2], b = x[..., d/2:];
    #    pairing "interleaved": a = x[..., 0::2], b = x[..., 1::2].
    # 4. Turn each pair: a·cos − b·sin and a·sin + b·cos, put back where a and b were.
    # 5. Return it in x's dtype.
    raise NotImplementedError


def rope_decode_step(q, k, v, k_cache, v_cache, base=10000.0, pairing="half"):
    """Attend T new tokens over the cached keys and values and their own, with RoPE, and grow the cache.

    q, k, v: [B, H, T, d]  the new tokens' queries, keys and values, projected and split
                           into heads, not rotated yet
    k_cache: [B, H, P, d]  the P earlier tokens' keys, stored already rotated at their
                           positions 0 … P − 1 (P may be 0: a prefill)
    v_cache: [B, H, P, d]  their values (values are never rotated)

    New token i (0-based among the new ones) sits at position P + i: its query and
    key turn by that position; the cached keys are not turned again. It attends the
    keys 0 … P + i (causal, aligned bottom-right) with softmax(q·kᵀ / √d).

    Returns (out, k_cache, v_cache):
    out:     [B, H, T, d]      the weights times the values, per head
    k_cache: [B, H, P + T, d]  the cache with the new keys, rotated, appended
    v_cache: [B, H, P + T, d]  the cache with the new values appended
    """
    # 1. positions = P, P + 1, …, P + T − 1 (P = k_cache.shape[2]).
    # 2. q_rot = apply_rope(q, positions, ...), k_rot = apply_rope(k, positions, ...); v as it is.
    # 3. Append: keys = torch.cat([k_cache, k_rot], dim=2), values = torch.cat([v_cache, v], dim=2).
    # 4. Scores q_rot @ keys.transpose(-2, -1) / √d: [B, H, T, P + T]; -inf where key j > P + i.
    # 5. torch.softmax over the keys (dim=-1); out = weights @ values: [B, H, T, d].
    # 6. Return (out, keys, values).
    raise NotImplementedError
