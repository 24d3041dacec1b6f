"""Each step read off the production layer, and how far float64 rounding may move it there.

The exact engine is checked against the batched layer (:func:`tutor.production.verify.verify`):
for every step, ``<id>_production(run, ex, head)`` reads the step off
:func:`tutor.numeric.run_exercise`'s forward (batch axis dropped: q, k, v
``[H, L, d]``, scores ``[H, L, L_k]`` already divided by √d_k, weights
``[H, L, L_k]``, context ``[L, H·d_v]``, output ``[L, d_out]``), and
``<id>_rounding(r, head)`` bounds the float64 error of that reading on this
exercise, from the exact values of the steps (``r.values``) and the bounds
of its inputs (``r.slack``), in the order the catalogue walks them.

Float64 cannot represent every exercise the format allows to nine digits:
scores of 1e24 that differ by 1 are equal in float64, so its softmax gives
0.5 where the exact one gives 0.73.  The bounds are forward error bounds
carried through the steps from the magnitudes of the inputs (Higham,
"Accuracy and Stability of Numerical Algorithms", 2nd ed., §3.1 and §3.5,
``γ_n = n·u / (1 - n·u)`` for a dot product of length ``n``; for softmax, a
perturbation ``|δ| <= e`` of the scores of a row scales each weight by a
factor in ``[exp(-2e), exp(2e)]``).  For paper-sized exercises they are
~1e-15; a real disagreement (a wrong formula) is far above them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:  # pragma: no cover
    from tutor.exercise.record import Exercise

    from .layer import ExerciseRun
    from .replay import Replay

Array = NDArray[np.float64]
UNIT = float(np.finfo(np.float64).eps) / 2  # u, the unit roundoff of float64


def gamma(n: int) -> float:
    """``γ_n = n·u / (1 - n·u)``: the relative error bound of a float64 sum or dot product of ``n`` terms."""
    return n * UNIT / (1 - n * UNIT)


def _abs(m: Sequence[Sequence[Fraction]] | Sequence[Fraction] | None, shape: tuple[int, ...] = ()) -> Array:
    """``|m|`` as float64 (a matrix ``[r, c]`` or a vector ``[c]``); zeros of ``shape`` for ``None``."""
    if m is None:
        return np.zeros(shape)
    return np.abs(np.array(m, dtype=object).astype(np.float64))


# --- q, k, v: x·W + b, one dot product of d_in terms per entry, inputs rounded to float64 once -----------


def q_production(run: ExerciseRun, ex: Exercise, head: int | None) -> Array:
    return run.q[head]


def k_production(run: ExerciseRun, ex: Exercise, head: int | None) -> Array:
    return run.k[head]


def v_production(run: ExerciseRun, ex: Exercise, head: int | None) -> Array:
    return run.v[head]


def _projection_rounding(r: Replay, id: str, head: int | None) -> Array:
    ex = r.ex
    hd = ex.heads[head or 0]
    w, b = {"q": (hd.w_q, hd.b_q), "k": (hd.w_k, hd.b_k), "v": (hd.w_v, hd.b_v)}[id]
    if (id, head) in r.values and ex.has_cache and (f"{id}_new", head) in r.values:  # format v2: K, V are [cache; new]
        new = r.delta(f"{id}_new", head)  # [L, d]
        past = ex.cache[ex.kv_head(head or 0)]  # type: ignore[index]
        return np.vstack([UNIT * _abs(getattr(past, id)), new])  # the cache is rounded to float64 once
    x = ex.x if id == "q" else ex.kv  # step id: Q is projected from X, K and V from X_kv
    return gamma(len(x[0]) + 3) * (_abs(x) @ _abs(w) + _abs(b, (len(w[0]),)))  # [n, d]


# --- format v2: the new tokens' keys and values; the biased scores --------------------------------------


def k_new_production(run: ExerciseRun, ex: Exercise, head: int | None) -> Array:
    assert run.k_new is not None
    return run.k_new[head]


def v_new_production(run: ExerciseRun, ex: Exercise, head: int | None) -> Array:
    assert run.v_new is not None
    return run.v_new[head]


def k_new_rounding(r: Replay, head: int | None) -> Array:
    return _new_rounding(r, "k", head)


def v_new_rounding(r: Replay, head: int | None) -> Array:
    return _new_rounding(r, "v", head)


def _new_rounding(r: Replay, id: str, head: int | None) -> Array:
    hd = r.ex.heads[head or 0]
    w, b = getattr(hd, f"w_{id}"), getattr(hd, f"b_{id}")
    return gamma(len(r.ex.kv[0]) + 3) * (_abs(r.ex.kv) @ _abs(w) + _abs(b, (len(w[0]),)))  # [L, d]


def biased_production(run: ExerciseRun, ex: Exercise, head: int | None) -> Array:
    assert run.biased is not None
    return run.biased[head]


def biased_rounding(r: Replay, head: int | None) -> Array:
    """The scaled scores' bound, plus one rounded addition (and the bias rounded to float64 once)."""
    assert r.ex.bias is not None
    return r.delta("scaled", head) + gamma(2) * (np.abs(r.values["biased", head]) + _abs(r.ex.bias[head or 0]))


def q_rounding(r: Replay, head: int | None) -> Array:
    return _projection_rounding(r, "q", head)


def k_rounding(r: Replay, head: int | None) -> Array:
    return _projection_rounding(r, "k", head)


def v_rounding(r: Replay, head: int | None) -> Array:
    return _projection_rounding(r, "v", head)


# --- scores, scaled, masked: the layer computes (q/√d_k)·kᵀ; the scores are read back times √d_k -----


