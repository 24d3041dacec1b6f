"""The backward pass through the layer: ``d_output``, ``d_concat``, ``d_W_O``, ``d_b_O``, and back to ``d_X``, ``d_X_kv``.

``output = concat·W_O + b_O`` (Vaswani et al. 2017, §3.2.2) gives
``d_concat = d_output·W_Oᵀ``, ``d_W_O = concatᵀ·d_output`` and
``d_b_O = Σ_rows d_output``; X reaches the output through every head's
projections, so ``d_X = Σ_h d_Q·W_Qᵀ (+ d_K·W_Kᵀ + d_V·W_Vᵀ in
self-attention)``.  The steps before the heads' (``d_output`` … ``d_b_o``)
come first in the backward pass, ``d_x`` and ``d_x_kv`` last
(:attr:`~tutor.steps.StepKind.late`).  What the backward kinds share is
:mod:`tutor.steps.grad`.

Each kind's engines, side by side: the exact build (:mod:`tutor.exact.backward`),
the float walk and its slack (under ``bias_grad="mean"``: a bias's gradient
averaged, not summed), the batched layer's gradient and its rounding bound.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, cast

from ..base.messages import Msg
from ..exact import backward as eb
from ..exact.engine import QMat
from ..exact.numbers import SoftmaxRow
from ..exercise.record import Exercise
from .grad import (
    bias_step,
    bias_sum,
    bias_work,
    final_key,
    floats_of,
    given_of,
    givens,
    has_w_o,
    heads_key,
    layer_key,
    new_rows,
    new_slice,
    num,
    product,
    production,
    rounding,
    rows_note,
    step_of,
)
from .kind import Input, StepKind, always, dims, given_matrix, given_step
from .records import Operand, Solution, Step
from .state import Build, Replay, mul_slack
from .worked import MOST_PLACES, adds_up, total

if TYPE_CHECKING:
    import numpy as np

    from .rounding import Array
else:
    from ..base.lazy import numpy as np

# --- d_output: the upstream gradient ------------------------------------------------------------------------


def _d_output(bd: Build, head: int | None) -> Step:
    ex = bd.ex
    G = [list(r) for r in ex.upstream] if ex.upstream is not None else eb.ones(ex.L, ex.d_out)
    bd.data["d_output", None] = G
    final = bd.steps[final_key(bd)]
    formula = "d_output = ∂L/∂output = upstream" if ex.upstream is not None else Msg("formula.d_output.ones")
    return Step("d_output", None, "d_output", formula, (Operand("upstream", (ex.L, ex.d_out)),), "=",
                eb.rational_exact(G), final.row_labels, final.col_labels)


def _d_output_floats(r: Replay, head: int | None = None) -> Array:
    """The upstream gradient ``[L, d_out]``: the exercise's ``upstream``, or all ones."""
    ex = r.ex
    return np.ones((ex.L, ex.d_out)) if ex.upstream is None else floats_of(ex.upstream)


def _d_output_slack(r: Replay, head: int | None = None) -> Array:
    return np.zeros_like(r.value(("d_output", None)))


def _d_output_given(sol: Solution, step: Step) -> tuple[Input, ...]:
    """The forward pass's result, whose gradient the upstream is, and the exercise's ``upstream`` ``[L, d_out]``
    when it has one: the step copies it, so it is given (without it only ``show`` revealed it, counted as
    missed); all ones, when the exercise gives none, the formula says."""
    forward = [s for s in sol.steps if not s.id.startswith("d_")]
    ex = sol.exercise
    if ex.upstream is None:
        return (given_step(forward[-1]),)
    return (given_step(forward[-1]), given_matrix("upstream", ex.upstream, step.row_labels, step.col_labels))


