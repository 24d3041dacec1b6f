"""The ``masks`` kata: the causal mask and the key padding, combined, as a boolean and as an additive mask.

The learner writes ``attention_masks(key_padding_mask, is_causal=True) ->
(allowed, additive)``, in NumPy or (the same name, tensors in and out) in
PyTorch.

Conventions (pinned by issue 21): ``key_padding_mask [B, L]`` bool, True =
a padding key (the polarity of ``nn.MultiheadAttention``'s
``key_padding_mask``); ``allowed [B, 1, L, L]`` bool, True = query ``i`` may
attend key ``j``: ``j ≤ i`` when ``is_causal`` (top-left, PyTorch's
``is_causal``) AND key ``j`` is not padding (the polarity of a bool
``attn_mask`` of ``torch.nn.functional.scaled_dot_product_attention``; the
axis of size 1 is the heads', broadcast over them); ``additive [B, 1, L, L]``
float, 0.0 where allowed and ``-inf`` where not (the float ``attn_mask`` SDPA
adds to the scores, the convention of
``nn.Transformer.generate_square_subsequent_mask``).  A left-padded sequence
with a causal mask leaves its padding queries no key at all: a fully masked
row, which SDPA gives zero weights with ``-inf`` (CPU, torch 2.13); an additive
``-1e9`` or ``-1e4`` is added to the whole row and cancels in the softmax, so
that row attends every key, padding included (in float32 ``-1e9`` swamps the
scores: uniform weights).  The masks: Vaswani et al. 2017, §3.2.3 (the
decoder's masking); the additive form: the ``attn_mask`` of
``torch.nn.functional.scaled_dot_product_attention``.

Pure NumPy: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from . import hand
from .kata import Array, Case, Kata, Mistake, Output, Phrase, phrase
from .sdpa import causal

__all__ = ["KATA", "reference"]

#: The fills of a blocked entry a learner writes instead of ``-inf``: the slip and the number.
FILLS = {"fill_neg_1e9": -1e9, "fill_neg_1e4": -1e4}


def reference(inputs: Mapping[str, Any], slips: frozenset[str]) -> tuple[Array, Array]:
    """``(allowed [B, 1, L, L] bool, additive [B, 1, L, L] float64)`` for ``key_padding_mask`` and
    ``is_causal``, made with ``slips``.

    Slips: ``mask_upper``, ``mask_diagonal`` (the causal part built wrongly: ``j ≥ i``, ``j < i``),
    ``causal_ignored`` (the padding part only), ``causal_always`` (``is_causal=False`` not read),
    ``padding_ignored`` (the causal part only), ``padding_polarity`` (``key_padding_mask`` read as
    True = keep), ``padding_rows`` (the padding on query rows), ``mask_or`` (the parts combined with
    OR), ``allowed_inverted`` (the blocked mask returned as ``allowed``; ``additive`` right),
    ``additive_inverted`` (``additive`` made from the returned, inverted ``allowed``),
    ``additive_bool`` (``allowed`` cast to float: 1/0), ``fill_neg_1e9``/``fill_neg_1e4`` (that number
    instead of ``-inf``), ``no_head_axis`` (both ``[B, L, L]``).
    """
    pad = np.asarray(inputs["key_padding_mask"], dtype=bool)  # [B, L], True = padding
    B, L = pad.shape
    keep = pad if "padding_polarity" in slips else ~pad  # [B, L], True = a real key
    keep = keep[:, None, :, None] if "padding_rows" in slips else keep[:, None, None, :]
    if "padding_ignored" in slips:
        keep = np.ones((B, 1, 1, L), dtype=bool)
    is_causal = bool(inputs["is_causal"]) or "causal_always" in slips
    if is_causal and "causal_ignored" not in slips:
        tri = causal(L, L, slips)[None, None]  # [1, 1, L, L]
        allowed = (tri | keep) if "mask_or" in slips else (tri & keep)
    else:
        allowed = keep
    allowed = np.broadcast_to(allowed, (B, 1, L, L)).copy()
    fill = next((FILLS[s] for s in FILLS if s in slips), -np.inf)
    if "additive_bool" in slips:
        additive = allowed.astype(np.float64)
    else:
        additive = np.where(allowed, 0.0, fill)
    if "allowed_inverted" in slips:
        allowed = ~allowed
        if "additive_inverted" in slips:
            additive = np.where(allowed, 0.0, fill)
    if "no_head_axis" in slips:
        return allowed[:, 0], additive[:, 0]
    return allowed, additive


def _case(id: str, key_padding_mask: Array, is_causal: bool, dtype: str, *, given: tuple[str | Phrase, ...],
          expected: tuple[Array, ...] = (), hand_sized: bool = False) -> Case:
    inputs = {"key_padding_mask": key_padding_mask, "is_causal": is_causal}
    B, L = key_padding_mask.shape
    return Case(id, inputs, dtype, {"B": B, "L": L, "1": 1}, expected or reference(inputs, frozenset()),
                args=(key_padding_mask,), kwargs={"is_causal": is_causal}, given=given, hand=hand_sized)


def _from_exercise(id: str, case_id: str, given: tuple[str | Phrase, ...]) -> Case:
    """A hand-sized case (``B = 1``): the bundled exercise ``id``'s key padding and mask, the allowed keys
    as the exercise record combines them, the additive mask as the exact engine's ``masked`` step has it
    (``-inf`` where blocked, the scaled score where not: 0 there)."""
    ex = hand.exercise(id)
    assert ex.key_padding_mask is not None and ex.allowed() is not None
    pad = np.array(ex.key_padding_mask, dtype=bool)[None]  # [1, L]
    allowed = np.array(ex.allowed(), dtype=bool)[None, None]  # [1, 1, L, L]
    masked = hand.step(id, "masked", 0)  # [L, L]
    additive = np.where(np.isneginf(masked), -np.inf, 0.0)[None, None]
    return _case(case_id, pad, ex.mask_kind == "causal", "float64", given=(*given, f"exercise:{id}"),
                 expected=(allowed, additive), hand_sized=True)


def cases() -> tuple[Case, ...]:
    """Two hand-sized cases (a left-padded causal prompt, key padding alone) and generated ones: B ≥ 2,
    right and left padding, a member without padding, ``is_causal`` True and False, fully masked rows."""
    rng = np.random.default_rng(2103)
    lengths = np.array([3, 5, 4])  # right-padded, no padding, left-padded (below)
    right = np.arange(5)[None, :] >= lengths[:, None]  # [3, 5], True = padding
    right[2] = right[2][::-1]  # member 2: its padding first (a left-padded prompt)
    mixed = rng.uniform(size=(2, 6)) < 0.4
    mixed[:, 1] = False  # a real key in every member
    mixed[0, 0] = mixed[1, 5] = True
    left = np.array([[True, True, False, False], [False, False, False, True]])
    return (
        _from_exercise("causal-left-padding-4x2", "hand-left-padded", ("is_causal=True", phrase("left_padding"))),
        _from_exercise("padding-4x2", "hand-padding", ("is_causal=False", phrase("key_padding"))),
        _case("causal-padded", right, True, "float64", given=("is_causal=True", phrase("right_and_left_padding"))),
        _case("padding-only", mixed, False, "float64", given=("is_causal=False", phrase("scattered_padding"))),
        _case("causal-left", left, True, "float32", given=("is_causal=True", phrase("two_padding_queries_no_key"))),
    )


KATA = Kata(
    id="masks",
    numpy_name="attention_masks",
    torch_name="attention_masks",
    outputs=(Output("allowed", ("B", "1", "L", "L")), Output("additive", ("B", "1", "L", "L"))),
    reference=reference,
    cases=cases,
    mistakes=(
        # first: where is_causal=False the key padding read as True = keep gives what an inverted `allowed`
        # with the additive mask made from it gives, and the judge's first name on a case counts
        Mistake.of("padding_polarity"),
        Mistake.of("allowed_inverted"),
        Mistake.of("allowed_inverted", "allowed_inverted", "additive_inverted"),
        Mistake.of("padding_rows"),
        Mistake.of("mask_upper"),
        Mistake.of("mask_diagonal"),
        Mistake.of("causal_ignored"),
        Mistake.of("causal_always"),
        Mistake.of("padding_ignored"),
        Mistake.of("mask_or"),
        Mistake.of("additive_bool"),
        Mistake.of("mask_large_negative", "fill_neg_1e9", fill="-1e9"),
        Mistake.of("mask_large_negative", "fill_neg_1e4", fill="-1e4"),
        Mistake.of("mask_no_head_axis", "no_head_axis"),
    ),
    follow_ups=("mask-polarity", "mask-combine", "mask-neg-1e9", "fully-masked-row", "cache-causal"),
)
