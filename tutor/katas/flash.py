"""The ``flash`` kata: FlashAttention-2's forward pass, the keys walked in blocks with the online softmax.

The learner writes ``flash_attention(q, k, v, block_size) -> (out, lse)`` in
NumPy, or the same function with tensors in PyTorch.  Shapes: ``q [B, H, L_q,
d]``, ``k [B, H, L_k, d]``, ``v [B, H, L_k, d_v]``; ``out [B, H, L_q, d_v]``,
``lse [B, H, L_q]``.  The scores are ``q·kᵀ/√d``; the keys (and values) are
read in blocks of ``block_size`` (the last block may be smaller), and for each
block, with ``s`` its scores ``[…, L_q, n]`` (Dao 2023, FlashAttention-2,
Algorithm 1; :mod:`tutor.flash.walk`)::

    m_new = max(m, rowmax(s))                 the running max (m = -inf before the first block)
    alpha = exp(m − m_new)                    the rescale factor (0 at the first block)
    p     = exp(s − m_new)
    l     = alpha·l + rowsum(p)               the running sum (0 before the first block)
    acc   = alpha·acc + p·v_block             the accumulator (0 before the first block)

and at the end ``out = acc / l`` and ``lse = m + log l`` (natural log): ``out``
is plain attention's ``softmax(q·kᵀ/√d)·v`` and ``lse`` the log-sum-exp of a
row's scaled scores, whatever the blocks.  No mask (every query attends to
every key).  The point of the algorithm is that it never forms the ``[L_q,
L_k]`` scores: one case (``trace_memory``) measures the most memory the NumPy
flavour allocates and allows a quarter of one such matrix.

A mistake that cannot be seen: taking each block's own max as the new running
max (``m = rowmax(s)``, ``alpha = exp(m_old − m)`` possibly above 1) keeps
``l·exp(m) = Σ exp(s_j)`` and ``acc·exp(m) = Σ exp(s_j)·v_j``, so ``out`` and
``lse`` are right (only overflow could show it); the mistake named
``tiled_block_max`` is the block's ``p`` taken relative to the block's own max
while ``l`` and ``acc`` are rescaled by the running one.  Initialising ``m`` to
0 is invisible for the same reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from . import hand
from .kata import Array, Case, Kata, Mistake, Output, Phrase, phrase

__all__ = ["KATA", "SLIPS", "reference"]

#: What each slip of :func:`reference` does, as code.
SLIPS = {
    "no_scaling": "s = q @ k_block.T (no / √d)",
    "tiled_no_rescale_acc": "acc = acc + p @ v_block (the old acc not multiplied by alpha)",
    "tiled_no_rescale_l": "l = l + p.sum() (the old l not multiplied by alpha)",
    "tiled_alpha_inverted": "alpha = exp(m_new − m) (0 while m = -inf: the state started from the first block)",
    "alpha_nan": "with tiled_alpha_inverted: m = -inf at the start, so alpha = exp(+inf) = inf and inf·0 = NaN",
    "tiled_block_max": "p = exp(s − rowmax(s)): the block's own max, not the running max",
    "tiled_block_softmax": "p = p / p.sum(): each block normalised by its own sum",
    "tiled_divide_per_block": "acc = acc / l at every block, and not at the end",
    "tiled_no_final_divide": "out = acc (no / l at the end)",
    "tiled_lse_no_m": "lse = log l (m left out)",
}


def reference(inputs: Mapping[str, Any], slips: frozenset[str]) -> tuple[Array, Array]:
    """``(out [B, H, L_q, d_v], lse [B, H, L_q])`` of the online softmax on ``inputs`` (``q``, ``k``, ``v``,
    ``block_size``), in float64, made with ``slips`` (:data:`SLIPS`), walked block by block as the
    learner's code is (so a slip's NaN or its rounding is theirs too)."""
    q, k, v, n = inputs["q"], inputs["k"], inputs["v"], int(inputs["block_size"])
    L_k = k.shape[-2]
    scale = 1.0 if "no_scaling" in slips else 1.0 / math.sqrt(q.shape[-1])
    m = np.full(q.shape[:-1], -np.inf)  # [B, H, L_q]
    lsum = np.zeros(q.shape[:-1])  # [B, H, L_q]
    acc = np.zeros((*q.shape[:-1], v.shape[-1]))  # [B, H, L_q, d_v]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for start in range(0, L_k, n):
            s = q @ np.swapaxes(k[..., start:start + n, :], -1, -2) * scale  # [B, H, L_q, n]
            block_max = s.max(axis=-1)
            m_new = np.maximum(m, block_max)
            if "tiled_alpha_inverted" in slips:
                alpha = np.exp(m_new - m)
                if "alpha_nan" not in slips:
                    alpha = np.where(np.isneginf(m), 0.0, alpha)
            else:
                alpha = np.exp(m - m_new)
            p = np.exp(s - (block_max if "tiled_block_max" in slips else m_new)[..., None])
            if "tiled_block_softmax" in slips:
                p = p / p.sum(axis=-1, keepdims=True)
            lsum = (1.0 if "tiled_no_rescale_l" in slips else alpha) * lsum + p.sum(axis=-1)
            acc = (1.0 if "tiled_no_rescale_acc" in slips else alpha[..., None]) * acc + p @ v[..., start:start + n, :]
            if "tiled_divide_per_block" in slips:
                acc = acc / lsum[..., None]
            m = m_new
        out = acc if slips & {"tiled_divide_per_block", "tiled_no_final_divide"} else acc / lsum[..., None]
        lse = np.log(lsum) if "tiled_lse_no_m" in slips else m + np.log(lsum)
    return out, lse


def _case(id: str, inputs: dict[str, Any], dtype: str, *, given: tuple[str | Phrase, ...] = (), expected: tuple[Array, ...] = (),
          hand_sized: bool = False, trace_memory: bool = False) -> Case:
    q, k, v, n = inputs["q"], inputs["k"], inputs["v"], inputs["block_size"]
    B, H, L_q, d = q.shape
    L_k, d_v = k.shape[-2], v.shape[-1]
    limit = L_q * L_k * np.dtype(dtype).itemsize // 4 if trace_memory else None
    return Case(id, inputs, dtype, {"B": B, "H": H, "L_q": L_q, "L_k": L_k, "d": d, "d_v": d_v, "block_size": n},
                expected or reference(inputs, frozenset()), args=(q, k, v, n), given=given, hand=hand_sized,
                trace_memory=trace_memory, memory_limit=limit)


def _from_exercise(id: str, block_size: int, case_id: str, given: tuple[str | Phrase, ...]) -> Case:
    """A hand-sized case: head 1 of the bundled exercise ``id`` (its Q, K, V exact), walked in blocks of
    ``block_size`` by the exact engine (:func:`tutor.flash.walk.tiled`): its ``o`` and ``lse``."""
    from ..flash.walk import tiled

    rows = tiled(hand.exercise(id), block_size, head=0)
    inputs = {"q": hand.step(id, "q", 0)[None, None], "k": hand.step(id, "k", 0)[None, None],
              "v": hand.step(id, "v", 0)[None, None], "block_size": block_size}
    out = np.array([[float(x.value()) for x in r.o] for r in rows])[None, None]
    lse = np.array([float(r.lse.value()) for r in rows])[None, None]
    return _case(case_id, inputs, "float64", given=(*given, f"exercise:{id}"), expected=(out, lse), hand_sized=True)


def _generated(rng: np.random.Generator, B: int, H: int, L_q: int, L_k: int, d: int, d_v: int, block_size: int,
               ramp: float = 0.0) -> dict[str, Any]:
    """Entries in [-1, 1] (scores of a few units: a softmax far from one-hot), Q ≠ K ≠ V; ``ramp``: the
    first coordinate of every query is 1 and the keys' first coordinates go from ``-ramp`` to ``ramp``, so
    the keys' scores rise (``ramp > 0``: each block's max above the running max) or fall block by block."""
    def u(*shape: int) -> Array:
        return rng.uniform(-1.0, 1.0, size=shape).round(3)
    q, k = u(B, H, L_q, d), u(B, H, L_k, d)
    if ramp:
        q[..., 0] = 1.0
        k[..., 0] = np.linspace(-ramp, ramp, L_k).round(3)
    return {"q": q, "k": k, "v": u(B, H, L_k, d_v), "block_size": block_size}


def cases() -> tuple[Case, ...]:
    """Two hand-sized cases (bundled exercises walked exactly), then generated ones: B = 2, H = 2, L_q ≠ L_k,
    L_k not a multiple of the block, a max rising block by block and one falling, block_size 1 and
    block_size ≥ L_k, float32 and float64, and one large case whose memory is measured."""
    rng = np.random.default_rng(2023)
    return (
        _from_exercise("single-head-asym-3x4", 1, "hand-blocks-of-1",
                       ("block_size 1", phrase("running_max_rises"))),
        _from_exercise("cross-attention-2x3", 2, "hand-cross-2x3", ("L_q ≠ L_k", phrase("last_block_smaller"))),
        _case("ragged-blocks", _generated(rng, 2, 2, 5, 7, 4, 3, 3), "float64",
              given=(phrase("ragged_blocks"), "L_q ≠ L_k")),
        _case("rising-max-float32", _generated(rng, 2, 2, 4, 8, 2, 3, 2, ramp=3.0), "float32",
              given=(phrase("rising_max"),)),
        _case("falling-max", _generated(rng, 1, 2, 3, 6, 4, 2, 2, ramp=-3.0), "float64",
              given=(phrase("falling_max"),)),
        _case("blocks-of-1-float32", _generated(rng, 2, 2, 4, 5, 3, 2, 1), "float32", given=("block_size 1",)),
        _case("one-block", _generated(rng, 2, 2, 3, 5, 4, 4, 8), "float64", given=(phrase("one_block", size=8, L_k=5),)),
        _case("memory-2048", _generated(rng, 1, 1, 2048, 2048, 4, 4, 64), "float64", trace_memory=True,
              given=(phrase("memory", L=2048, size=64, mib=32),)),
    )


KATA = Kata(
    id="flash",
    numpy_name="flash_attention",
    torch_name="flash_attention",
    outputs=(Output("out", ("B", "H", "L_q", "d_v")), Output("lse", ("B", "H", "L_q"))),
    reference=reference,
    cases=cases,
    mistakes=(
        Mistake.of("no_scaling"),
        Mistake.of("tiled_no_rescale_acc"),
        Mistake.of("tiled_no_rescale_l"),
        Mistake.of("tiled_alpha_inverted"),
        Mistake.of("tiled_alpha_inverted", "tiled_alpha_inverted", "alpha_nan"),
        Mistake.of("tiled_block_max"),
        Mistake.of("tiled_block_softmax"),
        Mistake.of("tiled_divide_per_block"),
        Mistake.of("tiled_no_final_divide"),
        Mistake.of("tiled_lse_no_m"),
    ),
    follow_ups=("flash-attention", "online-softmax", "stable-softmax"),
)
