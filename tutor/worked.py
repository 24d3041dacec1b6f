"""One entry of a step, worked out with its products: what a hint shows and a diagnosis quotes.

``worked_entry(sol, step, i, j)`` gives ``scores[t1, t2] = Q[t1, :]·K[t2, :] = 1·2 + 1·2 = 4``,
in the answer grammar a learner types.  Pure: no printing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from .exactnum import Exact, Rat, frac_text
from .messages import t
from .steps import Solution, Step


def fixed(v: float, places: int) -> str:
    """``v`` rounded to ``places`` decimal places, as text; never ``-0``.

    ``places`` may be 0 or negative (an entry such as ``1e1`` is written to
    -1 places: to the tens): ``fixed(12.5, 2) == "12.50"``,
    ``fixed(12.5, 0) == "12"``, ``fixed(17.0, -1) == "20"``.  ``inf``,
    ``-inf`` and ``nan`` for the values that are not finite.
    """
    if not math.isfinite(v):
        return "nan" if math.isnan(v) else ("-inf" if v < 0 else "inf")
    text = f"{v:.{places}f}" if places > 0 else f"{round(v, places):.0f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def _dec(v: float, places: int = 4) -> str:
    return fixed(v, places)


def _factor(e: Exact | Fraction, value: float) -> str:
    """An operand in a product: a short exact rational as written (parenthesised when it has a
    sign or a slash), otherwise its decimal."""
    if isinstance(e, Fraction):
        e = Rat(e)
    if isinstance(e, Rat) and len(frac_text(e.q)) <= 6:
        text = frac_text(e.q)
        return f"({text})" if "/" in text or text.startswith("-") else text
    text = _dec(value)
    return f"({text})" if text.startswith("-") else text


def _total(e: Exact, value: float) -> str:
    """``= 4``, ``= 2*sqrt(2) ≈ 2.8284``, ``≈ 0.1084``: the result of a worked entry."""
    if isinstance(e, Rat):
        return f"= {frac_text(e.q)}"
    if math.isinf(value):
        return "= -inf"
    text = str(e)
    if len(text) <= 16:
        return f"= {text} ≈ {_dec(value)}"
    return f"≈ {_dec(value)}"


def _dot(pairs: Sequence[tuple[str, str]]) -> str:
    return " + ".join(f"{a}·{b}" for a, b in pairs)


def _weights_work(src: Step, i: int, j: int) -> str:
    """``exp(a_ij) / (exp(a_i1) + …) = 4.1133 / (4.1133 + …)`` for a weights entry (not masked)."""
    row = src.value[i]
    top = max(v for v in row if not math.isinf(v))
    shift = top if top > 20 else 0.0  # keep exp() readable: divide top and bottom by exp(max)

    def power(v: float) -> str:
        if math.isinf(v):
            return "0"
        return f"exp({_dec(v)} - {_dec(shift)})" if shift else f"exp({_dec(v)})"

    def number(v: float) -> str:
        return "0" if math.isinf(v) else _dec(math.exp(v - shift))

    return (f"{power(row[j])} / ({' + '.join(power(v) for v in row)}) = "
            f"{number(row[j])} / ({' + '.join(number(v) for v in row)})")


def worked_entry(sol: Solution, step: Step, i: int, j: int) -> str:
    """Entry ``(i, j)`` of ``step`` worked out with its products, in answer-grammar notation:
    ``scores[t1, t2] = Q[t1, :]·K[t2, :] = 1·2 + 1·2 = 4``."""
    return f"{entry_name(step, i, j)} = {entry_work(sol, step, i, j)}"


def entry_name(step: Step, i: int, j: int) -> str:
    """``scores[t1, t2]``: an entry named by its step's result and its row and column labels."""
    return f"{step.result.name}[{step.row_labels[i]}, {step.col_labels[j]}]"


