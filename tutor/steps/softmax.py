"""The softmax of one head's scores, and the weighted sum of its values: ``weights``, ``head_output``.

``head = softmax(scores) V`` (Vaswani et al. 2017, eq. 1), the softmax over
each query row's keys; a query row that may attend to no key gets zero
weights and a zero output row (PyTorch's SDPA on CPU since 2.5).  The scores it
reads are :mod:`tutor.steps.scores`'s.

Each kind's engines, side by side: the exact build (one structured softmax
per row, :class:`tutor.exact.numbers.SoftmaxRow`), the float walk and its
slack (under a misconception's knobs: no softmax, over the columns, not
normalised, a mask applied after it, the heads' weights averaged,
``weights·K``), the batched layer's reading and its float64 rounding bound,
and the exact walk.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, cast

from ..base.messages import Msg, Text
from ..exact import engine as exact
from ..exact import matrices as em
from ..exact.engine import Exponents, QMat, Scaled
from ..exact.numbers import SoftmaxRow
from ..exercise.record import Exercise
from .kind import StepKind, always, dims, given_step
from .records import Operand, Solution, Step
from .rounding import UNIT, gamma
from .scores import _bias_matrix, _exact_keep, empty_rows, keep, pre_mask, softmax_input
from .state import Build, ExactWalk, Replay, mul_slack
from .worked import Worked, dot, entry_products, factor, softmax_arithmetic, softmax_row, total

if TYPE_CHECKING:
    import numpy as np

    from ..numeric.layer import LayerRun
    from .rounding import Array
else:
    from ..base.lazy import numpy as np


def _empty_labels(ex: Exercise) -> tuple[int, Text]:
    """How many query rows may attend to no key, and their labels in a sentence (``t3``, ``t2 and t3``)."""
    rows = empty_rows(ex)
    return len(rows), Msg.and_list([ex.query_labels[i] for i in rows]) if rows else ""


# --- weights: softmax over each row ------------------------------------------------------------------------


def _weights(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    sc = bd.data[pre_mask(ex, h)]
    assert isinstance(sc, Scaled)
    live = cast(Exponents, bd.data["masked", h]) if ex.has_mask else exact.mask(sc, None)
    rows = exact.softmax_rows(live, sc)
    bd.data["weights", h] = rows
    src = softmax_input(ex, h)[0]
    return Step("weights", h, "weights", f"weights_ij = exp({src}_ij) / Σ_k exp({src}_ik)",
                (Operand(src, (ex.L, ex.L_k)),), "softmax", exact.weights(rows, ex.L_k),
                ex.query_labels, ex.key_labels)


def _weights_floats(r: Replay, head: int | None) -> Array | None:
    """``softmax`` of each row of the masked (or scaled) scores: ``[L, L_k]``; a fully masked row is 0."""
    v = r.variant
    (A,) = r.inputs(WEIGHTS, head)
    if A is None:
        return None
    if not v.softmax:
        W = np.where(np.isinf(A), 0.0, A)  # [L, L_k], the scores themselves, a blocked one counting 0
    elif not v.normalise:
        W = np.exp(A)  # [L, L_k], the numerators only
    else:
        from ..numeric.functional import softmax  # the NumPy core's one softmax (numpy: loaded on first use)

        W = softmax(A, axis=v.softmax_axis)  # [L, L_k]
    if v.mask == "after_softmax" and r.allowed is not None:
        allowed = keep(r, A)
        if allowed is None:
            return None
        W = np.where(allowed, W, 0.0)  # [L, L_k], not renormalised
    if v.empty_rows == "uniform":
        empty = np.all(np.isneginf(A), axis=-1)  # [L], rows whose every score is blocked
        W = np.where(empty[:, None], 1.0 / W.shape[1], W)  # [L, L_k]
    if v.scale == "after_softmax":  # the scores were not scaled: the weights are divided instead
        W = W / math.sqrt(r.ex.heads[head or 0].d_k)  # [L, L_k]
    if v.bias == "after_softmax" and r.ex.has_bias:
        B = _bias_matrix(r, head)
        assert B is not None  # only "shifted" has none
        W = W + np.where(np.isneginf(A), 0.0, B)  # [L, L_k], added to the weights (blocked stay 0)
    if v.average_heads:
        assert r.right is not None
        right = r.right()
        W = np.mean(np.stack([right.value(("weights", h)) for h in range(r.ex.num_heads)]), axis=0)  # [L, L_k]
    return W


def _weights_slack(r: Replay, head: int | None) -> Array:
    (src,) = WEIGHTS.inputs(r.ex, head)
    A, dA, W = r.value(src), r.delta(*src), r.value(("weights", head))
    live = np.where(np.isinf(A), 0.0, dA)  # [L, L_k]
    spread = np.max(live, axis=-1, keepdims=True)  # [L, 1]
    return W * np.expm1(2 * spread)  # [L, L_k]


def _weights_production(run: LayerRun, ex: Exercise, head: int | None) -> Array:
    return run.weights[head]


def _weights_rounding(r: Replay, head: int | None) -> Array:
    """Row ``i`` of the scores perturbed by at most ``e_i`` (their bound plus the rounding of ``s - max``)
    gives ``|δw_ij| <= w_ij·(exp(2 e_i) - 1)``, computed as ``exp(log w_ij + log(expm1(2 e_i)))`` so that
    it neither overflows nor vanishes with ``w_ij`` (scores 1e24 apart by 1e6); capped at 1.  Masked keys
    have weight 0 in both engines."""
    ex = r.ex
    allowed = ex.allowed()
    live = np.ones((ex.L, ex.L_k), dtype=bool) if allowed is None else np.array(allowed, dtype=bool)  # [L, L_k]
    src = pre_mask(ex, head)  # the scores before the mask: the mask's -inf are applied below
    scaled, e_scaled = r.value(src), r.delta(*src)
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


def _weights_exact(w: ExactWalk, head: int | None) -> em.Matrix | None:
    v = w.variant
    (A,) = w.inputs(WEIGHTS, head)
    if A is None:
        return None
    W: em.Matrix
    if not v.softmax:
        W = [[em.ZERO if em.blocked(a) else a for a in row] for row in A]
    elif not v.normalise:
        W = [[em.ZERO if em.blocked(a) else em.exp(a) for a in row] for row in A]
    elif v.softmax_axis == 0:
        W = em.transpose([em.softmax_row(col) for col in em.transpose(A)])
    else:
        W = [em.softmax_row(row) for row in A]
    if v.mask == "after_softmax" and w.allowed is not None:
        allowed = _exact_keep(w, A)
        if allowed is None:
            return None
        W = [[x if k else em.ZERO for x, k in zip(wr, kr)] for wr, kr in zip(W, allowed)]
    if v.empty_rows == "uniform":
        W = [[Fraction(1, len(wr)) for _ in wr] if all(em.blocked(a) for a in ar) else wr
             for wr, ar in zip(W, A)]
    return W


def _weights_work(sol: Solution, step: Step, i: int, j: int) -> Text:
    rl, cl = step.row_labels[i], step.col_labels[j]
    scores = sol.step(*softmax_input(sol.exercise, step.head))
    head = f"exp({scores.id}[{rl}, {cl}]) / Σ_k exp({scores.id}[{rl}, k])"
    if all(math.isinf(v) for v in scores.value[i]):  # no key to attend: 0/0, set to 0 by the convention
        return Msg("practice.work.empty.line", work=head, row=rl)
    if math.isinf(scores.value[i][j]):
        return Msg("practice.work.noted", work=f"{head} = 0", note=Msg("practice.work.blocked", row=rl, col=cl))
    return f"{head} = {softmax_row(scores, i, j, step.value[i][j])} {total(step.exact[i][j], step.value[i][j])}"


def _weights_why(step: Step, ex: Exercise) -> list[Text]:
    """The softmax's sentence, true of this exercise: positive weights where no key is blocked; a blocked
    key exactly 0 with a mask that blocks one; and a row that may attend to no key sums to 0, not 1."""
    allowed = ex.allowed()
    blocks = allowed is not None and not all(all(row) for row in allowed)  # a mask that blocks nothing (a one-token
    out: list[Text] = [Msg("step.weights.why.masked" if blocks else "step.weights.why")]  # decode, lower-right) leaves them positive
    n, rows = _empty_labels(ex)
    if n:
        out.append(Msg.plural("step.weights.why.empty", n, rows=rows))
    return out


def _weights_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    src = sol.step(*softmax_input(sol.exercise, step.head))
    return tuple(softmax_arithmetic(src, step, i, places, none_left=Msg("explain.work.no_key"), sum_label="Σ")
                 for i in range(step.shape[0]))


WEIGHTS = StepKind(
    id="weights", scope="head", op="softmax", exists=always,
    inputs=lambda ex, head: (softmax_input(ex, head),),
    build=_weights, floats=_weights_floats, slack=_weights_slack, production=_weights_production,
    rounding=_weights_rounding, exact_walk=_weights_exact,
    varies=frozenset({"mask", "softmax", "softmax_axis", "normalise", "empty_rows", "average_heads", "bias", "scale"}),
    work=_weights_work, why=_weights_why, arithmetic=_weights_arithmetic,
    given=lambda sol, step: (given_step(sol.step(*softmax_input(sol.exercise, step.head))),),
    latex=r"\text{weights}_{ij} = \frac{\exp(\text{$src}_{ij})}{\sum_k \exp(\text{$src}_{ik})}",
    fixed_by_mask=0.0, heatmap=True, checks=("row_sums", "weights_range", "masked_zero"),
)


# --- head output: weights·V ----------------------------------------------------------------------------------


def _head_output(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    rows, V = cast("tuple[tuple[SoftmaxRow, ...], QMat]", bd.inputs(HEAD_OUTPUT, h))
    out = exact.attend(rows, V)  # [L, L_k]·[L_k, d_v] -> [L, d_v]
    bd.data["head_output", h] = out
    d_v = ex.heads[h or 0].d_v
    return Step("head_output", h, f"head_{(h or 0) + 1}", f"head_{(h or 0) + 1} = weights·V",  # head_1 … head_h, as in the paper
                (Operand("weights", (ex.L, ex.L_k)), Operand("V", (ex.L_k, d_v))), "·", out,
                ex.query_labels, dims("d", d_v))


def _head_output_floats(r: Replay, head: int | None) -> Array | None:
    """``weights·V`` (``weights·K`` under ``values="k"``): ``[L, L_k]·[L_k, d_v]`` -> ``[L, d_v]``."""
    W, Vs = r.inputs(HEAD_OUTPUT, head)
    if r.variant.values == "k":
        Vs = r.input("k", head)  # the mistake: the keys in place of the values
    if W is None or Vs is None or W.shape[1] != Vs.shape[0]:
        return None
    return W @ Vs


def _head_output_slack(r: Replay, head: int | None) -> Array:
    w, v = HEAD_OUTPUT.inputs(r.ex, head)
    return mul_slack(r.value(w), r.delta(*w), r.value(v), r.delta(*v))


def _head_output_production(run: LayerRun, ex: Exercise, head: int | None) -> Array:
    offset = sum(hd.d_v for hd in ex.heads[:head])
    return run.context[:, offset:offset + ex.heads[head or 0].d_v]  # [L, d_v], this head's columns


def _head_output_rounding(r: Replay, head: int | None) -> Array:
    w, v = HEAD_OUTPUT.inputs(r.ex, head)
    W, V = np.abs(r.value(w)), np.abs(r.value(v))
    e_w, e_v = r.delta(*w), r.delta(*v)
    return e_w @ V + W @ e_v + e_w @ e_v + gamma(r.ex.L_k + 2) * (W @ V)  # [L, d_v]


def _head_output_exact(w: ExactWalk, head: int | None) -> em.Matrix | None:
    W, Vs = w.inputs(HEAD_OUTPUT, head)
    if w.variant.values == "k":
        Vs = w.input("k", head)  # the mistake: the keys in place of the values
    if W is None or Vs is None:
        return None
    return em.matmul(W, Vs)


def _head_output_work(sol: Solution, step: Step, i: int, j: int) -> str:
    weights, values = sol.step("weights", step.head), sol.step("v", step.head)
    pairs = [(factor(weights.exact[i][k], weights.value[i][k]), factor(values.exact[k][j], values.value[k][j]))
             for k in range(weights.shape[1])]
    return (f"weights[{step.row_labels[i]}, :]·V[:, {step.col_labels[j]}] = {dot(pairs)} "
            f"{total(step.exact[i][j], step.value[i][j])}")


def _head_output_why(step: Step, ex: Exercise) -> list[Text]:
    """The convex-average bound, with the rows it does not hold for: a zero row (no key to attend)."""
    out: list[Text] = [Msg("step.head_output.why")]
    n, rows = _empty_labels(ex)
    if n:
        out.append(Msg.plural("step.head_output.why.empty", n, rows=rows))
    return out


def _head_output_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    weights, values = sol.step("weights", step.head), sol.step("v", step.head)

    def pairs_of(i: int, j: int, places: int) -> tuple[list[tuple[str, str]], str]:
        return [(factor(weights.exact[i][k], weights.value[i][k], places), factor(values.exact[k][j], values.value[k][j], places))
                for k in range(weights.shape[1])], ""

    return entry_products(step, pairs_of, places)


HEAD_OUTPUT = StepKind(
    id="head_output", scope="head", op="·", exists=always,
    inputs=lambda ex, head: (("weights", head), ("v", head)),
    build=_head_output, floats=_head_output_floats, slack=_head_output_slack, production=_head_output_production,
    rounding=_head_output_rounding, exact_walk=_head_output_exact,
    varies=frozenset({"values"}), work=_head_output_work,
    why=_head_output_why, arithmetic=_head_output_arithmetic,
    given=lambda sol, step: (given_step(sol.step("weights", step.head)), given_step(sol.step("v", step.head))),
    latex=r"\text{head}_{$head} = \text{weights}\, V", checks=("column_range",), names_head=True,
)


#: The softmax's kinds in the contract's order.
SOFTMAX_STEPS: tuple[StepKind, ...] = (WEIGHTS, HEAD_OUTPUT)