D_OUTPUT = StepKind(
    id="d_output", scope="layer", op="=", exists=always, inputs=lambda ex, head: (),
    build=_d_output, floats=_d_output_floats, slack=_d_output_slack, production=production("d_output"),
    rounding=rounding(_d_output_slack),
    work=lambda sol, step, i, j: f"upstream[{step.row_labels[i]}, {step.col_labels[j]}] "
                                 f"{total(step.exact[i][j], step.value[i][j])}",
    given=_d_output_given, latex=r"d_{\text{output}} = \frac{\partial L}{\partial\, \text{output}}", backward=True,
)


# --- d_concat = d_output·W_Oᵀ ---------------------------------------------------------------------------------


def _d_concat(bd: Build, head: int | None) -> Step:
    ex = bd.ex
    assert ex.w_o is not None
    (G,) = bd.inputs(D_CONCAT, head)
    dC = eb.d_concat(G, ex.w_o)  # [L, d_out]·[d_out, H·d_v] -> [L, H·d_v]
    bd.data["d_concat", None] = dC
    src = bd.steps[heads_key(ex)]
    return Step("d_concat", None, "d_concat", "d_concat = d_output·W_Oᵀ",
                (Operand("d_output", (ex.L, ex.d_out)), Operand("W_Oᵀ", (ex.d_out, len(ex.w_o)))), "·",
                eb.rational_exact(dC), ex.query_labels, src.col_labels)


def _d_concat_floats(r: Replay, head: int | None = None) -> Array | None:
    """``d_output·W_Oᵀ``: ``[L, d_out]·[d_out, H·d_v]`` -> ``[L, H·d_v]``."""
    (G,) = r.inputs(D_CONCAT, head)
    return None if G is None else G @ floats_of(r.ex.w_o).T


def _d_concat_slack(r: Replay, head: int | None = None) -> Array:
    return r.delta("d_output", None) @ np.abs(floats_of(r.ex.w_o)).T


def _d_concat_given(sol: Solution, step: Step) -> tuple[Input, ...]:
    w_o = sol.exercise.w_o
    assert w_o is not None
    return (given_step(sol.step("d_output", None)), given_matrix("W_O", w_o, dims("r", len(w_o)), dims("d", len(w_o[0]))))


D_CONCAT = StepKind(
    id="d_concat", scope="layer", op="·", exists=has_w_o, inputs=lambda ex, head: (("d_output", None),),
    build=_d_concat, floats=_d_concat_floats, slack=_d_concat_slack, production=production("d_concat"),
    rounding=rounding(_d_concat_slack),
    work=product(lambda sol, step: step_of(sol, "d_output", None),
                 lambda sol, step: given_of("W_Oᵀ", tuple(zip(*cast(Sequence[Sequence[Fraction]], sol.exercise.w_o))))),
    given=_d_concat_given,
    latex=r"d_{\text{concat}} = d_{\text{output}}\, W_O^\top", backward=True,
)


# --- d_W_O = concatᵀ·d_output, d_b_O = Σ_rows d_output ----------------------------------------------------


def _heads(bd: Build) -> list[tuple[Sequence[SoftmaxRow], QMat]]:
    return [(cast("tuple[SoftmaxRow, ...]", bd.data["weights", h]), cast(QMat, bd.data["v", h]))
            for h in range(bd.ex.num_heads)]


def _d_w_o(bd: Build, head: int | None) -> Step:
    ex = bd.ex
    assert ex.w_o is not None
    G = cast(eb.Rational, bd.data["d_output", None])
    g = eb.d_w_o(_heads(bd), G)  # [H·d_v, L]·[L, d_out] -> [H·d_v, d_out]
    src = bd.steps[heads_key(ex)].name
    return Step("d_w_o", None, "d_W_O", f"d_W_O = {src}ᵀ·d_output",
                (Operand(f"{src}ᵀ", (len(ex.w_o), ex.L)), Operand("d_output", (ex.L, ex.d_out))), "·",
                eb.grads_exact(g), dims("r", len(ex.w_o)), dims("o", ex.d_out))


