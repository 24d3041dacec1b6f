"""Helpers shared by the NumPy core: dtypes, shape texts, boolean checks, dropout, the thread pool."""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable

import numpy as np
from numpy.typing import DTypeLike, NDArray

from tutor.base.errors import ShapeError  # noqa: F401  (re-exported for the modules of the core)

_Record = Callable[[str, NDArray], object]

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


def _float_dtype(*dtypes: DTypeLike) -> np.dtype:
    """The dtype to compute in: the common dtype, float64 for integers."""
    dt = np.result_type(*dtypes)
    return dt if np.issubdtype(dt, np.floating) else np.dtype(np.float64)


def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(n) for n in shape) + "]"


class MaskPolarityWarning(UserWarning):
    """A mask that PyTorch accepts but that looks like the other API's polarity (or a keep-mask given as numbers).

    Raised as a warning, not an error, where PyTorch gives the same mask a
    defined meaning (an all-False SDPA mask gives zero output rows); where the
    result would be meaningless (an ``nn.MultiheadAttention`` mask that blocks
    every key), :class:`tutor.numeric.MultiHeadAttention` raises ``ValueError``.
    """


def _zero_one_only(bias: NDArray) -> bool:
    """True when a float mask holds only 0s and 1s and at least one 1: a keep-mask given as numbers."""
    return bool(bias.size) and bool(np.all((bias == 0) | (bias == 1))) and bool(np.any(bias == 1))


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

