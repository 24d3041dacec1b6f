"""An exercise's layer backwards in the NumPy core: every gradient, batched over the heads as a framework computes them.

The attention part is :func:`tutor.numeric.backward.scaled_dot_product_attention_backward`
(``enable_gqa`` for grouped K/V heads); the projections' and ``W_O``'s
gradients are the chain rule around it (Vaswani et al. 2017, eq. 1 and
§3.2.2).  What the exact engine's backward pass is checked against
(:func:`tutor.production.verify`).  Pure: no I/O.
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import NDArray

from ..exercise.record import Exercise
from ..numeric._common import MaskPolarityWarning
from ..numeric.backward import LayerGrads, scaled_dot_product_attention_backward, softmax_backward
from ..numeric.functional import _softmax_inplace

Array = NDArray[np.float64]


def _f(m: object) -> Array:
    return np.array(m, dtype=object).astype(np.float64)


def upstream(ex: Exercise) -> Array:
    """The exercise's upstream gradient ``[L, d_out]``: its ``upstream`` field, or all ones."""
    if ex.upstream is None:
        return np.ones((ex.L, ex.d_out))  # [L, d_out]
    return _f(ex.upstream)


def layer_backward(ex: Exercise, d_output: Array | None = None) -> LayerGrads:
    """The gradients of ``ex``'s layer for ``d_output`` (default :func:`upstream`), batched over the heads.

    The forward is recomputed in float64 as :class:`tutor.numeric.MultiHeadAttention`
    does it (heads stacked; format v2 as :func:`tutor.production.run.run_decoder`:
    the K/V heads once each, with ``enable_gqa=True``, the cache's rows before the
    new ones, the bias in a float ``attn_mask``); the attention part is
    :func:`scaled_dot_product_attention_backward`.  With grouped K/V heads
    ``d_k``, ``d_v`` and their weights' and biases' gradients are those of each
    query head's K/V head (the sum over its group), repeated per query head.
    With a KV cache the cached rows are constants: ``d_k``, ``d_v`` have a row
    per key (``[H, L_k, d]``), but only the new rows reach ``W_K``, ``W_V``,
    ``b_K``, ``b_V`` and ``d_x``.  The bias is a constant too (``d_scaled`` is
    the gradient of the biased scores as well).  With RoPE (format v3) the scores read Q and K turned by
    position: the attention part takes the rotated ones, and the gradients of Q and K are turned back
    (``R(mθ)ᵀ``), a cache's keys (stored rotated) left as they are.
    """
    H, Gk = ex.num_heads, ex.num_kv_heads
    first = [ex.sharing(g)[0] for g in range(Gk)]  # the first query head of each group holds its K/V weights
    x, kv = _f(ex.x), _f(ex.kv)  # [L, d_model], [L_new, d_kv]
    Wq = np.stack([_f(h.w_q) for h in ex.heads])  # [H, d_model, d_k]
    Wk = np.stack([_f(ex.heads[h].w_k) for h in first])  # [G, d_kv, d_k]
    Wv = np.stack([_f(ex.heads[h].w_v) for h in first])  # [G, d_kv, d_v]

    def bias(name: str, n: int, heads: list[int]) -> Array:
        return np.stack([_f(getattr(ex.heads[h], name)) if getattr(ex.heads[h], name) is not None else np.zeros(n)
                         for h in heads])  # [H|G, n]

    d_k, d_v = Wq.shape[2], Wv.shape[2]
    q = x @ Wq + bias("b_q", d_k, list(range(H)))[:, None, :]  # [L, d_model]·[H, d_model, d_k] -> [H, L, d_k]
    k = kv @ Wk + bias("b_k", d_k, first)[:, None, :]  # [G, L_new, d_k]
    v = kv @ Wv + bias("b_v", d_v, first)[:, None, :]  # [G, L_new, d_v]
    P_ = ex.L_past
    if ex.cache is not None:  # the cached rows (constants), then the new ones
        k = np.concatenate([np.stack([_f(c.k) for c in ex.cache]), k], axis=1)  # [G, L_k, d_k]
        v = np.concatenate([np.stack([_f(c.v) for c in ex.cache]), v], axis=1)  # [G, L_k, d_v]
    q_in, k_in = q, k  # what the scores read: with RoPE (format v3) Q and K turned by position (issue 23)
    if ex.rope is not None:
        q_in, k_in = _rope_turn(ex, q, k, 1.0)  # [H, L, d_k], [G, L_k, d_k]
    allowed = ex.allowed()
    ok = None if allowed is None else np.array(allowed, dtype=bool)  # [L, L_k]
    add = None if ex.bias is None else np.stack([_f(b) for b in ex.bias])  # [H, L, L_k]
    mask: NDArray | None = ok
    if add is not None:  # one float attn_mask: the bias, and -inf where blocked
        mask = add if ok is None else np.where(ok[None], add, -np.inf)  # [H, L, L_k]
    G = upstream(ex) if d_output is None else d_output  # [L, d_out]
    if ex.w_o is not None:
        W_O = _f(ex.w_o)  # [H·d_v, d_out]
        d_concat = G @ W_O.T  # [L, d_out]·[d_out, H·d_v] -> [L, H·d_v]
    else:
        d_concat = G  # [L, H·d_v]
    d_head = d_concat.reshape(ex.L, H, d_v).transpose(1, 0, 2)  # [H, L, d_v]
    with warnings.catch_warnings():  # an exercise may block what it likes (every key): no polarity to warn about
        warnings.simplefilter("ignore", MaskPolarityWarning)
        dq, dk, dv = scaled_dot_product_attention_backward(q_in, k_in, v, d_head, mask, enable_gqa=True)  # [H, L, d_k], [G, L_k, d_k], [G, L_k, d_v]
    dq_rot = dk_rot = None
    if ex.rope is not None:  # the gradients of Q_rot, K_rot turned back: R is orthogonal, R⁻¹ = Rᵀ = R(−mθ)
        dq_rot, dk_rot = dq, dk
        dq, dk = _rope_turn(ex, dq, dk, -1.0)  # [H, L, d_k], [G, L_k, d_k]
    rep = H // Gk
    k_h, v_h = np.repeat(k_in, rep, axis=0), np.repeat(v, rep, axis=0)  # [H, L_k, d]  what each query head read
    S = q_in @ k_h.transpose(0, 2, 1) * (1.0 / np.sqrt(d_k))  # [H, L, L_k]
    if add is not None:
        S += add  # [H, L, L_k]
    if ok is not None:
        S[:, ~ok] = -np.inf  # [H, L, L_k]
    P = _softmax_inplace(S)  # [H, L, L_k]
    dP = d_head @ v_h.transpose(0, 2, 1)  # [H, L, d_v]·[H, d_v, L_k] -> [H, L, L_k]
    concat = (P @ v_h).transpose(1, 0, 2).reshape(ex.L, H * d_v)  # [H, L, d_v] -> [L, H·d_v]
    d_w_o = concat.T @ G if ex.w_o is not None else np.zeros((H * d_v, G.shape[1]))  # [H·d_v, d_out]
    dk_new, dv_new = dk[:, P_:], dv[:, P_:]  # [G, L_new, d]: the rows of the new tokens; the cached ones stop here
    d_x = np.einsum("hld,hmd->lm", dq, Wq)  # Σ_h d_q·W_Qᵀ: [L, d_model]
    kv_path = np.einsum("gld,gmd->lm", dk_new, Wk) + np.einsum("gld,gmd->lm", dv_new, Wv)  # Σ_g: [L_new, d_kv]
    if ex.is_cross:
        d_x_kv = kv_path
    else:
        d_x, d_x_kv = d_x + kv_path, np.zeros_like(kv_path)  # x is also x_kv: the K/V paths add to d_x

    def per_head(a: Array) -> Array:
        return np.repeat(a, rep, axis=0)  # [G, ...] -> [H, ...]: each query head's K/V head

    return LayerGrads(
        d_output=G, d_concat=d_concat, d_w_o=d_w_o, d_b_o=G.sum(axis=0),
        d_weights=dP, d_scaled=softmax_backward(P, dP),
        d_q=dq, d_k=per_head(dk), d_v=per_head(dv),
        d_w_q=x.T @ dq, d_w_k=per_head(kv.T @ dk_new), d_w_v=per_head(kv.T @ dv_new),  # [d_in, n]·[., n, d] -> [., d_in, d]
        d_b_q=dq.sum(axis=1), d_b_k=per_head(dk_new.sum(axis=1)), d_b_v=per_head(dv_new.sum(axis=1)),  # [H, d]
        d_x=d_x, d_x_kv=d_x_kv,
        d_q_rot=dq_rot, d_k_rot=None if dk_rot is None else per_head(dk_rot),
    )


def _rope_turn(ex: Exercise, q: Array, k: Array, sign: float) -> tuple[Array, Array]:
    """``q [H, L, d_k]`` and ``k [G, L_k, d_k]`` turned by RoPE (``sign`` 1) or back (``sign`` −1: the
    transpose of each pair's rotation, ``R(mθ)ᵀ = R(−mθ)``; RoFormer, Su et al. 2021: R is orthogonal, §3.2.2; the pairs, §3.4.2).
    A cache's rows (the first ``L_past`` keys) are stored rotated: neither turned nor turned back."""
    from ..numeric.rotary import rope_angles, rotate_pairs

    assert ex.rope is not None
    d_k, P_ = q.shape[-1], ex.L_past
    base, pairing = float(ex.rope.base), ex.rope.pairing
    qa = sign * rope_angles(ex.query_positions, d_k, base)  # [L, d_k/2]
    ka = sign * rope_angles(ex.key_positions[P_:], d_k, base)  # [L_new, d_k/2]
    q_out = rotate_pairs(q, qa, pairing)  # [H, L, d_k]
    k_out = np.concatenate([k[:, :P_], rotate_pairs(k[:, P_:], ka, pairing)], axis=1)  # [G, L_k, d_k]
    return q_out, k_out
