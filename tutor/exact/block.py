"""The pre-norm block, exactly (issue 23): RMSNorm and LayerNorm of rational rows, the residual, and the
entries that follow a norm.

RMSNorm (Zhang & Sennrich 2019, eq. 4, with the gain ``g = 1``):
``x / sqrt(mean(x²) + eps)``; LayerNorm (Ba et al. 2016, eq. 4, without gain
and bias): ``(x − mean(x)) / sqrt(var(x) + eps)``, population variance; both
over each row of X.  A row's factor ``1/sqrt(m)`` with ``m = p/q`` rational
is ``s·sqrt(t)/p`` where ``q·p = s²·t`` (``t`` square-free), so a normalized
entry is a rational times ``sqrt(t)``: exact, with one root per row.

After a norm the rows of Q, K and V carry different roots, so a row of
scores mixes several (``sqrt(2)``, ``1``, ``sqrt(2)/2`` …) and the softmax
no longer fits :class:`tutor.exact.numbers.Mix` (one ``sqrt(t)`` per row).
Those entries are :class:`tutor.exact.expoly.Value` s (sums of fractions of
``Σ c·√t·exp(Σ u·√s)``), shown through :class:`Alg`.

Post-norm (Vaswani et al. 2017, §3.1: ``LayerNorm(x + Sublayer(x))``)
normalizes ``r = X + output``, whose entries hold exponentials: a row's
``v = var(r) + eps`` (or ``mean(r²) + eps``) is an exact :class:`Value`, but
its square root is not one.  An entry is kept as ``(r − mean(r))/sqrt(v)``
with both parts exact (:class:`Rooted`); it is a rational times a root when
``v`` is rational, and ``±1`` when ``v`` is exactly the entry's own square
(LayerNorm of two entries, eps 0).  Its equality with a typed answer is not
decided exactly (no theorem here covers a root of a sum of exponentials): it
is compared at many digits, as after RoPE's softmax
(:func:`tutor.answers.values.equals_exact`'s numeric path).
Pure: no numpy, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from . import matrices as em
from .expoly import Poly, Surds, Value, _NegInf, surds
from .numbers import (
    NEG_INF,
    Exact,
    Mix,
    MixSum,
    Rat,
    Surd,
    SurdPlus,
    _cancels,
    frac_text,
    mix_sum,
    square_free,
    sum_text,
    surd,
    surd_plus,
    surd_text,
)

if TYPE_CHECKING:
    import mpmath
    import sympy


def row_factor(m: Fraction) -> tuple[Fraction, int]:
    """``1/sqrt(m)`` as ``(c, t)``: ``c·sqrt(t)``, ``t`` square-free.  ``m > 0``.

    ``m = p/q``: ``1/sqrt(p/q) = sqrt(q·p)/p = s·sqrt(t)/p`` with ``q·p = s²·t``."""
    p, q = m.numerator, m.denominator
    s, t = square_free(p * q)
    return Fraction(s, p), t


def centred(row: Sequence[Fraction], center: bool) -> list[Fraction]:
    """The row, less its mean when ``center`` (LayerNorm), as it is (RMSNorm)."""
    if not center:
        return list(row)
    mean = sum(row, Fraction(0)) / len(row)
    return [x - mean for x in row]


def spread(row: Sequence[Fraction], center: bool, eps: Fraction) -> Fraction:
    """What the row is divided by the square root of: ``mean(x²) + eps``, or ``var(x) + eps`` when ``center``."""
    c = centred(row, center)
    return sum((x * x for x in c), Fraction(0)) / len(c) + eps


def normalize(x: Sequence[Sequence[Fraction]], center: bool, eps: Fraction,
              axis: int = -1) -> list[list[tuple[Fraction, int]]] | None:
    """Each row of ``x`` normalized (``axis=-1``; ``axis=0``: each column, a learner's mistake):
    ``[L, d]`` entries ``(u, t)`` meaning ``u·sqrt(t)``.  ``center``: LayerNorm (mean subtracted), else
    RMSNorm.  ``None`` when a row (column) has nothing to divide by (``mean(x²) + eps = 0``)."""
    lines = [list(r) for r in x] if axis == -1 else [list(c) for c in zip(*x)]
    out = []
    for line in lines:
        m = spread(line, center, eps)
        if m == 0:
            return None
        c, t = row_factor(m)
        out.append([(v * c, t) for v in centred(line, center)])
    return out if axis == -1 else [list(r) for r in zip(*out)]


def as_exact(m: Sequence[Sequence[tuple[Fraction, int]]]) -> tuple[tuple[Exact, ...], ...]:
    """Entries ``(u, t)`` as :class:`Rat` / :class:`Surd`."""
    return tuple(tuple(surd(u, t) for u, t in row) for row in m)


def as_values(m: Sequence[Sequence[tuple[Fraction, int]]]) -> em.Matrix:
    """Entries ``(u, t)`` as the exact walk's entries (a Fraction while rational)."""
    return [[u if t == 1 or u == 0 else Value.of(u, t) for u, t in row] for row in m]


# --- entries after a norm -------------------------------------------------------------------------------


def _exp_text(a: Surds) -> str:
    return f"exp({sum_text(surd_text(u, s) for s, u in a)})"


def _poly_text(p: Poly) -> str:
    """``Σ c·√t·exp(a)`` in the answer grammar, the constant term first, then by exponent."""
    terms = []
    for (a, t), c in sorted(p.terms.items(), key=lambda kv: (bool(kv[0][0]), kv[0])):
        coef = surd_text(c, t)
        if not a:
            terms.append(coef)
        elif coef in ("1", "-1"):
            terms.append(("-" if coef == "-1" else "") + _exp_text(a))
        else:
            terms.append(f"{coef}*{_exp_text(a)}")
    return sum_text(terms)


def _shifted(p: Poly, by: Surds) -> Poly:
    """``p / exp(by)``: every exponent less ``by``."""
    neg = tuple((s, -u) for s, u in by)
    return Poly({(surds(a + neg), t): c for (a, t), c in p.terms.items()})


def _part_text(n: Poly, d: Poly) -> str:
    if d.constant() == ((1, Fraction(1)),):
        return _poly_text(n)
    exps = {a for a, _ in n.terms} | {a for a, _ in d.terms}
    if len({a for a, _ in n.terms}) == 1:  # one exponent above: divide by it, so the fraction reads c/(1 + …)
        ref = next(iter(n.terms))[0]
    else:
        ref = max(exps, key=lambda a: float(Poly.exp(a).precise(20)))
    n, d = _shifted(n, ref), _shifted(d, ref)
    top = _poly_text(n)
    if len(n.terms) > 1:
        top = f"({top})"
    return f"{top}/({_poly_text(d)})"


@dataclass(frozen=True, slots=True, eq=False)
class Alg(Exact):
    """An entry that follows a norm: a :class:`tutor.exact.expoly.Value` (``Σ N/D``, numerators and
    denominators ``Σ c·√t·exp(Σ u·√s)``), printed in the answer grammar."""

    v: Value

    def __str__(self) -> str:
        return sum_text(_part_text(n, d) for n, d in self.v.parts)

    def value(self) -> float:
        """In floats, each part's exponents shifted by its denominator's largest (no overflow); at 30 digits
        (mpmath) when that is not finite or a sum cancels (as :meth:`tutor.exact.numbers.Mix.value` does)."""
        parts = []
        for n, d in self.v.parts:
            exps = {a: math.fsum(float(u) * math.sqrt(s) for s, u in a) for a, _ in (*n.terms, *d.terms)}
            top = max(exps[a] for a, _ in d.terms)

            try:
                num, den = ([float(c) * math.sqrt(t) * math.exp(exps[a] - top) for (a, t), c in p.terms.items()]
                            for p in (n, d))
            except OverflowError:
                return float(self.v.precise(30))
            top_n, top_d = math.fsum(num), math.fsum(den)
            if not (math.isfinite(top_n) and math.isfinite(top_d)) or _cancels(top_n, num) or _cancels(top_d, den):
                return float(self.v.precise(30))
            parts.append(top_n / top_d)
        total = math.fsum(parts)
        return float(self.v.precise(30)) if _cancels(total, parts) else total

    def precise_value(self, digits: int = 40) -> mpmath.mpf:
        return self.v.precise(digits)

    def to_sympy(self) -> sympy.Expr:
        import sympy

        def poly(p: Poly) -> sympy.Expr:
            return sympy.Add(*(sympy.Rational(c.numerator, c.denominator) * sympy.sqrt(t)
                               * sympy.exp(sympy.Add(*(sympy.Rational(u.numerator, u.denominator) * sympy.sqrt(s)
                                                       for s, u in a)))
                               for (a, t), c in p.terms.items()))

        return sympy.Add(*(poly(n) / poly(d) for n, d in self.v.parts))


def wrap(e: em.Entry) -> Exact:
    """An exact-walk entry as an entry of a step: a rational, a surd ``u·sqrt(t)``, ``-inf``, or :class:`Alg`."""
    if isinstance(e, _NegInf):
        return NEG_INF
    if isinstance(e, Fraction):
        return Rat(e)
    c = e.constant()
    if c is not None and len(c) <= 1:
        return Rat(Fraction(0)) if not c else surd(c[0][1], c[0][0])
    return Alg(e)


def plus_rational(e: Exact, q: Fraction) -> Exact:
    """``e + q`` for an output entry ``e`` and a rational ``q`` (the residual's ``x`` entry), exactly."""
    if isinstance(e, Rat):
        return Rat(e.q + q)
    if isinstance(e, Surd):
        return surd_plus(e.q, e.t, q)
    if isinstance(e, SurdPlus):
        return surd_plus(e.q, e.t, e.r + q)
    if isinstance(e, Mix):
        return mix_sum((e,), q)
    if isinstance(e, MixSum):
        return mix_sum(e.parts, e.const + q)
    assert isinstance(e, Alg), f"no residual for {type(e).__name__}"
    return Alg(e.v + Value.of(q))



# --- post-norm: X + output normalized ---------------------------------------------------------------


def _value(e: em.Entry) -> Value:
    return em.as_value(e)


@dataclass(frozen=True, slots=True, eq=False)
class Rooted(Exact):
    """``c/sqrt(v)`` with ``c``, ``v`` exact :class:`Value` s and ``v > 0``: an entry of post-norm's output
    whose row's variance (mean square) plus eps is no rational.  Printed in the answer grammar as
    ``(c)/sqrt(v)``; graded at many digits (see the module)."""

    c: Value
    v: Value

    def __str__(self) -> str:
        return f"({wrap(self.c)})/sqrt({wrap(self.v)})"

    def value(self) -> float:
        return float(self.precise_value(30))

    def precise_value(self, digits: int = 40) -> mpmath.mpf:
        import mpmath

        with mpmath.workdps(digits + 20):  # r − mean(r) may cancel a few digits: read both parts further
            out = self.c.precise(digits + 20) / mpmath.sqrt(self.v.precise(digits + 20))
        with mpmath.workdps(digits):
            return +out

    def to_sympy(self) -> sympy.Expr:
        import sympy

        return wrap(self.c).to_sympy() / sympy.sqrt(wrap(self.v).to_sympy())


def post_norm(r: Sequence[Sequence[em.Entry]], center: bool, eps: Fraction) -> list[list[Exact]]:
    """Each row of ``r = X + output`` ``[L, d_model]`` (exact-walk entries) normalized: ``(r − mean(r))/
    sqrt(var(r) + eps)`` when ``center`` (LayerNorm, population variance; Ba et al. 2016, eq. 4), else
    ``r/sqrt(mean(r²) + eps)`` (RMSNorm; Zhang & Sennrich 2019, eq. 4): ``[L, d_model]`` entries, a rational
    times a root when a row's ``v`` is rational, ``±1`` when ``v`` equals the entry's square, else
    :class:`Rooted`.  Raises ``ZeroDivisionError(i)`` when row ``i``'s ``v`` is exactly 0 (the norm divides by 0)."""
    out: list[list[Exact]] = []
    for i, row in enumerate(r):
        vals = [_value(e) for e in row]
        n = len(vals)
        if center:
            mean = sum(vals[1:], vals[0]).scale(Fraction(1, n))
            vals = [x + -mean for x in vals]
        squares = [x * x for x in vals]
        v = sum(squares[1:], squares[0]).scale(Fraction(1, n)) + Value.of(eps)
        zero, _ = v.equals(Value.of(0))
        if zero:
            raise ZeroDivisionError(i)
        const = v.constant()
        line: list[Exact] = []
        for x, x2 in zip(vals, squares):
            if not x.parts:
                line.append(Rat(Fraction(0)))
            elif const is not None and all(s == 1 for s, _ in const):  # v rational: 1/sqrt(v) = c·sqrt(t)
                c, t = row_factor(const[0][1] if const else Fraction(0))
                line.append(wrap(x * Value.of(c, t)))
            elif x2.equals(v) == (True, True):  # v = x²: x/|x| = ±1
                line.append(Rat(Fraction(1 if float(wrap(x).precise_value(30)) > 0 else -1)))
            else:
                line.append(Rooted(x, v))
        out.append(line)
    return out


__all__ = ["Alg", "Rooted", "as_exact", "as_values", "centred", "frac_text", "normalize", "plus_rational", "post_norm",
           "row_factor", "spread", "wrap"]
