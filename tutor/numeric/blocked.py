"""The blocked path of scaled dot-product attention: an online softmax over key blocks.

Source: Dao 2023, "FlashAttention-2: Faster Attention with Better Parallelism
and Work Partitioning", Algorithm 1 (queries in the outer loop, the
rescaled accumulator divided by the running sum once at the end), after
Milakov & Gimelshein 2018, "Online normalizer calculation for softmax".
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from . import _common
from ._common import _BATCH_CHUNK_SCORES, _dropout_inplace

#: Query and key block size that suits the blocked path on a CPU (the default of
#: :func:`tutor.numeric.blocked_attention`).  Measured with ``benchmarks/run.py``'s
#: case (L = 8192, d_k = 64, float32, 2 cores): 1024 ran in ~170 ms, 512 in
#: ~190 ms, 2048 in ~190 ms, the plain path in ~205 ms; bigger GEMMs thread
#: better, smaller score blocks stay in cache.  A block is 4 MiB in float32.
DEFAULT_BLOCK_SIZE = 1024


def _sdpa_blocked(
    q: NDArray,
    k: NDArray,
    v: NDArray,
    mask: NDArray[np.bool_] | None,
    bias: NDArray | None,
    batch: tuple[int, ...],
    scale: float,
    dropout_p: float,
    rng: np.random.Generator | None,
    bq: int,
    bk: int,
) -> NDArray:
    """Online softmax over key blocks for each query block (Dao 2023, FlashAttention-2, Alg. 1).

    ``mask`` (True = may attend) and ``bias`` (added to the scaled scores) are
    broadcastable to ``batch + (L_q, L_k)``; either may be ``None``.

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
    if bias is not None:
        bias = np.broadcast_to(bias, batch + (L_q, L_k))  # [..., L_q, L_k]  a view, never copied whole
        bias = bias.reshape((batch or (1,)) + (L_q, L_k))  # [..., L_q, L_k]  a view
    out = np.empty((N, L_q, d_v), dtype=dt)  # [N, L_q, d_v]
    neg_inf = dt.type(-np.inf)
    nb = max(1, _BATCH_CHUNK_SCORES // (min(bq, L_q) * min(bk, L_k) or 1))

    def work(n0: int, n1: int) -> None:  # batch slices n0..n1, one query block after another
        # the mask rows of slices n0..n1, gathered block by block below
        where_n = np.unravel_index(np.arange(n0, n1), batch or (1,)) if mask is not None or bias is not None else ()
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
                if bias is not None:
                    s += bias[where_n + (slice(i0, i1), slice(j0, j1))]  # [nb, bq, bk]  float attn_mask
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

    if dropout_p == 0 and N * L_q * L_k >= _common._PARALLEL_MIN_SCORES:
        _common._in_parallel(N, work, chunk=nb)  # each chunk of nb slices on its own thread
    else:
        for n0 in range(0, N, nb):
            work(n0, min(n0 + nb, N))
    return out.reshape(batch + (L_q, d_v))  # [..., L_q, d_v]
