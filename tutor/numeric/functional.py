"""The functional API: softmax, the causal mask, and scaled dot-product attention with PyTorch's signature.

:func:`scaled_dot_product_attention` takes the arguments of
``torch.nn.functional.scaled_dot_product_attention`` (PyTorch 2.13) with
their meaning and returns the output only, as it does.  The teaching variant
:func:`attention_with_weights` also returns the weights; :func:`blocked_attention`
is the memory-bounded path (FlashAttention-2's loop, :mod:`.blocked`).

Sources: Vaswani et al. 2017, eq. (1); the PyTorch docs of
``torch.nn.functional.scaled_dot_product_attention`` (its reference
implementation) and ``torch.softmax``.  Conventions as in :mod:`tutor.numeric`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tutor.base.errors import ShapeError

from . import _common
from ._common import MaskPolarityWarning, _dropout_inplace, _float_dtype, _shape_text, _zero_one_only
from .blocked import DEFAULT_BLOCK_SIZE, _sdpa_blocked


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

    Query ``i`` may attend to key ``j`` iff ``j <= i`` - the mask
    ``scaled_dot_product_attention(is_causal=True)`` applies.  With
    ``L_q < L_k`` (decoding with a KV cache) you usually want bottom-right
    alignment instead (``torch.nn.attention.bias.causal_lower_right``), which
    this is not.  ``nn.MultiheadAttention`` wants the complement, True =
    blocked: ``~causal_mask(L, S)``.  Raises ``ValueError`` for negative sizes.
    """
    if L_q < 0 or L_k < 0:
        raise ValueError(f"causal_mask needs sizes >= 0, got L_q={L_q}, L_k={L_k}")
    return np.tri(L_q, L_k, dtype=np.bool_)  # [L_q, L_k]


# --------------------------------------------------------------------------- #
# the arguments, checked and normalised once for every path
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class _Args:
    """The checked arguments of one call: arrays in the compute dtype, masks as ``allowed``/``bias``."""

    q: NDArray  # [..., L, E]
    k: NDArray  # [..., S, E]  (K/V heads already repeated for enable_gqa)
    v: NDArray  # [..., S, Ev]
    allowed: NDArray[np.bool_] | None  # broadcastable to [..., L, S]; True = may attend
    bias: NDArray | None  # broadcastable to [..., L, S]; added to the scaled scores
    batch: tuple[int, ...]  # the broadcast leading axes of the output
    scale: float
    dropout_p: float
    rng: np.random.Generator | None


def _qkv_dtype(q: NDArray, k: NDArray, v: NDArray) -> np.dtype:
    """The one dtype query, key and value share (integers count as float64); ``TypeError`` otherwise."""
    dts = {_float_dtype(a.dtype) for a in (q, k, v)}
    if len(dts) > 1:
        raise TypeError(
            "query, key and value must have one dtype, as in PyTorch "
            f"(got query {q.dtype}, key {k.dtype}, value {v.dtype}); cast them with .astype"
        )
    return dts.pop()


