"""The backward steps in the float pipeline: one function per step, as :mod:`tutor.numeric.replay`'s forward ones.

Each ``<id>(r, head)`` returns the step's ``[rows, cols]`` float64 value from
the steps before it (``r.input``), under the variant's backward knobs
(``softmax_grad``, ``grad_scale``, ``d_k_transposed``, ``masked_grad``,
``bias_grad``), or ``None`` when the variant cannot reach it; each
``<id>_slack`` how far the inputs' rounding moves it (first-order).
Formulas: :mod:`tutor.numeric.backward` (the chain rule; ``dS = P ∘ (dP −
rowsum(dP ∘ P))``, Dao 2023, Algorithm 2).  Bias gradients are ``[1, d]``.
Pure: no I/O.  Re-exported by :mod:`tutor.numeric.replay`, where the step
catalogue finds them by name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:  # pragma: no cover
    from .replay import Replay

Array = NDArray[np.float64]


def _f(m: object) -> Array:
    return np.array(m, dtype=object).astype(np.float64)


def _mul_slack(A: Array, dA: Array, B: Array, dB: Array) -> Array:
    return np.abs(A) @ dB + dA @ np.abs(B) + dA @ dB


def _heads_key(r: Replay) -> tuple[str, int | None]:
    return ("concat", None) if r.ex.num_heads > 1 else ("head_output", 0)


def _v_cols(r: Replay, head: int | None) -> slice:
    offset = sum(hd.d_v for hd in r.ex.heads[:head])
    return slice(offset, offset + r.ex.heads[head or 0].d_v)


def _group(r: Replay, head: int | None) -> tuple[int, ...]:
    """The query heads whose K/V gradients add up in ``head``'s (grouped K/V heads), else ``head`` alone."""
    ex = r.ex
    if not ex.grouped or r.variant.kv_grad == "own":  # "own": the misconception that takes one head's share
        return (head or 0,)
    return ex.sharing(ex.kv_head(head or 0))


def _new(r: Replay) -> slice:
    """The rows of ``d_k``/``d_v`` that reach the weights and X: with a KV cache the new tokens' only."""
    return slice(r.ex.L_past, None)


def _group_sum(r: Replay, head: int | None, one: Callable[[int], Array | None]) -> Array | None:
    """``one(h)`` summed over ``head``'s group; ``None`` when a head's part cannot be reached or shapes differ."""
    total: Array | None = None
    for h in _group(r, head):
        part = one(h)
        if part is None or (total is not None and part.shape != total.shape):
            return None
        total = part if total is None else total + part
    return total


# --- the layer: d_output, d_concat, d_w_o, d_b_o -------------------------------------------------


def d_output(r: Replay, head: int | None = None) -> Array:
    """The upstream gradient ``[L, d_out]``: the exercise's ``upstream``, or all ones."""
    ex = r.ex
    return np.ones((ex.L, ex.d_out)) if ex.upstream is None else _f(ex.upstream)


def d_output_slack(r: Replay, head: int | None = None) -> Array:
    return np.zeros_like(r.values["d_output", None])


def d_concat(r: Replay, head: int | None = None) -> Array | None:
    """``d_output·W_Oᵀ``: ``[L, d_out]·[d_out, H·d_v]`` -> ``[L, H·d_v]``."""
    G = r.input("d_output", None)
    return None if G is None else G @ _f(r.ex.w_o).T


def d_concat_slack(r: Replay, head: int | None = None) -> Array:
    return r.delta("d_output", None) @ np.abs(_f(r.ex.w_o)).T


def d_w_o(r: Replay, head: int | None = None) -> Array | None:
    """``concatᵀ·d_output``: ``[H·d_v, L]·[L, d_out]`` -> ``[H·d_v, d_out]``."""
    C, G = r.input(*_heads_key(r)), r.input("d_output", None)
    return None if C is None or G is None or C.shape[0] != G.shape[0] else C.T @ G


