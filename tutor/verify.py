"""The two engines check each other: the exact solution against the NumPy core.

:func:`verify` runs the exercise through :class:`tutor.numeric.MultiHeadAttention`
(batched, fused, as production code does) and compares every step of the
exact :class:`tutor.steps.Solution` with it; ``explain`` refuses to print a
solution where they disagree.

Float64 cannot represent every exercise the format allows to nine digits:
scores of 1e24 that differ by 1 are equal in float64, so its softmax gives
0.5 where the exact one gives 0.73.  The comparison therefore allows, on top
of ``1e-9``, the rounding error float64 can make on *this* exercise: a
forward error bound carried through the steps from the magnitudes of the
inputs (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
§3.1 and §3.5, ``γ_n = n·u / (1 - n·u)`` for a dot product of length ``n``;
for softmax, a perturbation ``|δ| <= e`` of the scores of a row scales each
weight by a factor in ``[exp(-2e), exp(2e)]``).  For the paper-sized
exercises the bound is ~1e-15 and the check is as strict as ever; a real
disagreement (a wrong formula) is far above it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from .errors import EngineMismatchError
from .messages import t
from .steps import Solution

RTOL = 1e-9
ATOL = 1e-9
UNIT = float(np.finfo(np.float64).eps) / 2  # u, the unit roundoff of float64
SAFETY = 8.0  # the bounds below are first-order; allow a margin for the orderings the NumPy core may use


def _gamma(n: int) -> float:
    """``γ_n = n·u / (1 - n·u)``: the relative error bound of a float64 sum or dot product of ``n`` terms."""
    return n * UNIT / (1 - n * UNIT)


def _abs(m: Sequence[Sequence[Fraction]] | Sequence[Fraction] | None, shape: tuple[int, ...] = ()) -> np.ndarray:
    """``|m|`` as float64 (a matrix ``[r, c]`` or a vector ``[c]``); zeros of ``shape`` for ``None``."""
    if m is None:
        return np.zeros(shape)
    return np.abs(np.array(m, dtype=object).astype(np.float64))


def _compare(sol: Solution, step_id: str, head: int | None, reference: np.ndarray, bound: np.ndarray | float = 0.0) -> None:
    step = sol.step(step_id, head)  # type: ignore[arg-type]
    exact = np.array(step.value, dtype=np.float64)  # [rows, cols]
    if exact.shape != reference.shape:
        raise EngineMismatchError(t("verify.shape", step=step_id, head=head, exact=exact.shape, numeric=reference.shape))
    inf = np.isinf(exact)
    if not np.array_equal(inf, np.isinf(reference)):
        raise EngineMismatchError(t("verify.masked", step=step_id, head=head))
    allowed = ATOL + RTOL * np.abs(exact) + SAFETY * np.broadcast_to(bound, exact.shape)  # [rows, cols]
    with np.errstate(invalid="ignore"):  # -inf - -inf at a masked entry
        diff = np.where(inf, 0.0, np.abs(exact - reference))  # [rows, cols]
    if not np.all(diff <= np.where(inf, np.inf, allowed)):
        i, j = np.unravel_index(np.argmax(diff - allowed), exact.shape)
        raise EngineMismatchError(t("verify.value", step=step_id, head=head, row=int(i), col=int(j),
                                    exact=float(exact[i, j]), numeric=float(reference[i, j])))


def _softmax_bound(scaled: np.ndarray, e_scaled: np.ndarray, live: np.ndarray, n: int) -> np.ndarray:
    """A bound ``[L, L_k]`` on the float64 error of the weights, from the exact scaled scores and their error bound.

    Row ``i`` perturbed by at most ``e_i`` (the scores' bound plus the rounding
    of ``s - max``) gives ``|δw_ij| <= w_ij·(exp(2 e_i) - 1)``, computed as
    ``exp(log w_ij + log(expm1(2 e_i)))`` so that it neither overflows nor
    vanishes with ``w_ij``; capped at 1 (weights lie in [0, 1]).  Masked keys
    have weight 0 in both engines.
    """
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        s = np.where(live, scaled, -np.inf)  # [L, L_k]
        top = np.max(s, axis=1, keepdims=True)  # [L, 1]; -inf for a fully masked row
        shifted = np.where(live, s - np.where(np.isfinite(top), top, 0.0), -np.inf)  # [L, L_k], <= 0
        log_z = np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))  # [L, 1]; >= 0 when a key is live
        log_w = np.where(live, shifted - log_z, -np.inf)  # [L, L_k]
        row_e = np.max(np.where(live, e_scaled + UNIT * np.abs(shifted), 0.0), axis=1, keepdims=True)  # [L, 1]
        x = 2 * row_e
        log_factor = np.where(x > 30, x, np.log(np.expm1(np.minimum(x, 30))))  # log(exp(2e) - 1); -inf when e = 0
        bound = np.exp(np.minimum(log_w + log_factor, 0.0)) + _gamma(n + 4) * np.exp(log_w)  # [L, L_k]
    return np.minimum(np.where(live, bound, 0.0), 1.0)


def _values(sol: Solution, step_id: str, head: int | None) -> np.ndarray:
    return np.array(sol.step(step_id, head).value, dtype=np.float64)  # type: ignore[arg-type]


def verify(sol: Solution) -> None:
    """Check every step of ``sol`` against the NumPy core to ``1e-9`` (relative and absolute),
    plus the rounding error float64 can make on this exercise (see the module docstring).

    Raises :class:`tutor.errors.EngineMismatchError` naming the first step,
    head and entry where the engines disagree (a bug in one of them).
    """
    from .numeric import run_exercise

    ex = sol.exercise
    run = run_exercise(ex)  # q, k, v [H, L, d]; scores, weights [H, L, L_k]; context [L, H·d_v]
    allowed = ex.allowed()
    live = np.ones((ex.L, ex.L_k), dtype=bool) if allowed is None else np.array(allowed, dtype=bool)  # [L, L_k]
    x, kv = _abs(ex.x), _abs(ex.kv)  # [L, d_model], [L_k, d_kv]
    offset = 0
    context_bounds = []
    for h, head in enumerate(ex.heads):
        d_k, d_v = head.d_k, head.d_v
        # projections: x·W + b, one dot product of d_in terms per entry, inputs rounded to float64 once
        e_q = _gamma(ex.d_model + 3) * (x @ _abs(head.w_q) + _abs(head.b_q, (d_k,)))  # [L, d_k]
        e_k = _gamma(len(ex.kv[0]) + 3) * (kv @ _abs(head.w_k) + _abs(head.b_k, (d_k,)))  # [L_k, d_k]
        e_v = _gamma(len(ex.kv[0]) + 3) * (kv @ _abs(head.w_v) + _abs(head.b_v, (d_v,)))  # [L_k, d_v]
        q, k, v = (np.abs(_values(sol, s, h)) for s in ("q", "k", "v"))
        # scores = Q·Kᵀ: the errors of Q and K carried, plus the dot product's own rounding
        e_s = e_q @ k.T + q @ e_k.T + e_q @ e_k.T + _gamma(d_k + 2) * (q @ k.T)  # [L, L_k]
        scaled_exact = _values(sol, "scaled", h)  # [L, L_k]
        e_scaled = e_s / math.sqrt(d_k) + _gamma(3) * np.abs(scaled_exact)  # [L, L_k]
        _compare(sol, "q", h, run.q[h], e_q)
        _compare(sol, "k", h, run.k[h], e_k)
        _compare(sol, "v", h, run.v[h], e_v)
        scaled = run.scores[h]  # [L, L_k], already divided by √d_k
        _compare(sol, "scores", h, scaled * math.sqrt(head.d_k), e_scaled * math.sqrt(d_k) + _gamma(2) * np.abs(scaled_exact))
        _compare(sol, "scaled", h, scaled, e_scaled)
        if allowed is not None:
            _compare(sol, "masked", h, np.where(np.array(allowed, dtype=bool), scaled, -np.inf), e_scaled)
        # softmax: |δs| <= e on a row scales each weight by [exp(-2e), exp(2e)], so |δw| <= w·(exp(2e) - 1);
        # in logs, because w may underflow to 0 where the bound is still large (scores 1e24 apart by 1e6)
        e_w = _softmax_bound(scaled_exact, e_scaled, live, ex.L_k)  # [L, L_k]
        _compare(sol, "weights", h, run.weights[h], e_w)
        w = _values(sol, "weights", h)  # [L, L_k]
        # head output = weights·V
        e_o = e_w @ v + w @ e_v + e_w @ e_v + _gamma(ex.L_k + 2) * (w @ v)  # [L, d_v]
        _compare(sol, "head_output", h, run.context[:, offset:offset + head.d_v], e_o)
        context_bounds.append(e_o)
        offset += head.d_v
    e_c = np.hstack(context_bounds)  # [L, H·d_v]
    if ex.num_heads > 1:
        _compare(sol, "concat", None, run.context, e_c)
    if ex.w_o is not None:
        c = np.abs(np.hstack([_values(sol, "head_output", h) for h in range(ex.num_heads)]))  # [L, H·d_v]
        w_o = _abs(ex.w_o)  # [H·d_v, d_out]
        e_out = e_c @ w_o + _gamma(c.shape[1] + 3) * (c @ w_o + _abs(ex.b_o, (w_o.shape[1],)))  # [L, d_out]
        _compare(sol, "output", None, run.output, e_out)
