"""The ``backward`` kata: the gradients of scaled dot-product attention, worked out by hand.

The learner writes ``attention_backward(q, k, v, d_out, mask=None) -> (d_q,
d_k, d_v, d_scores)`` in NumPy, or the same function with tensors in PyTorch
(by hand: the checker calls it under ``torch.no_grad()``, where autograd's
``.backward()`` raises).  Shapes: ``q [B, H, L_q, d]``, ``k [B, H, L_k, d]``,
``v [B, H, L_k, d_v]``, ``d_out [B, H, L_q, d_v]`` (∂loss/∂out); ``mask``
boolean, broadcastable to ``[B, H, L_q, L_k]``, True = may attend.  The
forward pass: ``S = q·kᵀ/√d`` (``-inf`` where masked), ``P = softmax(S)``
along the keys (a query with no key to attend to gets zero weights, so zero
gradients), ``out = P·v``.  The gradients (Dao 2023, FlashAttention-2,
Algorithm 2; :mod:`tutor.steps.backward_head`)::

    d_v      = Pᵀ·d_out                            [B, H, L_k, d_v]
    dP       = d_out·vᵀ                            [B, H, L_q, L_k]
    d_scores = P ∘ (dP − rowsum(dP ∘ P))           [B, H, L_q, L_k]   ∂loss/∂S (0 where masked)
    d_q      = d_scores·k/√d                       [B, H, L_q, d]
    d_k      = d_scoresᵀ·q/√d                      [B, H, L_k, d]

``d_scores`` is the gradient of the scaled scores ``S``, before the ``1/√d``
that ``d_q`` and ``d_k`` take.  The mistakes are the backward misconceptions
of :mod:`tutor.mistakes.diagnose` (the softmax's gradient element-wise or its
diagonal only, no ``1/√d``, ``d_K`` from ``d_scores·Q`` or its factors in the
wrong order, a blocked entry's gradient left non-zero) and a few more: the
row term summed over the queries, ``d_v`` as ``P·d_out``, ``d_scores``
returned after the ``1/√d``, and the forward pass recomputed wrongly (no scale,
no mask, a large negative fill or NaN on a fully masked row).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np

from . import hand
from .attention import attend
from .kata import Array, Case, Kata, Mistake, Output, Phrase, phrase

__all__ = ["KATA", "SLIPS", "reference"]

#: What each slip of :func:`reference` does beyond :func:`tutor.katas.attention.attend`'s (the forward pass
#: recomputed: ``no_scaling``, ``no_mask``, ``empty_row_uniform``, ``empty_row_nan``), as code.
SLIPS = {
    "softmax_grad_elementwise": "d_scores = P ∘ dP (no row term)",
    "softmax_grad_diagonal": "d_scores = P ∘ (1 − P) ∘ dP (the Jacobian's diagonal only)",
    "softmax_grad_axis": "the row term rowsum(dP ∘ P) summed over the queries (axis -2)",
    "grad_no_scale": "d_q = d_scores·k, d_k = d_scoresᵀ·q (no / √d)",
    "d_scores_scaled": "d_scores returned already divided by √d (the gradient of q·kᵀ, not of S)",
    "d_k_not_transposed": "d_k = d_scores·q / √d (needs L_q = L_k)",
    "d_k_order": "d_k = q·d_scoresᵀ / √d (needs d = L_k; [L_q, L_q])",
    "d_k_order_transposed": "d_k = qᵀ·d_scores / √d ([d, L_k]: d_k transposed)",
    "d_v_not_transposed": "d_v = P·d_out (needs L_q = L_k)",
    "masked_grad_leak": "a masked entry of d_scores left as dP − rowsum (not multiplied by its zero weight)",
}


def reference(inputs: Mapping[str, Any], slips: frozenset[str]) -> tuple[Array, Array, Array, Array] | None:
    """``(d_q, d_k, d_v, d_scores)`` of attention on ``inputs`` (``q``, ``k``, ``v``, ``d_out``, ``mask``), in
    float64, made with ``slips`` (:data:`SLIPS`); ``None`` when the slips' shapes do not chain."""
    q, k, v, g, mask = inputs["q"], inputs["k"], inputs["v"], inputs["d_out"], inputs["mask"]
    L_q, L_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d)
    forward = slips & {"no_scaling", "no_mask", "empty_row_uniform", "empty_row_nan"}
    with np.errstate(invalid="ignore"):
        _, P = attend(q, k, v, mask, forward)  # [B, H, L_q, L_k]
        if "d_v_not_transposed" in slips:
            if L_q != L_k:
                return None
            d_v = P @ g
        else:
            d_v = np.swapaxes(P, -1, -2) @ g  # [B, H, L_k, d_v]
        dP = g @ np.swapaxes(v, -1, -2)  # [B, H, L_q, L_k]
        if "softmax_grad_elementwise" in slips:
            row: Array | float = 0.0
            dS = P * dP
        elif "softmax_grad_diagonal" in slips:
            row = P * dP
            dS = P * (1 - P) * dP
        else:
            row = np.sum(dP * P, axis=-2 if "softmax_grad_axis" in slips else -1, keepdims=True)
            dS = P * (dP - row)
        if "masked_grad_leak" in slips and mask is not None:
            dS = np.where(np.broadcast_to(mask, dS.shape), dS, dP - row)
        f = 1.0 if "grad_no_scale" in slips else scale
        d_q = dS @ k * f  # [B, H, L_q, d]
        if "d_k_not_transposed" in slips:
            if L_q != L_k:
                return None
            d_k = dS @ q * f
        elif "d_k_order" in slips:
            if d != L_k:
                return None
            d_k = q @ np.swapaxes(dS, -1, -2) * f  # [B, H, L_q, L_q]
        elif "d_k_order_transposed" in slips:
            d_k = np.swapaxes(q, -1, -2) @ dS * f  # [B, H, d, L_k]
        else:
            d_k = np.swapaxes(dS, -1, -2) @ q * f  # [B, H, L_k, d]
    return d_q, d_k, d_v, dS * scale if "d_scores_scaled" in slips else dS


