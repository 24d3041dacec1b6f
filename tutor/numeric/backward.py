"""The backward pass in NumPy: SDPA's gradients, the record of a layer's, and a numerical gradient check.

Formulas (the chain rule through ``O = softmax(Q Kᵀ·scale + M) V``, Vaswani
et al. 2017, eq. 1; the softmax backward as FlashAttention-2 writes it, Dao
2023, Algorithm 2): with ``P`` the weights and ``dO`` the upstream gradient,

    ``dV = Pᵀ·dO``, ``dP = dO·Vᵀ``, ``dS = P ∘ (dP − rowsum(dP ∘ P))``,
    ``dQ = dS·K·scale``, ``dK = dSᵀ·Q·scale``.

A blocked key has ``P = 0``, so its ``dS`` is 0, and a query row that may
attend to no key (zero weights, as PyTorch's SDPA since 2.5) gets zero
gradients.  Pure: no I/O.  Shape comments on every line.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tutor.base.errors import ShapeError

from . import _common
from ._common import _shape_text
from .functional import _prepare, _softmax_inplace

Array = NDArray[np.float64]


def softmax_backward(P: NDArray, dP: NDArray) -> NDArray:
    """``dS = P ∘ (dP − rowsum(dP ∘ P))`` along the last axis: the softmax's vector-Jacobian product.

    Shapes: ``P``, ``dP`` ``[..., L, S]`` -> ``[..., L, S]``.  Source: ``∂P_j/∂S_k = P_j(δ_jk − P_k)``.
    """
    D = np.sum(dP * P, axis=-1, keepdims=True)  # [..., L, 1]
    return P * (dP - D)  # [..., L, S]


def scaled_dot_product_attention_backward(
    query: ArrayLike,
    key: ArrayLike,
    value: ArrayLike,
    grad_output: ArrayLike,
    attn_mask: ArrayLike | None = None,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> tuple[NDArray, NDArray, NDArray]:
    """The gradients ``(d_query, d_key, d_value)`` of
    ``torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask, 0.0, is_causal, scale=scale,
    enable_gqa=enable_gqa)`` for the upstream gradient ``grad_output`` (what ``out.backward(grad_output)`` gives
    as ``.grad``).

    Shapes: ``query [..., L, E]``, ``key [..., S, E]``, ``value [..., S, Ev]``,
    ``grad_output [..., L, Ev]``; the results have the shapes of query, key,
    value (no broadcasting of the batch axes: give them equal).  ``attn_mask``
    and ``is_causal`` as PyTorch's (boolean True = may attend; a float mask
    is added to the scaled scores); ``scale`` defaults to ``1/sqrt(E)``.  No
    dropout.  With ``enable_gqa=True`` key and value may have fewer heads
    (axis -3, ``Hkv`` dividing ``Hq``): query head ``h`` reads K/V head
    ``h // (Hq / Hkv)`` (as PyTorch's repeat_interleave), so the gradient of
    a K/V head is the sum over the query heads that read it, shaped as key
    and value.  Dtype: the inputs' (float32 or float64).  Raises
    :class:`ShapeError` when shapes do not fit, ``ValueError``/``TypeError``
    as :func:`tutor.numeric.scaled_dot_product_attention`.
    """
    a = _prepare(query, key, value, attn_mask, 0.0, is_causal, scale, enable_gqa, None)
    q, k, v = a.q, a.k, a.v  # [..., L, E], [..., S, E], [..., S, Ev] (K/V heads repeated to Hq with enable_gqa)
    if q.shape[:-2] != k.shape[:-2] or q.shape[:-2] != v.shape[:-2]:
        raise ShapeError(f"query {_shape_text(q.shape)}, key {_shape_text(k.shape)} and value "
                         f"{_shape_text(v.shape)} must have the same batch axes")
    dO = np.asarray(grad_output, dtype=q.dtype)  # [..., L, Ev]
    if dO.shape != q.shape[:-1] + v.shape[-1:]:
        raise ShapeError(f"grad_output {_shape_text(dO.shape)} must have the output's shape "
                         f"{_shape_text(q.shape[:-1] + v.shape[-1:])}")
    batch, L, S_ = q.shape[:-2], q.shape[-2], v.shape[-2]
    N = math.prod(batch)
    qf, kf, vf, gf = (np.ascontiguousarray(x).reshape((N,) + x.shape[-2:]) for x in (q, k, v, dO))  # [N, ·, ·]
    ok = None if a.allowed is None else np.broadcast_to(a.allowed, batch + (L, S_)).reshape(N, L, S_)  # [N, L, S]
    bias = None if a.bias is None else np.broadcast_to(a.bias, batch + (L, S_)).reshape(N, L, S_)  # [N, L, S]
    dq, dk, dv = np.empty_like(qf), np.empty_like(kf), np.empty_like(vf)  # [N, L, E], [N, S, E], [N, S, Ev]
    scale = q.dtype.type(a.scale)
    # products get contiguous operands: a transposed [L, S] view makes NumPy's matmul copy or leave BLAS (2x
    # slower, measured); only the small [S, E]-sized operands are transposed, never an [L, S] one

    def work(i: int, j: int) -> None:
        P = (qf[i:j] * scale) @ np.ascontiguousarray(kf[i:j].swapaxes(-1, -2))  # [n, L, E]·[n, E, S] -> [n, L, S]
        if bias is not None:
            P += bias[i:j]  # [n, L, S]
        if ok is not None:
            np.copyto(P, -np.inf, where=~ok[i:j])  # [n, L, S]; blocked keys
        _softmax_inplace(P)  # [n, L, S] weights; zero rows where every key is blocked
        g = gf[i:j]  # [n, L, Ev]
        dv[i:j] = (np.ascontiguousarray(g.swapaxes(-1, -2)) @ P).swapaxes(-1, -2)  # Pᵀ·dO = (dOᵀ·P)ᵀ: [n, S, Ev]
        dS = g @ np.ascontiguousarray(vf[i:j].swapaxes(-1, -2))  # dP: [n, L, Ev]·[n, Ev, S] -> [n, L, S]
        D = np.einsum("...ij,...ij->...i", dS, P)[..., None]  # rowsum(dP ∘ P): [n, L, 1]
        dS -= D  # [n, L, S], in place: dP − D
        dS *= P  # [n, L, S]: P ∘ (dP − D), as softmax_backward, in place
        dS *= scale  # [n, L, S]: the scale of both products, applied once
        np.matmul(dS, kf[i:j], out=dq[i:j])  # [n, L, S]·[n, S, E] -> [n, L, E]
        dk[i:j] = (np.ascontiguousarray(qf[i:j].swapaxes(-1, -2)) @ dS).swapaxes(-1, -2)  # dSᵀ·Q = (Qᵀ·dS)ᵀ: [n, S, E]

    if N * L * S_ >= _common._PARALLEL_MIN_SCORES:
        _common._in_parallel(N, work, chunk=max(1, N // (4 * _common._workers())))
    else:
        work(0, N)
    dQ, dK, dV = dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)
    if enable_gqa:  # each K/V head's gradient: the sum over the query heads that read it
        dK, dV = _fold_heads(dK, np.shape(key)), _fold_heads(dV, np.shape(value))
    return dQ, dK, dV


def _fold_heads(g: NDArray, shape: tuple[int, ...]) -> NDArray:
    """``[..., Hq, S, E]`` summed over each group of ``Hq / Hkv`` query heads -> ``[..., Hkv, S, E]`` (``shape``)."""
    Hq, Hkv = g.shape[-3], shape[-3]
    if Hq == Hkv:
        return g
    return g.reshape(g.shape[:-3] + (Hkv, Hq // Hkv) + g.shape[-2:]).sum(axis=-3)  # [..., Hkv, S, E]


# --------------------------------------------------------------------------- #
# a layer's every gradient
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class LayerGrads:
    """Every gradient of a multi-head attention layer for a batch of one (float64; heads stacked on axis 0).

    ``d_output [L, d_out]``, ``d_concat [L, H·d_v]``, ``d_w_o [H·d_v, d_out]``,
    ``d_b_o [d_out]``; per head ``d_weights``, ``d_scaled [H, L, L_k]``,
    ``d_q [H, L, d_k]``, ``d_k [H, L_k, d_k]``, ``d_v [H, L_k, d_v]``,
    ``d_w_q [H, d_model, d_k]``, ``d_w_k [H, d_kv, d_k]``, ``d_w_v [H, d_kv, d_v]``,
    biases' ``[H, d]``; ``d_x [L, d_model]``, ``d_x_kv [L_k, d_kv]`` (zeros in self-attention,
    where the K/V paths are in ``d_x``).  With grouped K/V heads the K/V gradients of a query
    head are its K/V head's (summed over the group); with a KV cache ``d_x_kv`` has the new
    tokens' rows only.  With RoPE ``d_q_rot``, ``d_k_rot`` are the gradients of the rotated Q and K (``d_q``,
    ``d_k`` those turned back), else ``None``.  An exercise's: :func:`tutor.production.layer_backward`.
    """

    d_output: Array
    d_concat: Array
    d_w_o: Array
    d_b_o: Array
    d_weights: Array
    d_scaled: Array
    d_q: Array
    d_k: Array
    d_v: Array
    d_w_q: Array
    d_w_k: Array
    d_w_v: Array
    d_b_q: Array
    d_b_k: Array
    d_b_v: Array
    d_x: Array
    d_x_kv: Array
    d_q_rot: Array | None = None  # [H, L, d_k]: with RoPE, the gradient of the rotated queries (d_q turned back)
    d_k_rot: Array | None = None  # [H, L_k, d_k]: with RoPE, the gradient of the rotated keys


# --------------------------------------------------------------------------- #
# the numerical gradient check
# --------------------------------------------------------------------------- #
def numerical_gradient(f: Callable[[Array], float], x: ArrayLike, h: float = 1e-6) -> Array:
    """``∂f/∂x`` by central differences in float64: ``(f(x + h·e_i) − f(x − h·e_i)) / 2h`` per entry.

    ``f`` maps an array of ``x``'s shape to a float; the truncation error is
    ``O(h²)`` (≈1e-12 relative for smooth ``f`` and ``h = 1e-6``), the rounding
    error ``O(ε/h)`` (≈1e-10).  Returns an array of ``x``'s shape.
    """
    base = np.array(x, dtype=np.float64)  # [...]
    grad = np.zeros_like(base)  # [...]
    flat, gflat = base.reshape(-1), grad.reshape(-1)  # views
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + h
        up = f(base)
        flat[i] = old - h
        down = f(base)
        flat[i] = old
        gflat[i] = (up - down) / (2 * h)
    return grad


def gradient_check(query: ArrayLike, key: ArrayLike, value: ArrayLike, grad_output: ArrayLike,
                   attn_mask: ArrayLike | None = None, *, h: float = 1e-6) -> float:
    """The largest relative difference between :func:`scaled_dot_product_attention_backward` and
    :func:`numerical_gradient` of ``L = Σ grad_output ∘ sdpa(query, key, value)`` (float64 central
    differences), over the three gradients; about 1e-9 or less when the analytic gradient is right.
    """
    from .functional import scaled_dot_product_attention

    q, k, v = (np.array(a, dtype=np.float64) for a in (query, key, value))
    dO = np.array(grad_output, dtype=np.float64)
    analytic = scaled_dot_product_attention_backward(q, k, v, dO, attn_mask)
    loss = [
        lambda t: float(np.sum(dO * scaled_dot_product_attention(t, k, v, attn_mask))),
        lambda t: float(np.sum(dO * scaled_dot_product_attention(q, t, v, attn_mask))),
        lambda t: float(np.sum(dO * scaled_dot_product_attention(q, k, t, attn_mask))),
    ]
    worst = 0.0
    for fn, at, g in zip(loss, (q, k, v), analytic):
        num = numerical_gradient(fn, at, h)
        worst = max(worst, float(np.max(np.abs(num - g) / np.maximum(1.0, np.abs(g)))))
    return worst
