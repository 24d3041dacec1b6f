"""The pre-norm block's steps (issue 23): ``x_norm`` before the projections, ``residual`` after the layer.

``X_norm = RMSNorm(X)`` (``x / sqrt(mean(x²) + eps)`` per row; Zhang &
Sennrich 2019, eq. 4, gain 1) or ``LayerNorm(X)`` (``(x − mean) /
sqrt(var + eps)`` per row, population variance; Ba et al. 2016, eq. 4, no
gain or bias); the projections then read ``X_norm`` (the pre-norm placement
of Xiong et al. 2020, Figure 1(b)).  ``residual = X + output`` (He et al.
2016): the block's output, ``X`` unnormalized.

Each kind's engines, side by side: the exact build (:mod:`tutor.exact.block`),
the float walk under a misconception's knobs (each column normalized instead
of each row, the mean subtracted in RMSNorm, the residual forgotten or added
to ``X_norm``), the batched layer's reading and its float64 rounding bound,
and the exact walk.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from ..base.messages import Msg, Text
from ..exact import block as eb
from ..exact import matrices as em
from ..exact.numbers import Rat, frac_text, surd
from ..exercise.record import Exercise
from .kind import StepKind, dims, given_matrix, given_step
from .records import Operand, Solution, Step
from .rounding import gamma
from .state import Build, ExactWalk, Replay
from .variant import Variant
from .worked import Worked, factor, result, total

if TYPE_CHECKING:
    import numpy as np

    from ..numeric.layer import LayerRun
    from .rounding import Array
else:
    from ..base.lazy import numpy as np


def _center(ex: Exercise, v: Variant) -> bool:
    """Whether the mean is subtracted: LayerNorm, or RMSNorm under the mistake ``norm_mean``."""
    return ex.norm == "layernorm" or v.norm_mean


# --- x_norm ---------------------------------------------------------------------------------


def formula(ex: Exercise) -> str:
    """``X_norm = X / √(mean(X²))`` or ``(X − mean(X)) / √(var(X) + ε)``: over each row."""
    eps = " + ε" if ex.norm_eps else ""
    if ex.norm == "layernorm":
        return f"X_norm = (X − mean(X)) / √(var(X){eps})"
    return f"X_norm = X / √(mean(X²){eps})"


def _x_norm(bd: Build, head: int | None) -> Step:
    ex = bd.ex
    m = eb.normalize(ex.x, ex.norm == "layernorm", ex.norm_eps)
    assert m is not None  # the loader refuses a row with nothing to divide by
    return Step("x_norm", None, "X_norm", formula(ex), (Operand("X", (ex.L, ex.d_model)),), "norm", eb.as_exact(m),
                ex.query_labels, dims("d", ex.d_model))


def _row_spread(ex: Exercise, i: int) -> tuple[Fraction, Fraction]:
    """Row ``i``'s mean (0 for RMSNorm) and what its entries are divided by the square root of."""
    row = ex.x[i]
    center = ex.norm == "layernorm"
    mean = sum(row, Fraction(0)) / len(row) if center else Fraction(0)
    return mean, eb.spread(row, center, ex.norm_eps)


def _x_norm_work(sol: Solution, step: Step, i: int, j: int) -> str:
    ex = sol.exercise
    rl, cl = step.row_labels[i], step.col_labels[j]
    mean, m = _row_spread(ex, i)
    x = factor(ex.x[i][j], float(ex.x[i][j]))
    if ex.norm == "layernorm":
        return (f"(X[{rl}, {cl}] - {factor(mean, float(mean))})/sqrt(var(X[{rl}, :]) + eps) = "
                f"({x} - {factor(mean, float(mean))})/sqrt({frac_text(m)}) {total(step.exact[i][j], step.value[i][j])}")
    return f"X[{rl}, {cl}]/sqrt(mean(X[{rl}, :]²) + eps) = {x}/sqrt({frac_text(m)}) {total(step.exact[i][j], step.value[i][j])}"


