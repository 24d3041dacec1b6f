"""Scaled dot-product attention, one head: scores, scaled, masked, weights, head output.

``head = softmax(Q Kᵀ / √d_k + M) V`` (Vaswani et al. 2017, eq. 1; the
mask ``M`` as in PyTorch's ``scaled_dot_product_attention``: 0 where a query
may attend a key, ``-inf`` where it may not).  A query row that may attend
to no key gets zero weights and a zero output row.
"""

from __future__ import annotations

import math
from typing import cast

from ..base.messages import join_and, plural, t
from ..exact import engine as exact
from ..exact.engine import Exponents, QMat, Scaled
from ..exact.numbers import SoftmaxRow, notation
from ..exercise.record import Exercise
from .kind import Build, Input, StepKind, always, dims, given_step
from .records import Key, Operand, Solution, Step
from .worked import Worked, dot, entry_name, entry_products, factor, result, softmax_arithmetic, softmax_row, total


def _has_mask(ex: Exercise) -> bool:
    return ex.has_mask


def _pre_mask(ex: Exercise, head: int | None) -> Key:
    """What the mask is added to: the biased scores when the exercise has a bias (format v2), else the scaled ones."""
    return ("biased", head) if ex.has_bias else ("scaled", head)


def empty_rows(ex: Exercise) -> list[int]:
    """The 0-based query rows of ``ex`` that may attend to no key at all."""
    allowed = ex.allowed()
    return [] if allowed is None else [i for i, row in enumerate(allowed) if not any(row)]


def _empty_labels(ex: Exercise) -> tuple[int, str]:
    """How many query rows may attend to no key, and their labels in a sentence (``t3``, ``t2 and t3``)."""
    rows = empty_rows(ex)
    return len(rows), join_and([ex.query_labels[i] for i in rows]) if rows else ""


def torch_empty_row() -> str:
    """What PyTorch 2.13 gives for a query row that may attend to no key, per API and setting.

    Each fact is checked against torch in ``tests/test_torch_claims.py``:
    SDPA returns no weights and a zero output row (since 2.5: its math path
    calls ``_safe_softmax``, pytorch/pytorch#133882);
    ``nn.MultiheadAttention`` returns NaN with ``need_weights=True`` and on
    its inference fast path (taken only when every condition in
    ``MultiheadAttention.forward`` holds: eval, no gradient to track, bool
    masks, ``bias=True`` ...), and ``out_proj.bias`` (0 with ``bias=False``)
    with ``need_weights=False`` off the fast path.
    """
    facts = [t(f"torch.empty_row.{k}") for k in ("sdpa", "mha_nan", "mha_fast", "mha_bias")]
    return t("torch.empty_row", facts=t("torch.facts.sep").join(facts))


def _score_source(ex: Exercise, head: int | None) -> Key:
    """What the softmax reads: the masked scores when the exercise has a mask, else the biased or scaled ones."""
    return ("masked", head) if ex.has_mask else _pre_mask(ex, head)


# --- scores ---------------------------------------------------------------------------------


