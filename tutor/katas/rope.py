"""The ``rope`` kata: rotary position embedding, then attention and a KV-cache decode step with it.

The learner writes two functions, in NumPy on arrays or in PyTorch on tensors
(the same names; a file that imports ``torch`` is the PyTorch flavour):

* ``apply_rope(x, positions, base=10000.0, pairing="half") -> x_rot``: ``x
  [..., L, d]`` (``d`` even), ``positions [L]`` integers, ``x_rot`` of ``x``'s
  shape and dtype.  Pair ``i`` (``i = 0 … d/2 − 1``) of the row at position
  ``m`` turns by ``m·θ_i``, ``θ_i = base^(−2i/d)``: ``[a, b] → [a·cos − b·sin,
  a·sin + b·cos]`` (Su et al. 2021, "RoFormer", §3.4.2, eq. 34).  ``half``
  pairs dimensions ``(i, i + d/2)`` (GPT-NeoX, Hugging Face LLaMA's
  ``rotate_half``: ``x·cos + rotate_half(x)·sin`` with ``cos``/``sin`` of
  ``[θ, θ]`` concatenated); ``interleaved`` pairs ``(2i, 2i + 1)`` (RoFormer,
  GPT-J, Meta's LLaMA as complex numbers, ``torch.view_as_complex`` on
  ``[..., d/2, 2]``).
* ``rope_decode_step(q, k, v, k_cache, v_cache, base=10000.0, pairing="half")
  -> (out, k_cache, v_cache)``: ``q``, ``k``, ``v`` ``[B, H, T, d]`` the ``T ≥
  1`` new tokens' heads, projected, not rotated; ``k_cache`` ``[B, H, P, d]``
  the ``P`` earlier tokens' keys, stored already rotated at their positions
  ``0 … P − 1``, ``v_cache`` their values (never rotated).  The new token
  ``i`` sits at position ``P + i``: its query and key turn by that position
  (the cached keys are not turned again), its value does not; it attends the
  keys ``0 … P + i`` (causal, aligned bottom-right) with ``softmax(q·kᵀ/√d)``
  (Vaswani et al. 2017, eq. 1).  Returns ``out [B, H, T, d]`` and the caches
  with the new rows appended, ``[B, H, P + T, d]`` (the new keys rotated).
  ``P = 0`` is the prefill: causal attention with RoPE over ``T`` tokens.

A case calls one of the two (:attr:`tutor.katas.kata.Case.call`).  The slips
of :func:`rotate` (the rotation) and of :func:`decode` (the step) are
:data:`SLIPS`; the step's attention takes :func:`tutor.katas.attention.attend`'s
``no_scaling`` and the top-left mask of :mod:`.kv_cache` (``decode_top_left``).
The rotation is :func:`tutor.numeric.rotary.rotate_pairs` (tested against a
rotation written in torch); the hand-sized cases' values come from the exact
engine (:mod:`tutor.exact.rotary`) through the bundled exercise
``rope-half-causal-3x4``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..numeric.rotary import rotate_pairs
from . import hand
from .attention import attend
from .kata import Array, Case, Kata, Mistake, Output, Phrase, phrase

__all__ = ["DECODE", "KATA", "SLIPS", "decode", "reference", "rotate"]

DECODE = "rope_decode_step"  # the second function a case may call
#: What each slip does, as code (``rotate``'s, then ``decode``'s).
SLIPS = {
    "rope_pairing_swapped": "the other convention's pairs: (2i, 2i+1) for half, (i, i + d/2) for interleaved",
    "rope_half_interleaved_angles": "half: x·cos + rotate_half(x)·sin with cos, sin of repeat_interleave(angles, 2)",
    "rope_interleaved_half_angles": "interleaved: pairs (2i, 2i+1) turned by cos, sin of cat([angles, angles])",
    "rope_theta_no_2": "θ_i = base^(−i/d)",
    "rope_sign": "[a·cos + b·sin, −a·sin + b·cos]: turned by −m·θ_i",
    "rope_positions_ignored": "apply_rope turns row p by p·θ_i (arange(L)), not by positions[p]·θ_i",
    "rope_positions_from_1": "decode: the new tokens at positions P + 1 … P + T",
    "rope_decode_position_0": "decode: the new tokens at positions 0 … T − 1 (arange(T)), not P … P + T − 1",
    "rope_v_rotated": "decode: the new values rotated too",
    "rope_cache_rotated_again": "decode: cat([k_cache, k]) rotated by arange(P + T): the cached keys turned twice",
    "rope_keys_rotated_at_attention": "decode: the cache grown right (cat([k_cache, k_rot])), then turned again by "
                                      "arange(P + T) to attend: every key turned twice, the returned cache right",
    "rope_cache_unrotated": "decode: the new keys appended to the returned cache unrotated",
}


def _other(pairing: str) -> str:
    return "interleaved" if pairing == "half" else "half"


def rotate(x: Array, positions: Array, base: float, pairing: str, slips: frozenset[str] = frozenset()) -> Array:
    """``x [..., L, d]`` with row ``p`` turned by ``positions[p]`` (``[L]``), made with ``slips``: ``[..., L, d]``,
    float64.  ``θ_i = base^(−2i/d)`` (RoFormer §3.4.2); the right rotation is
    :func:`tutor.numeric.rotary.rotate_pairs`."""
    L, d = x.shape[-2], x.shape[-1]
    i = np.arange(d // 2, dtype=np.float64)
    theta = float(base) ** (-(i if "rope_theta_no_2" in slips else 2 * i) / d)  # [d/2]
    pos = np.arange(L) if "rope_positions_ignored" in slips else np.asarray(positions)
    angles = pos.astype(np.float64)[:, None] * theta[None, :]  # [L, d/2]
    if "rope_sign" in slips:
        angles = -angles
    layout = _other(pairing) if "rope_pairing_swapped" in slips else pairing
    if layout == "half" and "rope_half_interleaved_angles" in slips:
        full = np.repeat(angles, 2, axis=-1)  # [L, d]: θ_0, θ_0, θ_1, θ_1, …
        turned = np.concatenate([-x[..., d // 2:], x[..., : d // 2]], axis=-1)  # rotate_half(x)
        return x * np.cos(full) + turned * np.sin(full)
    if layout == "interleaved" and "rope_interleaved_half_angles" in slips:
        full = np.concatenate([angles, angles], axis=-1)  # [L, d]: θ_0 … θ_{d/2−1}, θ_0 … θ_{d/2−1}
        turned = np.empty_like(x)  # rotate_every_two(x): (−x_{2i+1}, x_{2i})
        turned[..., 0::2], turned[..., 1::2] = -x[..., 1::2], x[..., 0::2]
        return x * np.cos(full) + turned * np.sin(full)
    return rotate_pairs(np.asarray(x, dtype=np.float64), angles, layout)


def decode(inputs: Mapping[str, Any], slips: frozenset[str] = frozenset()) -> tuple[Array, Array, Array]:
    """``(out [B, H, T, d], k_cache [B, H, P + T, d], v_cache [B, H, P + T, d])`` of one decode step with RoPE on
    ``inputs`` (``q``, ``k``, ``v``, ``k_cache``, ``v_cache``, ``base``, ``pairing``), made with ``slips``."""
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    k_cache, v_cache = inputs["k_cache"], inputs["v_cache"]
    base, pairing = inputs["base"], inputs["pairing"]
    P, T = k_cache.shape[2], q.shape[2]
    pos = np.arange(P, P + T)
    if "rope_positions_from_1" in slips:
        pos = pos + 1
    if "rope_decode_position_0" in slips:
        pos = np.arange(T)
    q_rot, k_rot = rotate(q, pos, base, pairing, slips), rotate(k, pos, base, pairing, slips)
    v_new = rotate(v, pos, base, pairing, slips) if "rope_v_rotated" in slips else v
    if "rope_keys_rotated_at_attention" in slips:
        kept = np.concatenate([k_cache, k_rot], axis=2)
        keys = rotate(kept, np.arange(P + T), base, pairing, slips)
    elif "rope_cache_rotated_again" in slips:
        whole = np.arange(P + T) + (1 if "rope_positions_from_1" in slips else 0)
        keys = rotate(np.concatenate([k_cache, k], axis=2), whole, base, pairing, slips)
        kept = keys
    else:
        keys = np.concatenate([k_cache, k_rot], axis=2)
        kept = np.concatenate([k_cache, k], axis=2) if "rope_cache_unrotated" in slips else keys
    values = np.concatenate([v_cache, v_new], axis=2)
    i, j = np.arange(T)[:, None], np.arange(P + T)[None, :]
    allowed = j <= i if "decode_top_left" in slips else j <= P + i  # [T, P + T]
    out, _ = attend(q_rot, keys, values, allowed, slips)
    return out, kept, values


def reference(inputs: Mapping[str, Any], slips: frozenset[str]) -> tuple[Array, ...]:
    """The outputs of the case's call on ``inputs``: ``(x_rot,)`` for ``apply_rope`` (``x`` and ``positions``
    given), ``(out, k_cache, v_cache)`` for ``rope_decode_step``; float64."""
    if "x" in inputs:
        return (rotate(inputs["x"], inputs["positions"], inputs["base"], inputs["pairing"], slips),)
    return decode(inputs, slips)


def _rotation_case(id: str, x: Array, positions: Array, dtype: str, *, base: float = 10000.0, pairing: str = "half",
                   given: tuple[str | Phrase, ...] = (), expected: Array | None = None) -> Case:
    axes = {2: ("L", "d"), 3: ("B", "L", "d")}.get(x.ndim, ("B", "H", "L", "d"))
    inputs = {"x": x, "positions": positions, "base": base, "pairing": pairing}
    right = expected if expected is not None else reference(inputs, frozenset())[0]
    return Case(id, inputs, dtype, dict(zip(axes, x.shape, strict=True)), (right,), args=(x, positions),
                kwargs={"base": base, "pairing": pairing}, given=(phrase(f"rope_{pairing}"), *given),
                hand=expected is not None, outputs=(Output("x_rot", axes),))


_STEP_OUTPUTS = (Output("out", ("B", "H", "T", "d")), Output("k_cache", ("B", "H", "P+T", "d")),
                 Output("v_cache", ("B", "H", "P+T", "d")))


def _step_case(id: str, inputs: dict[str, Any], dtype: str, *, given: tuple[str | Phrase, ...] = (),
               expected: tuple[Array, ...] = ()) -> Case:
    B, H, T, d = inputs["q"].shape
    P = inputs["k_cache"].shape[2]
    names = ("q", "k", "v", "k_cache", "v_cache")
    return Case(id, inputs, dtype, {"B": B, "H": H, "T": T, "d": d, "P": P, "P+T": P + T},
                expected or decode(inputs), args=tuple(inputs[n] for n in names),
                kwargs={"base": inputs["base"], "pairing": inputs["pairing"]},
                given=(phrase(f"rope_{inputs['pairing']}"), *given), hand=bool(expected), call=DECODE,
                outputs=_STEP_OUTPUTS)


HAND = "rope-half-causal-3x4"  # one head, d_k = 4, pairing half, base 10000, causal: θ = (1, 1/100)


def _hand_cases() -> tuple[Case, ...]:
    """The bundled exercise's K turned by ``apply_rope`` (its exact ``k_rot``), its causal forward as a prefill
    (``P = 0``), and its last token as a decode step against the first two (cached: the exact ``k_rot`` rows)."""
    ex = hand.exercise(HAND)
    assert ex.rope is not None and ex.rope.pairing == "half" and ex.num_heads == 1
    q, k, v = (hand.step(HAND, s, 0) for s in ("q", "k", "v"))  # [3, 4]
    k_rot, out = hand.step(HAND, "k_rot", 0), hand.step(HAND, "head_output", 0)
    base, given = float(ex.rope.base), f"exercise:{HAND}"
    rows = np.arange(len(k))

    def batch(a: Array) -> Array:
        return a[None, None]  # [L, d] -> [1, 1, L, d]

    def step(P: int) -> dict[str, Any]:
        return {"q": batch(q[P:]), "k": batch(k[P:]), "v": batch(v[P:]), "k_cache": batch(k_rot[:P]),
                "v_cache": batch(v[:P]), "base": base, "pairing": "half"}

    return (
        _rotation_case("hand-rotate-k", k, rows, "float64", base=base, given=(given,), expected=k_rot),
        _step_case("hand-prefill", step(0), "float64", given=(phrase("empty_cache"), given),
                   expected=(batch(out), batch(k_rot), batch(v))),
        _step_case("hand-decode", step(2), "float64", given=(phrase("one_new_token"), given),
                   expected=(batch(out[2:]), batch(k_rot), batch(v))),
    )


def _generated_step(rng: np.random.Generator, B: int, H: int, P: int, T: int, d: int, pairing: str,
                    base: float = 10000.0) -> dict[str, Any]:
    """Entries in [-1, 1] rounded to 3 decimals; the caches are the earlier tokens' keys turned at positions
    ``0 … P − 1`` (as the steps before this one stored them) and their values."""
    def u(*shape: int) -> Array:
        return rng.uniform(-1.0, 1.0, size=shape).round(3)
    past_k = u(B, H, P, d)
    return {"q": u(B, H, T, d), "k": u(B, H, T, d), "v": u(B, H, T, d),
            "k_cache": rotate(past_k, np.arange(P), base, pairing), "v_cache": u(B, H, P, d),
            "base": base, "pairing": pairing}


def cases() -> tuple[Case, ...]:
    """Three hand-sized cases (``apply_rope`` on the exercise's K; its prefill; its last token decoded against a
    2-token cache) and generated ones: ``apply_rope`` on ``[B, H, L, d]`` and ``[B, L, d]`` with positions out of
    order, both pairings, base 10000 and 100; decode steps with B = 2, H = 2, d = 8, P = 0, 3 and 5, T = 1 … 3,
    both pairings; float32 and float64."""
    rng = np.random.default_rng(2301)

    def u(*shape: int) -> Array:
        return rng.uniform(-1.0, 1.0, size=shape).round(3)

    return (
        *_hand_cases(),
        _rotation_case("half-4d", u(2, 2, 5, 8), np.array([3, 0, 7, 1, 12]), "float64",
                       given=(phrase("rope_positions_shuffled"),)),
        _rotation_case("interleaved-4d-float32", u(2, 3, 4, 8), np.array([5, 2, 9, 0]), "float32",
                       pairing="interleaved", given=(phrase("rope_positions_shuffled"),)),
        _rotation_case("interleaved-3d-base-100", u(2, 6, 6), np.array([4, 1, 0, 8, 2, 6]), "float64",
                       base=100.0, pairing="interleaved", given=("base=100.0",)),
        _rotation_case("half-3d-float32", u(3, 4, 12), np.array([0, 11, 2, 5]), "float32",
                       given=(phrase("rope_positions_shuffled"),)),
        _step_case("prefill-interleaved", _generated_step(rng, 2, 2, 0, 4, 8, "interleaved"), "float64",
                   given=(phrase("empty_cache"),)),
        _step_case("decode-one-half", _generated_step(rng, 2, 2, 5, 1, 8, "half"), "float32",
                   given=(phrase("one_new_token"),)),
        _step_case("decode-two-interleaved", _generated_step(rng, 2, 2, 3, 2, 8, "interleaved"), "float32",
                   given=(phrase("new_tokens_causal"),)),
        _step_case("decode-three-half", _generated_step(rng, 2, 2, 3, 3, 8, "half"), "float64",
                   given=(phrase("new_tokens_causal"),)),
    )


KATA = Kata(
    id="rope",
    numpy_name="apply_rope",
    torch_name="apply_rope",
    outputs=(Output("x_rot", ("B", "H", "L", "d")),),
    reference=reference,
    cases=cases,
    mistakes=(
        Mistake.of("rope_pairing_swapped"),
        Mistake.of("rope_half_interleaved_angles"),
        Mistake.of("rope_interleaved_half_angles"),
        Mistake.of("rope_theta_no_2"),
        Mistake.of("rope_sign"),
        Mistake.of("rope_decode_position_0"),  # before positions_ignored: named together on a step, this one first
        Mistake.of("rope_positions_ignored"),
        Mistake.of("rope_positions_from_1"),
        Mistake.of("rope_v_rotated"),
        Mistake.of("rope_cache_rotated_again"),
        Mistake.of("rope_cache_rotated_again", "rope_keys_rotated_at_attention"),  # the same mistake, where it is made
        Mistake.of("rope_cache_unrotated"),
        Mistake.of("decode_top_left"),
        Mistake.of("no_scaling"),
    ),
    follow_ups=("rope", "rope-context-extension", "kv-cache"),
    dtype_of={"apply_rope": "x"},  # the starter: "the same shape and dtype as x"
)
