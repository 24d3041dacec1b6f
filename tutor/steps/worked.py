"""The pieces of a worked entry: operands in a product, the result, a dot product, a softmax row.

A step kind's ``work`` function (:class:`tutor.steps.kind.StepKind`) writes
one entry of its step with these: ``Q[t1, :]·K[t2, :] = 1·2 + 1·2 = 4``, in
the answer grammar a learner types.  Pure: no printing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from ..decimals import fixed
from ..exactnum import Exact, Rat, frac_text
from .records import Step


def factor(e: Exact | Fraction, value: float) -> str:
    """An operand in a product: a short exact rational as written (parenthesised when it has a
    sign or a slash), otherwise its decimal."""
    if isinstance(e, Fraction):
        e = Rat(e)
    if isinstance(e, Rat) and len(frac_text(e.q)) <= 6:
        text = frac_text(e.q)
        return f"({text})" if "/" in text or text.startswith("-") else text
    text = fixed(value, 4)
    return f"({text})" if text.startswith("-") else text


def total(e: Exact, value: float) -> str:
    """``= 4``, ``= 2*sqrt(2) ≈ 2.8284``, ``≈ 0.1084``: the result of a worked entry."""
    if isinstance(e, Rat):
        return f"= {frac_text(e.q)}"
    if math.isinf(value):
        return "= -inf"
    text = str(e)
    if len(text) <= 16:
        return f"= {text} ≈ {fixed(value, 4)}"
    return f"≈ {fixed(value, 4)}"


def dot(pairs: Sequence[tuple[str, str]]) -> str:
    """``1·2 + 1·2``: a dot product written out."""
    return " + ".join(f"{a}·{b}" for a, b in pairs)


def softmax_row(src: Step, i: int, j: int) -> str:
    """``exp(a_ij) / (exp(a_i1) + …) = 4.1133 / (4.1133 + …)`` for a weights entry (not masked)."""
    row = src.value[i]
    top = max(v for v in row if not math.isinf(v))
    shift = top if top > 20 else 0.0  # keep exp() readable: divide top and bottom by exp(max)

    def power(v: float) -> str:
        if math.isinf(v):
            return "0"
        return f"exp({fixed(v, 4)} - {fixed(shift, 4)})" if shift else f"exp({fixed(v, 4)})"

    def number(v: float) -> str:
        return "0" if math.isinf(v) else fixed(math.exp(v - shift), 4)

    return (f"{power(row[j])} / ({' + '.join(power(v) for v in row)}) = "
            f"{number(row[j])} / ({' + '.join(number(v) for v in row)})")


def entry_name(step: Step, i: int, j: int) -> str:
    """``scores[t1, t2]``: an entry named by its step's result and its row and column labels."""
    return f"{step.name}[{step.row_labels[i]}, {step.col_labels[j]}]"
