"""The backward pass through one head: ``d_head``, ``d_weights``, ``d_scaled``, ``d_V``, ``d_Q``, ``d_K``.

``head = weights·V`` gives ``d_weights = d_head·Vᵀ`` and ``d_V = weightsᵀ·d_head``;
the softmax's Jacobian gives ``d_scaled = weights ∘ (d_weights − rowsum(d_weights ∘ weights))``
(Dao 2023, FlashAttention-2, Algorithm 2); ``scaled = Q·Kᵀ/√d_k`` gives
``d_Q = d_scaled·K/√d_k`` and ``d_K = d_scaledᵀ·Q/√d_k``.  With grouped K/V
heads ``d_V`` and ``d_K`` belong to the K/V head: the sum over its group's
query heads (what ``scaled_dot_product_attention(…, enable_gqa=True)`` gives
as ``key.grad``).  A bias and a mask are constants: ``d_scaled`` is the
gradient of the biased scores too, and 0 at a blocked key.  With RoPE
(format v3, issue 23) the scores read ``Q_rot`` and ``K_rot``: ``d_Q_rot =
d_scaled·K_rot/√d_k`` and ``d_K_rot = d_scaledᵀ·Q_rot/√d_k`` come first, and
``d_Q``, ``d_K`` are them turned back pair by pair, ``R(mθ)ᵀ`` (a rotation
is orthogonal: RoFormer, Su et al. 2021, §3.2.2).

Each kind's engines, side by side: the exact build (:mod:`tutor.exact.backward`),
the float walk and its slack (under a misconception's knobs: the softmax's
gradient taken element-wise, a blocked entry left non-zero, no ``1/√d_k``,
``d_K`` not transposed, one query head's share of a K/V gradient), the
batched layer's gradient and its rounding bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, cast

from ..base.messages import Msg, Text
from ..exact import backward as eb
from ..exact.engine import QMat
from ..exact.numbers import SoftmaxRow
from ..exercise.record import Exercise
from .grad import (
    d_head_source,
    givens,
    group_grads,
    group_sum,
    kv_grad_work,
    kv_group,
    kv_tags,
    kv_why,
    num,
    own,
    product,
    production,
    rounding,
    sigma,
    sqrt_dk,
    step_of,
    walked_group,
)
from .kind import Input, StepKind, always, dims, given_step
from .records import Operand, Solution, Step
from .state import Build, Replay, mul_slack
from .worked import Worked, factor, total

if TYPE_CHECKING:
    import numpy as np

    from ..exact.rotary import TrigMat
    from .rounding import Array
else:
    from ..base.lazy import numpy as np


def _v_cols(ex: Exercise, head: int | None) -> slice:
    offset = sum(hd.d_v for hd in ex.heads[:head])
    return slice(offset, offset + ex.heads[head or 0].d_v)


# --- d_head: this head's columns of d_concat ------------------------------------------------------------------


def _d_head_output(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    src = d_head_source(ex)
    (g,) = cast("list[eb.Rational]", bd.inputs(D_HEAD_OUTPUT, h))
    d_v = ex.heads[h or 0].d_v
    dH = [row[_v_cols(ex, h)] for row in g]  # [L, d_v], this head's columns
    bd.data["d_head_output", h] = dH
    name = f"d_head_{(h or 0) + 1}"
    return Step("d_head_output", h, name, Msg("formula.d_head", name=name, src=src[0], head=(h or 0) + 1),
                (Operand(src[0], (ex.L, len(g[0]))),), "=", eb.rational_exact(dH), ex.query_labels, dims("d", d_v))


def _d_head_output_floats(r: Replay, head: int | None) -> Array | None:
    """This head's columns of ``d_concat`` (``d_output`` without W_O): ``[L, d_v]``."""
    (g,) = r.inputs(D_HEAD_OUTPUT, head)
    return None if g is None else g[:, _v_cols(r.ex, head)]


def _d_head_output_slack(r: Replay, head: int | None) -> Array:
    return r.delta(*d_head_source(r.ex))[:, _v_cols(r.ex, head)]


def _d_head_output_work(sol: Solution, step: Step, i: int, j: int) -> str:
    src = sol.step(*d_head_source(sol.exercise))
    offset = sum(hd.d_v for hd in sol.exercise.heads[:step.head])
    return f"{src.name}[{step.row_labels[i]}, {src.col_labels[offset + j]}] {total(step.exact[i][j], step.value[i][j])}"


def _d_head_why(step: Step, ex: Exercise) -> list[Text]:
    src = d_head_source(ex)[0]
    return [Msg("step.d_head_output.why" if ex.num_heads > 1 else "step.d_head_output.why.single", src=src)]


D_HEAD_OUTPUT = StepKind(
    id="d_head_output", scope="head", op="=", exists=always, inputs=lambda ex, head: (d_head_source(ex),),
    build=_d_head_output, floats=_d_head_output_floats, slack=_d_head_output_slack,
    production=production("d_head_output"), rounding=rounding(_d_head_output_slack),
    work=_d_head_output_work, why=_d_head_why,
    given=givens(lambda sol, step: d_head_source(sol.exercise)), names_head=True,
    latex=r"d_{\text{head}_{$head}} = $op0[:, $head_columns]", backward=True,
)


