"""Rotary position embedding (RoPE) in NumPy, as LLM code applies it to a head's queries and keys.

Su et al. 2021, "RoFormer", §3.4.2: pair ``i`` of a vector at position ``m``
turns by ``m·θ_i``, ``θ_i = base^(−2i/d)``.  Two layouts of the pairs are in
use: ``interleaved`` pairs dimensions ``(2i, 2i+1)`` (RoFormer, GPT-J),
``half`` pairs ``(i, i + d/2)`` (GPT-NeoX and LLaMA's ``rotate_half``:
``x·cos + rotate_half(x)·sin`` with ``cos``, ``sin`` of ``[θ, θ]``
concatenated).  Knows no exercise; tested against a rotation written in
torch.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray


def rope_angles(positions: ArrayLike, d: int, base: float = 10000.0) -> NDArray:
    """``m·θ_i`` for each position ``m`` and pair ``i``: ``[n, d/2]`` (float64).  Raises ``ValueError`` for an odd ``d``."""
    if d % 2:
        raise ValueError(f"RoPE turns pairs of dimensions: d = {d} is odd")
    theta = float(base) ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # [d/2]  θ_i = base^(−2i/d)
    return np.asarray(positions, dtype=np.float64)[:, None] * theta[None, :]  # [n, 1]·[1, d/2] -> [n, d/2]


def apply_rope(x: ArrayLike, positions: ArrayLike, *, base: float = 10000.0,
               pairing: Literal["interleaved", "half"] = "interleaved") -> NDArray:
    """``x [..., n, d]`` with row ``p`` turned by position ``positions[p]``: ``[..., n, d]``.

    ``[a, b] → [a·cos − b·sin, a·sin + b·cos]`` on each pair (``interleaved``:
    ``(2i, 2i+1)``; ``half``: ``(i, i + d/2)``).  The dtype of ``x`` is kept
    for a float ``x`` (float64 for integers).  Raises ``ValueError`` for an
    odd ``d`` or a ``positions`` that is not one per row.
    """
    arr = np.asarray(x)
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    n, d = arr.shape[-2], arr.shape[-1]
    pos = np.asarray(positions)
    if pos.shape != (n,):
        raise ValueError(f"positions must have one entry per row ({n}), got shape {pos.shape}")
    return rotate_pairs(arr, rope_angles(pos, d, base), pairing)  # [n, d/2] angles -> [..., n, d]


def rotate_pairs(x: NDArray, angles: NDArray, pairing: Literal["interleaved", "half"] | str) -> NDArray:
    """``x [..., n, d]`` with pair ``i`` of row ``p`` turned by ``angles[p, i]`` (``[n, d/2]``): ``[..., n, d]``.

    ``[a, b] → [a·cos − b·sin, a·sin + b·cos]``; ``interleaved`` pairs ``(2i, 2i+1)``, ``half`` pairs
    ``(i, i + d/2)``.  Raises ``ValueError`` for another pairing.
    """
    d = x.shape[-1]
    cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)  # [n, d/2]
    if pairing == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]  # [..., n, d/2] each: dimensions 2i and 2i+1
        out = np.empty_like(x)  # [..., n, d]
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out
    if pairing == "half":
        a, b = x[..., : d // 2], x[..., d // 2:]  # [..., n, d/2] each: dimensions i and i + d/2
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)  # [..., n, d]
    raise ValueError(f"pairing must be 'interleaved' or 'half', got {pairing!r}")