def _repeat_kv_heads(q: NDArray, k: NDArray, v: NDArray) -> tuple[NDArray, NDArray]:
    """``enable_gqa=True``: K and V heads repeated to the query heads in repeat_interleave order.

    Query head ``h`` reads K/V head ``h // (Hq / Hkv)`` - PyTorch's
    ``key.repeat_interleave(Hq // Hk, -3)`` (and the same for value).
    """
    if min(q.ndim, k.ndim, v.ndim) < 3:
        raise ShapeError(
            "enable_gqa=True needs a head axis: query [..., Hq, L, E], key [..., H, S, E], value [..., H, S, Ev]; "
            f"got query {_shape_text(q.shape)}, key {_shape_text(k.shape)}, value {_shape_text(v.shape)}"
        )
    Hq, Hk, Hv = q.shape[-3], k.shape[-3], v.shape[-3]
    if Hk == 0 or Hv == 0 or Hq % Hk or Hq % Hv:
        raise ShapeError(
            f"enable_gqa=True: the number of heads in key ({Hk}) and value ({Hv}) must divide "
            f"the number of heads in query ({Hq})"
        )
    k = k if Hk == Hq else np.repeat(k, Hq // Hk, axis=-3)  # [..., Hq, S, E]  head h reads K/V head h // (Hq/Hk)
    v = v if Hv == Hq else np.repeat(v, Hq // Hv, axis=-3)  # [..., Hq, S, Ev]
    return k, v


def _polarity_warnings(allowed: NDArray[np.bool_], L: int, S: int) -> None:
    """Warn about a boolean SDPA mask that looks like ``nn.MultiheadAttention``'s polarity (True = blocked)."""
    if allowed.size and not allowed.any():
        warnings.warn(
            "attn_mask is False everywhere: in scaled_dot_product_attention a boolean attn_mask means "
            "True = may attend, so every query attends to nothing and every output row is 0. "
            "A mask in nn.MultiheadAttention's polarity (True = blocked) must be inverted: pass ~attn_mask.",
            MaskPolarityWarning,
            stacklevel=4,
        )
    elif (
        L > 1 and S > 1 and allowed.shape[-2:] == (L, S)
        and not allowed[..., 0, 0].any() and allowed[..., 0, 1].all()  # cheap first: the corner of ~causal
        and np.array_equal(allowed, np.broadcast_to(~causal_mask(L, S), allowed.shape))
    ):
        warnings.warn(
            "attn_mask is True exactly above the diagonal: that is the causal mask in nn.MultiheadAttention's "
            "polarity (True = blocked). Here True = may attend, so query i would see only keys j > i. "
            "Pass ~attn_mask, or is_causal=True.",
            MaskPolarityWarning,
            stacklevel=4,
        )


def _prepare(
    query: ArrayLike,
    key: ArrayLike,
    value: ArrayLike,
    attn_mask: ArrayLike | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
    rng: np.random.Generator | None,
) -> _Args:
    qa, ka, va = np.asarray(query), np.asarray(key), np.asarray(value)
    for name, a in (("query", qa), ("key", ka), ("value", va)):
        if a.ndim < 2:
            raise ShapeError(f"{name} must have at least 2 axes [..., L, E], got {_shape_text(a.shape)}")
    dtype = _qkv_dtype(qa, ka, va)
    L, E = qa.shape[-2:]
    S = ka.shape[-2]
    if ka.shape[-1] != E:
        raise ShapeError(
            f"query {_shape_text(qa.shape)} and key {_shape_text(ka.shape)} differ in E (d_k): "
            "query @ keyᵀ needs the same last axis"
        )
    if va.shape[-2] != S:
        raise ShapeError(
            f"key {_shape_text(ka.shape)} and value {_shape_text(va.shape)} differ in S (L_k): "
            "every key needs one value"
        )
    if enable_gqa:
        ka, va = _repeat_kv_heads(qa, ka, va)
    try:
        batch = np.broadcast_shapes(qa.shape[:-2], ka.shape[:-2], va.shape[:-2])
    except ValueError:
        hint = " (different numbers of heads: pass enable_gqa=True for grouped K/V heads)" if not enable_gqa else ""
        raise ShapeError(
            f"the batch axes of query {_shape_text(qa.shape)}, key {_shape_text(ka.shape)}, "
            f"value {_shape_text(va.shape)} do not broadcast{hint}"
        ) from None
    allowed = bias = None
    if attn_mask is not None and is_causal:
        raise ValueError(
            "attn_mask and is_causal=True were both given: PyTorch refuses that (RuntimeError: 'Explicit attn_mask "
            "should not be set when is_causal=True'); give one mask: causal_mask(L, S) & attn_mask for a boolean one"
        )
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        if m.dtype == np.bool_:
            allowed = m
        elif np.issubdtype(m.dtype, np.floating) and m.dtype in (np.dtype(np.float32), dtype):
            bias = m.astype(dtype, copy=False)
        else:
            raise TypeError(
                f"attn_mask must be boolean (True = may attend) or a float array added to the scores, of float32 "
                f"or the query's dtype {dtype} (as PyTorch); got dtype {m.dtype}"
            )
        out_shape = batch + (L, S)
        try:
            fits = np.broadcast_shapes(m.shape, out_shape) == out_shape
        except ValueError:
            fits = False
        if not fits:
            raise ShapeError(
                f"attn_mask {_shape_text(m.shape)} does not broadcast to the weights' shape "
                f"[..., L, S] = {_shape_text(out_shape)}"
            )
        if allowed is not None:
            _polarity_warnings(allowed, L, S)
        elif bias is not None and _zero_one_only(bias):
            warnings.warn(
                "attn_mask is a float array of only 0s and 1s: a float attn_mask is added to the scores (1 adds 1), "
                "it blocks nothing. For a keep-mask pass a boolean array (True = may attend): attn_mask.astype(bool).",
                MaskPolarityWarning,
                stacklevel=3,
            )
    if is_causal:
        allowed = causal_mask(L, S)  # [L, S]  top-left, as PyTorch
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(
            f"dropout_p must be in [0, 1], got {dropout_p} (PyTorch raises above 1 and ignores a negative value)"
        )
    if dropout_p > 0 and rng is None:
        rng = np.random.default_rng()
    if scale is None:
        scale = 1.0 / math.sqrt(E) if E else 1.0
    return _Args(
        q=qa.astype(dtype, copy=False),
        k=ka.astype(dtype, copy=False),
        v=va.astype(dtype, copy=False),
        allowed=allowed,
        bias=bias,
        batch=batch,
        scale=float(scale),
        dropout_p=float(dropout_p),
        rng=rng,
    )


_ARGS_DOC = """
    Arguments (PyTorch's names and meanings, ``torch.nn.functional.scaled_dot_product_attention``):

    * ``query [..., L, E]``, ``key [..., S, E]``, ``value [..., S, Ev]``; the
      leading axes broadcast against each other (``[B, H]`` typically).
      One dtype for all three (float32 or float64; PyTorch refuses mixed
      dtypes, so does this); integer arrays are computed in float64.
    * ``attn_mask``: broadcastable to the weights' shape ``[..., L, S]``
      (it may not add axes the output does not have).  **Boolean: True = may
      attend** (the opposite of ``nn.MultiheadAttention``'s masks).  **Float:
      added to the scaled scores** (an ALiBi or relative-position bias;
      ``-inf`` blocks); float32 or the query's dtype.
    * ``dropout_p``: inverted dropout on the weights, always applied when
      ``> 0`` (pass 0 in evaluation, as PyTorch says); each weight is kept
      with probability ``1 - dropout_p`` and scaled by ``1/(1 - dropout_p)``.
      The keep mask is ``rng.random(weights.shape) >= dropout_p`` from
      ``rng`` (a ``numpy.random.Generator``; a fresh unseeded one when
      ``None``), so it never equals PyTorch's random draw.
    * ``is_causal``: the top-left causal mask, query ``i`` sees keys
      ``j <= i`` (:func:`causal_mask`), also when ``L != S``.
    * ``scale`` (keyword-only, as in PyTorch): defaults to ``1/sqrt(E)``.
    * ``enable_gqa`` (keyword-only): ``key``/``value`` may have fewer heads
      (axis ``-3``) than ``query``; query head ``h`` reads K/V head
      ``h // (Hq / H)`` (``repeat_interleave`` order).

    A query row with no key it may attend to (every score ``-inf``) gets
    zero weights and a zero output row, as PyTorch's SDPA since 2.5.

    Raises :class:`ShapeError` (a ``ValueError``) when shapes do not fit;
    ``ValueError`` for ``attn_mask`` together with ``is_causal=True`` (PyTorch:
    RuntimeError) and for ``dropout_p`` outside ``[0, 1]`` (PyTorch raises
    above 1 and ignores a negative value); ``TypeError`` for mixed dtypes or a
    mask that is neither boolean nor float32/the query's dtype.
    Warns :class:`MaskPolarityWarning` for a boolean mask that is False
    everywhere or True exactly above the diagonal (``nn.MultiheadAttention``'s
    polarity), and for a float mask of only 0s and 1s (a keep-mask added as
    numbers).
"""


def scaled_dot_product_attention(
    query: ArrayLike,
    key: ArrayLike,
    value: ArrayLike,
    attn_mask: ArrayLike | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
    rng: np.random.Generator | None = None,
) -> NDArray:
    """``softmax(query keyᵀ · scale + mask) @ value`` (Vaswani et al. 2017, eq. 1), as PyTorch's SDPA.

    Returns the output ``[..., L, Ev]`` only, like
    ``torch.nn.functional.scaled_dot_product_attention``; for the weights use
    :func:`attention_with_weights`, for bounded memory :func:`blocked_attention`.
    ``rng`` is this module's addition (the source of the dropout draw).
    """
    a = _prepare(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, rng)
    return _sdpa_plain(a)[0]


def attention_with_weights(
    query: ArrayLike,
    key: ArrayLike,
    value: ArrayLike,
    attn_mask: ArrayLike | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
    rng: np.random.Generator | None = None,
) -> tuple[NDArray, NDArray]:
    """The teaching variant of :func:`scaled_dot_product_attention`: ``(output [..., L, Ev], weights [..., L, S])``.

    Same arguments and output; the weights are the softmax of the masked,
    scaled scores (after dropout when ``dropout_p > 0``: the ones that
    multiplied ``value``, as in PyTorch's reference implementation).
    PyTorch's SDPA returns no weights; its ``nn.MultiheadAttention`` does,
    averaged over heads unless ``average_attn_weights=False``.
    """
    a = _prepare(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, rng)
    return _sdpa_plain(a)


def blocked_attention(
    query: ArrayLike,
    key: ArrayLike,
    value: ArrayLike,
    attn_mask: ArrayLike | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
    block_size: int | tuple[int, int] = DEFAULT_BLOCK_SIZE,
    rng: np.random.Generator | None = None,
) -> NDArray:
    """:func:`scaled_dot_product_attention` in bounded memory: an online softmax over key blocks.

    Same arguments and output ``[..., L, Ev]`` (equal to rounding: 1e-12
    relative in float64).  ``block_size=N`` or ``(N_q, N_k)``: queries in
    blocks of ``N_q``, keys in blocks of ``N_k``; a running row max, a running
    sum and a rescaled accumulator divided by the sum once at the end - the
    loop order of Dao 2023, "FlashAttention-2", Algorithm 1.  It never forms
    the ``[L, S]`` weights.  Memory: about ``max(N_q·N_k, 512²)`` scores at a
    time, plus the output.

    With dropout, the keep mask is drawn per score block, in block order, so
    it matches the plain path only when one block covers everything
    (``N_q >= L``, ``N_k >= S``, and all batch slices together hold at most
    ``512²`` scores).  Raises ``ValueError`` for a block size below 1.
    """
    a = _prepare(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, rng)
    bq, bk = _block_sizes(block_size)
    return _sdpa_blocked(a.q, a.k, a.v, a.allowed, a.bias, a.batch, a.scale, a.dropout_p, a.rng, bq, bk)


for _f in (scaled_dot_product_attention, attention_with_weights, blocked_attention):
    _f.__doc__ = (_f.__doc__ or "") + _ARGS_DOC


def _block_sizes(block_size: int | tuple[int, int]) -> tuple[int, int]:
    pair = block_size if isinstance(block_size, tuple) else (block_size, block_size)
    if len(pair) != 2 or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in pair):
        raise ValueError(f"block_size must be an int >= 1 or a pair of them, got {block_size!r}")
    return pair


def _sdpa_plain(a: _Args) -> tuple[NDArray, NDArray]:
    """The textbook path; forms the full ``[..., L, S]`` weights and returns ``(output, weights)``.

    Batch slices run on a thread pool when the problem is large and there is
    no dropout (so a seeded ``rng`` draws in one order); see :func:`_common._in_parallel`.
    """
    q, k, v, batch = a.q, a.k, a.v, a.batch
    L, E = q.shape[-2:]
    S, Ev = v.shape[-2:]
    N = math.prod(batch)
    dt = q.dtype
    qf = np.broadcast_to(q, batch + (L, E)).reshape(N, L, E)  # [N, L, E]  a view unless broadcast
    kT = np.broadcast_to(k, batch + (S, E)).reshape(N, S, E).swapaxes(-1, -2)  # [N, E, S]
    vf = np.broadcast_to(v, batch + (S, Ev)).reshape(N, S, Ev)  # [N, S, Ev]
    ok = None if a.allowed is None else np.broadcast_to(a.allowed, batch + (L, S)).reshape(N, L, S)  # [N, L, S]
    bias = None if a.bias is None else np.broadcast_to(a.bias, batch + (L, S)).reshape(N, L, S)  # [N, L, S]
    w = np.empty((N, L, S), dtype=dt)  # [N, L, S]  scores, then weights
    out = np.empty((N, L, Ev), dtype=dt)  # [N, L, Ev]
    scale, p, rng = dt.type(a.scale), a.dropout_p, a.rng

    def work(i: int, j: int) -> None:
        qs = qf[i:j] * scale  # [n, L, E]  scale folded into q: L·E multiplies, not L·S
        np.matmul(qs, kT[i:j], out=w[i:j])  # [n, L, S]  scores
        if bias is not None:
            w[i:j] += bias[i:j]  # [n, L, S]  float attn_mask: added to the scaled scores
        if ok is not None:
            np.copyto(w[i:j], -np.inf, where=~ok[i:j])  # [n, L, S]  masked_fill(~attn_mask, -inf)
        _softmax_inplace(w[i:j])  # [n, L, S]  weights; an all -inf row gives zeros
        if p > 0:
            _dropout_inplace(w[i:j], p, rng)  # [n, L, S]
        np.matmul(w[i:j], vf[i:j], out=out[i:j])  # [n, L, Ev]

    if p == 0 and N * L * S >= _common._PARALLEL_MIN_SCORES:
        _common._in_parallel(N, work, chunk=max(1, N // (4 * _common._workers())))
    else:
        work(0, N)
    return out.reshape(batch + (L, Ev)), w.reshape(batch + (L, S))
