"""The additive bias: ``biased = scaled + B`` before the mask and the softmax (format v2).

``softmax(Q Kᵀ / √d_k + B + M) V``: ``B`` is a float ``attn_mask`` in
PyTorch's ``scaled_dot_product_attention`` (added to the scaled scores), or
ALiBi's linear bias ``B_ij = m_h · (j − i)`` with the slope of head ``h`` of
``H`` heads ``m_h = 2^(−8(h+1)/H)`` (Press et al. 2022, "Train Short, Test
Long", §3).  The step exists only when the exercise has a bias.
"""

from __future__ import annotations

from fractions import Fraction

from ..base.messages import t
from ..exact import engine as exact
from ..exact.engine import Scaled
from ..exact.numbers import frac_text
from ..exercise.record import Exercise, alibi_slope
from .kind import Build, Input, StepKind, given_matrix, given_step
from .records import Operand, Solution, Step
from .worked import factor, total


def _bias(ex: Exercise, head: int | None) -> tuple[tuple[Fraction, ...], ...]:
    assert ex.bias is not None  # the step exists only with a bias
    return ex.bias[head or 0]


def _formula(ex: Exercise, head: int | None) -> str:
    if ex.alibi:
        m = alibi_slope(head or 0, ex.num_heads)
        return f"biased = scaled + B,  B_ij = m·(j − i),  m = 2^(−8·{(head or 0) + 1}/{ex.num_heads}) = {frac_text(m)}"
    return "biased = scaled + B"


def _biased(bd: Build, h: int | None) -> Step:
    ex = bd.ex
    sc = bd.data["scaled", h]
    assert isinstance(sc, Scaled)
    b = exact.biased(sc, _bias(ex, h))  # [L, L_k] = U·√t + B
    bd.data["biased", h] = b
    ops = (Operand("scaled", (ex.L, ex.L_k)), Operand("B", (ex.L, ex.L_k)))
    return Step("biased", h, "biased", _formula(ex, h), ops, "+", b.exact(), ex.query_labels, ex.key_labels)


def _biased_work(sol: Solution, step: Step, i: int, j: int) -> str:
    scaled = sol.step("scaled", step.head)
    B = _bias(sol.exercise, step.head)
    rl, cl = step.row_labels[i], step.col_labels[j]
    return (f"scaled[{rl}, {cl}] + B[{rl}, {cl}] = {factor(scaled.exact[i][j], scaled.value[i][j])} + "
            f"{factor(B[i][j], float(B[i][j]))} {total(step.exact[i][j], step.value[i][j])}")


def _biased_given(sol: Solution, step: Step) -> tuple[Input, ...]:
    ex = sol.exercise
    return (given_step(sol.step("scaled", step.head)), given_matrix("B", _bias(ex, step.head), ex.query_labels, ex.key_labels))


def _biased_why(step: Step, ex: Exercise) -> list[str]:
    out = [t("step.biased.why")]
    if ex.alibi:
        out.append(t("step.biased.why.alibi"))
    return out


BIASED = StepKind(
    id="biased", scope="head", op="+", exists=lambda ex: ex.has_bias,
    inputs=lambda ex, head: (("scaled", head),),
    build=_biased, varies=frozenset({"bias"}), work=_biased_work, given=_biased_given, why=_biased_why,
    latex=r"\text{biased} = \text{scaled} + B", advanced=True,
)