def _case(id: str, inputs: dict[str, Any], dtype: str, *, given: tuple[str | Phrase, ...] = (), expected: tuple[Array, ...] = (),
          hand_sized: bool = False) -> Case:
    q, k, v, g, mask = (inputs[n] for n in ("q", "k", "v", "d_out", "mask"))
    B, H, L_q, d = q.shape
    right = reference(inputs, frozenset())
    assert right is not None
    return Case(id, inputs, dtype, {"B": B, "H": H, "L_q": L_q, "L_k": k.shape[-2], "d": d, "d_v": v.shape[-1]},
                expected or right, args=(q, k, v, g), kwargs={} if mask is None else {"mask": mask},
                given=given, hand=hand_sized)


def _from_exercise(id: str, upstream: tuple[tuple[int, ...], ...], case_id: str, given: tuple[str | Phrase, ...]) -> Case:
    """A hand-sized case: the bundled exercise ``id`` without its output projection, ``upstream`` as
    ∂loss/∂(the heads' outputs side by side), its gradients from the exact engine's backward pass."""
    from ..steps import solve

    ex = replace(hand.exercise(id), w_o=None, b_o=None,
                 upstream=tuple(tuple(Fraction(x) for x in row) for row in upstream))
    sol = solve(ex, backward=True)
    H, L, d_v = ex.num_heads, ex.L, ex.heads[0].d_v

    def stacked(step: str) -> Array:  # [1, H, rows, cols]
        return np.stack([np.array(sol.step(step, h).value, dtype=np.float64) for h in range(H)])[None]

    allowed = ex.allowed()
    inputs = {"q": stacked("q"), "k": stacked("k"), "v": stacked("v"),
              "d_out": np.array(upstream, dtype=np.float64).reshape(L, H, d_v).transpose(1, 0, 2)[None],
              "mask": None if allowed is None else np.array(allowed, dtype=bool)[None, None]}
    expected = (stacked("d_q"), stacked("d_k"), stacked("d_v"), stacked("d_scaled"))
    return _case(case_id, inputs, "float64", given=(*given, f"exercise:{id}"), expected=expected, hand_sized=True)


