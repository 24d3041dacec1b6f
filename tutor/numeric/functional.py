"""The functional API: softmax, masks, and scaled dot-product attention (plain path).

Sources: Vaswani et al. 2017, eq. (1); the PyTorch docs of
``torch.nn.functional.scaled_dot_product_attention`` and ``torch.softmax``.
Conventions as in :mod:`tutor.numeric`.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tutor.errors import ShapeError

from . import _common
from ._common import _bool_array, _dropout_inplace, _float_dtype, _shape_text
from .blocked import _sdpa_blocked


def _softmax_inplace(x: NDArray, axis: int = -1) -> NDArray:
    """Softmax of a float array, in place; returns ``x``.  See :func:`softmax`."""
    m = x.max(axis=axis, keepdims=True, initial=-np.inf)  # [..., 1]
    m[m == -np.inf] = 0  # all -inf row: subtract 0, exp gives zeros, not NaN
    with np.errstate(over="ignore"):  # -3e38 - 3e38 -> -inf in float32: exp gives the right 0
        x -= m  # [...]
    np.exp(x, out=x)  # [...]
    s = x.sum(axis=axis, keepdims=True)  # [..., 1]
    s[s == 0] = 1  # an all-zero row stays zero
    x /= s  # [...]
    return x


def softmax(x: ArrayLike, axis: int = -1) -> NDArray:
    """Numerically stable softmax along ``axis``: ``exp(x - max) / sum(exp(x - max))``.

    Shapes: any; the result has ``x``'s shape.  Dtypes: float32 and float64 are
    preserved (float16 too); integers are computed in float64.  The input is
    never modified.

    Subtracting the row maximum first makes the largest exponent ``exp(0) = 1``,
    so nothing overflows at any magnitude (``[1000, 1001, 1002]`` or ``1e38``
    in float32 work).  A row that is entirely ``-inf`` (a fully masked row)
    gives zeros, not NaN; a row containing NaN or ``+inf`` gives NaN.

    Raises ``numpy.exceptions.AxisError`` for an axis ``x`` does not have.
    Source: the standard log-sum-exp shift; PyTorch ``torch.softmax``.
    """
    arr = np.asarray(x)
    out = arr.astype(_float_dtype(arr.dtype), copy=True)  # [...]
    return _softmax_inplace(out, axis=axis)


def causal_mask(L_q: int, L_k: int) -> NDArray[np.bool_]:
    """Top-left aligned causal mask ``[L_q, L_k]``, True = may attend.

    Query ``i`` may attend to key ``j`` iff ``j <= i`` - the alignment of
    PyTorch's ``scaled_dot_product_attention(is_causal=True)``.  With
    ``L_q < L_k`` (decoding with a KV cache) you usually want bottom-right
    alignment instead (``torch.nn.attention.bias.causal_lower_right``), which
    this is not.  Raises ``ValueError`` for negative sizes.
    """
    if L_q < 0 or L_k < 0:
        raise ValueError(f"causal_mask needs sizes >= 0, got L_q={L_q}, L_k={L_k}")
    return np.tri(L_q, L_k, dtype=np.bool_)  # [L_q, L_k]


def combine_masks(
    mask: ArrayLike | None = None, key_padding: ArrayLike | None = None
) -> NDArray[np.bool_] | None:
    """One boolean mask ``[B, 1, L_q, L_k]`` (True = may attend) from an attention mask and key padding.

    ``mask``: ``[L_q, L_k]`` (one for the whole batch, e.g. :func:`causal_mask`)
    or ``[B, L_q, L_k]``; True = may attend.  ``key_padding``: ``[B, L_k]``,
    **True = a real key, False = padding** (the exercise-file convention; the
    opposite of PyTorch's ``key_padding_mask``, where True = ignore).

    Returns ``mask AND key_padding`` shaped ``[B, 1, L_q, L_k]`` - the ``1``
    broadcasts over heads.  Without key padding and with a 2-D mask the batch
    axis is ``1`` (``[1, 1, L_q, L_k]``); with key padding only it is
    ``[B, 1, 1, L_k]``.  ``None`` when both are ``None``.

    Raises ``TypeError`` for a non-boolean mask and :class:`ShapeError` when the
    shapes do not fit each other.  Source: PyTorch docs of
    ``nn.MultiheadAttention`` (``attn_mask``, ``key_padding_mask``, both
    True = blocked there) and of SDPA (``attn_mask``, True = may attend).
    """
    m4 = None
    if mask is not None:
        m = _bool_array(mask, "mask")
        if m.ndim == 2:
            m4 = m[None, None]  # [1, 1, L_q, L_k]
        elif m.ndim == 3:
            m4 = m[:, None]  # [B, 1, L_q, L_k]
        else:
            raise ShapeError(
                f"mask must be [L_q, L_k] or [B, L_q, L_k], got {_shape_text(m.shape)}"
            )
    p4 = None
    if key_padding is not None:
        p = _bool_array(key_padding, "key_padding")
        if p.ndim != 2:
            raise ShapeError(f"key_padding must be [B, L_k], got {_shape_text(p.shape)}")
        p4 = p[:, None, None, :]  # [B, 1, 1, L_k]
    if m4 is None:
        return p4
    if p4 is None:
        return m4
    try:
        return np.logical_and(m4, p4)  # [B, 1, L_q, L_k]
    except ValueError:
        raise ShapeError(
            f"mask {_shape_text(m4.shape[-2:])} and key_padding {_shape_text(p4.shape[::3])} "
            "do not fit: the key axes (L_k) and batch axes (B) must agree"
        ) from None



def scaled_dot_product_attention(
    q: ArrayLike,
    k: ArrayLike,
    v: ArrayLike,
    mask: ArrayLike | None = None,
    *,
    scale: float | None = None,
    dropout_p: float = 0.0,
    rng: np.random.Generator | None = None,
    block_size: int | tuple[int, int] | None = None,
) -> tuple[NDArray, NDArray | None]:
    """``softmax(q kᵀ · scale, masked) @ v`` (Vaswani et al. 2017, eq. 1).

    Shapes: ``q [..., L_q, d_k]``, ``k [..., L_k, d_k]``, ``v [..., L_k, d_v]``;
    the leading ``...`` axes broadcast (``[B, H]`` typically).  ``mask`` is
    boolean, broadcastable to ``[..., L_q, L_k]``, **True = may attend** (as
    SDPA's boolean ``attn_mask``).  Returns ``(output [..., L_q, d_v],
    weights [..., L_q, L_k])``.

    ``scale`` defaults to ``1/sqrt(d_k)``.  A query row whose mask is all
    False gets zero weights and a zero output row (as PyTorch SDPA since 2.5;
    ``nn.MultiheadAttention`` gives NaN there).

    Dropout (PyTorch semantics): with ``dropout_p > 0`` each weight is kept
    with probability ``1 - dropout_p`` and scaled by ``1/(1 - dropout_p)``
    (inverted dropout); the keep mask is ``rng.random(weights.shape) >= p``
    from ``rng`` (a ``numpy.random.Generator``; a fresh unseeded one when
    ``None``).  The returned weights are the dropped-out ones that multiplied
    ``v``, as in PyTorch's math path.

    ``block_size=N`` (or ``(N_q, N_k)``) takes the memory-bounded path
    (Dao 2023, FlashAttention-2, Algorithm 1): queries in blocks of
    ``N_q``, keys in blocks of ``N_k``, an online softmax with a running max,
    a running sum and a rescaled accumulator.  It never forms the
    ``[L_q, L_k]`` weights and returns ``(output, None)``; the output equals
    the plain path's to rounding (1e-12 relative in float64).  With dropout,
    the keep mask is drawn per score block, in block order, so it matches the
    plain path only when one block covers everything (``N_q >= L_q``,
    ``N_k >= L_k``, and all batch slices together hold at most ``512²``
    scores).  Memory: about ``max(N_q·N_k, 512²)`` scores at a time, plus
    the output.

    Dtypes: float32/float64 preserved (the common dtype of q, k, v; integers
    are computed in float64).

    Raises :class:`ShapeError` when the shapes do not chain or broadcast,
    ``TypeError`` for a non-boolean mask, ``ValueError`` for ``dropout_p``
    outside ``[0, 1]`` or a block size below 1.
    """
    qa, ka, va = np.asarray(q), np.asarray(k), np.asarray(v)
    dtype = _float_dtype(qa.dtype, ka.dtype, va.dtype)
    for name, a in (("q", qa), ("k", ka), ("v", va)):
        if a.ndim < 2:
            raise ShapeError(f"{name} must have at least 2 axes [..., L, d], got {_shape_text(a.shape)}")
    L_q, d_k = qa.shape[-2:]
    L_k = va.shape[-2]
    if ka.shape[-1] != d_k:
        raise ShapeError(
            f"q {_shape_text(qa.shape)} and k {_shape_text(ka.shape)} differ in d_k: "
            f"q @ kᵀ needs the same last axis"
        )
    if ka.shape[-2] != L_k:
        raise ShapeError(
            f"k {_shape_text(ka.shape)} and v {_shape_text(va.shape)} differ in L_k: "
            "every key needs one value"
        )
    try:
        batch = np.broadcast_shapes(qa.shape[:-2], ka.shape[:-2], va.shape[:-2])
    except ValueError:
        raise ShapeError(
            f"batch axes of q {_shape_text(qa.shape)}, k {_shape_text(ka.shape)}, "
            f"v {_shape_text(va.shape)} do not broadcast"
        ) from None
    m = None
    if mask is not None:
        m = _bool_array(mask, "mask")
        try:
            full = np.broadcast_shapes(m.shape, batch + (L_q, L_k))
        except ValueError:
            full = None
        if full is None or full[-2:] != (L_q, L_k):
            raise ShapeError(
                f"mask {_shape_text(m.shape)} does not broadcast to "
                f"[..., L_q, L_k] = {_shape_text(batch + (L_q, L_k))}"
            )
        batch = full[:-2]
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout_p must be in [0, 1], got {dropout_p}")
    if dropout_p > 0 and rng is None:
        rng = np.random.default_rng()
    if scale is None:
        scale = 1.0 / math.sqrt(d_k) if d_k else 1.0
    qa = qa.astype(dtype, copy=False)
    ka = ka.astype(dtype, copy=False)
    va = va.astype(dtype, copy=False)

    if block_size is None:
        return _sdpa_plain(qa, ka, va, m, batch, scale, dropout_p, rng)
    bq, bk = _block_sizes(block_size)
    return _sdpa_blocked(qa, ka, va, m, batch, scale, dropout_p, rng, bq, bk), None


def _block_sizes(block_size: int | tuple[int, int]) -> tuple[int, int]:
    pair = block_size if isinstance(block_size, tuple) else (block_size, block_size)
    if len(pair) != 2 or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in pair):
        raise ValueError(f"block_size must be an int >= 1 or a pair of them, got {block_size!r}")
    return pair


def _sdpa_plain(
    q: NDArray,
    k: NDArray,
    v: NDArray,
    mask: NDArray[np.bool_] | None,
    batch: tuple[int, ...],
    scale: float,
    dropout_p: float,
    rng: np.random.Generator | None,
) -> tuple[NDArray, NDArray]:
    """The textbook path; forms the full ``[..., L_q, L_k]`` weights.

    Batch slices run on a thread pool when the problem is large and there is
    no dropout (so a seeded ``rng`` draws in one order); see :func:`_in_parallel`.
    """
    L_q, d_k = q.shape[-2:]
    L_k, d_v = v.shape[-2:]
    N = math.prod(batch)
    dt = q.dtype
    qf = np.broadcast_to(q, batch + (L_q, d_k)).reshape(N, L_q, d_k)  # [N, L_q, d_k]  a view unless broadcast
    kT = np.broadcast_to(k, batch + (L_k, d_k)).reshape(N, L_k, d_k).swapaxes(-1, -2)  # [N, d_k, L_k]
    vf = np.broadcast_to(v, batch + (L_k, d_v)).reshape(N, L_k, d_v)  # [N, L_k, d_v]
    blocked = None if mask is None else ~np.broadcast_to(mask, batch + (L_q, L_k)).reshape(N, L_q, L_k)  # [N, L_q, L_k]
    w = np.empty((N, L_q, L_k), dtype=dt)  # [N, L_q, L_k]  scores, then weights
    out = np.empty((N, L_q, d_v), dtype=dt)  # [N, L_q, d_v]

    def work(a: int, b: int) -> None:
        qs = qf[a:b] * dt.type(scale)  # [n, L_q, d_k]  scale folded into q: L_q·d_k multiplies, not L_q·L_k
        np.matmul(qs, kT[a:b], out=w[a:b])  # [n, L_q, L_k]  scores
        if blocked is not None:
            np.copyto(w[a:b], -np.inf, where=blocked[a:b])  # [n, L_q, L_k]  masked_fill(~mask, -inf)
        _softmax_inplace(w[a:b])  # [n, L_q, L_k]  weights
        if dropout_p > 0:
            _dropout_inplace(w[a:b], dropout_p, rng)  # [n, L_q, L_k]
        np.matmul(w[a:b], vf[a:b], out=out[a:b])  # [n, L_q, d_v]

    if dropout_p == 0 and N * L_q * L_k >= _common._PARALLEL_MIN_SCORES:
        _common._in_parallel(N, work, chunk=max(1, N // (4 * _common._workers())))
    else:
        work(0, N)
    return out.reshape(batch + (L_q, d_v)), w.reshape(batch + (L_q, L_k))

