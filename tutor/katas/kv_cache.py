"""The ``kv-cache`` kata: one decode step of multi-head attention against a KV cache.

The learner writes ``decode_step(x_new, w_q, w_k, w_v, w_o, num_heads,
k_cache, v_cache) -> (out, k_cache, v_cache)``, in NumPy on arrays or in
PyTorch on tensors (the same name; a file that imports ``torch`` is the
PyTorch flavour).

Conventions (pinned by issue 21): ``x_new [B, T, D]``, the inputs of the ``T
≥ 1`` new tokens; ``w_q``, ``w_k``, ``w_v``, ``w_o`` ``[D, D]`` in
``nn.Linear``'s layout (``y = x @ w.T``), no biases; ``k_cache``, ``v_cache``
``[B, H, P, d_k]``: the projected keys and values of the ``P`` earlier tokens
(``P`` may be 0), split into heads as a multi-head module splits them (head
``h`` takes columns ``h·d_k … (h+1)·d_k − 1``).  Only the new tokens are
projected; their keys and values are appended below the cache, and the new
token ``i`` (0-based among the new), at position ``P + i``, attends keys ``0 …
P + i``: the causal mask aligned bottom-right (PyTorch's
``torch.nn.attention.bias.causal_lower_right``).  Returns ``out [B, T, D]``
(the heads merged, then ``@ w_o.T``) and the caches with the new rows
appended, ``[B, H, P + T, d_k]``.  ``out`` equals the last ``T`` rows of a
causal forward over all ``P + T`` tokens (checked by the tests).  Formulas:
Vaswani et al. 2017, eq. 1 and §3.2.2; the cache: Pope et al. 2022.

Slips beyond :func:`tutor.katas.attention.attend`'s (and :func:`split_heads`,
:func:`merge_heads`'): ``decode_top_left`` (the mask ``tril(ones(T, P + T))``:
new token ``i`` sees keys ``0 … i``), ``cache_not_appended`` (the new keys and
values never appended: the step attends the past only and returns the old
caches), ``cache_reprojected`` (the cached rows merged back to ``[B, P, D]``
and multiplied by ``w_k``/``w_v`` again, as if the cache held inputs),
``cache_prepended`` (the new rows put before the cache), ``cache_kv_swapped``
(the two caches read the wrong way round: the values' cache used as keys),
``cache_returned_swapped`` (the caches returned in the wrong order),
``no_out_proj``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from . import hand
from .attention import NotApplicable, attend, merge_heads, split_heads
from .kata import Array, Case, Kata, Mistake, Output, Phrase, phrase

__all__ = ["KATA", "full_forward", "reference"]


def _allowed(T: int, L_k: int, P: int, slips: frozenset[str]) -> Array:
    """``[T, L_k]``, True = may attend: new token ``i`` sees keys ``j ≤ P + i`` (bottom-right), or ``j ≤ i``
    (``decode_top_left``)."""
    i, j = np.arange(T)[:, None], np.arange(L_k)[None, :]
    return j <= i if "decode_top_left" in slips else j <= P + i


def reference(inputs: Mapping[str, Any], slips: frozenset[str]) -> tuple[Array, Array, Array] | None:
    """``(out [B, T, D], k_cache [B, H, P + T, d_k], v_cache [B, H, P + T, d_k])`` of one decode step on
    ``inputs``, made with ``slips``; ``None`` when the slips cannot run (no cache to attend to)."""
    x = inputs["x_new"]
    H = inputs["num_heads"]
    k_cache, v_cache = inputs["k_cache"], inputs["v_cache"]
    if "cache_kv_swapped" in slips:
        k_cache, v_cache = v_cache, k_cache
    P = k_cache.shape[2]
    q, k_new, v_new = (split_heads(x @ inputs[w].T, H, slips) for w in ("w_q", "w_k", "w_v"))
    if "cache_reprojected" in slips:  # the cache taken for inputs: [B, P, D] again, then projected with x_new
        k, v = (split_heads(np.concatenate([merge_heads(c), x], axis=1) @ inputs[w].T, H, slips)
                for c, w in ((k_cache, "w_k"), (v_cache, "w_v")))
    elif "cache_not_appended" in slips:  # the mask j ≤ P + i then keeps every cached key (with T = 1 so would
        # one built from K's length, j ≤ i + L_k − T: the T = 1 cases name this mistake whichever the code built)
        if P == 0:
            return None  # a softmax over no key: the learner's code raises
        k, v = k_cache, v_cache
    elif "cache_prepended" in slips:
        k, v = np.concatenate([k_new, k_cache], axis=2), np.concatenate([v_new, v_cache], axis=2)
    else:
        k, v = np.concatenate([k_cache, k_new], axis=2), np.concatenate([v_cache, v_new], axis=2)
    try:
        context, _ = attend(q, k, v, _allowed(x.shape[1], k.shape[2], P, slips), slips)
    except NotApplicable:
        return None
    out = merge_heads(context, slips)
    if "no_out_proj" not in slips:
        out = out @ inputs["w_o"].T
    return (out, v, k) if "cache_returned_swapped" in slips else (out, k, v)


def full_forward(inputs: Mapping[str, Any]) -> Array:
    """``[B, P + T, D]``: a causal multi-head forward over the earlier tokens' inputs ``past_x`` and ``x_new``
    (what the step's ``out`` is the last ``T`` rows of)."""
    x = np.concatenate([inputs["past_x"], inputs["x_new"]], axis=1)
    H, L = inputs["num_heads"], x.shape[1]
    q, k, v = (split_heads(x @ inputs[w].T, H) for w in ("w_q", "w_k", "w_v"))
    context, _ = attend(q, k, v, np.tril(np.ones((L, L), dtype=bool)))
    return merge_heads(context) @ inputs["w_o"].T


def _case(id: str, inputs: dict[str, Any], dtype: str, *, given: tuple[str | Phrase, ...] = (),
          expected: tuple[Array, ...] = (), hand_sized: bool = False) -> Case:
    x, H = inputs["x_new"], inputs["num_heads"]
    B, T, D = x.shape
    P = inputs["k_cache"].shape[2]
    right = reference(inputs, frozenset())
    assert right is not None
    names = ("x_new", "w_q", "w_k", "w_v", "w_o", "num_heads", "k_cache", "v_cache")
    return Case(id, inputs, dtype, {"B": B, "T": T, "D": D, "H": H, "d_k": D // H, "P": P, "P+T": P + T},
                expected or right, args=tuple(inputs[n] for n in names), given=given, hand=hand_sized)


def _from_exercise(id: str, case_id: str, given: tuple[str | Phrase, ...]) -> Case:
    """A hand-sized case: the bundled decode exercise ``id``'s numbers in the kata's layout (its ``x @ W`` weights
    transposed to ``nn.Linear``'s, ``w_o`` the identity when it has none), the outputs and full caches exact."""
    ex = hand.exercise(id)
    H, D = ex.num_heads, ex.d_model
    assert ex.cache is not None and ex.past_x is not None

    def fused(name: str) -> Array:  # [D, H·d_k] in x @ W form, transposed to nn.Linear's [H·d_k, D]
        return np.hstack([hand.array(getattr(h, name)) for h in ex.heads]).T

    inputs: dict[str, Any] = {
        "x_new": hand.array(ex.x)[None], "num_heads": H,
        "w_q": fused("w_q"), "w_k": fused("w_k"), "w_v": fused("w_v"),
        "w_o": np.eye(D) if ex.w_o is None else hand.array(ex.w_o).T,
        "k_cache": np.stack([hand.array(c.k) for c in ex.cache])[None],
        "v_cache": np.stack([hand.array(c.v) for c in ex.cache])[None],
        "past_x": hand.array(ex.past_x)[None],
    }
    heads = np.hstack([hand.step(id, "head_output", h) for h in range(H)])
    expected = ((heads @ inputs["w_o"].T)[None], hand.stacked(id, "k")[None], hand.stacked(id, "v")[None])
    return _case(case_id, inputs, "float64", given=(*given, f"exercise:{id}"), expected=expected, hand_sized=True)


def _generated(rng: np.random.Generator, B: int, P: int, T: int, D: int, H: int) -> dict[str, Any]:
    """Entries in [-1, 1] (inputs in [-2, 2]) rounded to 3 decimals; the caches are the earlier tokens' ``past_x``
    projected and split into heads, as the steps before this one would have left them."""
    def u(*shape: int, scale: float = 1.0) -> Array:
        return (scale * rng.uniform(-1.0, 1.0, size=shape)).round(3)
    inputs: dict[str, Any] = {"x_new": u(B, T, D, scale=2.0), "num_heads": H, "w_q": u(D, D), "w_k": u(D, D), "w_v": u(D, D),
              "w_o": u(D, D), "past_x": u(B, P, D, scale=2.0)}
    inputs["k_cache"], inputs["v_cache"] = (split_heads(inputs["past_x"] @ inputs[w].T, H) for w in ("w_k", "w_v"))
    return inputs


def cases() -> tuple[Case, ...]:
    """Two hand-sized cases (two new tokens against a 2-token cache; one against a 3-token cache) and generated
    ones: B = 2, H ≥ 2, d_k ≥ 2; T = 1, 2 and 3 (a mask's alignment and the heads' split show only with T ≥ 2);
    an empty cache (P = 0: a causal prefill); float32 and float64."""
    rng = np.random.default_rng(2106)
    return (
        _from_exercise("decode-two-tokens-alignment", "hand-two-new", (phrase("w_o_identity"),)),
        _from_exercise("decode-one-token-cache-3", "hand-one-new", (phrase("w_o_identity"),)),
        _case("two-new-tokens", _generated(rng, 2, 3, 2, 6, 2), "float64", given=(phrase("new_tokens_causal"),)),
        _case("one-new-token-float32", _generated(rng, 2, 4, 1, 6, 3), "float32", given=(phrase("one_new_token"),)),
        _case("empty-cache", _generated(rng, 2, 0, 3, 4, 2), "float64", given=(phrase("empty_cache"),)),
        _case("three-new-float32", _generated(rng, 2, 2, 3, 8, 2), "float32", given=(phrase("new_tokens_causal"),)),
    )


KATA = Kata(
    id="kv-cache",
    numpy_name="decode_step",
    torch_name="decode_step",
    outputs=(Output("out", ("B", "T", "D")), Output("k_cache", ("B", "H", "P+T", "d_k")),
             Output("v_cache", ("B", "H", "P+T", "d_k"))),
    reference=reference,
    cases=cases,
    mistakes=(
        Mistake.of("decode_top_left"),
        Mistake.of("no_mask"),
        Mistake.of("cache_not_appended"),
        Mistake.of("cache_reprojected"),
        Mistake.of("cache_prepended"),
        Mistake.of("cache_kv_swapped"),
        Mistake.of("cache_returned_swapped"),
        Mistake.of("no_scaling"),
        Mistake.of("heads_split_reshape"),
        Mistake.of("heads_merge_reshape"),
        Mistake.of("no_out_proj"),
    ),
    follow_ups=("kv-cache", "cache-causal", "kv-cache-memory", "gqa"),
)
