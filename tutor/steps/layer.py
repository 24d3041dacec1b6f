"""The layer steps: the heads concatenated, and the output projection ``W_O``.

``MultiHead(Q, K, V) = Concat(head_1, …, head_h) W_O`` (Vaswani et al.
2017, §3.2.2), row-vector convention, with an optional bias ``b_O``.

Each kind's engines, side by side: the exact build, the float walk and its
slack (under a misconception's knobs: the heads in the wrong order or merged
by a plain reshape, ``W_Oᵀ``, ``b_O`` left out), the batched layer's reading
and its float64 rounding bound, and the exact walk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from ..base.messages import Msg
from ..exact import engine as exact
from ..exact import matrices as em
from ..exact.engine import QMat
from ..exact.numbers import SoftmaxRow
from ..exercise.record import Exercise
from .kind import Input, StepKind, dims, given_matrix, given_step
from .records import Key, Operand, Solution, Step
from .rounding import gamma, magnitude
from .state import Build, ExactWalk, Replay, floats
from .worked import Worked, carried, dot, entry_products, factor, total

if TYPE_CHECKING:
    import numpy as np

    from ..numeric.layer import LayerRun
    from .rounding import Array
else:
    from ..base.lazy import numpy as np


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


def _concat_floats(r: Replay, head: int | None = None) -> Array | None:
    """The head outputs side by side (last head first under ``heads_reversed``): ``[L, H·d_v]``."""
    outs = r.inputs(CONCAT, head)
    if any(o is None for o in outs):
        return None
    order = outs[::-1] if r.variant.heads_reversed else outs
    if r.variant.merge_reshape:  # [H, L, d_v] reshaped straight to [L, H·d_v]: the heads' rows mixed
        stacked = np.stack(order)  # type: ignore[arg-type]
        H, L, d_v = stacked.shape
        return stacked.reshape(L, H * d_v)
    return np.hstack(order)  # type: ignore[arg-type]


def _concat_slack(r: Replay, head: int | None = None) -> Array:
    return np.hstack([r.delta(*key) for key in CONCAT.inputs(r.ex, head)])


def _concat_production(run: LayerRun, ex: Exercise, head: int | None) -> Array:
    return run.context


def _concat_exact(w: ExactWalk, head: int | None) -> em.Matrix | None:
    outs = [o for o in w.inputs(CONCAT, head) if o is not None]
    if len(outs) < w.ex.num_heads:
        return None
    order = outs[::-1] if w.variant.heads_reversed else outs
    return [[x for o in order for x in o[i]] for i in range(len(order[0]))]


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
    build=_concat, floats=_concat_floats, slack=_concat_slack, production=_concat_production,
    rounding=_concat_slack, exact_walk=_concat_exact,
    varies=frozenset({"heads_reversed", "merge_reshape"}), work=_concat_work,
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


def _w_o(r: Replay) -> Array | None:
    """``W_O`` ``[H·d_v, d_out]`` as the variant uses it (``W_Oᵀ``, which chains only when square)."""
    assert r.ex.w_o is not None
    W_O = floats(r.ex.w_o)  # [H·d_v, d_out]
    if r.variant.w_o_transposed:
        return W_O.T if W_O.shape[0] == W_O.shape[1] else None  # [d_out, H·d_v]
    return W_O


def _output_floats(r: Replay, head: int | None = None) -> Array | None:
    """``concat·W_O + b_O``: ``[L, H·d_v]·[H·d_v, d_out]`` -> ``[L, d_out]``."""
    (C,) = r.inputs(OUTPUT, head)
    W_O = _w_o(r)
    if C is None or W_O is None or C.shape[1] != W_O.shape[0]:
        return None
    return C @ W_O + r.bias("b_o", r.ex.b_o)


def _output_slack(r: Replay, head: int | None = None) -> Array:
    return r.delta(*_heads_source(r.ex)) @ magnitude(r.ex.w_o)


def _output_production(run: LayerRun, ex: Exercise, head: int | None) -> Array:
    return run.output


def _output_rounding(r: Replay, head: int | None) -> Array:
    ex = r.ex
    H = ex.num_heads
    c = np.abs(np.hstack([r.value(("head_output", h)) for h in range(H)]))  # [L, H·d_v]
    e_c = np.hstack([r.delta("head_output", h) for h in range(H)])
    w_o = magnitude(ex.w_o)  # [H·d_v, d_out]
    return e_c @ w_o + gamma(c.shape[1] + 3) * (c @ w_o + magnitude(ex.b_o, (w_o.shape[1],)))  # [L, d_out]


def _output_exact(w: ExactWalk, head: int | None) -> em.Matrix | None:
    ex = w.ex
    assert ex.w_o is not None
    (C,) = w.inputs(OUTPUT, head)
    W_O = em.rational(ex.w_o)  # [H·d_v, d_out]
    if w.variant.w_o_transposed:
        if len(W_O) != len(W_O[0]):
            return None
        W_O = em.transpose(W_O)
    if C is None:
        return None
    out = em.matmul(C, W_O)
    return None if out is None else em.plus(out, w.bias("b_o", ex.b_o))


def _output_work(sol: Solution, step: Step, i: int, j: int) -> str:
    ex = sol.exercise
    assert ex.w_o is not None
    rl, cl = step.row_labels[i], step.col_labels[j]
    heads = sol.step(*_heads_source(ex))
    w_o, b_o = ex.w_o, ex.b_o

    def make(p: int) -> tuple[list[tuple[str, str]], str]:
        return ([(factor(heads.exact[i][k], heads.value[i][k], p), factor(w_o[k][j], float(w_o[k][j]), p))
                 for k in range(len(w_o))], factor(b_o[j], float(b_o[j]), p) if b_o is not None else "")

    pairs, extra = carried(make, step.value[i][j])
    bias = f" + b_O[{cl}]" if ex.b_o is not None else ""
    bias_value = f" + {extra}" if extra else ""
    return f"{heads.name}[{rl}, :]·W_O[:, {cl}]{bias} = {dot(pairs)}{bias_value} {total(step.exact[i][j], step.value[i][j])}"


def _output_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    ex = sol.exercise
    assert ex.w_o is not None
    heads, w_o, b_o = sol.step(*_heads_source(ex)), ex.w_o, ex.b_o

    def pairs_of(i: int, j: int, places: int) -> tuple[list[tuple[str, str]], str]:
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
    build=_output, floats=_output_floats, slack=_output_slack, production=_output_production,
    rounding=_output_rounding, exact_walk=_output_exact,
    varies=frozenset({"w_o_transposed", "drop"}), work=_output_work, given=_output_given,
    arithmetic=_output_arithmetic,
    why=lambda step, ex: [Msg(("step.output.why.nohead" if ex.num_heads == 1 else "step.output.why")
                            + (".cross" if ex.is_cross else ""))],
    latex=r"\text{output} = $op0\, W_{O}$plus",
)


#: The layer's kinds in the contract's order.
LAYER: tuple[StepKind, ...] = (CONCAT, OUTPUT)