def _scaled_rounding(r: Replay, head: int | None) -> Array:
    """The bound of the layer's scaled scores: Q's and K's errors carried, plus the dot product's rounding."""
    q, k = np.abs(r.values["q", head]), np.abs(r.values["k", head])
    e_q, e_k = r.delta("q", head), r.delta("k", head)
    d_k = r.ex.heads[head or 0].d_k
    e_s = e_q @ k.T + q @ e_k.T + e_q @ e_k.T + gamma(d_k + 2) * (q @ k.T)  # [L, L_k]
    return e_s / math.sqrt(d_k) + gamma(3) * np.abs(r.values["scores", head]) / math.sqrt(d_k)


def scores_production(run: ExerciseRun, ex: Exercise, head: int | None) -> Array:
    return run.scores[head] * math.sqrt(ex.heads[head or 0].d_k)  # [L, L_k], the scale undone


def scores_rounding(r: Replay, head: int | None) -> Array:
    d_k = r.ex.heads[head or 0].d_k
    return _scaled_rounding(r, head) * math.sqrt(d_k) + gamma(2) * np.abs(r.values["scores", head]) / math.sqrt(d_k)


def scaled_production(run: ExerciseRun, ex: Exercise, head: int | None) -> Array:
    return run.scores[head]


def scaled_rounding(r: Replay, head: int | None) -> Array:
    return _scaled_rounding(r, head)


def masked_production(run: ExerciseRun, ex: Exercise, head: int | None) -> Array:
    before = run.biased if run.biased is not None and ex.has_bias else run.scores  # format v2: the bias is added first
    return np.where(np.array(ex.allowed(), dtype=bool), before[head], -np.inf)  # [L, L_k]


def masked_rounding(r: Replay, head: int | None) -> Array:
    return r.delta("biased" if r.ex.has_bias else "scaled", head)  # blocked entries are -inf in both engines


# --- weights, head output -----------------------------------------------------------------------------


def weights_production(run: ExerciseRun, ex: Exercise, head: int | None) -> Array:
    return run.weights[head]


def weights_rounding(r: Replay, head: int | None) -> Array:
    """Row ``i`` of the scores perturbed by at most ``e_i`` (their bound plus the rounding of ``s - max``)
    gives ``|δw_ij| <= w_ij·(exp(2 e_i) - 1)``, computed as ``exp(log w_ij + log(expm1(2 e_i)))`` so that
    it neither overflows nor vanishes with ``w_ij`` (scores 1e24 apart by 1e6); capped at 1.  Masked keys
    have weight 0 in both engines."""
    ex = r.ex
    allowed = ex.allowed()
    live = np.ones((ex.L, ex.L_k), dtype=bool) if allowed is None else np.array(allowed, dtype=bool)  # [L, L_k]
    src = "biased" if ex.has_bias else "scaled"  # format v2: the softmax reads the biased scores
    scaled, e_scaled = r.values[src, head], r.delta(src, head)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        s = np.where(live, scaled, -np.inf)  # [L, L_k]
        top = np.max(s, axis=1, keepdims=True)  # [L, 1]; -inf for a fully masked row
        shifted = np.where(live, s - np.where(np.isfinite(top), top, 0.0), -np.inf)  # [L, L_k], <= 0
        log_z = np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))  # [L, 1]; >= 0 when a key is live
        log_w = np.where(live, shifted - log_z, -np.inf)  # [L, L_k]
        row_e = np.max(np.where(live, e_scaled + UNIT * np.abs(shifted), 0.0), axis=1, keepdims=True)  # [L, 1]
        x = 2 * row_e
        log_factor = np.where(x > 30, x, np.log(np.expm1(np.minimum(x, 30))))  # log(exp(2e) - 1); -inf when e = 0
        bound = np.exp(np.minimum(log_w + log_factor, 0.0)) + gamma(ex.L_k + 4) * np.exp(log_w)  # [L, L_k]
    return np.minimum(np.where(live, bound, 0.0), 1.0)


def head_output_production(run: ExerciseRun, ex: Exercise, head: int | None) -> Array:
    offset = sum(hd.d_v for hd in ex.heads[:head])
    return run.context[:, offset:offset + ex.heads[head or 0].d_v]  # [L, d_v], this head's columns


def head_output_rounding(r: Replay, head: int | None) -> Array:
    w, v = np.abs(r.values["weights", head]), np.abs(r.values["v", head])
    e_w, e_v = r.delta("weights", head), r.delta("v", head)
    return e_w @ v + w @ e_v + e_w @ e_v + gamma(r.ex.L_k + 2) * (w @ v)  # [L, d_v]


# --- concat, output ---------------------------------------------------------------------------------


def concat_production(run: ExerciseRun, ex: Exercise, head: int | None) -> Array:
    return run.context


def concat_rounding(r: Replay, head: int | None) -> Array:
    return np.hstack([r.delta("head_output", h) for h in range(r.ex.num_heads)])


def output_production(run: ExerciseRun, ex: Exercise, head: int | None) -> Array:
    return run.output


def output_rounding(r: Replay, head: int | None) -> Array:
    ex = r.ex
    H = ex.num_heads
    c = np.abs(np.hstack([r.values["head_output", h] for h in range(H)]))  # [L, H·d_v]
    e_c = np.hstack([r.delta("head_output", h) for h in range(H)])
    w_o = _abs(ex.w_o)  # [H·d_v, d_out]
    return e_c @ w_o + gamma(c.shape[1] + 3) * (c @ w_o + _abs(ex.b_o, (w_o.shape[1],)))  # [L, d_out]


# --- the backward steps (issue 13): found here by name, like the forward ones ---------------------------
from .production_backward import *  # noqa: E402, F403, I001
