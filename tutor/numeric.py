"""The NumPy mirror of production attention (no torch, no sympy, no I/O).

What the hand calculation does one head and one token at a time, this module
does the way production code does it: batched tensors, one fused QKV
projection split into heads by ``reshape``/``transpose``, a boolean mask, a
stable softmax, ``weights @ V``, heads merged back, output projection.  The
tests check every function here against PyTorch 2.13 and against values
worked out by hand.

Sources
    * Scaled dot-product and multi-head attention: Vaswani et al. 2017,
      "Attention Is All You Need", eq. (1) and section 3.2.2.
    * Layouts, mask polarity, causal alignment, dropout scaling: the PyTorch
      docs of ``torch.nn.functional.scaled_dot_product_attention`` and
      ``torch.nn.MultiheadAttention``.
    * The blocked path (online softmax over key blocks): Dao et al. 2022,
      "FlashAttention: Fast and Memory-Efficient Exact Attention with
      IO-Awareness", Algorithm 1 (after Milakov & Gimelshein 2018).

Conventions
    * Row vectors, math convention: a projection is ``x @ W + b`` with ``W``
      of shape ``[d_in, d_out]`` (PyTorch's ``nn.Linear`` stores ``W.T``).
    * Every boolean mask here means **True = may attend** (the polarity of
      SDPA's boolean ``attn_mask``).  ``nn.MultiheadAttention``'s boolean
      ``attn_mask`` and ``key_padding_mask`` mean the opposite (True =
      blocked); pass ``~mask`` there.  A key-padding vector here is True for a
      real key and False for padding, as ``key_padding`` in an exercise file.
    * A query row that may attend to no key gets zero weights and a zero
      context row.  ``F.scaled_dot_product_attention`` does the same since
      PyTorch 2.5; ``nn.MultiheadAttention`` returns NaN for such rows (output
      and weights) when ``need_weights=True`` or on its fast path, and
      ``out_proj.bias`` as the output row with ``need_weights=False`` off the
      fast path - which is what :class:`MultiHeadAttention` returns too.
    * float32 stays float32 and float64 stays float64; integer inputs are
      computed in float64.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from tutor.errors import ShapeError

if TYPE_CHECKING:  # pragma: no cover
    from tutor.model import Exercise

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "ExerciseRun",
    "MultiHeadAttention",
    "TraceStep",
    "causal_mask",
    "combine_masks",
    "exercise_trace",
    "run_exercise",
    "scaled_dot_product_attention",
    "softmax",
]

#: Query and key block size that suits the blocked path on a CPU: pass
#: ``block_size=DEFAULT_BLOCK_SIZE``.  Measured with ``benchmarks/run.py``'s
#: case (L = 8192, d_k = 64, float32, 2 cores): 1024 ran in ~170 ms, 512 in
#: ~190 ms, 2048 in ~190 ms, the plain path in ~205 ms; bigger GEMMs thread
#: better, smaller score blocks stay in cache.  A block is 4 MiB in float32.
DEFAULT_BLOCK_SIZE = 1024

#: How many scores one batch chunk of the blocked path may hold: the batch
#: slices are taken a few at a time so that ``slices·bq·bk`` stays about this
#: (1 MiB of float32, cache-sized) when the blocks themselves are small.
_BATCH_CHUNK_SCORES = 512 * 512
# Below this many scores (batch · L_q · L_k) a thread pool costs more than it saves.
_PARALLEL_MIN_SCORES = 1 << 18
_pool_lock = threading.Lock()
_pool = None  # concurrent.futures.ThreadPoolExecutor, made on first use


def _workers() -> int:
    return min(os.cpu_count() or 1, 8)


def _in_parallel(n: int, work: Callable[[int, int], None], *, chunk: int = 1) -> None:
    """Run ``work(a, b)`` over ``range(n)`` in chunks, on a thread pool, like PyTorch's intra-op threads.

    NumPy releases the GIL in matmul and ufuncs, so batch slices run side by
    side.  Meanwhile BLAS is held to one thread (threadpoolctl), so the pool
    and BLAS do not both spawn a thread per core.  That limit is process-wide
    while the call lasts: a BLAS call made at the same time by another thread
    of the same program runs single-threaded (slower, never wrong).  Falls
    back to one call when there is one core or one chunk.
    """
    workers = _workers()
    bounds = list(range(0, n, max(chunk, 1))) + [n]
    spans = [(a, b) for a, b in itertools.pairwise(bounds) if b > a]
    if workers < 2 or len(spans) < 2:
        work(0, n)
        return
    global _pool
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tutor-attention")
    with threadpool_limits(1, user_api="blas"):
        for future in [_pool.submit(work, a, b) for a, b in spans]:
            future.result()  # re-raises a worker's exception here

_Record = Callable[[str, NDArray], object]


# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #
def _float_dtype(*dtypes: DTypeLike) -> np.dtype:
    """The dtype to compute in: the common dtype, float64 for integers."""
    dt = np.result_type(*dtypes)
    return dt if np.issubdtype(dt, np.floating) else np.dtype(np.float64)


def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(n) for n in shape) + "]"


def _bool_array(mask: ArrayLike, what: str) -> NDArray[np.bool_]:
    arr = np.asarray(mask)
    if arr.dtype != np.bool_:
        raise TypeError(f"{what} must be a boolean array (True = may attend), got dtype {arr.dtype}")
    return arr


# --------------------------------------------------------------------------- #
# softmax and masks
# --------------------------------------------------------------------------- #
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


# --------------------------------------------------------------------------- #
# scaled dot-product attention
# --------------------------------------------------------------------------- #
def _dropout_inplace(w: NDArray, p: float, rng: np.random.Generator | None) -> None:
    """Inverted dropout on ``w`` in place: keep with prob ``1 - p``, scale by ``1 / (1 - p)``."""
    if rng is None:
        rng = np.random.default_rng()
    if p >= 1.0:
        w[...] = 0  # PyTorch: dropout with p = 1 zeroes everything
        return
    keep = rng.random(w.shape) >= p  # [...] bool
    w *= keep  # [...]
    w *= w.dtype.type(1.0 / (1.0 - p))  # [...]


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
    (Dao et al. 2022, FlashAttention, Algorithm 1): queries in blocks of
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

    if dropout_p == 0 and N * L_q * L_k >= _PARALLEL_MIN_SCORES:
        _in_parallel(N, work, chunk=max(1, N // (4 * _workers())))
    else:
        work(0, N)
    return out.reshape(batch + (L_q, d_v)), w.reshape(batch + (L_q, L_k))


def _sdpa_blocked(
    q: NDArray,
    k: NDArray,
    v: NDArray,
    mask: NDArray[np.bool_] | None,
    batch: tuple[int, ...],
    scale: float,
    dropout_p: float,
    rng: np.random.Generator | None,
    bq: int,
    bk: int,
) -> NDArray:
    """Online softmax over key blocks for each query block (Dao et al. 2022, Alg. 1).

    Per query block it keeps a running row max ``m``, a running row sum ``ell`` (ℓ)
    of ``exp(s - m)`` and an accumulator ``acc = Σ exp(s - m) v``; when a new
    key block raises the max to ``m'``, the old ``ell`` and ``acc`` are rescaled
    by ``exp(m - m')``.  At the end ``out = acc / ell``.

    The batch axes are flattened to ``N`` and taken ``nb`` slices at a time,
    with ``nb·bq·bk`` about ``max(bq·bk, 512²)`` - a score block
    that stays in cache (one slice at a time is 1.5x faster than all 32 at
    once at ``[4, 8, 512, 512]``), while tiny problems stay vectorized.
    Memory: one ``[nb, bq, bk]`` score block plus ``[nb, bq, d]`` accumulators.
    """
    L_q, d_k = q.shape[-2:]
    L_k, d_v = v.shape[-2:]
    N = math.prod(batch)
    dt = q.dtype
    q = np.broadcast_to(q, batch + (L_q, d_k)).reshape(N, L_q, d_k)  # [N, L_q, d_k]  a view unless broadcast
    k = np.broadcast_to(k, batch + (L_k, d_k)).reshape(N, L_k, d_k)  # [N, L_k, d_k]
    v = np.broadcast_to(v, batch + (L_k, d_v)).reshape(N, L_k, d_v)  # [N, L_k, d_v]
    kT = k.swapaxes(-1, -2)  # [N, d_k, L_k]  a view
    if mask is not None:
        mask = np.broadcast_to(mask, batch + (L_q, L_k))  # [..., L_q, L_k]  a view, never copied whole
        mask = mask.reshape((batch or (1,)) + (L_q, L_k))  # [..., L_q, L_k]  at least one batch axis; a view
    out = np.empty((N, L_q, d_v), dtype=dt)  # [N, L_q, d_v]
    neg_inf = dt.type(-np.inf)
    nb = max(1, _BATCH_CHUNK_SCORES // (min(bq, L_q) * min(bk, L_k) or 1))

    def work(n0: int, n1: int) -> None:  # batch slices n0..n1, one query block after another
        # the mask rows of slices n0..n1, gathered block by block below
        where_n = np.unravel_index(np.arange(n0, n1), batch or (1,)) if mask is not None else ()
        for i0 in range(0, L_q, bq):
            i1 = min(i0 + bq, L_q)
            qb = q[n0:n1, i0:i1] * dt.type(scale)  # [nb, bq, d_k]
            m = np.full((n1 - n0, i1 - i0, 1), neg_inf, dtype=dt)  # [nb, bq, 1]  running max
            ell = np.zeros((n1 - n0, i1 - i0, 1), dtype=dt)  # [nb, bq, 1]  running sum (ℓ in Dao et al.)
            acc = np.zeros((n1 - n0, i1 - i0, d_v), dtype=dt)  # [nb, bq, d_v]  running Σ p v
            for j0 in range(0, L_k, bk):
                j1 = min(j0 + bk, L_k)
                mb = None
                if mask is not None:
                    mb = mask[where_n + (slice(i0, i1), slice(j0, j1))]  # [nb, bq, bk]
                    if not mb.any():
                        continue  # a block nobody may see adds nothing (skips most of a causal mask)
                s = qb @ kT[n0:n1, :, j0:j1]  # [nb, bq, bk]  scores
                if mb is not None:
                    np.copyto(s, neg_inf, where=~mb)  # [nb, bq, bk]
                m_new = np.maximum(m, s.max(axis=-1, keepdims=True))  # [nb, bq, 1]
                m_safe = np.where(m_new == neg_inf, 0, m_new)  # [nb, bq, 1]  all masked so far: shift by 0
                with np.errstate(over="ignore"):  # a -inf difference is the right answer: exp gives 0
                    s -= m_safe  # [nb, bq, bk]
                np.exp(s, out=s)  # [nb, bq, bk]  p = exp(s - m')
                alpha = np.exp(m - m_safe)  # [nb, bq, 1]  rescale factor exp(m - m'); 0 while m = -inf
                ell *= alpha  # [nb, bq, 1]
                ell += s.sum(axis=-1, keepdims=True)  # [nb, bq, 1]
                acc *= alpha  # [nb, bq, d_v]
                if dropout_p > 0:
                    _dropout_inplace(s, dropout_p, rng)  # [nb, bq, bk]  after the sum, as FlashAttention
                acc += s @ v[n0:n1, j0:j1]  # [nb, bq, d_v]
                m = m_new
            ell[ell == 0] = 1  # a fully masked row: acc is 0, output 0
            np.divide(acc, ell, out=out[n0:n1, i0:i1])  # [nb, bq, d_v]

    if dropout_p == 0 and N * L_q * L_k >= _PARALLEL_MIN_SCORES:
        _in_parallel(N, work, chunk=nb)  # each chunk of nb slices on its own thread
    else:
        for n0 in range(0, N, nb):
            work(n0, min(n0 + nb, N))
    return out.reshape(batch + (L_q, d_v))  # [..., L_q, d_v]


# --------------------------------------------------------------------------- #
# the shape trace
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class TraceStep:
    """One step of a forward pass as shapes: what a shape drill or ``explain`` shows.

    ``name`` is the step (``"qkv"``, ``"view"``, ``"permute"``, ...);
    ``dims`` the symbolic shape (``("B", "L", "3·H·d_h")``); ``shape`` the
    same shape in numbers (``(4, 512, 1536)``); ``note`` says what produced it,
    naming the reshape/transpose in PyTorch spelling.
    """

    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    note: str

    @property
    def symbolic(self) -> str:
        """``"[B, L, 3·H·d_h]"``."""
        return "[" + ", ".join(self.dims) + "]"

    @property
    def concrete(self) -> str:
        """``"[4, 512, 1536]"``."""
        return _shape_text(self.shape)


def _dim_value(expr: str, sizes: dict[str, int]) -> int:
    """Evaluate a dimension like ``"3·H·d_h"`` (factors joined by ``·``) from ``sizes``."""
    n = 1
    for factor in expr.split("·"):
        n *= int(factor) if factor.isdigit() else sizes[factor]
    return n


class _TraceBuilder:
    def __init__(self, sizes: dict[str, int]):
        self.sizes = sizes
        self.steps: list[TraceStep] = []

    def add(self, name: str, dims: tuple[str, ...], note: str) -> None:
        shape = tuple(_dim_value(d, self.sizes) for d in dims)
        self.steps.append(TraceStep(name, dims, shape, note))


# --------------------------------------------------------------------------- #
# the multi-head attention layer
# --------------------------------------------------------------------------- #
def _matrix(a: ArrayLike, dtype: np.dtype, what: str) -> NDArray:
    arr = np.array(a, dtype=dtype, copy=True, order="C")
    if arr.ndim != 2:
        raise ShapeError(f"{what} must be a matrix, got shape {_shape_text(arr.shape)}")
    arr.setflags(write=False)
    return arr


def _vector(a: ArrayLike | None, n: int, dtype: np.dtype, what: str) -> NDArray | None:
    if a is None:
        return None
    arr = np.array(a, dtype=dtype, copy=True)
    if arr.shape != (n,):
        raise ShapeError(f"{what} must have shape [{n}], got {_shape_text(arr.shape)}")
    arr.setflags(write=False)
    return arr


class MultiHeadAttention:
    """Multi-head attention from explicit weights (Vaswani et al. 2017, section 3.2.2).

    Math convention: projections are ``x @ W + b`` with ``W [d_in, d_out]``;
    the columns of ``w_q`` are the heads side by side (head ``h`` owns columns
    ``h·d_k : (h+1)·d_k``), likewise ``w_k`` and ``w_v``.

    Shapes: ``w_q [d_model, H·d_k]``, ``w_k [d_kv, H·d_k]``,
    ``w_v [d_kv, H·d_v]``, biases ``[H·d_k]``/``[H·d_v]`` or ``None``,
    ``w_o [H·d_v, d_out]`` or ``None`` (then ``d_out = H·d_v`` and the merged
    heads are the output), ``b_o [d_out]`` or ``None``.  ``d_kv`` is the
    width of the sequence K and V come from (``d_model`` for self-attention).

    Self-attention with ``d_k == d_v`` runs the production path: one fused
    projection ``x @ W_qkv`` with ``W_qkv = [w_q | w_k | w_v]``, split by
    ``view [B, L, 3, H, d_h]`` and ``permute(2, 0, 3, 1, 4)``.  Cross-attention
    (or ``d_k != d_v``) projects Q from ``x`` and K, V from ``x_kv``
    separately, each ``view [B, L, H, d]`` and ``transpose(1, 2)``.
    No Python loop runs over the batch or the heads.

    Weights are stored read-only in ``dtype`` (default: their common dtype).
    Raises :class:`ShapeError` when the weights do not fit together.
    """

    def __init__(
        self,
        w_q: ArrayLike,
        w_k: ArrayLike,
        w_v: ArrayLike,
        num_heads: int,
        *,
        b_q: ArrayLike | None = None,
        b_k: ArrayLike | None = None,
        b_v: ArrayLike | None = None,
        w_o: ArrayLike | None = None,
        b_o: ArrayLike | None = None,
        dtype: DTypeLike | None = None,
    ):
        given = [np.asarray(a) for a in (w_q, w_k, w_v, b_q, b_k, b_v, w_o, b_o) if a is not None]
        dt = np.dtype(dtype) if dtype is not None else _float_dtype(*(a.dtype for a in given))
        if not np.issubdtype(dt, np.floating):
            raise TypeError(f"MultiHeadAttention computes in a float dtype, got {dt}")
        if not isinstance(num_heads, int) or num_heads < 1:
            raise ValueError(f"num_heads must be a positive int, got {num_heads!r}")
        H = num_heads
        self.dtype: np.dtype = dt
        self.num_heads = H
        self.w_q = _matrix(w_q, dt, "w_q")  # [D, H·d_k]
        self.w_k = _matrix(w_k, dt, "w_k")  # [D_kv, H·d_k]
        self.w_v = _matrix(w_v, dt, "w_v")  # [D_kv, H·d_v]
        self.d_model = self.w_q.shape[0]
        self.d_kv = self.w_k.shape[0]
        hk, hv = self.w_q.shape[1], self.w_v.shape[1]
        if hk % H or hv % H:
            raise ShapeError(
                f"w_q has {hk} and w_v {hv} columns; both must split into {H} equal heads"
            )
        if self.w_k.shape[1] != hk:
            raise ShapeError(
                f"w_q {_shape_text(self.w_q.shape)} and w_k {_shape_text(self.w_k.shape)} "
                "need the same number of columns (H·d_k) for q @ kᵀ"
            )
        if self.w_v.shape[0] != self.d_kv:
            raise ShapeError(
                f"w_k {_shape_text(self.w_k.shape)} and w_v {_shape_text(self.w_v.shape)} "
                "project the same sequence and need the same number of rows (d_kv)"
            )
        self.d_k, self.d_v = hk // H, hv // H
        self.b_q = _vector(b_q, hk, dt, "b_q")  # [H·d_k]
        self.b_k = _vector(b_k, hk, dt, "b_k")  # [H·d_k]
        self.b_v = _vector(b_v, hv, dt, "b_v")  # [H·d_v]
        self.w_o = None if w_o is None else _matrix(w_o, dt, "w_o")  # [H·d_v, d_out]
        if self.w_o is not None and self.w_o.shape[0] != hv:
            raise ShapeError(
                f"w_o {_shape_text(self.w_o.shape)} must have one row per column of the merged heads "
                f"(H·d_v = {hv})"
            )
        self.d_out = hv if self.w_o is None else self.w_o.shape[1]
        self.b_o = _vector(b_o, self.d_out, dt, "b_o")  # [d_out]
        # The fused projection of production self-attention: W_qkv = [w_q | w_k | w_v].
        self.w_qkv: NDArray | None = None
        self.b_qkv: NDArray | None = None
        if self.d_kv == self.d_model and self.d_k == self.d_v:
            self.w_qkv = np.concatenate([self.w_q, self.w_k, self.w_v], axis=1)  # [D, 3·H·d_h]
            self.w_qkv.setflags(write=False)
            if any(b is not None for b in (self.b_q, self.b_k, self.b_v)):
                zero = np.zeros(hk, dtype=dt)  # [H·d_h]
                parts = [b if b is not None else zero for b in (self.b_q, self.b_k, self.b_v)]
                self.b_qkv = np.concatenate(parts)  # [3·H·d_h]
                self.b_qkv.setflags(write=False)

    # constructors ----------------------------------------------------------
    @classmethod
    def from_exercise(cls, ex: Exercise, dtype: DTypeLike = np.float64) -> MultiHeadAttention:
        """The layer of a :class:`tutor.model.Exercise` (Fractions → ``dtype``).

        Per-head ``w_q [d_model, d_k]`` etc. are laid side by side in head
        order (``w_q = [W_q¹ | W_q² | …]``).  A head without a bias gets
        zeros when another head has one.  ``d_k`` need not be
        ``d_model / num_heads``.

        Raises :class:`ShapeError` when the heads differ in ``d_k`` or ``d_v``:
        a batched layer splits one projection into equal heads, so such an
        exercise is for the exact engine only.  Source: Vaswani et al. 2017,
        section 3.2.2 (heads concatenated, then ``W^O``).
        """
        heads = ex.heads
        d_ks = sorted({h.d_k for h in heads})
        d_vs = sorted({h.d_v for h in heads})
        if len(d_ks) > 1 or len(d_vs) > 1:
            raise ShapeError(
                f"exercise {ex.id!r}: the heads differ in size (d_k in {d_ks}, d_v in {d_vs}); "
                "the batched layer splits one projection into equal heads, so only the "
                "exact engine computes this exercise"
            )
        dt = np.dtype(dtype)

        def side_by_side(mats: list) -> NDArray:
            return np.concatenate([np.array(m, dtype=object).astype(dt) for m in mats], axis=1)

        def biases(vecs: list, n: int) -> NDArray | None:
            if all(b is None for b in vecs):
                return None
            return np.concatenate(
                [np.array(b if b is not None else [0] * n, dtype=object).astype(dt) for b in vecs]
            )

        to = (lambda m: None if m is None else np.array(m, dtype=object).astype(dt))
        return cls(
            side_by_side([h.w_q for h in heads]),  # [D, H·d_k]
            side_by_side([h.w_k for h in heads]),  # [D_kv, H·d_k]
            side_by_side([h.w_v for h in heads]),  # [D_kv, H·d_v]
            len(heads),
            b_q=biases([h.b_q for h in heads], d_ks[0]),
            b_k=biases([h.b_k for h in heads], d_ks[0]),
            b_v=biases([h.b_v for h in heads], d_vs[0]),
            w_o=to(ex.w_o),
            b_o=to(ex.b_o),
            dtype=dt,
        )

    @classmethod
    def from_torch_layout(
        cls,
        in_proj_weight: ArrayLike | None,
        in_proj_bias: ArrayLike | None,
        out_proj_weight: ArrayLike | None,
        out_proj_bias: ArrayLike | None,
        num_heads: int,
        *,
        q_proj_weight: ArrayLike | None = None,
        k_proj_weight: ArrayLike | None = None,
        v_proj_weight: ArrayLike | None = None,
    ) -> MultiHeadAttention:
        """The layer from ``torch.nn.MultiheadAttention``'s parameters, as NumPy arrays.

        PyTorch layout (``nn.Linear``: ``y = x @ W.T + b``): ``in_proj_weight
        [3E, E]`` stacks W_Q, W_K, W_V (rows, in that order; head ``h`` owns rows
        ``h·E/H : (h+1)·E/H`` of each block), ``in_proj_bias [3E]``,
        ``out_proj_weight [E, E]``, ``out_proj_bias [E]``; the biases are
        ``None`` for ``bias=False``.  When the module was built with ``kdim``
        or ``vdim`` different from ``E`` it has ``in_proj_weight = None`` and
        ``q_proj_weight [E, E]``, ``k_proj_weight [E, kdim]``,
        ``v_proj_weight [E, vdim]`` instead; pass those by keyword.
        ``vdim != kdim`` is not supported (one ``x_kv`` feeds K and V).
        ``add_bias_kv`` / ``add_zero_attn`` are not supported.

        Raises :class:`ShapeError` for shapes that do not fit that layout.
        """
        if in_proj_weight is not None:
            w = np.asarray(in_proj_weight)
            if w.ndim != 2 or w.shape[0] != 3 * w.shape[1]:
                raise ShapeError(f"in_proj_weight must be [3E, E], got {_shape_text(w.shape)}")
            wq_t, wk_t, wv_t = np.split(w, 3, axis=0)  # 3 × [E, E]
        else:
            if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
                raise ShapeError("give in_proj_weight, or all of q_proj_weight, k_proj_weight, v_proj_weight")
            wq_t, wk_t, wv_t = (np.asarray(a) for a in (q_proj_weight, k_proj_weight, v_proj_weight))
        E = wq_t.shape[0]
        if E % num_heads:
            raise ShapeError(f"embed_dim {E} does not split into {num_heads} heads")
        b_q = b_k = b_v = None
        if in_proj_bias is not None:
            b = np.asarray(in_proj_bias)
            if b.shape != (3 * E,):
                raise ShapeError(f"in_proj_bias must be [3E] = [{3 * E}], got {_shape_text(b.shape)}")
            b_q, b_k, b_v = np.split(b, 3)  # 3 × [E]
        return cls(
            wq_t.T,  # [E, E]    math convention: x @ W
            wk_t.T,  # [kdim, E]
            wv_t.T,  # [vdim, E]
            num_heads,
            b_q=b_q,
            b_k=b_k,
            b_v=b_v,
            w_o=None if out_proj_weight is None else np.asarray(out_proj_weight).T,  # [E, E]
            b_o=out_proj_bias,
        )

    # forward ---------------------------------------------------------------
    def forward(
        self,
        x: ArrayLike,
        x_kv: ArrayLike | None = None,
        *,
        mask: ArrayLike | None = None,
        key_padding: ArrayLike | None = None,
    ) -> tuple[NDArray, NDArray]:
        """Multi-head attention of ``x [B, L, d_model]`` over itself or over ``x_kv [B, L_k, d_kv]``.

        ``mask``: boolean, True = may attend; ``[L, L_k]``, ``[B, L, L_k]`` or
        ``[B|1, H|1, L, L_k]``.  ``key_padding``: ``[B, L_k]``, True = real
        key, False = padding.  A query row left with no key gets zero weights,
        so its output row is ``b_o`` (zeros without ``b_o``).

        Returns ``(output [B, L, d_out], weights [B, H, L, L_k])``, per-head
        weights (PyTorch: ``average_attn_weights=False``).  Dtype: the common
        dtype of ``x`` and the layer's weights (float32 in, float32 out for a
        float32 layer).

        Raises :class:`ShapeError` when ``x``, ``x_kv`` or the masks do not fit
        the layer, ``TypeError`` for non-boolean masks.
        """
        return self._forward(x, x_kv, mask, key_padding, None)

    __call__ = forward

    def _forward(
        self,
        x: ArrayLike,
        x_kv: ArrayLike | None,
        mask: ArrayLike | None,
        key_padding: ArrayLike | None,
        record: _Record | None,
    ) -> tuple[NDArray, NDArray]:
        x = np.asarray(x)
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ShapeError(f"x must be [B, L, d_model={self.d_model}], got {_shape_text(x.shape)}")
        dt = _float_dtype(x.dtype, self.dtype)
        x = x.astype(dt, copy=False)  # [B, L, D]
        B, L, D = x.shape
        H = self.num_heads
        cross = x_kv is not None
        if cross:
            kv = np.asarray(x_kv).astype(dt, copy=False)  # [B, L_k, D_kv]
            if kv.ndim != 3 or kv.shape[0] != B or kv.shape[-1] != self.d_kv:
                raise ShapeError(
                    f"x_kv must be [B={B}, L_k, d_kv={self.d_kv}], got {_shape_text(kv.shape)}"
                )
        else:
            if self.d_kv != self.d_model:
                raise ShapeError(
                    f"this layer projects K and V from width {self.d_kv}, not d_model={self.d_model}: "
                    "pass x_kv (cross-attention)"
                )
            kv = x  # [B, L, D]
        L_k = kv.shape[1]
        allowed = self._allowed(mask, key_padding, B, L, L_k)  # [B|1, H|1, L, L_k] or None
        w = lambda a: a if a.dtype == dt else a.astype(dt)
        rec = record or (lambda name, a: None)
        rec("x", x)

        if not cross and self.w_qkv is not None:
            d_h = self.d_k
            qkv = x.reshape(B * L, D) @ w(self.w_qkv)  # [B·L, 3·H·d_h]  fused projection
            if self.b_qkv is not None:
                qkv += w(self.b_qkv)  # [B·L, 3·H·d_h]
            qkv = qkv.reshape(B, L, 3 * H * d_h)  # [B, L, 3·H·d_h]
            rec("qkv", qkv)
            qkv = qkv.reshape(B, L, 3, H, d_h)  # [B, L, 3, H, d_h]  a view
            rec("view", qkv)
            qkv = qkv.transpose(2, 0, 3, 1, 4)  # [3, B, H, L, d_h]  a view
            rec("permute", qkv)
            q, k, v = qkv[0], qkv[1], qkv[2]  # 3 × [B, H, L, d_h]  views
        else:
            q = self._project(x, self.w_q, self.b_q, w)  # [B, L, H·d_k]
            k = self._project(kv, self.w_k, self.b_k, w)  # [B, L_k, H·d_k]
            v = self._project(kv, self.w_v, self.b_v, w)  # [B, L_k, H·d_v]
            if cross:
                rec("x_kv", kv)
            rec("q", q)
            rec("k", k)
            rec("v", v)
            q = q.reshape(B, L, H, self.d_k)  # [B, L, H, d_k]  a view
            k = k.reshape(B, L_k, H, self.d_k)  # [B, L_k, H, d_k]
            v = v.reshape(B, L_k, H, self.d_v)  # [B, L_k, H, d_v]
            rec("q_view", q)
            rec("k_view", k)
            rec("v_view", v)
            q = q.transpose(0, 2, 1, 3)  # [B, H, L, d_k]  a view
            k = k.transpose(0, 2, 1, 3)  # [B, H, L_k, d_k]
            v = v.transpose(0, 2, 1, 3)  # [B, H, L_k, d_v]
            rec("q_heads", q)
            rec("k_heads", k)
            rec("v_heads", v)

        scale = 1.0 / math.sqrt(self.d_k)
        scores = (q * dt.type(scale)) @ k.swapaxes(-1, -2)  # [B, H, L, L_k]  (q/√d_k) @ kᵀ
        rec("scores", scores)
        if allowed is not None:
            np.copyto(scores, -np.inf, where=~allowed)  # [B, H, L, L_k]  masked_fill(~allowed, -inf)
            rec("masked", scores)
        weights = _softmax_inplace(scores)  # [B, H, L, L_k]  softmax over keys
        rec("weights", weights)
        ctx = weights @ v  # [B, H, L, d_v]
        rec("context", ctx)
        ctx = ctx.transpose(0, 2, 1, 3)  # [B, L, H, d_v]  a view
        rec("transpose", ctx)
        merged = ctx.reshape(B, L, H * self.d_v)  # [B, L, H·d_v]  a copy: heads side by side
        rec("merge", merged)
        if self.w_o is None:
            out = merged  # [B, L, H·d_v]
            if self.b_o is not None:
                out += w(self.b_o)  # [B, L, d_out]
        else:
            out = merged.reshape(B * L, H * self.d_v) @ w(self.w_o)  # [B·L, d_out]
            if self.b_o is not None:
                out += w(self.b_o)  # [B·L, d_out]
            out = out.reshape(B, L, self.d_out)  # [B, L, d_out]
            rec("out_proj", out)
        return out, weights

    @staticmethod
    def _project(a: NDArray, W: NDArray, b: NDArray | None, w: Callable[[NDArray], NDArray]) -> NDArray:
        B, L, d_in = a.shape
        y = a.reshape(B * L, d_in) @ w(W)  # [B·L, d_out]  one GEMM for the whole batch
        if b is not None:
            y += w(b)  # [B·L, d_out]
        return y.reshape(B, L, W.shape[1])  # [B, L, d_out]

    def _allowed(
        self, mask: ArrayLike | None, key_padding: ArrayLike | None, B: int, L: int, L_k: int
    ) -> NDArray[np.bool_] | None:
        """``mask AND key_padding`` as ``[B|1, H|1, L, L_k]``; raises :class:`ShapeError` on misfit."""
        if mask is None and key_padding is None:
            return None
        m4 = None
        if mask is not None:
            m = _bool_array(mask, "mask")
            if m.ndim in (2, 3):
                m4 = combine_masks(m)  # [B|1, 1, L, L_k]
            elif m.ndim == 4:
                m4 = m  # [B|1, H|1, L, L_k]
            else:
                raise ShapeError(
                    f"mask must be [L, L_k], [B, L, L_k] or [B, H, L, L_k], got {_shape_text(m.shape)}"
                )
        p4 = None
        if key_padding is not None:
            p = _bool_array(key_padding, "key_padding")
            if p.shape != (B, L_k):
                raise ShapeError(
                    f"key_padding must be [B, L_k] = [{B}, {L_k}], got {_shape_text(p.shape)}"
                )
            p4 = combine_masks(None, p)  # [B, 1, 1, L_k]
        target = (B, self.num_heads, L, L_k)
        if m4 is not None and not _fits(m4.shape, target):
            raise ShapeError(
                f"mask {_shape_text(m4.shape)} does not broadcast to [B, H, L, L_k] = {_shape_text(target)}"
            )
        if m4 is None:
            return p4  # [B, 1, 1, L_k]
        if p4 is None:
            return m4  # [B|1, H|1, L, L_k]
        return np.logical_and(m4, p4)  # [B, H|1, L, L_k]  both fit the target, so they fit each other

    # the shape trace --------------------------------------------------------
    def shape_trace(
        self, B: int, L: int, L_k: int | None = None, *, cross: bool = False, masked: bool = False
    ) -> tuple[TraceStep, ...]:
        """The forward pass as an ordered tuple of :class:`TraceStep` (name, shapes, note).

        Both symbolic (``[B, H, L, d_h]``) and concrete shapes, for a batch of
        ``B`` sequences of ``L`` queries over ``L_k`` keys (``L_k = L`` for
        self-attention; ``cross=True`` names the key sequence ``x_kv``).
        ``masked`` adds the ``masked_fill`` step.  The steps are exactly the
        arrays :meth:`forward` makes (a test checks every shape).  Self-attention
        with equal ``d_k``, ``d_v`` reads::

            x [B, L, D] → qkv [B, L, 3·H·d_h] → view [B, L, 3, H, d_h]
            → permute [3, B, H, L, d_h] → scores [B, H, L, L] → (masked)
            → weights [B, H, L, L] → context [B, H, L, d_h]
            → transpose [B, L, H, d_h] → merge [B, L, H·d_h] → out_proj [B, L, d_out]

        Raises ``ValueError`` when ``cross`` is set without ``L_k``, or
        self-attention is asked for on a layer whose K, V width is not d_model.
        """
        if cross and L_k is None:
            raise ValueError("a cross-attention trace needs L_k, the length of x_kv")
        if not cross and (L_k not in (None, L) or self.d_kv != self.d_model):
            raise ValueError("self-attention has L_k = L and d_kv = d_model; pass cross=True")
        fused = not cross and self.w_qkv is not None
        Lk = "L_k" if cross else "L"
        dk, dv = ("d_h", "d_h") if self.d_k == self.d_v else ("d_k", "d_v")
        sizes = {
            "B": B, "L": L, "L_k": L if L_k is None else L_k, "D": self.d_model, "D_kv": self.d_kv,
            "H": self.num_heads, "d_h": self.d_k, "d_k": self.d_k, "d_v": self.d_v, "d_out": self.d_out,
        }
        t = _TraceBuilder(sizes)
        t.add("x", ("B", "L", "D"), "input: a batch of B sequences of L tokens")
        if fused:
            t.add("qkv", ("B", "L", f"3·H·{dk}"), "x @ W_qkv + b_qkv: one fused projection for Q, K and V")
            t.add("view", ("B", "L", "3", "H", dk), "view: split the last axis into (q|k|v, head, d_h); no copy")
            t.add("permute", ("3", "B", "H", "L", dk), "permute(2, 0, 3, 1, 4), then q, k, v = unbind(0)")
        else:
            if cross:
                t.add("x_kv", ("B", "L_k", "D_kv"), "the sequence K and V come from (cross-attention)")
            src = "x_kv" if cross else "x"
            t.add("q", ("B", "L", f"H·{dk}"), "x @ W_q + b_q")
            t.add("k", ("B", Lk, f"H·{dk}"), f"{src} @ W_k + b_k")
            t.add("v", ("B", Lk, f"H·{dv}"), f"{src} @ W_v + b_v")
            t.add("q_view", ("B", "L", "H", dk), "view: split q into heads; no copy")
            t.add("k_view", ("B", Lk, "H", dk), "view: split k into heads; no copy")
            t.add("v_view", ("B", Lk, "H", dv), "view: split v into heads; no copy")
            t.add("q_heads", ("B", "H", "L", dk), "transpose(1, 2): heads become a batch axis")
            t.add("k_heads", ("B", "H", Lk, dk), "transpose(1, 2)")
            t.add("v_heads", ("B", "H", Lk, dv), "transpose(1, 2)")
        t.add("scores", ("B", "H", "L", Lk), f"q @ k.transpose(-2, -1) / √{dk} (the scale is applied to q)")
        if masked:
            t.add("masked", ("B", "H", "L", Lk), "masked_fill(~allowed, -inf); allowed is [B, 1, L, L_k], broadcast over heads")
        t.add("weights", ("B", "H", "L", Lk), "softmax over the last axis (keys); each row sums to 1")
        t.add("context", ("B", "H", "L", dv), "weights @ v")
        t.add("transpose", ("B", "L", "H", dv), "transpose(1, 2): back to tokens first; no copy")
        t.add("merge", ("B", "L", f"H·{dv}"), "reshape (a contiguous copy): the heads side by side")
        if self.w_o is not None:
            t.add("out_proj", ("B", "L", "d_out"), "merge @ W_o + b_o")
        return tuple(t.steps)


def _fits(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """True when ``shape`` broadcasts to exactly ``target``."""
    try:
        return np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


# --------------------------------------------------------------------------- #
# exercises
# --------------------------------------------------------------------------- #
@dataclass(frozen=True, eq=False)
class ExerciseRun:
    """An exercise through :class:`MultiHeadAttention`, batch axis dropped.

    Shapes: ``q [H, L, d_k]``, ``k [H, L_k, d_k]``, ``v [H, L_k, d_v]``,
    ``scores [H, L, L_k]`` (``q kᵀ / √d_k``, before masking),
    ``weights [H, L, L_k]`` (fully masked rows are zero), ``context
    [L, H·d_v]`` (heads side by side), ``output [L, d_out]``.
    """

    q: NDArray
    k: NDArray
    v: NDArray
    scores: NDArray
    weights: NDArray
    context: NDArray
    output: NDArray


def run_exercise(ex: Exercise, dtype: DTypeLike = np.float64) -> ExerciseRun:
    """Run an exercise through the batched layer (``B = 1``), keeping the intermediate arrays.

    Uses ``ex.mask`` (or a causal mask when ``mask_kind == "causal"`` and no
    matrix is given) and ``ex.key_padding`` (False = padding), and ``x_kv``
    for cross-attention.  This is what checks the exact engine.
    Raises :class:`ShapeError` as :meth:`MultiHeadAttention.from_exercise`.
    """
    layer = MultiHeadAttention.from_exercise(ex, dtype=dtype)
    dt = layer.dtype
    x = np.array(ex.x, dtype=object).astype(dt)[None]  # [1, L, D]
    x_kv = None if ex.x_kv is None else np.array(ex.x_kv, dtype=object).astype(dt)[None]  # [1, L_k, D_kv]
    mask = None
    if ex.mask is not None:
        mask = np.array(ex.mask, dtype=bool)  # [L, L_k]
    elif ex.mask_kind == "causal":
        mask = causal_mask(ex.L, ex.L_k)  # [L, L_k]
    kp = None if ex.key_padding is None else np.array(ex.key_padding, dtype=bool)[None]  # [1, L_k]
    seen: dict[str, NDArray] = {}
    out, weights = layer._forward(x, x_kv, mask, kp, lambda name, a: seen.setdefault(name, a.copy()))
    if "permute" in seen:
        q, k, v = seen["permute"][:, 0]  # 3 × [H, L, d_h]
    else:
        q, k, v = seen["q_heads"][0], seen["k_heads"][0], seen["v_heads"][0]  # [H, L, d]
    return ExerciseRun(
        q=q,
        k=k,
        v=v,
        scores=seen["scores"][0],  # [H, L, L_k]
        weights=weights[0],  # [H, L, L_k]
        context=seen["merge"][0],  # [L, H·d_v]
        output=out[0],  # [L, d_out]
    )


def exercise_trace(ex: Exercise, B: int = 1) -> tuple[TraceStep, ...]:
    """The production shape trace of an exercise's layer (see :meth:`MultiHeadAttention.shape_trace`).

    Raises :class:`ShapeError` as :meth:`MultiHeadAttention.from_exercise`.
    """
    layer = MultiHeadAttention.from_exercise(ex)
    return layer.shape_trace(
        B, ex.L, ex.L_k if ex.is_cross else None, cross=ex.is_cross,
        masked=ex.has_mask or ex.mask_kind == "causal",
    )