def _x_norm_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    """Each row: its mean (LayerNorm), its mean square or variance plus ε, the factor, the row divided."""
    ex = sol.exercise
    out = []
    for i, row in enumerate(ex.x):
        mean, m = _row_spread(ex, i)
        lines = []
        if ex.norm == "layernorm":
            lines.append(f"mean = ({' + '.join(factor(x, float(x)) for x in row)}) / {len(row)} "
                         f"{result(Rat(mean), float(mean), places)}")
            terms = " + ".join(f"({factor(x, float(x))} − {factor(mean, float(mean))})²" for x in row)
            what = "var"
        else:
            terms = " + ".join(f"{factor(x, float(x))}²" for x in row)
            what = "mean(x²)"
        eps = f" + {factor(ex.norm_eps, float(ex.norm_eps))}" if ex.norm_eps else ""
        lines.append(f"{what}{' + ε' if eps else ''} = ({terms}) / {len(row)}{eps} {result(Rat(m), float(m), places)}")
        c, tt = eb.row_factor(m)
        lines.append(f"1/√({frac_text(m)}) {result(surd(c, tt), float(c) * float(tt) ** 0.5, places)}")
        lines.append(f"{step.name}[{step.row_labels[i]}, :] = "
                     + ",  ".join(result(e, v, places).lstrip("=≈ ") for e, v in zip(step.exact[i], step.value[i])))
        out.append(Worked(step.row_labels[i], tuple(lines), ": "))
    return tuple(out)


def _x_norm_floats(r: Replay, head: int | None) -> Array | None:
    """``X`` normalized over each row (each column under ``norm_axis=0``), the mean subtracted for LayerNorm
    (and for RMSNorm under ``norm_mean``): ``[L, d_model]``."""
    x, axis = r.x, r.variant.norm_axis
    c = x - x.mean(axis=axis, keepdims=True) if _center(r.ex, r.variant) else x  # [L, d_model]
    m = (c * c).mean(axis=axis, keepdims=True) + float(r.ex.norm_eps)  # [L, 1] (or [1, d_model])
    if np.any(m == 0):
        return None  # the mistake divides by 0 here: it gives no value
    return c / np.sqrt(m)


def _x_norm_production(run: LayerRun, ex: Exercise, head: int | None) -> Array:
    assert run.x_norm is not None
    return run.x_norm


def _x_norm_rounding(r: Replay, head: int | None) -> Array:
    """A mean of ``d`` products, a square root and a division: ``γ_{d+4}·|X_norm|`` (Higham §3.1)."""
    return gamma(r.ex.d_model + 4) * np.abs(r.value(("x_norm", None)))


def _x_norm_exact(w: ExactWalk, head: int | None) -> em.Matrix | None:
    m = eb.normalize(w.ex.x, _center(w.ex, w.variant), w.ex.norm_eps, w.variant.norm_axis)
    return None if m is None else eb.as_values(m)


def _x_norm_why(step: Step, ex: Exercise) -> list[Text]:
    return [Msg(f"step.x_norm.why.{ex.norm}"), Msg("step.x_norm.why")]


X_NORM = StepKind(
    id="x_norm", scope="layer", op="norm", exists=lambda ex: ex.has_norm, inputs=lambda ex, head: (),
    build=_x_norm, floats=_x_norm_floats, slack=lambda r, head: np.zeros_like(r.value(("x_norm", None))),
    production=_x_norm_production, rounding=_x_norm_rounding, exact_walk=_x_norm_exact,
    varies=frozenset({"norm_axis", "norm_mean"}), work=_x_norm_work, arithmetic=_x_norm_arithmetic,
    given=lambda sol, step: (given_matrix("X", sol.exercise.x, sol.exercise.query_labels,
                                          dims("d", sol.exercise.d_model)),),
    why=_x_norm_why, latex=r"X_{\text{norm}} = \mathrm{norm}(X)", early=True,
)


