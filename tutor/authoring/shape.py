"""The shape numbers are drawn for (:class:`Shape`: everything an exercise is but its numbers), from the
options of ``attn-tutor new`` (:func:`spec_shape`) or from an exercise (:func:`shape_of`, for ``--like``).

Format v2 adds two fields: ``kv_heads`` (query heads sharing K/V heads) and
``past`` (how many of the tokens are cached: the numbers are drawn for the
whole sequence, the file then gives the cached tokens' K and V).  Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .spec import Spec

if TYPE_CHECKING:
    from ..exercise.record import Exercise


@dataclass(frozen=True)
class HeadShape:
    """One head's sizes and which biases it has."""

    d_k: int
    d_v: int
    b_q: bool = False
    b_k: bool = False
    b_v: bool = False


@dataclass(frozen=True)
class Shape:
    """Everything an exercise is but its numbers: sizes, labels, masks, which biases and W_O it has.

    ``d_kv`` and ``kv_tokens`` only for cross-attention (``x_kv``); ``mask``
    is ``"none"``, ``"causal"``, or a matrix ``[L, L_k]`` (True = may attend);
    ``w_o`` the number of columns of W_O (``d_out``), ``None`` without one.
    Format v2: ``kv_heads`` K/V heads (``None``: one per query head), and the
    first ``past`` of the ``L`` tokens are the cache's.
    """

    L: int
    d_model: int
    heads: tuple[HeadShape, ...]
    tokens: tuple[str, ...]
    L_k: int | None = None
    d_kv: int | None = None
    kv_tokens: tuple[str, ...] | None = None
    mask: str | tuple[tuple[bool, ...], ...] = "none"
    key_padding: tuple[bool, ...] | None = None
    w_o: int | None = None
    b_o: bool = False
    fused: bool = False  # written in the fused form (one w_q, w_k, w_v for all heads), as the exercise it is like
    kv_heads: int | None = None
    past: int = 0

    @property
    def keys(self) -> int:
        """``L_k``: the number of keys."""
        return self.L_k if self.L_k is not None else self.L

    @property
    def cross(self) -> bool:
        return self.L_k is not None

    @property
    def per_group(self) -> int:
        """How many query heads share one K/V head (1 without grouping)."""
        return len(self.heads) // (self.kv_heads or len(self.heads))

    def allowed(self) -> tuple[tuple[bool, ...], ...] | None:
        """``[L, L_k]`` booleans, True = may attend (mask AND key padding), or ``None`` without either."""
        if self.mask == "none" and self.key_padding is None:
            return None
        mask = self.mask
        rows = []
        for i in range(self.L):
            row = []
            for j in range(self.keys):
                seen = True if mask == "none" else (j <= i if mask == "causal" else bool(mask[i][j]))
                row.append(seen and (self.key_padding is None or self.key_padding[j]))
            rows.append(tuple(row))
        return tuple(rows)


def spec_shape(spec: Spec) -> Shape:
    """The shape ``new --tokens … --mask …`` asks for: labels ``t1 …`` (``s1 …`` for x_kv), the last key
    padded with ``--mask padding`` and labelled PAD.

    Format v2: the whole sequence, ``--cache`` tokens ``p1 …`` first; the
    mask over it causal when asked causal or lower-right (for the new tokens
    against every key that is the lower-right alignment); labels are never
    PAD.  The file states the mask and padding as asked
    (:func:`tutor.authoring.draft.as_asked`); the numbers are drawn for this shape.
    """
    past = spec.cache or 0
    tokens = [f"p{j + 1}" for j in range(past)] + [f"t{i + 1}" for i in range(spec.tokens)]
    kv_tokens = [f"s{j + 1}" for j in range(spec.L_k)] if spec.cross is not None else None
    padding = None
    if spec.mask == "padding":
        padding = (True,) * (spec.L_k + past - 1) + (False,)
        if not spec.is_v2:
            (kv_tokens if kv_tokens is not None else tokens)[-1] = "PAD"
    return Shape(L=spec.tokens + past, d_model=spec.d_model, heads=(HeadShape(spec.d_k, spec.d_k),) * spec.heads,
                 tokens=tuple(tokens), L_k=spec.cross, d_kv=spec.d_model if spec.cross is not None else None,
                 kv_tokens=None if kv_tokens is None else tuple(kv_tokens),
                 mask="causal" if spec.mask in ("causal", "causal_lower_right") else "none", key_padding=padding,
                 kv_heads=spec.kv_heads, past=past, w_o=spec.d_model if spec.residual else None)


def shape_of(ex: Exercise) -> Shape:
    """The shape of a format-v1 exercise ``ex``: its sizes, labels, mask and key padding, which biases
    and W_O it has, and its form (per-head or fused)."""
    heads = tuple(HeadShape(h.d_k, h.d_v, h.b_q is not None, h.b_k is not None, h.b_v is not None) for h in ex.heads)
    mask: str | tuple[tuple[bool, ...], ...] = "none"
    if ex.mask_kind == "causal":
        mask = "causal"
    elif ex.mask is not None:
        mask = ex.mask
    return Shape(L=ex.L, d_model=ex.d_model, heads=heads, tokens=ex.query_labels,
                 L_k=ex.L_k if ex.is_cross else None, d_kv=len(ex.kv[0]) if ex.is_cross else None,
                 kv_tokens=ex.key_labels if ex.is_cross else None, mask=mask, key_padding=ex.key_padding,
                 w_o=ex.d_out if ex.w_o is not None else None, b_o=ex.b_o is not None, fused=ex.fused)
