"""The ``cross`` kata: cross-attention, the decoder's queries over the encoder's states.

The learner writes ``cross_attention(x, memory, w_q, w_k, w_v, w_o,
num_heads, key_padding_mask=None) -> (out, weights)``, in NumPy or (the same
name, tensors in and out) in PyTorch.

Conventions (pinned by issue 21): ``x [B, L_q, D]`` the decoder's tokens
(the queries), ``memory [B, L_k, D]`` the encoder's states (the keys and the
values); ``w_q``, ``w_k``, ``w_v``, ``w_o`` each ``[D, D]`` in
``nn.Linear``'s layout (``y = x @ w.T``), no biases; head ``h`` takes rows
``h·D/H … (h+1)·D/H − 1`` of ``w_q``, ``w_k``, ``w_v`` (``view(B, L, H,
d_k).transpose(1, 2)``); ``key_padding_mask [B, L_k]`` bool, True = a padding
key of the memory (``nn.MultiheadAttention``'s polarity), or ``None``;
``out [B, L_q, D]``, ``weights [B, H, L_q, L_k]``.  The same layer as
``nn.MultiheadAttention(D, H, bias=False, batch_first=True)`` called as
``mha(x, memory, memory, key_padding_mask=...,
average_attn_weights=False)`` with ``in_proj_weight = cat(w_q, w_k, w_v)``
and ``out_proj.weight = w_o``.  Formulas: Vaswani et al. 2017, eq. 1 and
§3.2.2, the "encoder-decoder attention" of §3.2.3.

Pure NumPy: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..exercise.load import exercise_from_data
from ..exercise.record import Exercise
from ..steps import solve
from .attention import attend, merge_heads, split_heads
from .kata import Array, Case, Kata, Mistake, Output, Phrase, phrase

__all__ = ["KATA", "reference"]


def reference(inputs: Mapping[str, Any], slips: frozenset[str]) -> tuple[Array, Array] | None:
    """``(out [B, L_q, D], weights [B, H, L_q, L_k])`` on ``inputs``, made with ``slips``.

    Slips beyond :func:`tutor.katas.attention.attend`'s and the heads' (``heads_split_reshape``,
    ``heads_merge_reshape``): ``sources_swapped`` (Q from ``memory``, K and V from ``x``), ``kv_from_x``
    (K and V from ``x`` too: self-attention), ``weights_not_transposed`` (``x @ w`` for every
    projection), ``guarded_columns`` (with ``softmax_columns``: a padding key's column zero, not NaN,
    as a softmax whose 0/0 is guarded gives it), ``padding_rows`` (the key padding on the query rows),
    ``padding_polarity`` (``key_padding_mask`` read as True = keep), ``no_out_proj``.  ``None`` when
    the slips' shapes do not chain (a padding mask of ``L_k`` keys against another length: the
    learner's masking line raises).
    """
    x, memory, H = inputs["x"], inputs["memory"], inputs["num_heads"]
    B, L_q, D = x.shape

    def linear(t: Array, w: Array) -> Array:
        return t @ w if "weights_not_transposed" in slips else t @ w.T

    q_src, kv_src = (memory, x) if "sources_swapped" in slips else (x, x) if "kv_from_x" in slips else (x, memory)
    q = split_heads(linear(q_src, inputs["w_q"]), H, slips)  # [B, H, L_q, d_k]
    k = split_heads(linear(kv_src, inputs["w_k"]), H, slips)  # [B, H, L_k, d_k]
    v = split_heads(linear(kv_src, inputs["w_v"]), H, slips)
    allowed = None
    pad = inputs.get("key_padding_mask")
    if pad is not None:
        keep = pad if "padding_polarity" in slips else ~pad  # [B, L_k], True = a real key
        allowed = keep[:, None, :, None] if "padding_rows" in slips else keep[:, None, None, :]
        try:
            np.broadcast_shapes(allowed.shape, (B, H, q.shape[2], k.shape[2]))
        except ValueError:
            return None  # the learner's masking line raises
    context, weights = attend(q, k, v, allowed, slips)
    if "guarded_columns" in slips:
        weights = np.nan_to_num(weights, nan=0.0)
        context = weights @ v
    out = merge_heads(context, slips)  # [B, L_q, D]
    if "no_out_proj" not in slips:
        out = linear(out, inputs["w_o"])
    return out, weights


def _case(id: str, inputs: dict[str, Any], dtype: str, *, given: tuple[str | Phrase, ...],
          expected: tuple[Array, ...] = (), hand_sized: bool = False) -> Case:
    x, memory, H = inputs["x"], inputs["memory"], inputs["num_heads"]
    B, L_q, D = x.shape
    right = reference(inputs, frozenset())
    assert right is not None
    pad = inputs.get("key_padding_mask")
    return Case(id, inputs, dtype,
                {"B": B, "L_q": L_q, "L_k": memory.shape[1], "D": D, "H": H, "d_k": D // H}, expected or right,
                args=(x, memory, *(inputs[w] for w in ("w_q", "w_k", "w_v", "w_o")), H),
                kwargs={} if pad is None else {"key_padding_mask": pad}, given=given, hand=hand_sized)


#: The hand-sized layer: D = 4, two heads of d_k = 2, two decoder tokens over three encoder states (the
#: last one padding in one case).  Math layout (``x @ W``), the fused form: head h takes columns 2h, 2h + 1;
#: entries 0 and 1 chosen so that no two allowed weights of a row tie and every mistake but the padding's
#: on the rows (which raises when L_q ≠ L_k) changes one of the two cases.
HAND: dict[str, Any] = {
    "id": "cross-kata-2x3", "title": "Cross-attention, two heads: 2 decoder tokens over 3 encoder states",
    "num_heads": 2,
    "tokens": ["je", "suis"], "x": [[0, 1, 1, 0], [0, 0, 1, 0]],
    "kv_tokens": ["I", "am", "here"], "x_kv": [[1, 1, 1, 1], [0, 0, 1, 0], [1, 0, 0, 0]],
    "w_q": [[1, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 1], [0, 0, 1, 1]],
    "w_k": [[0, 0, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1], [0, 0, 0, 1]],
    "w_v": [[0, 1, 0, 1], [0, 1, 1, 0], [0, 1, 1, 1], [1, 1, 0, 0]],
    "w_o": [[1, 1, 0, 0], [0, 1, 1, 0], [1, 0, 1, 1], [1, 0, 1, 0]],
}


def _exact(ex: Exercise) -> tuple[Array, Array]:
    """``(out [1, L_q, D], weights [1, H, L_q, L_k])`` of ``ex``, worked out exactly (:func:`tutor.steps.solve`)."""
    sol = solve(ex)
    out = np.array(sol.step("output", None).value, dtype=np.float64)
    weights = np.stack([np.array(sol.step("weights", h).value, dtype=np.float64) for h in range(ex.num_heads)])
    return out[None], weights[None]


def _hand(case_id: str, padded: bool) -> Case:
    """The hand-sized case, its values from the exact engine, with the padding key or without it."""
    data = {**HAND, "key_padding_mask": [False, False, True]} if padded else HAND
    ex = exercise_from_data(data, filename=f"<{case_id}>")

    def linear(w: str) -> Array:  # the math layout's [D, D] as nn.Linear's: its transpose
        return np.array(HAND[w], dtype=np.float64).T

    inputs = {"x": np.array(HAND["x"], dtype=np.float64)[None], "memory": np.array(HAND["x_kv"], dtype=np.float64)[None],
              "w_q": linear("w_q"), "w_k": linear("w_k"), "w_v": linear("w_v"), "w_o": linear("w_o"), "num_heads": 2,
              "key_padding_mask": np.array([[False, False, True]]) if padded else None}
    given = ("L_q = 2, L_k = 3", phrase("two_heads"), phrase("last_key_padding") if padded else phrase("no_padding"))
    return _case(case_id, inputs, "float64", given=given, expected=_exact(ex), hand_sized=True)


def _generated(rng: np.random.Generator, B: int, L_q: int, L_k: int, D: int, H: int) -> dict[str, Any]:
    """Entries in [-1, 1] to 3 decimals (scores of a few units, far from one-hot), x ≠ memory, four weights."""
    def u(*shape: int) -> Array:
        return rng.uniform(-1.0, 1.0, size=shape).round(3)
    return {"x": u(B, L_q, D), "memory": u(B, L_k, D), "w_q": u(D, D), "w_k": u(D, D), "w_v": u(D, D),
            "w_o": u(D, D), "num_heads": H, "key_padding_mask": None}


def cases() -> tuple[Case, ...]:
    """Two hand-sized cases (the exact engine's, with and without a padding key) and generated ones:
    B = 2, H ≥ 2, L_q < L_k and L_q > L_k, float32 and float64, key padding (every member with a real
    key and a padding key), and one case with L_q = L_k, where a mask on the query rows still runs."""
    rng = np.random.default_rng(2104)
    plain = _generated(rng, 2, 3, 5, 8, 2)
    padded = _generated(rng, 2, 4, 6, 6, 3)
    padded["key_padding_mask"] = np.array([[False] * 4 + [True] * 2, [True] + [False] * 4 + [True]])
    longer = _generated(rng, 2, 5, 3, 4, 2)
    square = _generated(rng, 2, 4, 4, 8, 4)
    square["key_padding_mask"] = np.array([[False, False, False, True], [True, False, True, False]])
    return (
        _hand("hand-padded", True),
        _hand("hand", False),
        _case("L_q<L_k", plain, "float64", given=("L_q = 3, L_k = 5", phrase("no_padding"))),
        _case("padded-float32", padded, "float32", given=("L_q = 4, L_k = 6", phrase("key_padding"), "float32")),
        _case("L_q>L_k", longer, "float64", given=("L_q = 5, L_k = 3", phrase("no_padding"))),
        _case("L_q=L_k-padded", square, "float64", given=("L_q = L_k = 4", phrase("key_padding"), "H = 4")),
    )


KATA = Kata(
    id="cross",
    numpy_name="cross_attention",
    torch_name="cross_attention",
    outputs=(Output("out", ("B", "L_q", "D")), Output("weights", ("B", "H", "L_q", "L_k"))),
    reference=reference,
    cases=cases,
    mistakes=(
        Mistake.of("sources_swapped"),
        Mistake.of("kv_from_x"),
        Mistake.of("weights_not_transposed"),
        Mistake.of("no_scaling"),
        Mistake.of("softmax_columns"),
        Mistake.of("softmax_columns", "softmax_columns", "guarded_columns"),
        Mistake.of("padding_rows"),
        Mistake.of("padding_polarity"),
        Mistake.of("heads_split_reshape"),
        Mistake.of("heads_merge_reshape"),
        Mistake.of("no_out_proj"),
    ),
    follow_ups=("cross-attention-shapes", "k-v-separate", "mask-polarity", "w-o-role", "why-heads"),
)