# --- residual -------------------------------------------------------------------------------


def _residual(bd: Build, head: int | None) -> Step:
    ex = bd.ex
    out = bd.steps["output", None]
    entries = tuple(tuple(eb.plus_rational(e, x) for e, x in zip(orow, xrow)) for orow, xrow in zip(out.exact, ex.x))
    return Step("residual", None, "residual", "residual = X + output", (Operand("X", (ex.L, ex.d_model)), out.result),
                "+", entries, ex.query_labels, dims("d", ex.d_model))


def _residual_floats(r: Replay, head: int | None) -> Array | None:
    """``X + output`` ``[L, d_model]``; under ``residual="none"`` the output alone, under ``"x_norm"``
    ``X_norm + output``."""
    out = r.input("output", None)
    if out is None:
        return None
    if r.variant.residual == "none":
        return out.copy()
    if r.variant.residual == "x_norm":
        xn = r.input("x_norm", None) if r.ex.has_norm else None
        return None if xn is None else xn + out
    return r.x + out


def _residual_slack(r: Replay, head: int | None) -> Array:
    return r.delta("output", None)


def _residual_production(run: LayerRun, ex: Exercise, head: int | None) -> Array:
    assert run.residual is not None
    return run.residual


def _residual_rounding(r: Replay, head: int | None) -> Array:
    return r.delta("output", None) + gamma(1) * np.abs(r.value(("residual", None)))


def _residual_exact(w: ExactWalk, head: int | None) -> em.Matrix | None:
    out = w.input("output", None)
    if out is None:
        return None
    if w.variant.residual == "none":
        return [list(row) for row in out]
    base: em.Matrix
    if w.variant.residual == "x_norm":
        xn = w.input("x_norm", None) if w.ex.has_norm else None
        if xn is None:
            return None
        base = xn
    else:
        base = [list(row) for row in w.ex.x]
    return [[a + b if isinstance(a, Fraction) and isinstance(b, Fraction) else em.as_value(a) + em.as_value(b)
             for a, b in zip(ra, rb)] for ra, rb in zip(base, out)]


def _residual_work(sol: Solution, step: Step, i: int, j: int) -> str:
    x, out = sol.exercise.x[i][j], sol.step("output")
    rl, cl = step.row_labels[i], step.col_labels[j]
    o = factor(out.exact[i][j], out.value[i][j])
    return f"X[{rl}, {cl}] + output[{rl}, {cl}] = {factor(x, float(x))} + {o} {total(step.exact[i][j], step.value[i][j])}"


def _residual_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    x, out = sol.exercise.x, sol.step("output")
    items = []
    for i in range(step.shape[0]):
        for j in range(step.shape[1]):
            o = out.exact[i][j]
            exact_sum = isinstance(o, Rat)
            line = (f"{factor(x[i][j], float(x[i][j]), places)} + {factor(o, out.value[i][j], places)} "
                    f"{result(step.exact[i][j], step.value[i][j], places, rounded=not exact_sum)}")
            items.append(Worked(f"{step.name}[{step.row_labels[i]}, {step.col_labels[j]}]", (line,)))
    return tuple(items)


RESIDUAL = StepKind(
    id="residual", scope="layer", op="+", exists=lambda ex: ex.residual, inputs=lambda ex, head: (("output", None),),
    build=_residual, floats=_residual_floats, slack=_residual_slack, production=_residual_production,
    rounding=_residual_rounding, exact_walk=_residual_exact, varies=frozenset({"residual"}), work=_residual_work,
    arithmetic=_residual_arithmetic,
    given=lambda sol, step: (given_matrix("X", sol.exercise.x, sol.exercise.query_labels, dims("d", sol.exercise.d_model)),
                             given_step(sol.step("output"))),
    why=lambda step, ex: [Msg("step.residual.why")], latex=r"\text{residual} = X + \text{output}",
)
