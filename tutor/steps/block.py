"""The pre-norm block's steps (issue 23): ``x_norm`` before the projections, ``residual`` after the layer,
and post-norm's ``out_norm`` after the residual.

``X_norm = RMSNorm(X)`` (``x / sqrt(mean(x²) + eps)`` per row; Zhang &
Sennrich 2019, eq. 4, gain 1) or ``LayerNorm(X)`` (``(x − mean) /
sqrt(var + eps)`` per row, population variance; Ba et al. 2016, eq. 4, no
gain or bias); the projections then read ``X_norm`` (the pre-norm placement
of Xiong et al. 2020, Figure 1(b)).  ``residual = X + output`` (He et al.
2016): the block's output, ``X`` unnormalized.  With ``norm_placement: post``
(Vaswani et al. 2017, §3.1: ``LayerNorm(x + Sublayer(x))``) the projections
read X and ``out_norm = Norm(X + output)`` is the block's output; its entries
are exact (:class:`tutor.exact.block.Rooted`), its float walk knows a knob of
its own: the norm taken before the sum (``Norm(X) + output``).

Each kind's engines, side by side: the exact build (:mod:`tutor.exact.block`),
the float walk under a misconception's knobs (each column normalized instead
of each row, the mean subtracted in RMSNorm, the residual forgotten or added
to ``X_norm``), the batched layer's reading and its float64 rounding bound,
and the exact walk.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from ..base.decimals import legible
from ..base.errors import TutorError
from ..base.messages import Msg, Text
from ..exact import block as eb
from ..exact import matrices as em
from ..exact.numbers import Rat, frac_text, notation, surd
from ..exercise.record import Exercise
from .kind import StepKind, dims, given_matrix, given_step
from .records import Operand, Solution, Step
from .rounding import gamma
from .state import Build, ExactWalk, Replay
from .variant import Variant
from .worked import CARRY, MOST_PLACES, Worked, adds_up, factor, result, rounds_to, total, written

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
    why=_x_norm_why, latex=r"X_{\text{norm}} = \mathrm{norm}(X)", early=True, advanced=True,
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
            p = places + CARRY  # output's decimals carried, as in entry_products, until the sum rounds to the result
            while not adds_up([(factor(x[i][j], float(x[i][j]), p), "1")], factor(o, out.value[i][j], p),
                              step.value[i][j], places) and p < MOST_PLACES:
                p += 1
            line = (f"{factor(x[i][j], float(x[i][j]), p)} + {factor(o, out.value[i][j], p)} "
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
    why=lambda step, ex: [Msg("step.residual.why")], latex=r"\text{residual} = X + \text{output}", advanced=True,
)


# --- out_norm: post-norm (issue 23) ---------------------------------------------------------------


def post_formula(ex: Exercise) -> str:
    """``out_norm = (residual − mean(residual)) / √(var(residual) + ε)`` (or RMSNorm's): over each row."""
    eps = " + ε" if ex.norm_eps else ""
    if ex.norm == "layernorm":
        return f"out_norm = (residual − mean(residual)) / √(var(residual){eps})"
    return f"out_norm = residual / √(mean(residual²){eps})"


def _out_norm(bd: Build, head: int | None) -> Step:
    """``Norm(X + output)`` exactly, from the residual's exact-walk entries (``solve`` keeps them in
    ``bd.data``): ``[L, d_model]``.  Raises :class:`~tutor.base.errors.TutorError` for a row of X + output
    whose variance (mean square) plus eps is exactly 0: the norm would divide by 0."""
    ex = bd.ex
    r = bd.data[("residual", None)]
    try:
        entries = eb.post_norm(r, ex.norm == "layernorm", ex.norm_eps)  # type: ignore[arg-type]
    except ZeroDivisionError as row:
        raise TutorError(Msg(f"post_norm.zero.{ex.norm}", id=ex.id, row=int(str(row)) + 1)) from None
    res = bd.steps["residual", None]
    return Step("out_norm", None, "out_norm", post_formula(ex), (res.result,), "norm",
                tuple(tuple(row) for row in entries), ex.query_labels, dims("d", ex.d_model))


def _row_stats(sol: Solution, i: int) -> tuple[float, float]:
    """Row ``i`` of the residual in floats: its mean (0 for RMSNorm) and what it is divided by the root of."""
    ex = sol.exercise
    row = np.array(sol.step("residual").value[i], dtype=np.float64)  # [d_model]
    mean = float(row.mean()) if ex.norm == "layernorm" else 0.0
    return mean, float(((row - mean) ** 2).mean()) + float(ex.norm_eps)


def _out_norm_work(sol: Solution, step: Step, i: int, j: int) -> str:
    ex = sol.exercise
    rl, cl = step.row_labels[i], step.col_labels[j]
    res = sol.step("residual")
    mean, v = _row_stats(sol, i)
    r = factor(res.exact[i][j], res.value[i][j])
    if ex.norm == "layernorm":
        return (f"(residual[{rl}, {cl}] - mean(residual[{rl}, :]))/sqrt(var(residual[{rl}, :]) + eps) ≈ "
                f"({r} - {legible(mean, 6)})/sqrt({legible(v, 6)}) {total(step.exact[i][j], step.value[i][j])}")
    return (f"residual[{rl}, {cl}]/sqrt(mean(residual[{rl}, :]²) + eps) ≈ {r}/sqrt({legible(v, 6)}) "
            f"{total(step.exact[i][j], step.value[i][j])}")


def _carried_places(ex: Exercise, res: Step, i: int, mean: float, v: float, places: int) -> int:
    """The places at which row ``i`` of the residual (and its mean, inside the variance) are written in the
    arithmetic, so that the mean and the variance as written, computed, round to the ones shown at ``places``
    (F8 of the class trial: ``(2.2552 + 2.5035) / 2`` is 2.37935, not the 2.3794 shown).  :data:`CARRY`
    more than ``places`` at first, as in :func:`tutor.steps.worked.entry_products`; more where needed."""
    n = res.shape[1]
    eps = Fraction(ex.norm_eps) if ex.norm_eps else Fraction(0)
    for p in range(places + CARRY, MOST_PLACES + 1):
        xs = [written(factor(e, x, p)) for e, x in zip(res.exact[i], res.value[i])]
        if any(x is None for x in xs):
            return p
        row = [x for x in xs if x is not None]
        if ex.norm == "layernorm":
            m = Fraction(legible(mean, p))
            ok = rounds_to(sum(row, Fraction(0)) / n, mean, places) and \
                rounds_to(sum(((x - m) ** 2 for x in row), Fraction(0)) / n + eps, v, places)
        else:
            ok = rounds_to(sum((x * x for x in row), Fraction(0)) / n + eps, v, places)
        if ok:
            return p
    return MOST_PLACES


def _out_norm_arithmetic(sol: Solution, step: Step, places: int) -> tuple[Worked, ...]:
    """Each row of the residual: its mean (LayerNorm), its variance or mean square plus ε, the root, the row
    divided.  The mean and the variance hold exponentials: their decimals are shown (the entries' exact forms
    are the step's)."""
    ex = sol.exercise
    res = sol.step("residual")
    out = []
    for i in range(step.shape[0]):
        mean, v = _row_stats(sol, i)
        p = _carried_places(ex, res, i, mean, v, places)
        row = [factor(e, x, p) for e, x in zip(res.exact[i], res.value[i])]
        lines = []
        if ex.norm == "layernorm":
            lines.append(f"mean = ({' + '.join(row)}) / {len(row)} ≈ {notation(legible(mean, places))}")
            terms = " + ".join(f"({x} − {notation(legible(mean, p))})²" for x in row)
            what = "var"
        else:
            terms = " + ".join(f"{x}²" for x in row)
            what = "mean(r²)"
        eps = f" + {factor(ex.norm_eps, float(ex.norm_eps))}" if ex.norm_eps else ""
        lines.append(f"{what}{' + ε' if eps else ''} = ({terms}) / {len(row)}{eps} ≈ {notation(legible(v, places))}")
        lines.append(f"√({what}{' + ε' if eps else ''}) ≈ {notation(legible(v ** 0.5, places))}")
        lines.append(f"{step.name}[{step.row_labels[i]}, :] ≈ "
                     + ",  ".join(notation(legible(x, places)) for x in step.value[i]))
        out.append(Worked(step.row_labels[i], tuple(lines), ": "))
    return tuple(out)


def _normed(a: Array, center: bool, axis: int, eps: float) -> Array | None:
    """``a`` normalized over ``axis`` (its mean subtracted when ``center``), ``None`` where it divides by 0."""
    c = a - a.mean(axis=axis, keepdims=True) if center else a
    m = (c * c).mean(axis=axis, keepdims=True) + eps
    if np.any(m == 0):
        return None
    return c / np.sqrt(m)


def _out_norm_floats(r: Replay, head: int | None) -> Array | None:
    """``Norm(residual)`` over each row ``[L, d_model]``; each column under ``norm_axis=0``, the mean
    subtracted in RMSNorm under ``norm_mean``; under ``post_norm="before_add"`` ``Norm(X) + output`` (X
    normalized, then the layer's output added: the norm before the sum)."""
    v, eps = r.variant, float(r.ex.norm_eps)
    center = _center(r.ex, v)
    if v.post_norm == "before_add":
        out = r.input("output", None)
        xn = _normed(r.x, center, v.norm_axis, eps)
        return None if out is None or xn is None else xn + out
    res = r.input("residual", None)
    return None if res is None else _normed(res, center, v.norm_axis, eps)


def _spread_rows(value: Array, ex: Exercise) -> Array:
    """Each row's ``sqrt(var + eps)`` (RMSNorm: ``sqrt(mean(x²) + eps)``) ``[L, 1]``."""
    c = value - value.mean(axis=-1, keepdims=True) if ex.norm == "layernorm" else value
    return np.sqrt((c * c).mean(axis=-1, keepdims=True) + float(ex.norm_eps))


def _out_norm_slack(r: Replay, head: int | None) -> Array:
    """How far the residual's slack moves the normalized rows: the norm's Jacobian has norm at most
    ``1/sqrt(v)`` (LayerNorm: a projection, then the division), so ``√d·max|δr|/sqrt(v)`` per row."""
    res, d = r.value(("residual", None)), r.ex.d_model
    delta = r.delta("residual", None)  # [L, d_model]
    bound = np.sqrt(d) * delta.max(axis=-1, keepdims=True) / _spread_rows(res, r.ex)
    return np.broadcast_to(bound, res.shape).copy()


def _out_norm_production(run: LayerRun, ex: Exercise, head: int | None) -> Array:
    assert run.out_norm is not None
    return run.out_norm


def _out_norm_rounding(r: Replay, head: int | None) -> Array:
    """The residual's bound carried through the norm (as :func:`_out_norm_slack`), plus the norm's own:
    ``γ_{d+4}·|out_norm|`` (Higham §3.1)."""
    return _out_norm_slack(r, head) + gamma(r.ex.d_model + 4) * np.abs(r.value(("out_norm", None)))


def _out_norm_why(step: Step, ex: Exercise) -> list[Text]:
    return [Msg("step.out_norm.why"), Msg(f"step.x_norm.why.{ex.norm}"), Msg("step.out_norm.why.warmup"),
            Msg("step.out_norm.why.exact")]


OUT_NORM = StepKind(
    id="out_norm", scope="layer", op="norm", exists=lambda ex: ex.post_norm,
    inputs=lambda ex, head: (("residual", None),),
    build=_out_norm, floats=_out_norm_floats, slack=_out_norm_slack, production=_out_norm_production,
    rounding=_out_norm_rounding, exact_walk=None, varies=frozenset({"norm_axis", "norm_mean", "post_norm"}),
    work=_out_norm_work, arithmetic=_out_norm_arithmetic,
    given=lambda sol, step: (given_step(sol.step("residual")),),
    why=_out_norm_why, latex=r"\text{out\_norm} = \mathrm{norm}(X + \text{output})", advanced=True,
)