def d_w_o_slack(r: Replay, head: int | None = None) -> Array:
    key = _heads_key(r)
    return _mul_slack(r.values[key].T, r.delta(*key).T, r.values["d_output", None], r.delta("d_output", None))


def _bias_sum(r: Replay, g: Array | None) -> Array | None:
    """Rows summed (``[n, d]`` -> ``[1, d]``); averaged under ``bias_grad="mean"``."""
    if g is None:
        return None
    total = g.sum(axis=0, keepdims=True)  # [1, d]
    return total / g.shape[0] if r.variant.bias_grad == "mean" else total


def d_b_o(r: Replay, head: int | None = None) -> Array | None:
    """``Σ_rows d_output``: ``[1, d_out]`` (b_O is added to every row)."""
    return _bias_sum(r, r.input("d_output", None))


def d_b_o_slack(r: Replay, head: int | None = None) -> Array:
    return r.delta("d_output", None).sum(axis=0, keepdims=True)


# --- one head --------------------------------------------------------------------------------------


def _d_head_source(r: Replay) -> tuple[str, None]:
    return ("d_concat", None) if r.ex.w_o is not None else ("d_output", None)


def d_head_output(r: Replay, head: int | None) -> Array | None:
    """This head's columns of ``d_concat`` (``d_output`` without W_O): ``[L, d_v]``."""
    g = r.input(*_d_head_source(r))
    return None if g is None else g[:, _v_cols(r, head)]


def d_head_output_slack(r: Replay, head: int | None) -> Array:
    return r.delta(*_d_head_source(r))[:, _v_cols(r, head)]


def d_weights(r: Replay, head: int | None) -> Array | None:
    """``d_head·Vᵀ``: ``[L, d_v]·[d_v, L_k]`` -> ``[L, L_k]``."""
    dH, V = r.input("d_head_output", head), r.input("v", head)
    return None if dH is None or V is None or dH.shape[1] != V.shape[1] else dH @ V.T


def d_weights_slack(r: Replay, head: int | None) -> Array:
    return _mul_slack(r.values["d_head_output", head], r.delta("d_head_output", head),
                      r.values["v", head].T, r.delta("v", head).T)


def d_scaled(r: Replay, head: int | None) -> Array | None:
    """``weights ∘ (d_weights − rowsum(d_weights ∘ weights))``: ``[L, L_k]``, 0 where blocked.

    Variants: ``softmax_grad="elementwise"`` (``weights ∘ d_weights``: the softmax
    treated as element-wise); ``masked_grad="leak"`` (a blocked entry left as
    ``d_weights − rowsum``).
    """
    P, dP = r.input("weights", head), r.input("d_weights", head)
    if P is None or dP is None or P.shape != dP.shape:
        return None
    if r.variant.softmax_grad == "elementwise":
        dS = P * dP  # [L, L_k]
        D = np.zeros((P.shape[0], 1))
    else:
        D = np.sum(dP * P, axis=-1, keepdims=True)  # [L, 1]
        dS = P * (dP - D)  # [L, L_k]
    if r.variant.masked_grad == "leak" and r.allowed is not None:
        dS = np.where(r.allowed, dS, dP - D)  # [L, L_k]; blocked entries not multiplied by their zero weight
    return dS


def d_scaled_slack(r: Replay, head: int | None) -> Array:
    P, dP = np.abs(r.values["weights", head]), r.values["d_weights", head]
    eP, edP = r.delta("weights", head), r.delta("d_weights", head)
    D = np.abs(np.sum(dP * r.values["weights", head], axis=-1, keepdims=True))  # [L, 1]
    eD = np.sum(edP * P + np.abs(dP) * eP, axis=-1, keepdims=True)  # [L, 1]
    return P * (edP + eD) + eP * (np.abs(dP) + D + edP + eD)  # [L, L_k]


