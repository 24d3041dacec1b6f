"""The ``mha`` kata: the seed's multi-head attention module, as the interview asks for it.

The learner writes, in NumPy, ``multi_head_attention(x, qkv_weight, qkv_bias,
out_weight, out_bias, num_heads, mask=None) -> (out, weights)``, or in PyTorch
the class ``MultiHeadAttention(d_model, num_heads, dropout=0.0)`` with
submodules ``qkv = nn.Linear(d_model, 3 * d_model)`` and ``out_proj =
nn.Linear(d_model, d_model)`` and ``forward(x, mask=None) -> (out, weights)``.

Conventions (pinned by issue 21): ``x [B, L, D]``; ``qkv_weight [3·D, D]``
and ``qkv_bias [3·D]`` in ``nn.Linear``'s layout (``x @ qkv_weight.T +
qkv_bias``), rows ordered Q, K, V, each third split into heads in order (head
``h`` takes rows ``h·D/H … (h+1)·D/H − 1`` of its third); ``out_weight [D, D]``,
``out_bias [D]``; ``mask`` boolean, broadcastable to ``[B, H, L, L]``, True =
may attend; ``out [B, L, D]``, ``weights [B, H, L, L]``; a query that may
attend to no key gets zero weights.  Formulas: Vaswani et al. 2017, eq. 1 and
§3.2.2.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import permutations
from typing import Any

import numpy as np

from . import hand
from .attention import NotApplicable, attend, merge_heads, split_heads
from .kata import Array, Case, Kata, Mistake, Output, Phrase, phrase

__all__ = ["KATA", "reference"]

_ORDERS = tuple("".join(p) for p in permutations("qkv") if "".join(p) != "qkv")


def reference(inputs: Mapping[str, Any], slips: frozenset[str]) -> tuple[Array, Array] | None:
    """``(out [B, L, D], weights [B, H, L, L])`` of the module on ``inputs``, made with ``slips``.

    Slips beyond :func:`tutor.katas.attention.attend`'s: ``qkv_order_<abc>`` (the three thirds
    taken as ``a``, ``b``, ``c``: ``qkv_order_kqv`` reads Q from K's rows), ``qkv_interleaved``
    (``view(B, L, H, 3, d_k)``: the fused rows read as head by head, Q/K/V inside each),
    ``no_out_proj``, ``no_out_bias``, ``heads_averaged`` (the weights returned averaged over
    the heads, ``[B, L, L]``).  ``None`` when the slips' shapes do not chain.
    """
    x = inputs["x"]
    B, L, D = x.shape
    H = inputs["num_heads"]
    qkv = x @ inputs["qkv_weight"].T + inputs["qkv_bias"]
    if "qkv_interleaved" in slips:
        parts = qkv.reshape(B, L, H, 3, D // H)
        q, k, v = (parts[:, :, :, i, :].reshape(B, L, D) for i in range(3))
    else:
        thirds = {"q": qkv[..., :D], "k": qkv[..., D:2 * D], "v": qkv[..., 2 * D:]}
        order = next((o for o in _ORDERS if f"qkv_order_{o}" in slips), "qkv")
        q, k, v = (thirds[c] for c in order)
    q, k, v = (split_heads(t, H, slips) for t in (q, k, v))
    try:
        context, weights = attend(q, k, v, inputs["mask"], slips, d_model=D)
    except NotApplicable:
        return None
    out = merge_heads(context, slips)
    if "no_out_proj" not in slips:
        out = out @ inputs["out_weight"].T + (0.0 if "no_out_bias" in slips else inputs["out_bias"])
    if "heads_averaged" in slips:
        weights = weights.mean(axis=1)
    return out, weights


def _case(id: str, inputs: dict[str, Any], dtype: str, *, given: tuple[str | Phrase, ...] = (), expected: tuple[Array, ...] = (),
          hand_sized: bool = False, dropout: float | None = None, twin: str | None = None) -> Case:
    x, mask = inputs["x"], inputs["mask"]
    B, L, D = x.shape
    H = inputs["num_heads"]
    right = reference(inputs, frozenset())
    assert right is not None
    weights = ("qkv_weight", "qkv_bias", "out_weight", "out_bias")
    return Case(
        id, inputs, dtype, {"B": B, "L": L, "D": D, "H": H, "d_k": D // H}, expected or right,
        args=(x, *(inputs[w] for w in weights), H), kwargs={} if mask is None else {"mask": mask},
        init=(D, H) if dropout is None else (D, H, dropout),
        load={"qkv.weight": inputs["qkv_weight"], "qkv.bias": inputs["qkv_bias"],
              "out_proj.weight": inputs["out_weight"], "out_proj.bias": inputs["out_bias"]},
        module_args=(x,), module_kwargs={} if mask is None else {"mask": mask},
        given=given, hand=hand_sized, only="torch" if dropout else None, twin=twin)


def _from_exercise(id: str, case_id: str, given: tuple[str | Phrase, ...]) -> Case:
    """A hand-sized case: the bundled exercise ``id``'s numbers in the module's layout, its values exact."""
    ex = hand.exercise(id)
    D, H = ex.d_model, ex.num_heads

    def fused(name: str) -> Array:  # [D, D] in x @ W form: every head's columns side by side
        return np.hstack([hand.array(getattr(h, name)) for h in ex.heads])

    def bias(name: str) -> Array:
        return np.concatenate([hand.array(getattr(h, name)) if getattr(h, name) else np.zeros(D // H) for h in ex.heads])

    w_o = hand.array(ex.w_o)
    inputs = {
        "x": hand.array(ex.x)[None], "num_heads": H,
        "qkv_weight": np.vstack([fused("w_q").T, fused("w_k").T, fused("w_v").T]),
        "qkv_bias": np.concatenate([bias("b_q"), bias("b_k"), bias("b_v")]),
        "out_weight": w_o.T, "out_bias": hand.array(ex.b_o) if ex.b_o else np.zeros(D),
        "mask": None if ex.allowed() is None else np.array(ex.allowed(), dtype=bool)[None, None],
    }
    expected = (hand.step(id, "output")[None], hand.stacked(id, "weights")[None])
    return _case(case_id, inputs, "float64", given=(*given, f"exercise:{id}"), expected=expected, hand_sized=True)


def _generated(rng: np.random.Generator, B: int, L: int, D: int, H: int) -> dict[str, Any]:
    """Numbers far from one-hot: entries in [-1, 1] (scores of a few units), Q ≠ K ≠ V, biases nonzero."""
    def u(*shape: int) -> Array:
        return rng.uniform(-1.0, 1.0, size=shape).round(3)
    return {"x": u(B, L, D), "num_heads": H, "qkv_weight": u(3 * D, D), "qkv_bias": u(3 * D) / 4,
            "out_weight": u(D, D), "out_bias": u(D) / 4, "mask": None}


def cases() -> tuple[Case, ...]:
    """The hand-sized cases (two bundled exercises) and generated ones: B = 2, H ≥ 2, d_k ≥ 2, float32 and
    float64, a causal mask, key padding, a fully masked row, and (PyTorch) dropout left on in eval."""
    rng = np.random.default_rng(21)
    plain = _generated(rng, 2, 4, 8, 2)
    causal = _generated(rng, 2, 5, 6, 3)
    causal["mask"] = np.tril(np.ones((5, 5), dtype=bool))
    padded = _generated(rng, 2, 4, 8, 4)
    keep = np.ones((2, 4), dtype=bool)
    keep[1, 3] = keep[0, 2:] = False
    padded["mask"] = keep[:, None, None, :]
    empty = _generated(rng, 2, 3, 4, 2)
    rows = np.ones((2, 1, 3, 3), dtype=bool)
    rows[0, 0, 1, :] = False
    rows[1, 0, :, 0] = False
    empty["mask"] = rows
    return (
        _from_exercise("two-head-fused-3x4", "hand-fused", (phrase("biases"),)),
        _from_exercise("two-head-causal-3x4", "hand-causal", (phrase("causal_mask"),)),
        _case("batch-2x4", plain, "float64", given=(phrase("no_mask"),)),
        _case("causal-float32", causal, "float32", given=(phrase("causal_mask_shape", shape="[L, L]"),)),
        _case("key-padding", padded, "float64", given=(phrase("key_padding_shape", shape="[B, 1, 1, L]"),)),
        _case("fully-masked-row", empty, "float64", given=(phrase("query_no_key_to_attend"),)),
        _case("dropout-eval", plain, "float64", given=("dropout=0.5, .eval()",), dropout=0.5, twin="batch-2x4"),
    )


def _dropout_left_on(case: Case, outputs: tuple[Array, ...], passed: Mapping[str, bool]) -> bool:
    """Dropout left on in eval: the case built with dropout fails, its twin without dropout passed."""
    return case.twin is not None and passed.get(case.twin, False)


KATA = Kata(
    id="mha",
    numpy_name="multi_head_attention",
    torch_name="MultiHeadAttention",
    outputs=(Output("out", ("B", "L", "D")), Output("weights", ("B", "H", "L", "L"))),
    reference=reference,
    cases=cases,
    mistakes=(
        Mistake.of("no_scaling"),
        Mistake.of("scale_sqrt_d_model"),
        Mistake.of("scale_d_k"),
        Mistake.of("kq_transposed"),
        Mistake.of("softmax_columns"),
        Mistake.of("softmax_columns", "softmax_columns", "guarded_columns"),
        Mistake.of("times_k"),
        Mistake.of("no_softmax"),
        *(Mistake.of("qkv_order", f"qkv_order_{o}", order=", ".join(o.upper())) for o in _ORDERS),
        Mistake.of("qkv_interleaved"),
        Mistake.of("heads_split_reshape"),
        Mistake.of("heads_merge_reshape"),
        Mistake.of("mask_inverted"),
        Mistake.of("mask_added"),
        Mistake.of("no_mask"),
        Mistake.of("mask_after_softmax"),
        Mistake.of("empty_row_nan"),
        Mistake.of("empty_row_uniform"),
        Mistake.of("heads_averaged"),
        Mistake.of("no_out_proj"),
        Mistake.of("no_out_bias"),
        Mistake("dropout_in_eval", judge=_dropout_left_on),
    ),
    follow_ups=("why-scale", "fully-masked-row", "w-o-role", "why-heads", "fused-qkv"),
)
