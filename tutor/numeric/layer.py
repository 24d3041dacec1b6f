"""The multi-head attention layer, batched as production code runs it, and an exercise through it.

Source: Vaswani et al. 2017, section 3.2.2; PyTorch's ``nn.MultiheadAttention``
for the layouts.  Conventions as in :mod:`tutor.numeric`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from tutor.errors import ShapeError

from ._common import _bool_array, _float_dtype, _Record, _shape_text
from .functional import _softmax_inplace, causal_mask, combine_masks

if TYPE_CHECKING:  # pragma: no cover
    from tutor.exercise.record import Exercise

    from .trace import TraceStep


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
        """The layer of a :class:`tutor.exercise.Exercise` (Fractions → ``dtype``).

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
        from .trace import shape_trace

        return shape_trace(self, B, L, L_k, cross=cross, masked=masked)


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