def _d_w_o_floats(r: Replay, head: int | None = None) -> Array | None:
    """``concatᵀ·d_output``: ``[H·d_v, L]·[L, d_out]`` -> ``[H·d_v, d_out]``."""
    C, G = r.inputs(D_W_O, head)
    return None if C is None or G is None or C.shape[0] != G.shape[0] else C.T @ G


def _d_w_o_slack(r: Replay, head: int | None = None) -> Array:
    key = heads_key(r.ex)
    return mul_slack(r.value(key).T, r.delta(*key).T, r.value(("d_output", None)), r.delta("d_output", None))


D_W_O = StepKind(
    id="d_w_o", scope="layer", op="·", exists=has_w_o, inputs=lambda ex, head: (heads_key(ex), ("d_output", None)),
    build=_d_w_o, floats=_d_w_o_floats, slack=_d_w_o_slack, production=production("d_w_o"),
    rounding=rounding(_d_w_o_slack),
    work=product(lambda sol, step: step_of(sol, *heads_key(sol.exercise)).T,
                 lambda sol, step: step_of(sol, "d_output", None)),
    given=givens(lambda sol, step: heads_key(sol.exercise), layer_key("d_output")),
    latex=r"d_{W_O} = \text{concat}^\top d_{\text{output}}", backward=True,
)


def _d_b_o(bd: Build, head: int | None) -> Step:
    ex = bd.ex
    G = cast(eb.Rational, bd.data["d_output", None])
    return bias_step("d_b_o", "d_b_O", "d_output", "d_output", eb.rational_grads(G), dims("o", ex.d_out), None, ex.L)


def _d_b_o_floats(r: Replay, head: int | None = None) -> Array | None:
    """``Σ_rows d_output``: ``[1, d_out]`` (b_O is added to every row)."""
    (G,) = r.inputs(D_B_O, head)
    return bias_sum(r, G)


def _d_b_o_slack(r: Replay, head: int | None = None) -> Array:
    return r.delta("d_output", None).sum(axis=0, keepdims=True)


D_B_O = StepKind(
    id="d_b_o", scope="layer", op="Σ", exists=lambda ex: ex.b_o is not None, inputs=lambda ex, head: (("d_output", None),),
    build=_d_b_o, floats=_d_b_o_floats, slack=_d_b_o_slack, production=production("d_b_o"),
    rounding=rounding(_d_b_o_slack),
    work=bias_work, given=givens(layer_key("d_output")), varies=frozenset({"bias_grad"}),
    latex=r"d_{b_O} = \textstyle\sum_{\text{rows}} d_{\text{output}}", backward=True,
)


# --- the inputs: d_x, d_x_kv ------------------------------------------------------------------------------


def _paths(ex: Exercise, id: str) -> tuple[str, ...]:
    return ("d_q",) if id == "d_x" and ex.is_cross else ("d_q", "d_k", "d_v") if id == "d_x" else ("d_k", "d_v")


def _terms(ex: Exercise, id: str) -> list[tuple[str, int]]:
    """The paths of ``d_x``/``d_x_kv`` as ``(source step, head)``: ``d_q`` of every head, then ``d_k``, ``d_v``
    once per K/V head (the first query head of each group holds the group's; every head without grouping)."""
    srcs = _paths(ex, id)
    out = [("d_q", h) for h in range(ex.num_heads) if "d_q" in srcs]
    kv_heads = [ex.sharing(g)[0] for g in range(ex.num_kv_heads)] if ex.grouped else range(ex.num_heads)
    if not ex.grouped:  # v1: head by head, d_q, d_k, d_v of each
        return [(src, h) for h in range(ex.num_heads) for src in srcs]
    return out + [(src, h) for h in kv_heads for src in srcs if src != "d_q"]


def _proj_w(ex: Exercise, id: str, head: int | None) -> Sequence[Sequence[Fraction]]:
    hd = ex.heads[head or 0]
    return {"d_q": hd.w_q, "d_k": hd.w_k, "d_v": hd.w_v}[id]


