"""The ``gqa`` kata: grouped-query attention, H query heads sharing G K/V heads (MQA when G = 1).

The learner writes ``grouped_query_attention(q, k, v, is_causal=False) ->
(out, weights)``, in NumPy on arrays or in PyTorch on tensors (the same name;
a file that imports ``torch`` is the PyTorch flavour).

Conventions (pinned by issue 21): ``q [B, H, L, d_k]``, ``k [B, G, L, d_k]``,
``v [B, G, L, d_v]``, ``H`` a multiple of ``G`` (``num_kv_heads``); query head
``h`` reads K/V head ``h // (H // G)``: the K/V heads expanded in
``repeat_interleave`` order ``[A, A, B, B]``, as PyTorch's
``scaled_dot_product_attention(..., enable_gqa=True)`` does (checked against
torch 2.13 by the tests); ``is_causal`` top-left (query ``i`` sees keys
``j ≤ i``); ``out [B, H, L, d_v]``, ``weights [B, H, L, L]`` (one row of
weights per query head).  Formulas: Vaswani et al. 2017, eq. 1 per query head;
grouping from Ainslie et al. 2023 (GQA), Shazeer 2019 (MQA).

Catalogued here beyond :func:`tutor.katas.attention.attend`'s slips:
``kv_tile_order`` (the K/V heads tiled ``[A, B, A, B]``; choosing K/V head
``h % G`` for query head ``h`` is the same code and the same numbers, so one
mistake names both), the causal mask on the wrong triangle (``causal_upper``),
without the diagonal (``causal_diagonal``), and the weights returned one per
K/V head (``[B, G, L, L]``, recognised by its shape: :func:`_weights_per_kv_head`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from . import hand
from .attention import attend
from .kata import Array, Case, Kata, Mistake, Output, Phrase, phrase

__all__ = ["KATA", "causal_mask", "expand_kv", "reference"]


def expand_kv(t: Array, num_heads: int, slips: frozenset[str] = frozenset()) -> Array:
    """``[B, G, L, d] -> [B, H, L, d]``: K/V head ``g`` repeated for query heads ``g·r … g·r + r − 1``
    (``r = H // G``, ``repeat_interleave``), or tiled ``[A, B, A, B]`` (slip ``kv_tile_order``)."""
    r = num_heads // t.shape[1]
    return np.tile(t, (1, r, 1, 1)) if "kv_tile_order" in slips else np.repeat(t, r, axis=1)


def causal_mask(L_q: int, L_k: int, slips: frozenset[str] = frozenset()) -> Array:
    """``[L_q, L_k]`` bool, True = may attend: top-left causal (``j ≤ i``), or the wrong triangle
    (``causal_upper``: ``j ≥ i``), or without the diagonal (``causal_diagonal``: ``j < i``)."""
    i, j = np.arange(L_q)[:, None], np.arange(L_k)[None, :]
    if "causal_upper" in slips:
        return j >= i
    if "causal_diagonal" in slips:
        return j < i
    return j <= i


def reference(inputs: Mapping[str, Any], slips: frozenset[str]) -> tuple[Array, Array]:
    """``(out [B, H, L, d_v], weights [B, H, L, L])`` of grouped-query attention on ``inputs``
    (``q``, ``k``, ``v``, ``is_causal``), made with ``slips``.  Every slip runs on every case (``L_q = L_k``;
    ``times_k`` gives ``out [B, H, L, d_k]``), so this is never ``None``."""
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    H = q.shape[1]
    k, v = expand_kv(k, H, slips), expand_kv(v, H, slips)
    allowed = causal_mask(q.shape[2], k.shape[2], slips) if inputs["is_causal"] else None
    if "times_k" in slips:  # weights @ k: out has d_k columns, whatever d_v is
        return attend(q, k, k, allowed, slips - {"times_k"})
    return attend(q, k, v, allowed, slips)


def _case(id: str, inputs: dict[str, Any], dtype: str, *, given: tuple[str | Phrase, ...] = (),
          expected: tuple[Array, ...] = (), hand_sized: bool = False) -> Case:
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    B, H, L, d_k = q.shape
    return Case(
        id, inputs, dtype, {"B": B, "H": H, "G": k.shape[1], "L": L, "d_k": d_k, "d_v": v.shape[-1]},
        expected or reference(inputs, frozenset()), args=(q, k, v), kwargs={"is_causal": True} if inputs["is_causal"] else {},
        given=given, hand=hand_sized)


def _from_exercise(id: str, case_id: str, given: tuple[str | Phrase, ...]) -> Case:
    """A hand-sized case: the bundled exercise ``id``'s per-head Q, K, V (K/V head ``g`` from the first query
    head that reads it), the weights and head outputs exact."""
    ex = hand.exercise(id)
    H, G = ex.num_heads, ex.num_kv_heads
    r = H // G
    inputs = {"q": hand.stacked(id, "q")[None],
              "k": np.stack([hand.step(id, "k", g * r) for g in range(G)])[None],
              "v": np.stack([hand.step(id, "v", g * r) for g in range(G)])[None],
              "is_causal": ex.mask_kind == "causal"}
    expected = (hand.stacked(id, "head_output")[None], hand.stacked(id, "weights")[None])
    return _case(case_id, inputs, "float64", given=(*given, f"exercise:{id}"), expected=expected, hand_sized=True)


def _generated(rng: np.random.Generator, B: int, H: int, G: int, L: int, d_k: int, d_v: int,
               is_causal: bool) -> dict[str, Any]:
    """Entries in [-2, 2] rounded to 3 decimals: scores of a few units, weights far from one-hot and from uniform."""
    def u(*shape: int) -> Array:
        return rng.uniform(-2.0, 2.0, size=shape).round(3)
    return {"q": u(B, H, L, d_k), "k": u(B, G, L, d_k), "v": u(B, G, L, d_v), "is_causal": is_causal}


def cases() -> tuple[Case, ...]:
    """Two hand-sized cases (GQA H = 4, G = 2, and MQA) and generated ones: B = 2; G = 2 of H = 4 and G = 3 of
    H = 6 (where tile and repeat_interleave differ in every head but the first and last); MQA; causal and not;
    d_v = d_k and d_v ≠ d_k; float32 and float64."""
    rng = np.random.default_rng(2105)
    return (
        _from_exercise("gqa-four-heads-2x4", "hand-gqa", (phrase("no_mask"),)),
        _from_exercise("mqa-two-heads-3x4", "hand-mqa", ("MQA", phrase("no_mask"))),
        _case("gqa-4-of-2", _generated(rng, 2, 4, 2, 4, 3, 3, False), "float64", given=(phrase("no_mask"),)),
        _case("gqa-6-of-3-causal", _generated(rng, 2, 6, 3, 5, 4, 2, True), "float32",
              given=("is_causal=True",)),
        _case("mqa-causal", _generated(rng, 2, 3, 1, 4, 2, 2, True), "float64",
              given=("MQA", "is_causal=True")),
        _case("gqa-6-of-3-float64", _generated(rng, 2, 6, 3, 3, 2, 3, False), "float64",
              given=(phrase("no_mask"),)),
        _case("gqa-8-of-2-causal", _generated(rng, 2, 8, 2, 4, 3, 3, True), "float32",
              given=("is_causal=True",)),
    )


def _weights_per_kv_head(case: Case, outputs: tuple[Array, ...], passed: Mapping[str, bool]) -> bool:
    """The weights came back one per K/V head, ``[B, G, L, L]``, where ``[B, H, L, L]`` is wanted (G < H)."""
    s = case.sizes
    shape = getattr(outputs[1], "shape", None) if len(outputs) > 1 else None
    return s["G"] != s["H"] and shape is not None and tuple(shape) == (s["B"], s["G"], s["L"], s["L"])


KATA = Kata(
    id="gqa",
    numpy_name="grouped_query_attention",
    torch_name="grouped_query_attention",
    outputs=(Output("out", ("B", "H", "L", "d_v")), Output("weights", ("B", "H", "L", "L"))),
    reference=reference,
    cases=cases,
    mistakes=(
        Mistake.of("kv_tile_order"),
        Mistake("weights_per_kv_head", judge=_weights_per_kv_head),
        Mistake.of("no_scaling"),
        Mistake.of("kq_transposed"),
        Mistake.of("softmax_columns"),
        Mistake.of("times_k"),
        Mistake.of("no_mask"),
        Mistake.of("mask_upper", "causal_upper"),
        # a causal mask without the diagonal leaves query 0 no key: NaN with a -inf fill, uniform with -1e9
        Mistake.of("mask_diagonal", "causal_diagonal", "empty_row_nan"),
        Mistake.of("mask_diagonal", "causal_diagonal", "empty_row_uniform"),
        # tril taken as the keys to block: the last query has no key left (NaN with -inf, uniform with -1e9)
        Mistake.of("mask_inverted", "mask_inverted", "empty_row_nan"),
        Mistake.of("mask_inverted", "mask_inverted", "empty_row_uniform"),
    ),
    follow_ups=("gqa", "kv-cache-memory", "kv-cache", "why-scale"),
)