# --- d_weights = d_head·Vᵀ -----------------------------------------------------------------------------------


def _d_weights(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    dH, V = cast("tuple[eb.Rational, QMat]", bd.inputs(D_WEIGHTS, h))
    dP = eb.d_weights(dH, V)  # [L, d_v]·[d_v, L_k] -> [L, L_k]
    bd.data["d_weights", h] = dP
    name = f"d_head_{(h or 0) + 1}"
    d_v = ex.heads[h or 0].d_v
    return Step("d_weights", h, "d_weights", f"d_weights = {name}·Vᵀ",
                (Operand(name, (ex.L, d_v)), Operand("Vᵀ", (d_v, ex.L_k))), "·",
                eb.rational_exact(dP), ex.query_labels, ex.key_labels)


def _d_weights_floats(r: Replay, head: int | None) -> Array | None:
    """``d_head·Vᵀ``: ``[L, d_v]·[d_v, L_k]`` -> ``[L, L_k]``."""
    dH, V = r.inputs(D_WEIGHTS, head)
    return None if dH is None or V is None or dH.shape[1] != V.shape[1] else dH @ V.T


def _d_weights_slack(r: Replay, head: int | None) -> Array:
    dh, v = D_WEIGHTS.inputs(r.ex, head)
    return mul_slack(r.value(dh), r.delta(*dh), r.value(v).T, r.delta(*v).T)


D_WEIGHTS = StepKind(
    id="d_weights", scope="head", op="·", exists=always, inputs=lambda ex, head: (("d_head_output", head), ("v", head)),
    build=_d_weights, floats=_d_weights_floats, slack=_d_weights_slack, production=production("d_weights"),
    rounding=rounding(_d_weights_slack),
    work=product(lambda sol, step: step_of(sol, "d_head_output", step.head),
                 lambda sol, step: step_of(sol, "v", step.head).T),
    given=givens(own("d_head_output"), own("v")), latex=r"d_{\text{weights}} = d_{\text{head}}\, V^\top",
    backward=True,
)


# --- d_scaled: the softmax's gradient ---------------------------------------------------------------------


def _d_scaled(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    rows, dP = cast("tuple[tuple[SoftmaxRow, ...], eb.Rational]", bd.inputs(D_SCALED, h))
    return Step("d_scaled", h, "d_scaled", "d_scaled = weights ∘ (d_weights − rowsum(d_weights ∘ weights))",
                (Operand("weights", (ex.L, ex.L_k)), Operand("d_weights", (ex.L, ex.L_k))), "∘",
                eb.grads_exact(eb.d_scaled(rows, dP)), ex.query_labels, ex.key_labels)


def _d_scaled_floats(r: Replay, head: int | None) -> Array | None:
    """``weights ∘ (d_weights − rowsum(d_weights ∘ weights))``: ``[L, L_k]``, 0 where blocked.

    Variants: ``softmax_grad="elementwise"`` (``weights ∘ d_weights``: the softmax
    treated as element-wise), ``"diagonal"`` (``weights ∘ (1 - weights) ∘ d_weights``:
    the Jacobian's diagonal only, each weight's derivative by its own score);
    ``masked_grad="leak"`` (a blocked entry left as
    ``d_weights − rowsum``).
    """
    P, dP = r.inputs(D_SCALED, head)
    if P is None or dP is None or P.shape != dP.shape:
        return None
    if r.variant.softmax_grad == "elementwise":
        dS = P * dP  # [L, L_k]
        D = np.zeros((P.shape[0], 1))
    elif r.variant.softmax_grad == "diagonal":
        D = P * dP  # [L, L_k]: what -P∘(rowsum) becomes when only the diagonal of the Jacobian is kept
        dS = P * (1 - P) * dP  # [L, L_k]
    else:
        D = np.sum(dP * P, axis=-1, keepdims=True)  # [L, 1]
        dS = P * (dP - D)  # [L, L_k]
    if r.variant.masked_grad == "leak" and r.allowed is not None:
        dS = np.where(r.allowed, dS, dP - D)  # [L, L_k]; blocked entries not multiplied by their zero weight
    return dS


def _d_scaled_slack(r: Replay, head: int | None) -> Array:
    w, dw = D_SCALED.inputs(r.ex, head)
    P, dP = np.abs(r.value(w)), r.value(dw)
    eP, edP = r.delta(*w), r.delta(*dw)
    D = np.abs(np.sum(dP * r.value(w), axis=-1, keepdims=True))  # [L, 1]
    eD = np.sum(edP * P + np.abs(dP) * eP, axis=-1, keepdims=True)  # [L, 1]
    return P * (edP + eD) + eP * (np.abs(dP) + D + edP + eD)  # [L, L_k]


def _d_scaled_work(sol: Solution, step: Step, i: int, j: int) -> str:
    P, dP = sol.step("weights", step.head), sol.step("d_weights", step.head)
    rl, cl = step.row_labels[i], step.col_labels[j]
    D = sum(p * g for p, g in zip(P.value[i], dP.value[i]))
    rowsum = " + ".join(f"{factor(dP.exact[i][k], dP.value[i][k])}·{factor(P.exact[i][k], P.value[i][k])}"
                        for k in range(P.shape[1]))
    return (f"weights[{rl}, {cl}]·(d_weights[{rl}, {cl}] − Σ_k d_weights[{rl}, k]·weights[{rl}, k]) = "
            f"{factor(P.exact[i][j], P.value[i][j])}·({factor(dP.exact[i][j], dP.value[i][j])} − ({rowsum})) = "
            f"{factor(P.exact[i][j], P.value[i][j])}·({factor(dP.exact[i][j], dP.value[i][j])} − {num(D)}) "
            f"{total(step.exact[i][j], step.value[i][j])}")


def _d_scaled_why(step: Step, ex: Exercise) -> list[Text]:
    out: list[Text] = [Msg("step.d_scaled.why")]
    if ex.has_bias:
        out.append(Msg("step.d_scaled.why.bias"))
    return out


D_SCALED = StepKind(
    id="d_scaled", scope="head", op="∘", exists=always, inputs=lambda ex, head: (("weights", head), ("d_weights", head)),
    build=_d_scaled, floats=_d_scaled_floats, slack=_d_scaled_slack, production=production("d_scaled"),
    rounding=rounding(_d_scaled_slack),
    work=_d_scaled_work, given=givens(own("weights"), own("d_weights")),
    varies=frozenset({"softmax_grad", "masked_grad"}), fixed_by_mask=0.0, backward=True, why=_d_scaled_why,
    latex=r"d_{\text{scaled}} = P \circ \big(d_{\text{weights}} - \mathrm{rowsum}(d_{\text{weights}} \circ P)\big)",
)


# --- d_V = weightsᵀ·d_head (summed over a K/V head's group) ------------------------------------------------


def _group_inputs(*ids: str) -> Callable[[Exercise, int | None], tuple[tuple[str, int], ...]]:
    """The steps a K/V gradient of ``head`` reads: ``ids`` of every query head of its group."""
    return lambda ex, head: tuple((id, h) for h in kv_group(ex, head) for id in ids)


def _d_v(bd: Build, h: int | None) -> Step:
    ex = bd.ex

    def one(hh: int) -> eb.Grads:
        rows = cast("tuple[SoftmaxRow, ...]", bd.data["weights", hh])
        dH = cast(eb.Rational, bd.data["d_head_output", hh])
        return eb.d_v(rows, dH, ex.L_k)  # [L_k, L]·[L, d_v] -> [L_k, d_v]

    g = bd.data["d_v", h] = group_grads(bd, "d_v", h, one)
    name = f"d_head_{(h or 0) + 1}" if not sigma(ex, h) else "d_head_h"
    d_v = ex.heads[h or 0].d_v
    formula = f"d_V = {sigma(ex, h)}weights{'_h' if sigma(ex, h) else ''}ᵀ·{name}"
    return Step("d_v", h, "d_V", formula, (Operand("weightsᵀ", (ex.L_k, ex.L)), Operand(name, (ex.L, d_v))),
                "·", eb.grads_exact(g), ex.key_labels, dims("d", d_v), **kv_tags(ex, h))  # type: ignore[arg-type]


def _d_v_floats(r: Replay, head: int | None) -> Array | None:
    """``weightsᵀ·d_head``: ``[L_k, L]·[L, d_v]`` -> ``[L_k, d_v]``; with grouped K/V heads the sum over the group."""
    def one(h: int) -> Array | None:
        P, dH = r.input("weights", h), r.input("d_head_output", h)
        return None if P is None or dH is None or P.shape[0] != dH.shape[0] else P.T @ dH

    return group_sum(r, head, one)


def _d_v_slack(r: Replay, head: int | None) -> Array:
    return sum((mul_slack(r.value(("weights", h)).T, r.delta("weights", h).T, r.value(("d_head_output", h)),
                          r.delta("d_head_output", h)) for h in walked_group(r, head)), np.zeros(()))


D_V = StepKind(
    id="d_v", scope="head", op="·", exists=always, inputs=_group_inputs("weights", "d_head_output"),
    build=_d_v, floats=_d_v_floats, slack=_d_v_slack, production=production("d_v"), rounding=rounding(_d_v_slack),
    work=kv_grad_work("weights", "d_head_output", scaled=False), varies=frozenset({"kv_grad"}),
    given=lambda sol, step: _group_givens(sol, step, "weights", "d_head_output"),
    latex=r"d_V = $sigma\text{weights}$h^\top d_{\text{head}$h}",
    backward=True, per_kv_head=True, why=kv_why,
)


# --- d_Q = d_scaled·K / √d_k, d_K = d_scaledᵀ·Q / √d_k (summed over a K/V head's group) ---------------------


def _scale(r: Replay, head: int | None) -> float:
    return 1 / math.sqrt(r.ex.heads[head or 0].d_k) if r.variant.grad_scale else 1.0


def _d_q_inputs(ex: Exercise, head: int | None) -> tuple[tuple[str, int | None], ...]:
    """``d_scaled`` and K; with RoPE (format v3) ``d_Q_rot``, which ``d_Q`` is turned back from."""
    return (("d_q_rot", head),) if ex.rope is not None else (("d_scaled", head), ("k", head))


def _d_q(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    if ex.rope is not None:
        return _unrotated(bd, "d_q", h)
    rows = cast("tuple[SoftmaxRow, ...]", bd.data["weights", h])
    dP = cast(eb.Rational, bd.data["d_weights", h])
    d_k = ex.heads[h or 0].d_k
    g = eb.d_q(rows, dP, cast(QMat, bd.data["k", h]), d_k)  # [L, L_k]·[L_k, d_k] -> [L, d_k]
    bd.data["d_q", h] = g
    ops = (Operand("d_scaled", (ex.L, ex.L_k)), Operand("K", (ex.L_k, d_k)))
    return Step("d_q", h, "d_Q", "d_Q = d_scaled·K / √d_k", ops, "·", eb.grads_exact(g), ex.query_labels, dims("d", d_k))


def _d_q_floats(r: Replay, head: int | None) -> Array | None:
    """``d_scaled·K / √d_k``: ``[L, L_k]·[L_k, d_k]`` -> ``[L, d_k]``."""
    if r.ex.rope is not None:
        return _unrotated_floats(r, "d_q", head)
    dS, K = r.inputs(D_Q, head)
    return None if dS is None or K is None or dS.shape[1] != K.shape[0] else dS @ K * _scale(r, head)


def _d_q_slack(r: Replay, head: int | None) -> Array:
    if r.ex.rope is not None:
        return _unrotated_slack(r, "d_q", head)
    ds, k = D_Q.inputs(r.ex, head)
    return mul_slack(r.value(ds), r.delta(*ds), r.value(k), r.delta(*k)) * _scale(r, head)


_d_q_product = product(lambda sol, step: step_of(sol, "d_scaled", step.head), lambda sol, step: step_of(sol, "k", step.head),
                       lambda sol, step: sqrt_dk(sol.exercise, step.head))


D_Q = StepKind(
    id="d_q", scope="head", op="·", exists=always, inputs=_d_q_inputs,
    build=_d_q, floats=_d_q_floats, slack=_d_q_slack, production=production("d_q"), rounding=rounding(_d_q_slack),
    varies=frozenset({"grad_scale", "rope", "rope_grad"}),
    work=lambda sol, step, i, j: (_unrotated_work(sol, step, i, j) if sol.exercise.rope is not None
                                  else _d_q_product(sol, step, i, j)),
    given=lambda sol, step: (given_step(sol.step("d_q_rot", step.head)),) if sol.exercise.rope is not None
    else givens(own("d_scaled"), own("k"))(sol, step),
    latex=r"d_Q = \frac{d_{\text{scaled}}\, K}{\sqrt{$d_k}}", backward=True,
    latex_rope=r"d_Q = R(m\theta)^\top d_{Q_\text{rot}}",
    why=lambda step, ex: _unrotated_why(step, ex) if ex.rope is not None else [Msg("step.d_q.why")],
    arithmetic=lambda sol, step, places: _unrotated_arithmetic(sol, step, places) if sol.exercise.rope is not None else (),
)


def _d_k(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    if ex.rope is not None:
        return _unrotated(bd, "d_k", h)
    d_k = ex.heads[h or 0].d_k

    def one(hh: int) -> eb.Grads:
        rows_h = cast("tuple[SoftmaxRow, ...]", bd.data["weights", hh])
        dP_h = cast(eb.Rational, bd.data["d_weights", hh])
        return eb.d_k(rows_h, dP_h, cast(QMat, bd.data["q", hh]), d_k, ex.L_k)  # [L_k, L]·[L, d_k] -> [L_k, d_k]

    g = bd.data["d_k", h] = group_grads(bd, "d_k", h, one)
    ops = (Operand("d_scaledᵀ", (ex.L_k, ex.L)), Operand("Q", (ex.L, d_k)))
    sub = "_h" if sigma(ex, h) else ""
    return Step("d_k", h, "d_K", f"d_K = {sigma(ex, h)}d_scaled{sub}ᵀ·Q{sub} / √d_k", ops, "·", eb.grads_exact(g),
                ex.key_labels, dims("d", d_k), **kv_tags(ex, h))  # type: ignore[arg-type]


def _d_k_floats(r: Replay, head: int | None) -> Array | None:
    """``d_scaledᵀ·Q / √d_k``: ``[L_k, L]·[L, d_k]`` -> ``[L_k, d_k]`` (``d_scaled·Q`` under ``d_k_transposed=False``);
    with grouped K/V heads the sum over the query heads of the group."""
    if r.ex.rope is not None:
        return _unrotated_floats(r, "d_k", head)

    def one(h: int) -> Array | None:
        dS, Q = r.input("d_scaled", h), r.input("q", h)
        if dS is None or Q is None:
            return None
        if r.variant.d_k_order == "q_first":  # Q·d_scaledᵀ: [L, d_k]·[L_k, L], a product only when d_k = L_k
            return None if Q.shape[1] != dS.shape[1] else Q @ dS.T * _scale(r, h)  # [L, L]
        if r.variant.d_k_order == "qt_first":  # Qᵀ·d_scaled: [d_k, L]·[L, L_k] -> [d_k, L_k], d_K transposed
            return None if Q.shape[0] != dS.shape[0] else Q.T @ dS * _scale(r, h)
        A = dS.T if r.variant.d_k_transposed else dS  # [L_k, L]; without the transpose [L, L_k], chains only if square
        return None if A.shape[1] != Q.shape[0] else A @ Q * _scale(r, h)

    return group_sum(r, head, one)


def _d_k_slack(r: Replay, head: int | None) -> Array:
    if r.ex.rope is not None:
        return _unrotated_slack(r, "d_k", head)
    return sum((mul_slack(r.value(("d_scaled", h)).T, r.delta("d_scaled", h).T, r.value(("q", h)),
                          r.delta("q", h)) * _scale(r, h) for h in walked_group(r, head)), np.zeros(()))


def _group_givens(sol: Solution, step: Step, *ids: str) -> tuple[Input, ...]:
    """Each head of the group's ``ids`` (one head without grouping), named by head when there are several."""
    group = kv_group(sol.exercise, step.head)
    out = []
    for h in group:
        for id in ids:
            inp = given_step(sol.step(id, h))
            named = len(group) > 1 and not str(inp.name).endswith(f"_{h + 1}")  # d_head_2 says its head already
            out.append(replace(inp, name=Msg("check.step_of_head", step=inp.name, head=h + 1)) if named else inp)
    return tuple(out)


def _d_k_inputs(ex: Exercise, head: int | None) -> tuple[tuple[str, int | None], ...]:
    """Each query head's ``d_scaled`` and Q; with RoPE (format v3) ``d_K_rot``, which ``d_K`` is turned back from."""
    return (("d_k_rot", head),) if ex.rope is not None else _group_inputs("d_scaled", "q")(ex, head)


_d_k_product = kv_grad_work("d_scaled", "q", scaled=True)


D_K = StepKind(
    id="d_k", scope="head", op="·", exists=always, inputs=_d_k_inputs,
    build=_d_k, floats=_d_k_floats, slack=_d_k_slack, production=production("d_k"), rounding=rounding(_d_k_slack),
    varies=frozenset({"grad_scale", "d_k_transposed", "d_k_order", "kv_grad", "rope", "rope_grad"}),
    work=lambda sol, step, i, j: (_unrotated_work(sol, step, i, j) if sol.exercise.rope is not None
                                  else _d_k_product(sol, step, i, j)),
    given=lambda sol, step: (given_step(sol.step("d_k_rot", step.head)),) if sol.exercise.rope is not None
    else _group_givens(sol, step, "d_scaled", "q"),
    latex=r"d_K = $sigma\frac{d_{\text{scaled}$h}^\top Q$h}{\sqrt{$d_k}}", backward=True,
    latex_rope=r"d_K = R(n\theta)^\top d_{K_\text{rot}}",
    per_kv_head=True,
    why=lambda step, ex: _unrotated_why(step, ex) if ex.rope is not None else kv_why(step, ex),
    arithmetic=lambda sol, step, places: _unrotated_arithmetic(sol, step, places) if sol.exercise.rope is not None else (),
)


# --- RoPE (format v3, issue 23): d_Q_rot, d_K_rot, and d_Q, d_K turned back ----------------------------------
# The scores read Q_rot and K_rot, so d_scaled gives their gradients first (d_Q_rot = d_scaled·K_rot/√d_k,
# d_K_rot = d_scaledᵀ·Q_rot/√d_k); Q_rot = R(mθ)·Q pair by pair, so d_Q = R(mθ)ᵀ·d_Q_rot, the inverse rotation
# (R is orthogonal: RoFormer, Su et al. 2021, §3.2.2), and likewise d_K per key position.  A KV cache's keys
# are stored rotated: their rows of d_K are d_K_rot's.  V is not rotated: d_V is unchanged.


def _d_rot(bd: Build, h: int | None, id: str) -> Step:
    ex = bd.ex
    d_k = ex.heads[h or 0].d_k
    if id == "d_q_rot":
        rows = cast("tuple[SoftmaxRow, ...]", bd.data["weights", h])
        g = eb.d_q_rot(rows, cast(eb.Rational, bd.data["d_weights", h]), cast("TrigMat", bd.data["k_rot", h]), d_k)  # [L, d_k]
        bd.data[id, h] = g
        ops = (Operand("d_scaled", (ex.L, ex.L_k)), Operand("K_rot", (ex.L_k, d_k)))
        return Step(id, h, "d_Q_rot", "d_Q_rot = d_scaled·K_rot / √d_k", ops, "·", eb.grads_exact(g),
                    ex.query_labels, dims("d", d_k))

    def one(hh: int) -> eb.Grads:
        rows_h = cast("tuple[SoftmaxRow, ...]", bd.data["weights", hh])
        dP_h = cast(eb.Rational, bd.data["d_weights", hh])
        return eb.d_k_rot(rows_h, dP_h, cast("TrigMat", bd.data["q_rot", hh]), d_k, ex.L_k)  # [L_k, L]·[L, d_k] -> [L_k, d_k]

    g = bd.data[id, h] = group_grads(bd, id, h, one)
    ops = (Operand("d_scaledᵀ", (ex.L_k, ex.L)), Operand("Q_rot", (ex.L, d_k)))
    sub = "_h" if sigma(ex, h) else ""
    return Step(id, h, "d_K_rot", f"d_K_rot = {sigma(ex, h)}d_scaled{sub}ᵀ·Q_rot{sub} / √d_k", ops, "·",
                eb.grads_exact(g), ex.key_labels, dims("d", d_k), **kv_tags(ex, h))  # type: ignore[arg-type]


def _d_q_rot_floats(r: Replay, head: int | None) -> Array | None:
    """``d_scaled·K_rot / √d_k``: ``[L, L_k]·[L_k, d_k]`` -> ``[L, d_k]``."""
    dS, K = r.inputs(D_Q_ROT, head)
    return None if dS is None or K is None or dS.shape[1] != K.shape[0] else dS @ K * _scale(r, head)


def _d_q_rot_slack(r: Replay, head: int | None) -> Array:
    ds, k = D_Q_ROT.inputs(r.ex, head)
    return mul_slack(r.value(ds), r.delta(*ds), r.value(k), r.delta(*k)) * _scale(r, head)


def _d_k_rot_floats(r: Replay, head: int | None) -> Array | None:
    """``d_scaledᵀ·Q_rot / √d_k``: ``[L_k, L]·[L, d_k]`` -> ``[L_k, d_k]`` (the group's sum with grouped K/V heads)."""
    def one(h: int) -> Array | None:
        dS, Q = r.input("d_scaled", h), r.input("q_rot", h)
        if dS is None or Q is None:
            return None
        if r.variant.d_k_order == "q_first":  # Q_rot·d_scaledᵀ: a product only when d_k = L_k (as d_K's)
            return None if Q.shape[1] != dS.shape[1] else Q @ dS.T * _scale(r, h)
        if r.variant.d_k_order == "qt_first":  # Q_rotᵀ·d_scaled: [d_k, L_k], transposed
            return None if Q.shape[0] != dS.shape[0] else Q.T @ dS * _scale(r, h)
        A = dS.T if r.variant.d_k_transposed else dS  # [L_k, L]; without the transpose [L, L_k]
        return None if A.shape[1] != Q.shape[0] else A @ Q * _scale(r, h)

    return group_sum(r, head, one)


def _d_k_rot_slack(r: Replay, head: int | None) -> Array:
    return sum((mul_slack(r.value(("d_scaled", h)).T, r.delta("d_scaled", h).T, r.value(("q_rot", h)),
                          r.delta("q_rot", h)) * _scale(r, h) for h in walked_group(r, head)), np.zeros(()))


def _rot_why(step: Step, ex: Exercise) -> list[Text]:
    out: list[Text] = [Msg(f"step.{step.id}.why")]
    if step.id == "d_k_rot" and ex.grouped and len(kv_group(ex, step.head)) > 1:
        out.append(Msg("step.d_kv.why.grouped", kv=ex.kv_head(step.head or 0) + 1,
                       heads=Msg.joined("list.sep", [str(h + 1) for h in kv_group(ex, step.head)])))
    return out


def _has_rope(ex: Exercise) -> bool:
    return ex.rope is not None


D_Q_ROT = StepKind(
    id="d_q_rot", scope="head", op="·", exists=_has_rope, inputs=lambda ex, head: (("d_scaled", head), ("k_rot", head)),
    build=lambda bd, h: _d_rot(bd, h, "d_q_rot"), floats=_d_q_rot_floats, slack=_d_q_rot_slack,
    production=production("d_q_rot"), rounding=rounding(_d_q_rot_slack), varies=frozenset({"grad_scale"}),
    work=product(lambda sol, step: step_of(sol, "d_scaled", step.head), lambda sol, step: step_of(sol, "k_rot", step.head),
                 lambda sol, step: sqrt_dk(sol.exercise, step.head)),
    given=givens(own("d_scaled"), own("k_rot")),
    latex=r"d_{Q_\text{rot}} = \frac{d_{\text{scaled}}\, K_\text{rot}}{\sqrt{$d_k}}", backward=True, advanced=True,
    why=_rot_why,
)


D_K_ROT = StepKind(
    id="d_k_rot", scope="head", op="·", exists=_has_rope, inputs=_group_inputs("d_scaled", "q_rot"),
    build=lambda bd, h: _d_rot(bd, h, "d_k_rot"), floats=_d_k_rot_floats, slack=_d_k_rot_slack,
    production=production("d_k_rot"), rounding=rounding(_d_k_rot_slack),
    varies=frozenset({"grad_scale", "d_k_transposed", "d_k_order", "kv_grad"}),
    work=kv_grad_work("d_scaled", "q_rot", scaled=True),
    given=lambda sol, step: _group_givens(sol, step, "d_scaled", "q_rot"),
    latex=r"d_{K_\text{rot}} = $sigma\frac{d_{\text{scaled}$h}^\top Q_\text{rot}$h}{\sqrt{$d_k}}", backward=True,
    advanced=True, per_kv_head=True, why=_rot_why,
)


def _positions(ex: Exercise, id: str) -> tuple[int, ...]:
    return ex.query_positions if id == "d_q" else ex.key_positions


def _kept(ex: Exercise, id: str) -> int:
    """The rows ``id`` copies from its rotated gradient: a KV cache's keys (stored rotated) for ``d_k``."""
    return ex.L_past if id == "d_k" else 0


def _position_letter(id: str) -> str:
    """The letter of a row's position in ``id``'s formula and worked lines: ``m`` for a query (``d_q``), ``n``
    for a key (``d_k``), as the explanations and hints name them (``R(nθ)`` for the keys)."""
    return "m" if id == "d_q" else "n"


def _unrotated(bd: Build, id: str, h: int | None) -> Step:
    """``d_Q`` (``d_K``) with RoPE: ``d_Q_rot`` (``d_K_rot``) turned back pair by pair, ``R(mθ)ᵀ``."""
    ex = bd.ex
    rope = ex.rope
    assert rope is not None
    d_k = ex.heads[h or 0].d_k
    thetas = rope.thetas(d_k)
    assert thetas is not None  # tutor.exercise.rope refuses an irrational angle
    src = f"{id}_rot"
    first = kv_group(ex, h)[0] if id == "d_k" else (h or 0)
    if id == "d_k" and (h or 0) != first:  # a K/V head's gradient, turned back once for its group
        g = cast(eb.Grads, bd.data[id, first])
    else:
        g = eb.unrotate(cast(eb.Grads, bd.data[src, h]), _positions(ex, id), thetas, rope.pairs(d_k), _kept(ex, id))
    bd.data[id, h] = g
    sym = "Q" if id == "d_q" else "K"
    n = ex.L if id == "d_q" else ex.L_k
    tags = kv_tags(ex, h) if id == "d_k" else {}
    p = _position_letter(id)
    return Step(id, h, f"d_{sym}", f"d_{sym} = R({p}θ)ᵀ·d_{sym}_rot", (Operand(f"d_{sym}_rot", (n, d_k)),), "rot",
                eb.grads_exact(g), ex.query_labels if id == "d_q" else ex.key_labels, dims("d", d_k),
                **tags)  # type: ignore[arg-type]


def _unrotated_floats(r: Replay, id: str, head: int | None) -> Array | None:
    """``d_Q_rot`` (``d_K_rot``) turned back, ``[n, d_k]``, under RoPE's mistakes (the angles as the forward
    took them); ``rope_grad="not_unrotated"``: left as it is (the gradient of Q taken as that of Q_rot);
    ``"forward"``: turned forward by ``R(mθ)`` instead of back by ``R(mθ)ᵀ``."""
    from .rope import rotated, turned_back

    (M,) = r.inputs(KINDS_ROPE[id], head)
    if M is None or M.shape != (len(_positions(r.ex, id)), r.ex.heads[head or 0].d_k):  # a mistake upstream
        return None  # changed its shape (d_K_rot transposed): no pair to turn back
    if r.variant.rope_grad == "not_unrotated":
        return M
    kept = _kept(r.ex, id)
    turn = rotated if r.variant.rope_grad == "forward" else turned_back  # "forward": by R(mθ), not R(mθ)ᵀ
    new = turn(r.ex, M[kept:], _positions(r.ex, id)[kept:], r.variant.rope)  # [n − kept, d_k]
    return np.vstack([M[:kept], new]) if kept else new


def _unrotated_slack(r: Replay, id: str, head: int | None) -> Array:
    """A turn moves each output of a pair by at most ``|δa| + |δb|`` (``|cos|, |sin| <= 1``)."""
    from .rope import pair_sum

    (key,) = KINDS_ROPE[id].inputs(r.ex, head)
    d = r.delta(*key)  # [n, d_k]
    out = pair_sum(r.ex, d)
    kept = _kept(r.ex, id)
    out[:kept] = d[:kept]  # the cached keys' rows are copied
    return out


def _angle(ex: Exercise, id: str, d_k: int, row: int, i: int) -> str:
    from ..exact.numbers import frac_text

    assert ex.rope is not None
    thetas = ex.rope.thetas(d_k)
    assert thetas is not None
    return frac_text(_positions(ex, id)[row] * thetas[i])


def _unrotated_work(sol: Solution, step: Step, r: int, j: int) -> Text:
    """``d_Q[t1, d1] = d_Q_rot[t1, d1]·cos(1) + d_Q_rot[t1, d2]·sin(1) = … ≈ …`` (the pair turned back)."""
    from .rope import pair_of
    from .worked import factor

    ex = sol.exercise
    m = sol.step(f"{step.id}_rot", step.head)
    rl = step.row_labels[r]
    if r < _kept(ex, step.id):
        return Msg("practice.work.noted", work=f"{m.name}[{rl}, {step.col_labels[j]}] "
                   f"{total(step.exact[r][j], step.value[r][j])}", note=Msg("rope.work.cached_grad"))
    d_k = m.shape[1]
    i, a, b = pair_of(ex, d_k, j)
    ang = _angle(ex, step.id, d_k, r, i)
    ca, cb = m.col_labels[a], m.col_labels[b]
    fa, fb = factor(m.exact[r][a], m.value[r][a]), factor(m.exact[r][b], m.value[r][b])
    if j == a:
        rule = f"{m.name}[{rl}, {ca}]·cos({ang}) + {m.name}[{rl}, {cb}]·sin({ang})"
        nums = f"{fa}·cos({ang}) + {fb}·sin({ang})"
    else:
        rule = f"-{m.name}[{rl}, {ca}]·sin({ang}) + {m.name}[{rl}, {cb}]·cos({ang})"
        nums = f"-{fa}·sin({ang}) + {fb}·cos({ang})"
    return f"{rule} = {nums} {total(step.exact[r][j], step.value[r][j])}"


def _unrotated_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    """Each pair of each row turned back on paper: the angle ``m·θ_i``, then
    ``[g_a, g_b] → [g_a·cos + g_b·sin, −g_a·sin + g_b·cos]`` (a cached key's row: copied)."""
    from ..base.decimals import legible
    from ..exact.numbers import Rat, frac_text, notation
    from .worked import entry_name, factor, result

    ex = sol.exercise
    assert ex.rope is not None
    m = sol.step(f"{step.id}_rot", step.head)
    d_k = m.shape[1]
    thetas = ex.rope.thetas(d_k)
    assert thetas is not None
    pos = _positions(ex, step.id)
    out = []
    for r in range(step.shape[0]):
        if r < _kept(ex, step.id):
            out.append(Worked(step.row_labels[r], (Msg("rope.work.cached_grad"),), ": "))
            continue
        for i, (a, b) in enumerate(ex.rope.pairs(d_k)):
            ang = frac_text(pos[r] * thetas[i])
            fa = factor(m.exact[r][a], m.value[r][a], places)
            fb = factor(m.exact[r][b], m.value[r][b], places)
            rounded = not (isinstance(m.exact[r][a], Rat) and isinstance(m.exact[r][b], Rat))

            def res(e: object, v: float, rounded: bool = rounded) -> str:
                if rounded and not isinstance(e, Rat):  # decimals in: only ≈ is true of an irrational result
                    return "≈ " + notation(legible(v, places))
                return result(e, v, places, rounded=rounded)  # type: ignore[arg-type]

            first = notation(f"{_position_letter(step.id)}·θ_{i} = {pos[r]}·{factor(thetas[i], float(thetas[i]))} = {ang}")
            out.append(Worked(f"{step.row_labels[r]} ({m.col_labels[a]}, {m.col_labels[b]})", (first,), ": "))
            xa = notation(f"{fa}·cos({ang}) + {fb}·sin({ang}) ") + res(step.exact[r][a], step.value[r][a])
            xb = notation(f"-{fa}·sin({ang}) + {fb}·cos({ang}) ") + res(step.exact[r][b], step.value[r][b])
            out.append(Worked(entry_name(step, r, a), (xa,)))
            out.append(Worked(entry_name(step, r, b), (xb,)))
    return tuple(out)


def _unrotated_why(step: Step, ex: Exercise) -> list[Text]:
    out: list[Text] = [Msg(f"step.{step.id}.why.rope")]
    if step.id == "d_k" and ex.has_cache:
        out.append(Msg("step.d_k.why.rope_cache", L_past=ex.L_past))
    return out


KINDS_ROPE = {"d_q": D_Q, "d_k": D_K}


#: One head's backward kinds, in the contract's order (RoPE's d_Q_rot, d_K_rot before the d_Q, d_K turned back from them).
HEAD_GRADS: tuple[StepKind, ...] = (D_HEAD_OUTPUT, D_WEIGHTS, D_SCALED, D_V, D_Q_ROT, D_Q, D_K_ROT, D_K)