def _scale(r: Replay, head: int | None) -> float:
    return 1 / math.sqrt(r.ex.heads[head or 0].d_k) if r.variant.grad_scale else 1.0


def d_q(r: Replay, head: int | None) -> Array | None:
    """``d_scaled·K / √d_k``: ``[L, L_k]·[L_k, d_k]`` -> ``[L, d_k]``."""
    dS, K = r.input("d_scaled", head), r.input("k", head)
    return None if dS is None or K is None or dS.shape[1] != K.shape[0] else dS @ K * _scale(r, head)


def d_q_slack(r: Replay, head: int | None) -> Array:
    return _mul_slack(r.values["d_scaled", head], r.delta("d_scaled", head), r.values["k", head],
                      r.delta("k", head)) * _scale(r, head)


def d_k(r: Replay, head: int | None) -> Array | None:
    """``d_scaledᵀ·Q / √d_k``: ``[L_k, L]·[L, d_k]`` -> ``[L_k, d_k]`` (``d_scaled·Q`` under ``d_k_transposed=False``);
    with grouped K/V heads the sum over the query heads of the group."""
    def one(h: int) -> Array | None:
        dS, Q = r.input("d_scaled", h), r.input("q", h)
        if dS is None or Q is None:
            return None
        A = dS.T if r.variant.d_k_transposed else dS  # [L_k, L]; without the transpose [L, L_k], chains only if square
        return None if A.shape[1] != Q.shape[0] else A @ Q * _scale(r, h)

    return _group_sum(r, head, one)


def d_k_slack(r: Replay, head: int | None) -> Array:
    return sum((_mul_slack(r.values["d_scaled", h].T, r.delta("d_scaled", h).T, r.values["q", h],
                           r.delta("q", h)) * _scale(r, h) for h in _group(r, head)), np.zeros(()))


def d_v(r: Replay, head: int | None) -> Array | None:
    """``weightsᵀ·d_head``: ``[L_k, L]·[L, d_v]`` -> ``[L_k, d_v]``; with grouped K/V heads the sum over the group."""
    def one(h: int) -> Array | None:
        P, dH = r.input("weights", h), r.input("d_head_output", h)
        return None if P is None or dH is None or P.shape[0] != dH.shape[0] else P.T @ dH

    return _group_sum(r, head, one)


def d_v_slack(r: Replay, head: int | None) -> Array:
    return sum((_mul_slack(r.values["weights", h].T, r.delta("weights", h).T, r.values["d_head_output", h],
                           r.delta("d_head_output", h)) for h in _group(r, head)), np.zeros(()))


def _x(r: Replay, id: str) -> Array:
    return r.x if id == "d_q" else r.kv  # [n, d_in]; step id: Q is projected from X, K and V from X_kv


def _d_w(r: Replay, id: str, head: int | None, rows: slice = slice(None)) -> Array | None:
    g = r.input(id, head)
    if g is None:
        return None
    g = g[rows]  # [n, d]; with a KV cache only the new rows of d_K, d_V reach W_K, W_V
    x = _x(r, id)
    return None if g.shape[0] != x.shape[0] else x.T @ g  # [d_in, n]·[n, d] -> [d_in, d]


def d_w_q(r: Replay, head: int | None) -> Array | None:
    """``Xᵀ·d_Q``: ``[d_model, L]·[L, d_k]`` -> ``[d_model, d_k]``."""
    return _d_w(r, "d_q", head)


def d_w_k(r: Replay, head: int | None) -> Array | None:
    """``X_kvᵀ·d_K``: ``[d_kv, d_k]``."""
    return _d_w(r, "d_k", head, _new(r))


def d_w_v(r: Replay, head: int | None) -> Array | None:
    """``X_kvᵀ·d_V``: ``[d_kv, d_v]``."""
    return _d_w(r, "d_v", head, _new(r))


def d_w_q_slack(r: Replay, head: int | None) -> Array:
    return np.abs(r.x.T) @ r.delta("d_q", head)