def _in_formula(ex: Exercise, id: str) -> str:
    """``d_X = Σ_h (d_Q·W_Qᵀ + d_K·W_Kᵀ + d_V·W_Vᵀ)``; grouped K/V heads ``Σ_h d_Q·W_Qᵀ + Σ_g (…)``; a cache ``d_K[2:]`` (the new rows)."""
    name = "d_X" if id == "d_x" else "d_X_kv"
    srcs = _paths(ex, id)
    text = {s: f"d_{s[2:].upper()}{rows_note(ex, s)}·W_{s[2:].upper()}ᵀ" for s in srcs}
    if not ex.grouped:
        group = " + ".join(text[s] for s in srcs)
        return f"{name} = Σ_h ({group})" if ex.num_heads > 1 else f"{name} = {group}"
    q = ("Σ_h " + text["d_q"]) if "d_q" in srcs else ""
    kv = " + ".join(text[s] for s in srcs if s != "d_q")
    kv = f"Σ_g ({kv})" if ex.num_kv_heads > 1 else kv
    return f"{name} = " + " + ".join(p for p in (q, kv) if p)


def _d_in(id: str) -> Callable[[Build, int | None], Step]:
    def build(bd: Build, head: int | None) -> Step:
        ex = bd.ex
        x = ex.x if id == "d_x" else ex.kv  # step id: d_X is the gradient of X, d_X_kv of X_kv
        acc: eb.Grads = [[eb.GradSum() for _ in range(len(x[0]))] for _ in range(len(x))]
        for src, h in _terms(ex, id):  # [n, d]·[d, d_in]; with a cache the new rows of d_K, d_V
            eb.right_t(cast(eb.Grads, bd.data[src, h])[new_rows(ex, src)], _proj_w(ex, src, h), acc)
        name = "d_X" if id == "d_x" else "d_X_kv"
        labels = ex.query_labels if id == "d_x" else ex.new_key_labels
        paths = tuple(Operand(f"d_{s[2:].upper()}·W_{s[2:].upper()}ᵀ", (len(x), len(x[0]))) for s in _paths(ex, id))
        return Step(id, None, name, _in_formula(ex, id), paths, "+",
                    eb.grads_exact(acc), labels, dims("d", len(x[0])))

    return build


def _paths_floats(r: Replay, q: bool, slack: bool) -> Array | None:
    """``Σ_h d_Q·W_Qᵀ`` (with ``q``) and, once per K/V head, ``d_K·W_Kᵀ + d_V·W_Vᵀ`` (the new rows with a
    KV cache, and only in self-attention for ``d_x``); the slack: ``Σ δ·|W|ᵀ``."""
    ex = r.ex
    terms = [("d_q", h, ex.heads[h].w_q, slice(None)) for h in range(ex.num_heads)] if q else []
    if not (q and ex.is_cross):  # d_x of cross-attention has no K/V path: K and V come from x_kv
        for kv in range(ex.num_kv_heads):  # a group's K/V gradient is counted once, held by its first query head
            h = ex.sharing(kv)[0]
            terms += [("d_k", h, ex.heads[h].w_k, new_slice(r)), ("d_v", h, ex.heads[h].w_v, new_slice(r))]
    acc: Array | None = None
    for id, h, w, rows in terms:
        W = floats_of(w)  # [d_in, d]
        g = r.delta(id, h) if slack else r.input(id, h)
        if g is None or g.shape[1] != W.shape[1]:
            return None
        term = g[rows] @ (np.abs(W).T if slack else W.T)  # [n, d]·[d, d_in] -> [n, d_in]
        if acc is not None and term.shape != acc.shape:
            return None
        acc = term if acc is None else acc + term
    return acc


def _d_x_floats(r: Replay, head: int | None = None) -> Array | None:
    """``Σ_h d_Q·W_Qᵀ`` (+ ``d_K·W_Kᵀ + d_V·W_Vᵀ`` in self-attention, where x is also x_kv): ``[L, d_model]``."""
    return _paths_floats(r, True, False)


