"""``nn.MultiheadAttention``'s masks: checked, and converted to one boolean and one additive mask.

PyTorch 2.13 has two polarities for boolean masks (its docs of both APIs):

* ``F.scaled_dot_product_attention``: ``attn_mask`` True = **may attend**;
* ``nn.MultiheadAttention``: ``attn_mask`` True = **not allowed to attend**,
  ``key_padding_mask`` True = **padding** (ignored).

Float masks mean the same in both: they are added to the scaled scores.
Inside the NumPy core every boolean mask is True = may attend; this module
is where ``nn.MultiheadAttention``'s arguments are turned around, once, and
where a mask that can only be the other polarity is refused.
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tutor.base.errors import ShapeError

from ._common import MaskPolarityWarning, _shape_text, _zero_one_only
from .functional import causal_mask


def _kind(mask: NDArray, name: str) -> str:
    """``"bool"`` or ``"float"``; ``TypeError`` for any other dtype (as PyTorch's ``_canonical_mask``)."""
    if mask.dtype == np.bool_:
        return "bool"
    if np.issubdtype(mask.dtype, np.floating):
        return "float"
    raise TypeError(f"only bool and floating types of {name} are supported (as in PyTorch), got dtype {mask.dtype}")


def _warn_zero_one(bias: NDArray, name: str) -> None:
    if _zero_one_only(bias):
        warnings.warn(
            f"{name} is a float array of only 0s and 1s: a float {name} is added to the scores (1 adds 1), "
            f"it blocks nothing. For nn.MultiheadAttention's boolean mask (True = blocked) pass {name}.astype(bool).",
            MaskPolarityWarning,
            stacklevel=4,
        )


def mha_masks(
    key_padding_mask: ArrayLike | None,
    attn_mask: ArrayLike | None,
    is_causal: bool,
    *,
    B: int,
    H: int,
    L: int,
    S: int,
    batched: bool,
    dtype: np.dtype,
) -> tuple[NDArray[np.bool_] | None, NDArray | None]:
    """``nn.MultiheadAttention``'s ``key_padding_mask``, ``attn_mask``, ``is_causal`` as ``(allowed, bias)``.

    ``allowed`` is boolean, True = may attend, and ``bias`` is added to the
    scaled scores; each broadcasts to ``[B, H, L, S]`` or is ``None``.

    * ``key_padding_mask``: ``[B, S]`` (unbatched: ``[S]``); boolean True =
      padding, or float (added).
    * ``attn_mask``: ``[L, S]`` or ``[B·H, L, S]`` (unbatched: ``[H, L, S]``),
      entry ``b·H + h`` for batch ``b`` and head ``h``; boolean True =
      blocked, or float (added).
    * ``is_causal``: a hint that ``attn_mask`` is the causal mask; as in
      PyTorch it needs ``attn_mask``.

    Raises :class:`ShapeError` for shapes PyTorch refuses; ``TypeError`` for a
    mask that is neither boolean nor float; ``ValueError`` for
    ``is_causal=True`` without ``attn_mask`` (PyTorch: RuntimeError) or with
    an ``attn_mask`` that is not the causal mask (PyTorch would use the mask
    on one path and the causal mask on another), and for a boolean mask that
    can only be meant in the other polarity: an ``attn_mask`` that blocks
    every key of every query, one equal to the causal mask in SDPA's polarity
    (True on and below the diagonal), or a ``key_padding_mask`` that marks
    every key of every sequence as padding.  Warns (``UserWarning``, as
    PyTorch) when one mask is boolean and the other float, and
    :class:`MaskPolarityWarning` for a float mask of only 0s and 1s.
    """
    blocked: NDArray[np.bool_] | None = None  # True = may not attend; inverted once at the end
    bias: NDArray | None = None
    kinds = []
    if key_padding_mask is not None:
        kpm = np.asarray(key_padding_mask)
        kinds.append(_kind(kpm, "key_padding_mask"))
        want: tuple[int, ...] = (B, S) if batched else (S,)
        if kpm.shape != want:
            raise ShapeError(
                f"key_padding_mask must be {'[B, S]' if batched else '[S]'} = {_shape_text(want)}, "
                f"got {_shape_text(kpm.shape)}"
            )
        kpm = kpm.reshape(B, 1, 1, S)  # [B, 1, 1, S]
        if kinds[-1] == "bool":
            if kpm.size and kpm.all():
                raise ValueError(
                    "key_padding_mask marks every key of every sequence as padding: in nn.MultiheadAttention "
                    "True = padding (ignored). If True meant a real token (the polarity of an exercise file's "
                    "key_padding), pass ~key_padding_mask"
                )
            blocked = kpm  # [B, 1, 1, S]
        else:
            _warn_zero_one(kpm, "key_padding_mask")
            bias = kpm.astype(dtype)  # [B, 1, 1, S]
    am4 = None
    if attn_mask is not None:
        am = np.asarray(attn_mask)
        kinds.append(_kind(am, "attn_mask"))
        if am.ndim == 2:
            if am.shape != (L, S):
                raise ShapeError(f"a 2-D attn_mask must be [L, S] = [{L}, {S}], got {_shape_text(am.shape)}")
            am4 = am[None, None]  # [1, 1, L, S]
        elif am.ndim == 3:
            want = (B * H, L, S) if batched else (H, L, S)
            if am.shape != want:
                raise ShapeError(
                    f"a 3-D attn_mask must be {'[B·H, L, S]' if batched else '[H, L, S]'} = {_shape_text(want)}, "
                    f"got {_shape_text(am.shape)}"
                )
            am4 = am.reshape(B, H, L, S)  # [B, H, L, S]  entry b·H + h
        else:
            raise ShapeError(
                f"attn_mask must be [L, S] or [B·H, L, S] (2-D or 3-D), got {am.ndim}-D {_shape_text(am.shape)}"
            )
        if kinds[-1] == "bool":
            if am4.size and am4.all():
                raise ValueError(
                    "attn_mask blocks every key for every query: in nn.MultiheadAttention a boolean attn_mask "
                    "means True = blocked. If True meant 'may attend' (the polarity of scaled_dot_product_attention), "
                    "pass ~attn_mask"
                )
            if (L > 1 and S > 1 and am4[..., 0, 0].all() and not am4[..., 0, 1].any()  # cheap first: the corner
                    and np.array_equal(am4, np.broadcast_to(causal_mask(L, S), am4.shape))):
                raise ValueError(
                    "attn_mask is True on and below the diagonal: that is the causal mask in "
                    "scaled_dot_product_attention's polarity (True = may attend). nn.MultiheadAttention's boolean "
                    "attn_mask means True = blocked, so it would block each query's own and earlier keys: "
                    "pass ~attn_mask (True above the diagonal)"
                )
            blocked = am4 if blocked is None else blocked | am4  # [B|1, H|1, L, S]
        else:
            _warn_zero_one(am4, "attn_mask")
            am_bias = am4.astype(dtype, copy=False)  # [B|1, H|1, L, S]
            bias = am_bias if bias is None else bias + am_bias
    if is_causal:
        if am4 is None:
            raise ValueError(
                "is_causal=True needs attn_mask: in nn.MultiheadAttention is_causal is only a hint that attn_mask "
                "is the causal mask (PyTorch: RuntimeError 'Need attn_mask if specifying the is_causal hint'); "
                "pass attn_mask=~causal_mask(L, S)"
            )
        below = causal_mask(L, S)  # [L, S]  True = may attend
        want_mask = ~below if am4.dtype == np.bool_ else np.where(below, 0.0, -np.inf)
        if not np.array_equal(am4, np.broadcast_to(want_mask, am4.shape)):
            raise ValueError(
                "is_causal=True says attn_mask is the causal mask (top-left: query i may attend keys j <= i), "
                "but it is not; PyTorch would then use attn_mask on one path and the causal mask on another. "
                "Pass the causal mask (~causal_mask(L, S), True = blocked above the diagonal) or is_causal=False"
            )
    if len(kinds) == 2 and kinds[0] != kinds[1]:
        warnings.warn(
            "Support for mismatched key_padding_mask and attn_mask is deprecated. Use same type for both instead.",
            UserWarning,
            stacklevel=3,
        )
    allowed = None if blocked is None else ~blocked  # [B|1, H|1, L|1, S]  True = may attend
    return allowed, bias




# --- issue 23: a sliding window (Mistral) with attention sinks (StreamingLLM) -----------------------------


def sliding_window_mask(L_q: int, L_k: int, window: int, sinks: int = 0) -> NDArray[np.bool_]:
    """A sliding-window causal mask ``[L_q, L_k]``, True = may attend: SDPA's boolean ``attn_mask``.

    The queries are the last ``L_q`` of ``L_k`` positions (bottom-right aligned, as a decode step with a KV
    cache): query ``i`` sits at ``p = i + L_k - L_q`` and may attend to key ``j`` iff ``j <= p`` and
    ``p - window < j`` -- itself and the ``window - 1`` keys before it, the local causal mask of
    Mistral 7B (Jiang et al. 2023, §2; xformers' ``triu(diagonal=shift - window_size + 1)``) -- or ``j <
    sinks``, the attention sinks every later query keeps (Xiao et al. 2023, StreamingLLM).  For
    ``F.scaled_dot_product_attention(..., attn_mask=mask)``; ``nn.MultiheadAttention`` wants ``~mask``; a
    float mask is ``np.where(mask, 0.0, -np.inf)``.  Raises ``ValueError`` for negative sizes, ``window < 1``
    or ``sinks < 0``.
    """
    if L_q < 0 or L_k < 0 or window < 1 or sinks < 0:
        raise ValueError(f"sliding_window_mask needs L_q, L_k, sinks >= 0 and window >= 1, got L_q={L_q}, "
                         f"L_k={L_k}, window={window}, sinks={sinks}")
    i = np.arange(L_k - L_q, L_k)[:, None]  # [L_q, 1]  each query's position among the keys
    j = np.arange(L_k)[None, :]  # [1, L_k]
    return (j <= i) & ((j > i - window) | (j < sinks))  # [L_q, L_k]
