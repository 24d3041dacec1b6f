"""RoPE and a decode step with it, in NumPy: a reference solution of the `rope` kata."""

import math

import numpy as np

KATA = "rope"


def apply_rope(x, positions, base=10000.0, pairing="half"):
    d = x.shape[-1]
    theta = base ** (-np.arange(0, d, 2) / d)                   # [d/2]: θ_i = base^(−2i/d)
    angles = np.asarray(positions)[:, None] * theta[None, :]    # [L, d/2]: m·θ_i
    cos, sin = np.cos(angles), np.sin(angles)
    if pairing == "half":                                       # pairs (i, i + d/2): rotate_half
        a, b = x[..., : d // 2], x[..., d // 2:]
        out = np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)
    else:                                                       # pairs (2i, 2i + 1): interleaved
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
    return out.astype(x.dtype, copy=False)


def rope_decode_step(q, k, v, k_cache, v_cache, base=10000.0, pairing="half"):
    T, d = q.shape[2], q.shape[3]
    P = k_cache.shape[2]                                        # tokens already in the cache
    positions = np.arange(P, P + T)                             # the new tokens continue from P
    q_rot = apply_rope(q, positions, base, pairing)
    k_rot = apply_rope(k, positions, base, pairing)             # v is not rotated
    keys = np.concatenate([k_cache, k_rot], axis=2)             # [B, H, P + T, d]: cached keys already rotated
    values = np.concatenate([v_cache, v], axis=2)
    scores = q_rot @ keys.swapaxes(-1, -2) / math.sqrt(d)       # [B, H, T, P + T]
    i = np.arange(T)[:, None]
    j = np.arange(P + T)[None, :]
    scores = np.where(j <= P + i, scores, -np.inf)              # causal, aligned bottom-right
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ values, keys, values