def _d_x_slack(r: Replay, head: int | None = None) -> Array:
    out = _paths_floats(r, True, True)
    assert out is not None
    return out


def _d_x_kv_floats(r: Replay, head: int | None = None) -> Array | None:
    """``Σ_g d_K·W_Kᵀ + d_V·W_Vᵀ``: ``[L_k, d_kv]`` (cross-attention)."""
    return _paths_floats(r, False, False)


def _d_x_kv_slack(r: Replay, head: int | None = None) -> Array:
    out = _paths_floats(r, False, True)
    assert out is not None
    return out


def _d_in_work(sol: Solution, step: Step, i: int, j: int) -> str:
    ex = sol.exercise
    parts = []
    for src, h in _terms(ex, step.id):
        g, w = sol.step(src, h), _proj_w(ex, src, h)
        r = i + (ex.L_past if src in ("d_k", "d_v") else 0)  # with a cache row i of X is key row L_past + i
        parts.append(sum(g.value[r][c] * float(w[j][c]) for c in range(g.shape[1])))
    p = 6  # the terms at 6 places, more where they would not sum to the result shown (F8 of the class trial)
    while not adds_up([(num(x, p).strip("()"), "1") for x in parts], "", step.value[i][j], 4) and p < MOST_PLACES:
        p += 1
    terms = " + ".join(num(x, p) for x in parts)
    return f"{step.name}[{step.row_labels[i]}, {step.col_labels[j]}] = {terms} {total(step.exact[i][j], step.value[i][j])}"


def _d_in_given(sol: Solution, step: Step) -> tuple[Input, ...]:
    ex = sol.exercise
    out = []
    for src, h in _terms(ex, step.id):
        w = _proj_w(ex, src, h)
        g, wm = given_step(sol.step(src, h)), given_matrix(f"W_{src[2:].upper()}", w, dims("r", len(w)), dims("d", len(w[0])))
        if ex.num_heads > 1:  # which head each pair is: its query head, or its K/V head when they are grouped
            g, wm = (replace(m, name=Msg("check.step_of_kv_head", step=m.name, kv=ex.kv_head(h) + 1)
                             if ex.grouped and src != "d_q" else Msg("check.step_of_head", step=m.name, head=h + 1))
                     for m in (g, wm))
        out += [g, wm]
    return tuple(out)


D_X = StepKind(
    id="d_x", scope="layer", op="+", exists=always,
    inputs=lambda ex, head: tuple(_terms(ex, "d_x")),
    build=_d_in("d_x"), floats=_d_x_floats, slack=_d_x_slack, production=production("d_x"),
    rounding=rounding(_d_x_slack),
    work=_d_in_work, given=_d_in_given, backward=True, late=True,
    latex=r"d_X = \textstyle\sum_h d_Q W_Q^\top \,(+\, d_K W_K^\top + d_V W_V^\top)",
)
D_X_KV = StepKind(
    id="d_x_kv", scope="layer", op="+", exists=lambda ex: ex.is_cross,
    inputs=lambda ex, head: tuple(_terms(ex, "d_x_kv")),
    build=_d_in("d_x_kv"), floats=_d_x_kv_floats, slack=_d_x_kv_slack, production=production("d_x_kv"),
    rounding=rounding(_d_x_kv_slack),
    work=_d_in_work, given=_d_in_given, backward=True, late=True,
    latex=r"d_{X_{kv}} = \textstyle\sum_h d_K W_K^\top + d_V W_V^\top",
)


#: The layer's backward kinds before the heads', and after them.
BEFORE_HEADS: tuple[StepKind, ...] = (D_OUTPUT, D_CONCAT, D_W_O, D_B_O)
AFTER_HEADS: tuple[StepKind, ...] = (D_X, D_X_KV)