def d_w_k_slack(r: Replay, head: int | None) -> Array:
    return np.abs(r.kv.T) @ r.delta("d_k", head)[_new(r)]


def d_w_v_slack(r: Replay, head: int | None) -> Array:
    return np.abs(r.kv.T) @ r.delta("d_v", head)[_new(r)]


def d_b_q(r: Replay, head: int | None) -> Array | None:
    """``Σ_rows d_Q``: ``[1, d_k]``."""
    return _bias_sum(r, r.input("d_q", head))


def _new_rows(r: Replay, id: str, head: int | None) -> Array | None:
    g = r.input(id, head)
    return None if g is None else g[_new(r)]


def d_b_k(r: Replay, head: int | None) -> Array | None:
    """``Σ_rows d_K`` (the new rows with a KV cache): ``[1, d_k]``."""
    return _bias_sum(r, _new_rows(r, "d_k", head))


def d_b_v(r: Replay, head: int | None) -> Array | None:
    return _bias_sum(r, _new_rows(r, "d_v", head))


def d_b_q_slack(r: Replay, head: int | None) -> Array:
    return r.delta("d_q", head).sum(axis=0, keepdims=True)


def d_b_k_slack(r: Replay, head: int | None) -> Array:
    return r.delta("d_k", head)[_new(r)].sum(axis=0, keepdims=True)


def d_b_v_slack(r: Replay, head: int | None) -> Array:
    return r.delta("d_v", head)[_new(r)].sum(axis=0, keepdims=True)


# --- the inputs: d_x, d_x_kv --------------------------------------------------------------------------


def _paths(r: Replay, q: bool, slack: bool) -> Array | None:
    """``Σ_h d_Q·W_Qᵀ`` (with ``q``) and, once per K/V head, ``d_K·W_Kᵀ + d_V·W_Vᵀ`` (the new rows with a
    KV cache, and only in self-attention for ``d_x``); the slack: ``Σ δ·|W|ᵀ``."""
    ex = r.ex
    terms = [("d_q", h, ex.heads[h].w_q, slice(None)) for h in range(ex.num_heads)] if q else []
    if not (q and ex.is_cross):  # d_x of cross-attention has no K/V path: K and V come from x_kv
        for kv in range(ex.num_kv_heads):  # a group's K/V gradient is counted once, held by its first query head
            h = ex.sharing(kv)[0]
            terms += [("d_k", h, ex.heads[h].w_k, _new(r)), ("d_v", h, ex.heads[h].w_v, _new(r))]
    total: Array | None = None
    for id, h, w, rows in terms:
        W = _f(w)  # [d_in, d]
        g = r.delta(id, h) if slack else r.input(id, h)
        if g is None or g.shape[1] != W.shape[1]:
            return None
        term = g[rows] @ (np.abs(W).T if slack else W.T)  # [n, d]·[d, d_in] -> [n, d_in]
        if total is not None and term.shape != total.shape:
            return None
        total = term if total is None else total + term
    return total


def d_x(r: Replay, head: int | None = None) -> Array | None:
    """``Σ_h d_Q·W_Qᵀ`` (+ ``d_K·W_Kᵀ + d_V·W_Vᵀ`` in self-attention, where x is also x_kv): ``[L, d_model]``."""
    return _paths(r, True, False)


def d_x_slack(r: Replay, head: int | None = None) -> Array:
    out = _paths(r, True, True)
    assert out is not None
    return out


def d_x_kv(r: Replay, head: int | None = None) -> Array | None:
    """``Σ_g d_K·W_Kᵀ + d_V·W_Vᵀ``: ``[L_k, d_kv]`` (cross-attention)."""
    return _paths(r, False, False)


def d_x_kv_slack(r: Replay, head: int | None = None) -> Array:
    out = _paths(r, False, True)
    assert out is not None
    return out
__all__ = [name for name in dir() if name.startswith("d_")]