def entry_work(sol: Solution, step: Step, i: int, j: int) -> str:
    """How entry ``(i, j)`` of ``step`` is made from the steps before it, with its value:
    ``Q[t1, :]·K[t2, :] = 1·2 + 1·2 = 4`` (the right-hand side of :func:`worked_entry`)."""
    ex = sol.exercise
    h = step.head
    rl, cl = step.row_labels[i], step.col_labels[j]
    total = _total(step.exact[i][j], step.value[i][j])
    if step.id in ("q", "k", "v"):
        hd = ex.heads[h or 0]
        sym = step.id.upper()
        w, b = {"q": (hd.w_q, hd.b_q), "k": (hd.w_k, hd.b_k), "v": (hd.w_v, hd.b_v)}[step.id]
        x, xn = (ex.x, "X") if step.id == "q" or not ex.is_cross else (ex.kv, "X_kv")
        pairs = [(_factor(x[i][k], float(x[i][k])), _factor(w[k][j], float(w[k][j]))) for k in range(len(w))]
        bias = f" + b_{sym}[{cl}]" if b is not None else ""
        bias_value = f" + {_factor(b[j], float(b[j]))}" if b is not None else ""
        return f"{xn}[{rl}, :]·W_{sym}[:, {cl}]{bias} = {_dot(pairs)}{bias_value} {total}"
    if step.id == "scores":
        q, k = sol.step("q", h), sol.step("k", h)
        pairs = [(_factor(q.exact[i][n], q.value[i][n]), _factor(k.exact[j][n], k.value[j][n])) for n in range(q.shape[1])]
        return f"Q[{rl}, :]·K[{cl}, :] = {_dot(pairs)} {total}"
    if step.id == "scaled":
        scores = sol.step("scores", h)
        d_k = ex.heads[h or 0].d_k
        score = _factor(scores.exact[i][j], scores.value[i][j])
        return f"scores[{rl}, {cl}] / sqrt({d_k}) = {score} / sqrt({d_k}) {total}"
    if step.id == "masked":
        if math.isinf(step.value[i][j]):
            return f"scaled[{rl}, {cl}] + (-inf) = -inf  ({t('practice.work.blocked', row=rl, col=cl)})"
        return f"scaled[{rl}, {cl}] + 0 {total}  ({t('practice.work.kept', row=rl, col=cl)})"
    if step.id == "weights":
        scores = sol.step("masked" if ex.has_mask else "scaled", h)
        head = f"exp({scores.id}[{rl}, {cl}]) / Σ_k exp({scores.id}[{rl}, k])"
        if math.isinf(scores.value[i][j]):
            return f"{head} = 0  ({t('practice.work.blocked', row=rl, col=cl)})"
        return f"{head} = {_weights_work(scores, i, j)} {total}"
    if step.id == "head_output":
        weights, values = sol.step("weights", h), sol.step("v", h)
        pairs = [(_factor(weights.exact[i][k], weights.value[i][k]), _factor(values.exact[k][j], values.value[k][j]))
                 for k in range(weights.shape[1])]
        return f"weights[{rl}, :]·V[:, {cl}] = {_dot(pairs)} {total}"
    if step.id == "concat":
        col = j
        for hh, hd in enumerate(ex.heads):
            if col < hd.d_v:
                return f"head_{hh}[{rl}, {sol.step('head_output', hh).col_labels[col]}] {total}"
            col -= hd.d_v
    assert ex.w_o is not None  # output
    heads = sol.step("concat", None) if ex.num_heads > 1 else sol.step("head_output", 0)
    pairs = [(_factor(heads.exact[i][k], heads.value[i][k]), _factor(ex.w_o[k][j], float(ex.w_o[k][j])))
             for k in range(len(ex.w_o))]
    bias = f" + b_O[{cl}]" if ex.b_o is not None else ""
    bias_value = f" + {_factor(ex.b_o[j], float(ex.b_o[j]))}" if ex.b_o is not None else ""
    return f"{heads.result.name}[{rl}, :]·W_O[:, {cl}]{bias} = {_dot(pairs)}{bias_value} {total}"