def _scores(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    Q, K = bd.data["q", h], bd.data["k", h]
    assert isinstance(Q, QMat) and isinstance(K, QMat)
    S = exact.scores(Q, K)  # [L, d_k]·[d_k, L_k] -> [L, L_k]
    bd.data["scores", h] = S
    d_k = ex.heads[h or 0].d_k
    ops = (Operand("Q", (ex.L, d_k)), Operand("Kᵀ", (d_k, ex.L_k)))
    return Step("scores", h, "scores", "scores = Q·Kᵀ", ops, "·", S.exact(), ex.query_labels, ex.key_labels)


def _scores_work(sol: Solution, step: Step, i: int, j: int) -> str:
    q, k = sol.step("q", step.head), sol.step("k", step.head)
    pairs = [(factor(q.exact[i][n], q.value[i][n]), factor(k.exact[j][n], k.value[j][n])) for n in range(q.shape[1])]
    return f"Q[{step.row_labels[i]}, :]·K[{step.col_labels[j]}, :] = {dot(pairs)} {total(step.exact[i][j], step.value[i][j])}"


def _scores_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    q, k = sol.step("q", step.head), sol.step("k", step.head)

    def pairs_of(i: int, j: int) -> tuple[list[tuple[str, str]], str]:
        return [(factor(q.exact[i][n], q.value[i][n], places), factor(k.exact[j][n], k.value[j][n], places))
                for n in range(q.shape[1])], ""

    return entry_products(step, pairs_of, places)


SCORES = StepKind(
    id="scores", scope="head", op="·", exists=always,
    inputs=lambda ex, head: (("q", head), ("k", head)),
    build=_scores, varies=frozenset({"kq"}), work=_scores_work, arithmetic=_scores_arithmetic,
    given=lambda sol, step: (given_step(sol.step("q", step.head)), given_step(sol.step("k", step.head))),
    latex=r"\text{scores} = Q K^\top", axes_note=True,
)


# --- scaled ---------------------------------------------------------------------------------


def _scaled(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    S = bd.data["scores", h]
    assert isinstance(S, QMat)
    d_k = ex.heads[h or 0].d_k
    sc = exact.scale(S, d_k)  # [L, L_k] = U·√t
    bd.data["scaled", h] = sc
    s, t_ = sc.s, sc.t
    root = f"√{d_k}" + (f" = {s}" if t_ == 1 else (f" = {s}√{t_}" if s != 1 else ""))
    ops = (Operand("scores", (ex.L, ex.L_k)), Operand(f"√{d_k}", ()))
    return Step("scaled", h, "scaled", f"scaled = scores / √d_k,  √d_k = {root}", ops, "/", sc.exact(),
                ex.query_labels, ex.key_labels)


def _scaled_work(sol: Solution, step: Step, i: int, j: int) -> str:
    scores = sol.step("scores", step.head)
    d_k = sol.exercise.heads[step.head or 0].d_k
    score = factor(scores.exact[i][j], scores.value[i][j])
    return (f"scores[{step.row_labels[i]}, {step.col_labels[j]}] / sqrt({d_k}) = {score} / sqrt({d_k}) "
            f"{total(step.exact[i][j], step.value[i][j])}")


def _scaled_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    scores = sol.step("scores", step.head)
    d_k = sol.exercise.heads[step.head or 0].d_k
    rows, cols = step.shape
    return tuple(Worked(entry_name(step, i, j), (f"{notation(factor(scores.exact[i][j], scores.value[i][j], places))} / √{d_k} "
                                                 f"{result(step.exact[i][j], step.value[i][j], places)}",))
                 for i in range(rows) for j in range(cols))


SCALED = StepKind(
    id="scaled", scope="head", op="/", exists=always,
    inputs=lambda ex, head: (("scores", head),),
    build=_scaled, varies=frozenset({"scale", "divisor"}), work=_scaled_work, arithmetic=_scaled_arithmetic,
    given=lambda sol, step: (given_step(sol.step("scores", step.head)),),
    latex=r"\text{scaled} = \frac{\text{scores}}{\sqrt{d_k}}, \quad \sqrt{d_k} = \sqrt{$d_k}$root",
)


# --- masked ---------------------------------------------------------------------------------


def _masked(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    src = _pre_mask(ex, h)[0]
    sc = bd.data[src, h]
    assert isinstance(sc, Scaled)
    live = exact.mask(sc, bd.allowed)  # [L, L_k], None where blocked
    bd.data["masked", h] = live
    ops = (Operand(src, (ex.L, ex.L_k)), Operand("M", (ex.L, ex.L_k)))
    return Step("masked", h, "masked", f"masked = {src} + M,  M_ij = 0 if query i may attend key j, else −∞",
                ops, "+", exact.masked_exact(live, sc), ex.query_labels, ex.key_labels)


def _masked_work(sol: Solution, step: Step, i: int, j: int) -> str:
    rl, cl = step.row_labels[i], step.col_labels[j]
    src = _pre_mask(sol.exercise, step.head)[0]
    if math.isinf(step.value[i][j]):
        return f"{src}[{rl}, {cl}] + (-inf) = -inf  ({t('practice.work.blocked', row=rl, col=cl)})"
    return f"{src}[{rl}, {cl}] + 0 {total(step.exact[i][j], step.value[i][j])}  ({t('practice.work.kept', row=rl, col=cl)})"


def _masked_given(sol: Solution, step: Step) -> tuple[Input, ...]:
    ex = sol.exercise
    allowed = ex.allowed()
    assert allowed is not None  # the step exists only with a mask
    m = Input("M", tuple(tuple("0" if a else "-inf" for a in row) for row in allowed),
              tuple(tuple(0.0 if a else -math.inf for a in row) for row in allowed), ex.query_labels, ex.key_labels)
    return (given_step(sol.step(*_pre_mask(ex, step.head))), m)


def _masked_why(step: Step, ex: Exercise) -> list[str]:
    out = [t("step.masked.why")]
    if ex.mask_kind == "causal_lower_right":
        out.append(t("step.masked.why.lower_right", L_q=ex.L, L_k=ex.L_k, offset=ex.L_k - ex.L))
    elif ex.mask_kind == "causal" and ex.L != ex.L_k:
        out.append(t("step.masked.why.upper_left", L_q=ex.L, L_k=ex.L_k))
    full = [step.row_labels[i] for i, row in enumerate(step.value) if all(math.isinf(v) for v in row)]
    if full:
        out.append(t("step.masked.why.full", rows=join_and(full), torch=torch_empty_row()))
    return out


def _masked_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    out = []
    for i, row in enumerate(step.value):
        kept = [step.col_labels[j] for j, v in enumerate(row) if not math.isinf(v)]
        blocked = [step.col_labels[j] for j, v in enumerate(row) if math.isinf(v)]
        parts = []
        if kept:
            parts.append(t("explain.work.kept", keys=", ".join(kept)))
        if blocked:
            parts.append(t("explain.work.blocked", keys=", ".join(blocked)))
        out.append(Worked(step.row_labels[i], ("; ".join(parts),), ": "))
    return tuple(out)


MASKED = StepKind(
    id="masked", scope="head", op="+", exists=_has_mask,
    inputs=lambda ex, head: (_pre_mask(ex, head),),
    build=_masked, varies=frozenset({"mask", "round_scaled", "truncate"}), work=_masked_work, given=_masked_given,
    arithmetic=_masked_arithmetic,
    why=_masked_why, fixed_by_mask=-math.inf,
    latex=(r"\text{masked} = \text{scaled} + M, \quad M_{ij} = "
           r"\begin{cases} 0 & \text{if query } i \text{ may attend key } j \\ -\infty & \text{otherwise} \end{cases}"),
)


# --- weights --------------------------------------------------------------------------------


def _weights(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    sc = bd.data[_pre_mask(ex, h)]
    assert isinstance(sc, Scaled)
    live = cast(Exponents, bd.data["masked", h]) if ex.has_mask else exact.mask(sc, None)
    rows = exact.softmax_rows(live, sc)
    bd.data["weights", h] = rows
    src = _score_source(ex, h)[0]
    return Step("weights", h, "weights", f"weights_ij = exp({src}_ij) / Σ_k exp({src}_ik)",
                (Operand(src, (ex.L, ex.L_k)),), "softmax", exact.weights(rows, ex.L_k),
                ex.query_labels, ex.key_labels)


def _weights_work(sol: Solution, step: Step, i: int, j: int) -> str:
    rl, cl = step.row_labels[i], step.col_labels[j]
    scores = sol.step(*_score_source(sol.exercise, step.head))
    head = f"exp({scores.id}[{rl}, {cl}]) / Σ_k exp({scores.id}[{rl}, k])"
    if all(math.isinf(v) for v in scores.value[i]):  # no key to attend: 0/0, set to 0 by the convention
        return f"{head} = {t('practice.work.empty', row=rl)} = 0"
    if math.isinf(scores.value[i][j]):
        return f"{head} = 0  ({t('practice.work.blocked', row=rl, col=cl)})"
    return f"{head} = {softmax_row(scores, i, j)} {total(step.exact[i][j], step.value[i][j])}"


def _weights_why(step: Step, ex: Exercise) -> list[str]:
    """The softmax's sentence, true of this exercise: positive weights where no key is blocked; a blocked
    key exactly 0 with a mask that blocks one; and a row that may attend to no key sums to 0, not 1."""
    allowed = ex.allowed()
    blocks = allowed is not None and not all(all(row) for row in allowed)  # a mask that blocks nothing (a one-token
    out = [t("step.weights.why.masked" if blocks else "step.weights.why")]  # decode, lower-right) leaves them positive
    n, rows = _empty_labels(ex)
    if n:
        out.append(plural("step.weights.why.empty", n, rows=rows))
    return out


def _weights_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    src = sol.step(*_score_source(sol.exercise, step.head))
    return tuple(softmax_arithmetic(src, step, i, places, none_left=t("explain.work.no_key"), sum_label="Σ")
                 for i in range(step.shape[0]))


WEIGHTS = StepKind(
    id="weights", scope="head", op="softmax", exists=always,
    inputs=lambda ex, head: (_score_source(ex, head),),
    build=_weights,
    varies=frozenset({"mask", "softmax", "softmax_axis", "normalise", "empty_rows", "round_scaled", "truncate",
                      "average_heads", "bias"}),
    work=_weights_work, why=_weights_why, arithmetic=_weights_arithmetic,
    given=lambda sol, step: (given_step(sol.step(*_score_source(sol.exercise, step.head))),),
    latex=r"\text{weights}_{ij} = \frac{\exp(\text{$src}_{ij})}{\sum_k \exp(\text{$src}_{ik})}",
    fixed_by_mask=0.0, heatmap=True, checks=("row_sums", "weights_range", "masked_zero"),
)


# --- head output ------------------------------------------------------------------------------


def _head_output(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    rows, V = cast("tuple[SoftmaxRow, ...]", bd.data["weights", h]), cast(QMat, bd.data["v", h])
    out = exact.attend(rows, V)  # [L, L_k]·[L_k, d_v] -> [L, d_v]
    bd.data["head_output", h] = out
    d_v = ex.heads[h or 0].d_v
    return Step("head_output", h, f"head_{(h or 0) + 1}", f"head_{(h or 0) + 1} = weights·V",  # head_1 … head_h, as in the paper
                (Operand("weights", (ex.L, ex.L_k)), Operand("V", (ex.L_k, d_v))), "·", out,
                ex.query_labels, dims("d", d_v))


def _head_output_work(sol: Solution, step: Step, i: int, j: int) -> str:
    weights, values = sol.step("weights", step.head), sol.step("v", step.head)
    pairs = [(factor(weights.exact[i][k], weights.value[i][k]), factor(values.exact[k][j], values.value[k][j]))
             for k in range(weights.shape[1])]
    return (f"weights[{step.row_labels[i]}, :]·V[:, {step.col_labels[j]}] = {dot(pairs)} "
            f"{total(step.exact[i][j], step.value[i][j])}")


def _head_output_why(step: Step, ex: Exercise) -> list[str]:
    """The convex-average bound, with the rows it does not hold for: a zero row (no key to attend)."""
    out = [t("step.head_output.why")]
    n, rows = _empty_labels(ex)
    if n:
        out.append(plural("step.head_output.why.empty", n, rows=rows))
    return out


def _head_output_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    weights, values = sol.step("weights", step.head), sol.step("v", step.head)

    def pairs_of(i: int, j: int) -> tuple[list[tuple[str, str]], str]:
        return [(factor(weights.exact[i][k], weights.value[i][k], places), factor(values.exact[k][j], values.value[k][j], places))
                for k in range(weights.shape[1])], ""

    return entry_products(step, pairs_of, places)


HEAD_OUTPUT = StepKind(
    id="head_output", scope="head", op="·", exists=always,
    inputs=lambda ex, head: (("weights", head), ("v", head)),
    build=_head_output, varies=frozenset({"values", "round_weights", "truncate"}), work=_head_output_work,
    why=_head_output_why, arithmetic=_head_output_arithmetic,
    given=lambda sol, step: (given_step(sol.step("weights", step.head)), given_step(sol.step("v", step.head))),
    latex=r"\text{head}_{$head} = \text{weights}\, V", checks=("column_range",), names_head=True,
)
