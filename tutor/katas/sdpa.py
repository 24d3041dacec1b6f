"""The ``sdpa`` kata: scaled dot-product attention, the function ``torch.nn.functional`` has, with its weights.

The learner writes ``scaled_dot_product_attention(q, k, v, mask=None,
is_causal=False) -> (out, weights)``, in NumPy or (the same name, tensors in
and out) in PyTorch.

Conventions (pinned by issue 21): ``q [B, H, L_q, d_k]``, ``k [B, H, L_k,
d_k]``, ``v [B, H, L_k, d_v]`` (``d_v`` may differ from ``d_k``); ``mask``
boolean, broadcastable to ``[B, H, L_q, L_k]``, True = may attend (the
polarity of a bool ``attn_mask`` of ``torch.nn.functional.scaled_dot_product_attention``);
``is_causal``: query ``i`` attends keys ``j ≤ i``, aligned top-left as
PyTorch's ``is_causal`` (the cases give it only with ``L_q = L_k``); never
both ``mask`` and ``is_causal`` (PyTorch refuses the pair); ``out [B, H, L_q,
d_v]``, ``weights [B, H, L_q, L_k]``.  A query that may attend to no key gets
zero weights and a zero output row: what ``scaled_dot_product_attention``
returns there with a bool ``attn_mask`` on CPU since PyTorch 2.5 (checked with
torch 2.13.0+cpu, the math and flash backends, float32 and float64; the same
with the additive ``-inf`` mask), where ``nn.MultiheadAttention`` with
``need_weights=True`` gives NaN.  Formula: Vaswani et al. 2017, eq. 1,
``softmax(Q Kᵀ / √d_k) V``.

Pure NumPy: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from . import hand
from .attention import NotApplicable, attend
from .kata import Array, Case, Kata, Mistake, Output, Phrase, phrase

__all__ = ["KATA", "causal", "reference"]


def causal(L_q: int, L_k: int, slips: frozenset[str] = frozenset()) -> Array:
    """``[L_q, L_k]`` booleans, True = may attend: key ``j ≤ i`` (top-left, PyTorch's ``is_causal``),
    or as a slip builds it: ``mask_upper`` keeps ``j ≥ i`` (the future, ``np.triu``), ``mask_diagonal``
    keeps only ``j < i`` (``np.tril(..., k=-1)``: the query's own key blocked)."""
    i = np.arange(L_q)[:, None]
    j = np.arange(L_k)[None, :]
    if "mask_upper" in slips:
        return j >= i
    if "mask_diagonal" in slips:
        return j < i
    return j <= i


def reference(inputs: Mapping[str, Any], slips: frozenset[str]) -> tuple[Array, Array] | None:
    """``(out [B, H, L_q, d_v], weights [B, H, L_q, L_k])`` on ``inputs`` (``q``, ``k``, ``v``, ``mask``,
    ``is_causal``), made with ``slips``.

    Slips beyond :func:`tutor.katas.attention.attend`'s: ``mask_upper``, ``mask_diagonal`` (the causal
    mask built wrongly, :func:`causal`), ``causal_ignored`` (``is_causal`` not read), ``guarded_columns``
    (with ``softmax_columns``: a key no query may attend gets zero weights, not NaN, as a softmax whose
    0/0 is guarded gives them).  ``no_mask`` is the ``mask`` argument ignored; the causal mask goes
    through the same masking line as ``mask`` does, so ``mask_inverted``, ``mask_added`` and
    ``mask_after_softmax`` turn it too.  ``times_k`` gives ``out [B, H, L_q, d_k]`` (the weights times
    K chain whatever ``d_v`` is).  ``None`` when the slips' shapes do not chain (``K·Qᵀ`` with
    ``L_q ≠ L_k``: the learner's code raises).
    """
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    allowed = inputs.get("mask")
    if inputs.get("is_causal"):
        allowed = None if "causal_ignored" in slips else causal(q.shape[-2], k.shape[-2], slips)
        slips = slips - {"no_mask"}
    try:
        _, weights = attend(q, k, v, allowed, slips - {"times_k"})
    except NotApplicable:
        return None
    if "guarded_columns" in slips:
        weights = np.nan_to_num(weights, nan=0.0)
    return weights @ (k if "times_k" in slips else v), weights  # weights·K chains whatever d_v is


def _case(id: str, inputs: dict[str, Any], dtype: str, *, given: tuple[str | Phrase, ...],
          expected: tuple[Array, ...] = (), hand_sized: bool = False) -> Case:
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    B, H, L_q, d_k = q.shape
    L_k, d_v = v.shape[-2:]
    right = reference(inputs, frozenset())
    assert right is not None
    kwargs: dict[str, Any] = {}
    if inputs.get("mask") is not None:
        kwargs["mask"] = inputs["mask"]
    if inputs.get("is_causal"):
        kwargs["is_causal"] = True
    return Case(id, inputs, dtype, {"B": B, "H": H, "L_q": L_q, "L_k": L_k, "d_k": d_k, "d_v": d_v},
                expected or right, args=(q, k, v), kwargs=kwargs, given=given, hand=hand_sized)


def _from_exercise(id: str, case_id: str, given: tuple[str | Phrase, ...], *, is_causal: bool = False) -> Case:
    """A hand-sized case: the bundled exercise ``id``'s Q, K, V (every head, ``B = 1``) and its mask, the
    weights and head outputs the exact engine works out for them."""
    ex = hand.exercise(id)
    q, k, v = (hand.stacked(id, s)[None] for s in ("q", "k", "v"))  # [1, H, L, d]
    mask = None
    if not is_causal and ex.allowed() is not None:
        mask = np.array(ex.allowed(), dtype=bool)[None, None]  # [1, 1, L_q, L_k]
    inputs = {"q": q, "k": k, "v": v, "mask": mask, "is_causal": is_causal}
    expected = (hand.stacked(id, "head_output")[None], hand.stacked(id, "weights")[None])
    return _case(case_id, inputs, "float64", given=(*given, f"exercise:{id}"), expected=expected,
                 hand_sized=True)


def _qkv(rng: np.random.Generator, B: int, H: int, L_q: int, L_k: int, d_k: int, d_v: int) -> dict[str, Any]:
    """Q, K, V with entries in [-1.5, 1.5] to 3 decimals: scores of a unit or two, far from one-hot."""
    def u(*shape: int) -> Array:
        return rng.uniform(-1.5, 1.5, size=shape).round(3)
    return {"q": u(B, H, L_q, d_k), "k": u(B, H, L_k, d_k), "v": u(B, H, L_k, d_v), "mask": None,
            "is_causal": False}


def cases() -> tuple[Case, ...]:
    """Four hand-sized cases (bundled exercises: no mask, a fully masked row, a causal mask, L_q ≠ L_k) and
    generated ones: B = 2, H ≥ 2, float32 and float64, L_q ≠ L_k, d_v ≠ d_k, a causal mask, key padding
    (``[B, 1, 1, L_k]``), a 2-D mask, and fully masked rows in a per-head ``[B, H, L_q, L_k]`` mask."""
    rng = np.random.default_rng(2102)
    cross = _qkv(rng, 2, 2, 3, 5, 4, 3)
    square = _qkv(rng, 2, 3, 4, 4, 4, 4)
    causal64 = {**_qkv(rng, 2, 2, 5, 5, 4, 4), "is_causal": True}
    causal32 = {**_qkv(rng, 2, 3, 4, 4, 2, 3), "is_causal": True}
    padded = _qkv(rng, 2, 2, 3, 4, 4, 4)
    keep = np.ones((2, 4), dtype=bool)
    keep[0, 0] = keep[1, 2:] = False  # member 0 left-padded, member 1 right-padded
    padded["mask"] = keep[:, None, None, :]  # [B, 1, 1, L_k]
    plain2d = _qkv(rng, 2, 2, 4, 4, 3, 3)
    plain2d["mask"] = np.array([[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 0, 1], [1, 0, 0, 1]], dtype=bool)  # [L_q, L_k]
    empty = _qkv(rng, 2, 2, 4, 4, 4, 4)
    rows = rng.uniform(size=(2, 2, 4, 4)) < 0.7
    rows[:, :, :, 0] = True
    rows[0, 0, 1, :] = rows[1, 1, 3, :] = False  # a query of head 0 and one of head 1 with no key
    rows[1, 0, :, 2] = False
    empty["mask"] = rows  # [B, H, L_q, L_k]
    return (
        _from_exercise("single-head-asym-3x4", "hand-asym", (phrase("no_mask"), "W_Q ≠ W_K")),
        _from_exercise("fully-masked-row-3x3", "hand-masked-row", (phrase("mask_shape", shape="[1, 1, L, L]"), phrase("query_no_key"))),
        _from_exercise("two-head-causal-3x4", "hand-causal", ("is_causal=True",), is_causal=True),
        _from_exercise("cross-attention-2x3", "hand-cross", ("L_q ≠ L_k",)),
        _case("cross-d_v", cross, "float64", given=("L_q = 3, L_k = 5", "d_v = 3 ≠ d_k = 4")),
        _case("square-float32", square, "float32", given=(phrase("no_mask"), "float32")),
        _case("causal", causal64, "float64", given=("is_causal=True",)),
        _case("causal-float32", causal32, "float32", given=("is_causal=True", "d_v ≠ d_k", "float32")),
        _case("key-padding", padded, "float64", given=(phrase("key_padding_shape", shape="[B, 1, 1, L_k]"), "L_q ≠ L_k")),
        _case("mask-2d-float32", plain2d, "float32", given=(phrase("mask_shape", shape="[L_q, L_k]"), "float32")),
        _case("fully-masked-rows", empty, "float64", given=(phrase("mask_shape", shape="[B, H, L_q, L_k]"), phrase("queries_no_key"))),
    )


KATA = Kata(
    id="sdpa",
    numpy_name="scaled_dot_product_attention",
    torch_name="scaled_dot_product_attention",
    outputs=(Output("out", ("B", "H", "L_q", "d_v")), Output("weights", ("B", "H", "L_q", "L_k"))),
    reference=reference,
    cases=cases,
    mistakes=(
        Mistake.of("no_scaling"),
        Mistake.of("scale_d_k"),
        Mistake.of("kq_transposed"),
        Mistake.of("softmax_columns"),
        Mistake.of("softmax_columns", "softmax_columns", "guarded_columns"),
        Mistake.of("times_k"),
        Mistake.of("mask_inverted"),
        Mistake.of("mask_added"),
        Mistake.of("no_mask"),
        Mistake.of("mask_after_softmax"),
        Mistake.of("empty_row_nan"),
        Mistake.of("empty_row_uniform"),
        Mistake.of("mask_upper"),
        Mistake.of("mask_diagonal"),
        Mistake.of("causal_ignored"),
    ),
    follow_ups=("why-scale", "fully-masked-row", "mask-polarity", "stable-softmax", "cache-causal"),
    dtype_of={"scaled_dot_product_attention": "q"},  # the starter: "in the dtype of q"
)
