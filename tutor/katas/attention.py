"""Attention as the katas' reference computes it, right or under the mistakes learners' code makes.

One batched float64 function, :func:`attend`, is scaled dot-product attention
``softmax(Q Kᵀ / √d_k) V`` (Vaswani et al. 2017, eq. 1) over ``[..., L_q, d_k]``
queries and ``[..., L_k, d_k]`` keys with a boolean mask (True = may attend);
a query row that may attend to no key gets zero weights and a zero output
(the katas' convention, and what PyTorch's ``scaled_dot_product_attention``
gives there since 2.5 on CPU).  ``slips`` names the mistakes to make, each one
line of code a learner gets wrong (:data:`SLIPS`); :mod:`.mha` and the other
katas build on it.  :func:`split_heads` and :func:`merge_heads` are the
``view``/``transpose`` pairs of a multi-head module, with their own slips.

Pure NumPy: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Set

import numpy as np

from ..numeric.functional import softmax  # the one softmax: a row of only -inf gives zeros
from .kata import Array

__all__ = ["SLIPS", "NotApplicable", "attend", "merge_heads", "split_heads"]

#: What each slip of :func:`attend`, :func:`split_heads` and :func:`merge_heads` does, as code.
SLIPS = {
    "no_scaling": "scores = q @ k.T (no / √d_k)",
    "scale_sqrt_d_model": "scores / √d_model",
    "scale_d_k": "scores / d_k",
    "kq_transposed": "scores = k @ q.T",
    "softmax_columns": "softmax over the queries' axis (dim=-2)",
    "guarded_columns": "with softmax_columns: a guarded 0/0, zeros on a column no query may attend",
    "times_k": "out = weights @ k",
    "no_softmax": "the scaled scores used as the weights, no softmax",
    "mask_inverted": "blocked where the mask is True",
    "mask_added": "the boolean mask added to the scores as 0/1",
    "no_mask": "the mask ignored",
    "mask_after_softmax": "weights zeroed after the softmax, not renormalised",
    "empty_row_nan": "masked_fill(-inf) with no guard: NaN on a fully masked row",
    "empty_row_uniform": "a large negative fill: uniform weights on a fully masked row",
    "heads_split_reshape": "[B, L, D] reshaped straight to [B, H, L, d_k]",
    "heads_merge_reshape": "[B, H, L, d_k] reshaped straight to [B, L, D]",
}


class NotApplicable(Exception):
    """The slips cannot run on these inputs: the learner's code would raise (shapes that do not chain)."""


def attend(q: Array, k: Array, v: Array, allowed: Array | None, slips: Set[str] = frozenset(), *,
           d_model: int | None = None) -> tuple[Array, Array]:
    """``(out, weights)`` of scaled dot-product attention, made with ``slips``.

    Shapes: ``q [..., L_q, d_k]``, ``k [..., L_k, d_k]``, ``v [..., L_k, d_v]``; ``allowed`` bool,
    broadcastable to ``[..., L_q, L_k]`` (True = may attend), or ``None``; returns ``out [..., L_q, d_v]``
    and ``weights [..., L_q, L_k]``, float64.  ``d_model``: for the slip ``scale_sqrt_d_model``.
    Raises :class:`NotApplicable` when a slip's shapes do not chain.
    """
    d_k = q.shape[-1]
    if "kq_transposed" in slips:
        if q.shape[-2] != k.shape[-2]:
            raise NotApplicable("K·Qᵀ needs L_q = L_k")
        scores = k @ np.swapaxes(q, -1, -2)
    else:
        scores = q @ np.swapaxes(k, -1, -2)
    if "no_scaling" not in slips:
        divisor = (math.sqrt(d_model) if "scale_sqrt_d_model" in slips and d_model
                   else d_k if "scale_d_k" in slips else math.sqrt(d_k))
        scores = scores / divisor
    keep = None if allowed is None or "no_mask" in slips else np.broadcast_to(allowed, scores.shape)
    if keep is not None and "mask_inverted" in slips:
        keep = ~keep
    if keep is not None and "mask_added" in slips:
        scores, keep = scores + keep, None
    if keep is not None and "mask_after_softmax" in slips:
        weights = softmax(scores) * keep
    elif keep is not None:
        empty = ~keep.any(axis=-1, keepdims=True)
        fill = -1e9 if "empty_row_uniform" in slips else -np.inf
        weights = softmax(np.where(keep, scores, fill), axis=-2 if "softmax_columns" in slips else -1)
        if "empty_row_nan" in slips:  # exp(-inf - max) with no guard: 0/0 on a row with no key
            weights = np.where(empty, np.nan, weights)
        if "softmax_columns" in slips and "guarded_columns" not in slips:  # 0/0 on a column no query may attend
            weights = np.where(~keep.any(axis=-2, keepdims=True), np.nan, weights)
    else:
        weights = softmax(scores, axis=-2 if "softmax_columns" in slips else -1)
    if "no_softmax" in slips:  # the (masked) scaled scores used as the weights, a blocked one as 0
        weights = scores if keep is None else np.where(keep, scores, 0.0)
    if "times_k" in slips:
        if k.shape[-1] != v.shape[-1]:
            raise NotApplicable("weights·K needs d_k = d_v")
        return weights @ k, weights
    return weights @ v, weights


def split_heads(t: Array, num_heads: int, slips: Set[str] = frozenset()) -> Array:
    """``[B, L, H·d] -> [B, H, L, d]``: ``view(B, L, H, d).transpose(1, 2)``, or a plain reshape (slip)."""
    B, L, D = t.shape
    if "heads_split_reshape" in slips:
        return t.reshape(B, num_heads, L, D // num_heads)
    return t.reshape(B, L, num_heads, D // num_heads).transpose(0, 2, 1, 3)


def merge_heads(t: Array, slips: Set[str] = frozenset()) -> Array:
    """``[B, H, L, d] -> [B, L, H·d]``: ``transpose(1, 2).reshape(B, L, H·d)``, or a plain reshape (slip)."""
    B, H, L, d = t.shape
    if "heads_merge_reshape" in slips:
        return t.reshape(B, L, H * d)
    return t.transpose(0, 2, 1, 3).reshape(B, L, H * d)
