"""The layer steps: the heads concatenated, and the output projection ``W_O``.

``MultiHead(Q, K, V) = Concat(head_1, …, head_h) W_O`` (Vaswani et al.
2017, §3.2.2), row-vector convention, with an optional bias ``b_O``.
"""

from __future__ import annotations

from typing import cast

from ..base.messages import t
from ..exact import engine as exact
from ..exact.engine import QMat
from ..exact.numbers import SoftmaxRow
from ..exercise.record import Exercise
from .kind import Build, Input, StepKind, dims, given_matrix, given_step
from .records import Key, Operand, Solution, Step
from .worked import Worked, dot, entry_products, factor, total


def _heads_source(ex: Exercise) -> Key:
    """What ``W_O`` multiplies: the concatenation, or head 0's output when there is one head."""
    return ("concat", None) if ex.num_heads > 1 else ("head_output", 0)


# --- concat ---------------------------------------------------------------------------------


def _concat(bd: Build, head: int | None) -> Step:
    ex = bd.ex
    H = ex.num_heads
    out = exact.concat([bd.steps["head_output", h].exact for h in range(H)])  # [L, H·d_v]
    cols = tuple(f"h{h + 1}.d{k + 1}" for h, hd in enumerate(ex.heads) for k in range(hd.d_v))
    ops = tuple(Operand(f"head_{h + 1}", (ex.L, hd.d_v)) for h, hd in enumerate(ex.heads))
    return Step("concat", None, "concat", "concat = [" + ", ".join(f"head_{h + 1}" for h in range(H)) + "]",
                ops, "concat", out, ex.query_labels, cols)


def _concat_work(sol: Solution, step: Step, i: int, j: int) -> str:
    col = j
    for h, hd in enumerate(sol.exercise.heads):
        if col < hd.d_v:
            source = sol.step("head_output", h)
            return f"{source.name}[{step.row_labels[i]}, {source.col_labels[col]}] {total(step.exact[i][j], step.value[i][j])}"
        col -= hd.d_v
    raise IndexError(j)


CONCAT = StepKind(
    id="concat", scope="layer", op="concat", exists=lambda ex: ex.num_heads > 1,
    inputs=lambda ex, head: tuple(("head_output", h) for h in range(ex.num_heads)),
    build=_concat, varies=frozenset({"heads_reversed", "merge_reshape"}), work=_concat_work,
    given=lambda sol, step: tuple(given_step(sol.step("head_output", h)) for h in range(sol.exercise.num_heads)),
    latex=r"\text{concat} = [$operands]",
)


# --- output ---------------------------------------------------------------------------------


def _output(bd: Build, head: int | None) -> Step:
    ex = bd.ex
    assert ex.w_o is not None  # the step exists only with W_O
    d_out, width = len(ex.w_o[0]), len(ex.w_o)
    heads = [(cast("tuple[SoftmaxRow, ...]", bd.data["weights", h]), cast(QMat, bd.data["v", h]))
             for h in range(ex.num_heads)]
    out = exact.out_project(heads, ex.w_o, ex.b_o)  # [L, H·d_v]·[H·d_v, d_out] -> [L, d_out]
    src = bd.steps[_heads_source(ex)].name
    ops: tuple[Operand, ...] = (Operand(src, (ex.L, width)), Operand("W_O", (width, d_out)))
    formula = f"output = {src}·W_O"
    if ex.b_o is not None:
        ops += (Operand("b_O", (d_out,)),)
        formula += " + b_O"
    return Step("output", None, "output", formula, ops, "·", out, ex.query_labels, dims("o", d_out))


def _output_work(sol: Solution, step: Step, i: int, j: int) -> str:
    ex = sol.exercise
    assert ex.w_o is not None
    rl, cl = step.row_labels[i], step.col_labels[j]
    heads = sol.step(*_heads_source(ex))
    pairs = [(factor(heads.exact[i][k], heads.value[i][k]), factor(ex.w_o[k][j], float(ex.w_o[k][j])))
             for k in range(len(ex.w_o))]
    bias = f" + b_O[{cl}]" if ex.b_o is not None else ""
    bias_value = f" + {factor(ex.b_o[j], float(ex.b_o[j]))}" if ex.b_o is not None else ""
    return f"{heads.name}[{rl}, :]·W_O[:, {cl}]{bias} = {dot(pairs)}{bias_value} {total(step.exact[i][j], step.value[i][j])}"


def _output_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    ex = sol.exercise
    assert ex.w_o is not None
    heads, w_o, b_o = sol.step(*_heads_source(ex)), ex.w_o, ex.b_o

    def pairs_of(i: int, j: int) -> tuple[list[tuple[str, str]], str]:
        pairs = [(factor(heads.exact[i][k], heads.value[i][k], places), factor(w_o[k][j], float(w_o[k][j]), places))
                 for k in range(len(w_o))]
        return pairs, factor(b_o[j], float(b_o[j]), places) if b_o is not None else ""

    return entry_products(step, pairs_of, places)


def _output_given(sol: Solution, step: Step) -> tuple[Input, ...]:
    ex = sol.exercise
    assert ex.w_o is not None
    out = [given_step(sol.step(*_heads_source(ex))),
           given_matrix("W_O", ex.w_o, dims("r", len(ex.w_o)), dims("o", len(ex.w_o[0])))]
    if ex.b_o is not None:
        out.append(given_matrix("b_O", (ex.b_o,), ("",), dims("o", len(ex.b_o))))
    return tuple(out)


OUTPUT = StepKind(
    id="output", scope="layer", op="·", exists=lambda ex: ex.w_o is not None,
    inputs=lambda ex, head: (_heads_source(ex),),
    build=_output, varies=frozenset({"w_o_transposed", "drop"}), work=_output_work, given=_output_given,
    arithmetic=_output_arithmetic,
    why=lambda step, ex: [t("step.output.why.nohead" if ex.num_heads == 1 else "step.output.why")],
    latex=r"\text{output} = $op0\, W_{O}$plus",
)