def _generated(rng: np.random.Generator, B: int, H: int, L_q: int, L_k: int, d: int, d_v: int) -> dict[str, Any]:
    """Entries in [-1, 1] (scores of a few units: a softmax far from one-hot), Q ≠ K ≠ V, ``d_out`` not all ones."""
    def u(*shape: int) -> Array:
        return rng.uniform(-1.0, 1.0, size=shape).round(3)
    return {"q": u(B, H, L_q, d), "k": u(B, H, L_k, d), "v": u(B, H, L_k, d_v), "d_out": u(B, H, L_q, d_v),
            "mask": None}


def cases() -> tuple[Case, ...]:
    """Three hand-sized cases (bundled exercises, the exact engine's backward pass), then generated ones:
    B = 2, H ≥ 2, L_q ≠ L_k, d ≠ d_v, a causal mask, key padding, a fully masked row, float32 and float64."""
    rng = np.random.default_rng(13)
    cross = _generated(rng, 2, 2, 3, 5, 4, 3)
    causal = _generated(rng, 2, 2, 4, 4, 2, 3)
    causal["mask"] = np.tril(np.ones((4, 4), dtype=bool))
    padded = _generated(rng, 2, 3, 4, 4, 4, 2)
    keep = np.ones((2, 4), dtype=bool)
    keep[0, 3] = keep[1, 2:] = False
    padded["mask"] = keep[:, None, None, :]
    empty = _generated(rng, 2, 2, 3, 3, 3, 2)
    rows = np.ones((2, 1, 3, 3), dtype=bool)
    rows[0, 0, 1, :] = False
    rows[1, 0, :, 2] = False
    rows[1, 0, 0, 1] = False
    empty["mask"] = rows
    return (
        _from_exercise("single-head-asym-3x4", ((1, -1), (0, 2), (2, 1)), "hand-asym", (phrase("no_mask"), "W_Q ≠ W_K")),
        _from_exercise("two-head-causal-3x4", ((1, -1, 2, 0), (0, 2, -1, 1), (2, 1, 0, -2)), "hand-causal",
                       (phrase("two_heads"), phrase("causal_mask"))),
        _from_exercise("fully-masked-row-3x3", ((1, -1), (0, 2), (2, 1)), "hand-fully-masked-row",
                       (phrase("query_no_key_to_attend"),)),
        _case("cross-3-by-5", cross, "float64", given=("L_q = 3, L_k = 5", "d = 4, d_v = 3", phrase("no_mask"))),
        _case("causal-float32", causal, "float32", given=(phrase("causal_mask_shape", shape="[L, L]"),)),
        _case("key-padding", padded, "float64", given=(phrase("key_padding_shape", shape="[B, 1, 1, L_k]"), "d = L_k = 4")),
        _case("fully-masked-row", empty, "float64", given=(phrase("query_no_key_to_attend"), phrase("mask_shape", shape="[B, 1, L, L]"))),
    )


KATA = Kata(
    id="backward",
    numpy_name="attention_backward",
    torch_name="attention_backward",
    outputs=(Output("d_q", ("B", "H", "L_q", "d")), Output("d_k", ("B", "H", "L_k", "d")),
             Output("d_v", ("B", "H", "L_k", "d_v")), Output("d_scores", ("B", "H", "L_q", "L_k"))),
    reference=reference,
    cases=cases,
    mistakes=(
        Mistake.of("softmax_grad_elementwise"),
        Mistake.of("softmax_grad_diagonal"),
        Mistake.of("softmax_grad_axis"),
        Mistake.of("grad_no_scale"),
        Mistake.of("d_scores_scaled"),
        Mistake.of("d_k_not_transposed"),
        Mistake.of("d_k_order"),
        Mistake.of("d_k_order_transposed"),
        Mistake.of("d_v_not_transposed"),
        Mistake.of("masked_grad_leak"),
        Mistake.of("no_scaling"),
        Mistake.of("no_mask"),
        Mistake.of("empty_row_uniform"),
        Mistake.of("empty_row_nan"),
    ),
    follow_ups=("gradcheck", "scale-gradients", "fully-masked-row", "flash-attention"),
    by_hand=True,
    dtype_of={"attention_backward": "q"},  # the starter: "in the inputs' dtype"
)
