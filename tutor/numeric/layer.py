"""The multi-head attention layer, batched as production code runs it, and one run's intermediate arrays.

Source: Vaswani et al. 2017, section 3.2.2; PyTorch's ``nn.MultiheadAttention``
for the layouts.  Conventions as in :mod:`tutor.numeric`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from tutor.base.errors import ShapeError
from tutor.base.messages import Msg

from ._common import _float_dtype, _Record, _shape_text
from .backward import LayerGrads
from .functional import _softmax_inplace
from .trace import TraceStep, _TraceBuilder, merge_copies


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
    """Multi-head attention from explicit weights, with ``torch.nn.MultiheadAttention``'s forward.

    Math convention: projections are ``x @ W + b`` with ``W [d_in, d_out]``;
    the columns of ``w_q`` are the heads side by side (head ``h`` owns columns
    ``h·d_k : (h+1)·d_k``), likewise ``w_k`` and ``w_v``
    (Vaswani et al. 2017, section 3.2.2).

    Shapes: ``w_q [d_model, H·d_k]``, ``w_k [kdim, H·d_k]``,
    ``w_v [vdim, H·d_v]``, biases ``[H·d_k]``/``[H·d_v]`` or ``None``,
    ``w_o [H·d_v, d_out]`` or ``None`` (then ``d_out = H·d_v`` and the merged
    heads are the output), ``b_o [d_out]`` or ``None``.  ``kdim`` and ``vdim``
    are the widths of the key and value inputs (``d_model`` for
    self-attention; PyTorch's ``kdim``/``vdim``); ``d_kv`` is ``kdim``.
    Unlike ``nn.MultiheadAttention``, ``d_k`` and ``d_v`` need not be
    ``d_model / H``, and ``w_o`` is optional.

    ``batch_first`` as in PyTorch: batched inputs are ``[L, B, E]`` when
    False (the default, as PyTorch's), ``[B, L, E]`` when True.

    Self-attention (``query is key is value``) with ``d_k == d_v`` runs the
    production path: one fused projection ``x @ W_qkv`` with
    ``W_qkv = [w_q | w_k | w_v]``, split by ``view [B, L, 3, H, d_h]`` and
    ``permute(2, 0, 3, 1, 4)``.  Otherwise Q, K and V are projected
    separately, each ``view [B, L, H, d]`` and ``transpose(1, 2)``.  No
    Python loop runs over the batch or the heads.  There is no dropout: the
    layer is ``nn.MultiheadAttention`` in ``eval()`` mode.

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
        batch_first: bool = False,
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
        self.batch_first = bool(batch_first)
        self.w_q = _matrix(w_q, dt, "w_q")  # [D, H·d_k]
        self.w_k = _matrix(w_k, dt, "w_k")  # [kdim, H·d_k]
        self.w_v = _matrix(w_v, dt, "w_v")  # [vdim, H·d_v]
        self.d_model = self.w_q.shape[0]
        self.kdim, self.vdim = self.w_k.shape[0], self.w_v.shape[0]
        self.d_kv = self.kdim
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
        if self.kdim == self.vdim == self.d_model and self.d_k == self.d_v:
            self.w_qkv = np.concatenate([self.w_q, self.w_k, self.w_v], axis=1)  # [D, 3·H·d_h]
            self.w_qkv.setflags(write=False)
            if any(b is not None for b in (self.b_q, self.b_k, self.b_v)):
                zero = np.zeros(hk, dtype=dt)  # [H·d_h]
                parts = [b if b is not None else zero for b in (self.b_q, self.b_k, self.b_v)]
                self.b_qkv = np.concatenate(parts)  # [3·H·d_h]
                self.b_qkv.setflags(write=False)

    # constructors ----------------------------------------------------------
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
        batch_first: bool = False,
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
        ``batch_first`` as the module's.  ``add_bias_kv`` / ``add_zero_attn``
        and dropout in training are not supported.

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
            batch_first=batch_first,
        )

    # forward ---------------------------------------------------------------
    def forward(
        self,
        query: ArrayLike,
        key: ArrayLike,
        value: ArrayLike,
        key_padding_mask: ArrayLike | None = None,
        need_weights: bool = True,
        attn_mask: ArrayLike | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[NDArray, NDArray | None]:
        """``nn.MultiheadAttention.forward`` (PyTorch 2.13): the same arguments, shapes, polarities and results.

        Shapes: batched ``query [L, B, d_model]``, ``key [S, B, kdim]``,
        ``value [S, B, vdim]`` (``[B, L, ·]`` with ``batch_first=True``), or
        unbatched ``[L, d_model]``, ``[S, kdim]``, ``[S, vdim]``.  Pass the
        same array three times for self-attention (``query is key is value``
        takes the fused projection).

        Masks (:func:`tutor.numeric.masks.mha_masks`): ``key_padding_mask``
        ``[B, S]`` (unbatched ``[S]``), **boolean True = padding** (ignored),
        or float (added); ``attn_mask`` ``[L, S]`` or ``[B·H, L, S]``
        (unbatched ``[H, L, S]``), **boolean True = blocked**, or float added
        to the scores (an ALiBi or relative bias); both combine.
        ``is_causal=True`` is a hint that ``attn_mask`` is the causal mask and
        needs it, as in PyTorch.  Masks in the opposite polarity that can be
        told (one blocking every key, a padding mask marking every key) raise
        ``ValueError`` naming the polarity.

        Returns ``(output, weights)``: ``output`` shaped like ``query`` with
        ``d_out`` features; ``weights`` ``None`` when ``need_weights=False``,
        else averaged over heads ``[B, L, S]`` (unbatched ``[L, S]``) when
        ``average_attn_weights=True`` (the default, as PyTorch), per head
        ``[B, H, L, S]`` (``[H, L, S]``) otherwise.

        A query row of a head left with no key it may attend to gets zero
        weights and a zero context row; when that holds in every head, the
        output row is ``b_o`` (zeros without ``b_o``).  PyTorch 2.13's
        ``nn.MultiheadAttention`` gives NaN there (the whole output row, and
        the weights) with ``need_weights=True`` and on its inference fast
        path, and with ``need_weights=False`` off the fast path (through SDPA)
        the value returned here (tests/test_torch_parity.py).

        Dtype: the common dtype of the inputs and the layer's weights.
        Raises :class:`ShapeError` when inputs or masks do not fit the layer,
        ``TypeError``/``ValueError`` for masks as :func:`~tutor.numeric.masks.mha_masks`.
        """
        from .masks import mha_masks

        self_attention = query is key and key is value
        same_kv = key is value
        q_in = np.asarray(query)
        k_in = q_in if self_attention else np.asarray(key)
        v_in = k_in if same_kv else np.asarray(value)
        batched = q_in.ndim == 3
        if q_in.ndim not in (2, 3):
            raise ShapeError(
                f"query must be batched (3-D) or unbatched (2-D), got {q_in.ndim}-D {_shape_text(q_in.shape)}"
            )
        if k_in.ndim != q_in.ndim or v_in.ndim != q_in.ndim:
            raise ShapeError(
                f"for a {q_in.ndim}-D query, key and value must be {q_in.ndim}-D too; "
                f"got key {_shape_text(k_in.shape)} and value {_shape_text(v_in.shape)}"
            )
        if not batched:
            q_in, k_in, v_in = q_in[None], k_in[None], v_in[None]  # [1, L|S, E]
        elif not self.batch_first:
            q_in, k_in, v_in = (a.transpose(1, 0, 2) for a in (q_in, k_in, v_in))  # [B, L|S, E]  views
        if self_attention:
            k_in = v_in = q_in
        elif same_kv:
            v_in = k_in
        B, L, E = q_in.shape
        S = k_in.shape[1]
        if E != self.d_model:
            raise ShapeError(f"query has {E} features, the layer's d_model is {self.d_model}")
        if k_in.shape[2] != self.kdim or v_in.shape[2] != self.vdim:
            raise ShapeError(
                f"key must have kdim={self.kdim} and value vdim={self.vdim} features, "
                f"got {k_in.shape[2]} and {v_in.shape[2]}"
            )
        if k_in.shape[:2] != v_in.shape[:2]:
            raise ShapeError(f"key and value differ in batch or length (S): {_shape_text(k_in.shape)} vs {_shape_text(v_in.shape)}")
        if k_in.shape[0] != B:
            raise ShapeError(f"query and key differ in batch size: {B} vs {k_in.shape[0]}")
        dt = _float_dtype(q_in.dtype, k_in.dtype, v_in.dtype, self.dtype)
        allowed, bias = mha_masks(key_padding_mask, attn_mask, is_causal, B=B, H=self.num_heads, L=L, S=S,
                                  batched=batched, dtype=dt)
        out, weights = self._forward(q_in, k_in, v_in, allowed, bias, None)
        if not batched:
            out = out[0]  # [L, d_out]
        elif not self.batch_first:
            out = out.transpose(1, 0, 2)  # [L, B, d_out]  a view, as PyTorch's
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(axis=1)  # [B, L, S]  the mean over heads
        return out, weights if batched else weights[0]

    __call__ = forward

    def _forward(
        self,
        x: NDArray,
        x_k: NDArray,
        x_v: NDArray,
        allowed: NDArray[np.bool_] | None,
        bias: NDArray | None,
        record: _Record | None,
    ) -> tuple[NDArray, NDArray]:
        """The batched computation: ``x [B, L, D]``, ``x_k [B, S, kdim]``, ``x_v [B, S, vdim]`` (checked).

        ``allowed`` (True = may attend) and ``bias`` (added to the scaled
        scores) broadcast to ``[B, H, L, S]``.  Self-attention is ``x is x_k is
        x_v``.  Returns ``(output [B, L, d_out], weights [B, H, L, S])``;
        ``record(name, array)`` sees every intermediate array (the shape trace).
        """
        dt = _float_dtype(x.dtype, x_k.dtype, x_v.dtype, self.dtype)
        fused = x is x_k and x_k is x_v and self.w_qkv is not None
        cross = x_k is not x
        x, x_k, x_v = (a.astype(dt, copy=False) for a in (x, x_k, x_v))  # [B, L|S, ·]
        B, L, D = x.shape
        S = x_k.shape[1]
        H = self.num_heads
        w = lambda a: a if a.dtype == dt else a.astype(dt)
        rec = record or (lambda name, a: None)
        rec("x", x)

        if fused:
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
            k = self._project(x_k, self.w_k, self.b_k, w)  # [B, S, H·d_k]
            v = self._project(x_v, self.w_v, self.b_v, w)  # [B, S, H·d_v]
            if cross and x_k is x_v:
                rec("x_kv", x_k)
            elif cross:
                rec("x_k", x_k)
                rec("x_v", x_v)
            rec("q", q)
            rec("k", k)
            rec("v", v)
            q = q.reshape(B, L, H, self.d_k)  # [B, L, H, d_k]  a view
            k = k.reshape(B, S, H, self.d_k)  # [B, S, H, d_k]
            v = v.reshape(B, S, H, self.d_v)  # [B, S, H, d_v]
            rec("q_view", q)
            rec("k_view", k)
            rec("v_view", v)
            q = q.transpose(0, 2, 1, 3)  # [B, H, L, d_k]  a view
            k = k.transpose(0, 2, 1, 3)  # [B, H, S, d_k]
            v = v.transpose(0, 2, 1, 3)  # [B, H, S, d_v]
            rec("q_heads", q)
            rec("k_heads", k)
            rec("v_heads", v)

        scale = 1.0 / math.sqrt(self.d_k)
        scores = (q * dt.type(scale)) @ k.swapaxes(-1, -2)  # [B, H, L, S]  (q/√d_k) @ kᵀ
        rec("scores", scores)
        if bias is not None:
            scores += bias  # [B, H, L, S]  float masks: added to the scaled scores
        if allowed is not None:
            np.copyto(scores, -np.inf, where=~allowed)  # [B, H, L, S]  masked_fill(~allowed, -inf)
        if bias is not None or allowed is not None:
            rec("masked", scores)
        weights = _softmax_inplace(scores)  # [B, H, L, S]  softmax over keys
        rec("weights", weights)
        ctx = weights @ v  # [B, H, L, d_v]
        rec("context", ctx)
        ctx = ctx.transpose(0, 2, 1, 3)  # [B, L, H, d_v]  a view
        rec("transpose", ctx)
        merged = ctx.reshape(B, L, H * self.d_v)  # [B, L, H·d_v]  a copy (a view when H = 1)
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

    def forward_traced(self, x: NDArray, x_kv: NDArray, allowed: NDArray[np.bool_] | None,
                       record: _Record) -> tuple[NDArray, NDArray]:
        """The batched computation with every intermediate array seen by ``record(name, array)``.

        ``x [B, L, D]``, ``x_kv [B, S, D_kv]`` (``x`` itself for self-attention),
        ``allowed`` one boolean mask broadcastable to ``[B, H, L, S]`` (True =
        may attend), given below :meth:`forward`'s PyTorch-style mask checks: it
        may block what it likes (every key of a row).  Returns ``(output [B, L, d_out],
        weights [B, H, L, S])``.
        """
        return self._forward(x, x_kv, x_kv, allowed, None, record)

    @staticmethod
    def _project(a: NDArray, W: NDArray, b: NDArray | None, w: Callable[[NDArray], NDArray]) -> NDArray:
        B, L, d_in = a.shape
        y = a.reshape(B * L, d_in) @ w(W)  # [B·L, d_out]  one GEMM for the whole batch
        if b is not None:
            y += w(b)  # [B·L, d_out]
        return y.reshape(B, L, W.shape[1])  # [B, L, d_out]

    # the shape trace --------------------------------------------------------
    def shape_trace(
        self, B: int, L: int, L_k: int | None = None, *, cross: bool = False, masked: bool = False,
        allowed: Literal["mask", "padding", "both"] = "both",
    ) -> tuple[TraceStep, ...]:
        """The forward pass as an ordered tuple of :class:`TraceStep` (name, shapes, note).

        Both symbolic (``[B, H, L, d_k]``) and concrete shapes, for a batch of
        ``B`` sequences of ``L`` queries over ``L_k`` keys (``L_k = L`` for
        self-attention; ``cross=True`` names the key sequence ``x_kv``).
        ``masked`` adds the ``masked_fill`` step; ``allowed`` says what its boolean mask is, so that its
        note gives its shape: a mask shared by the batch (``[1, 1, L, L_k]``), key padding alone
        (``[B, 1, 1, L_k]``) or both (``[B, 1, L, L_k]``).  The steps are exactly the
        arrays :meth:`forward` makes (a test checks every shape).  Self-attention
        with equal ``d_k``, ``d_v`` reads::

            x [B, L, D] → qkv [B, L, 3·H·d_k] → view [B, L, 3, H, d_k]
            → permute [3, B, H, L, d_k] → scores [B, H, L, L] → (masked)
            → weights [B, H, L, L] → context [B, H, L, d_v]
            → transpose [B, L, H, d_v] → merge [B, L, H·d_v] → out_proj [B, L, d_out]

        Raises ``ValueError`` when ``cross`` is set without ``L_k``, or
        self-attention is asked for on a layer whose K, V width is not d_model.
        """
        if cross and L_k is None:
            raise ValueError("a cross-attention trace needs L_k, the length of x_kv")
        if not cross and (L_k not in (None, L) or self.d_kv != self.d_model):
            raise ValueError("self-attention has L_k = L and d_kv = d_model; pass cross=True")
        fused = not cross and self.w_qkv is not None
        Lk = "L_k" if cross else "L"
        sizes = {
            "B": B, "L": L, "L_k": L if L_k is None else L_k, "D": self.d_model, "D_kv": self.d_kv,
            "H": self.num_heads, "d_k": self.d_k, "d_v": self.d_v, "d_out": self.d_out,
        }
        tr = _TraceBuilder(sizes)
        tr.add("x", ("B", "L", "D"))
        if fused:  # the fused projection needs d_k = d_v: one width for q, k and v
            tr.add("qkv", ("B", "L", "3·H·d_k"))
            tr.add("view", ("B", "L", "3", "H", "d_k"))
            tr.add("permute", ("3", "B", "H", "L", "d_k"))
        else:
            if cross:
                tr.add("x_kv", ("B", "L_k", "D_kv"))
            src = "x_kv" if cross else "x"
            tr.add("q", ("B", "L", "H·d_k"))
            tr.add("k", ("B", Lk, "H·d_k"), src=src)
            tr.add("v", ("B", Lk, "H·d_v"), src=src)
            tr.add("q_view", ("B", "L", "H", "d_k"), "trace.split", what="q")
            tr.add("k_view", ("B", Lk, "H", "d_k"), "trace.split", what="k")
            tr.add("v_view", ("B", Lk, "H", "d_v"), "trace.split", what="v")
            tr.add("q_heads", ("B", "H", "L", "d_k"))
            tr.add("k_heads", ("B", "H", Lk, "d_k"), "trace.heads_axis")
            tr.add("v_heads", ("B", "H", Lk, "d_v"), "trace.heads_axis")
        tr.add("scores", ("B", "H", "L", Lk))
        if masked:
            tr.add("masked", ("B", "H", "L", Lk), allowed=Msg(f"trace.masked.{allowed}"))
        tr.add("weights", ("B", "H", "L", Lk))
        tr.add("context", ("B", "H", "L", "d_v"))
        tr.add("transpose", ("B", "L", "H", "d_v"))
        copies = merge_copies(self.num_heads, L, self.d_v)
        tr.add("merge", ("B", "L", "H·d_v"), "trace.merge.copy" if copies else "trace.merge.view")
        if self.w_o is not None:
            tr.add("out_proj", ("B", "L", "d_out"))
        return tuple(tr.steps)


# --------------------------------------------------------------------------- #
# one run's intermediate arrays
# --------------------------------------------------------------------------- #
@dataclass(frozen=True, eq=False)
class LayerRun:
    """One forward of the layer for a batch of one, with its intermediate arrays, batch axis dropped.

    Shapes: ``q [H, L, d_k]``, ``k [H, L_k, d_k]``, ``v [H, L_k, d_v]``,
    ``scores [H, L, L_k]`` (``q kᵀ / √d_k``, before masking),
    ``weights [H, L, L_k]`` (fully masked rows are zero), ``context
    [L, H·d_v]`` (heads side by side), ``output [L, d_out]``; a decoder's
    step (grouped K/V heads, a KV cache, a bias) also ``k_new``, ``v_new``
    ``[H, L, d]`` (the new tokens' keys and values, each query head's K/V
    head) and ``biased [H, L, L_k]`` (the scaled scores plus the bias);
    ``grads`` the backward pass's gradients when they were asked for.
    What an exercise's run is: :func:`tutor.production.run_exercise`.
    """

    q: NDArray
    k: NDArray
    v: NDArray
    scores: NDArray
    weights: NDArray
    context: NDArray
    output: NDArray
    k_new: NDArray | None = None
    v_new: NDArray | None = None
    biased: NDArray | None = None
    grads: LayerGrads | None = None
    q_rot: NDArray | None = None  # [H, L, d_k]: RoPE's rotated queries (format v3), else None
    k_rot: NDArray | None = None  # [H, L_k, d_k]: RoPE's rotated keys, each query head's K/V head
    # multi-head latent attention (format v3): c_kv [L_k, d_c], q_absorbed [H, L, d_c], scores_absorbed [H, L, L_k]
    c_kv: NDArray | None = None
    q_absorbed: NDArray | None = None
    scores_absorbed: NDArray | None = None
    x_norm: NDArray | None = None  # [L, d_model]: X normalized before the projections (the pre-norm block)
    residual: NDArray | None = None  # [L, d_model]: X + output (the block's residual)
    out_norm: NDArray | None = None  # [L, d_model]: Norm(X + output), post-norm's block output (issue 23)
