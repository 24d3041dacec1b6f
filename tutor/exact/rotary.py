"""RoPE, exactly: cosines and sines of rational angles, the rotated Q and K, their scores and softmax.

RoPE (Su et al. 2021, "RoFormer", §3.4.2) turns pair ``i`` of a query or
key at position ``m`` by the angle ``m·θ_i``:
``[a, b] → [a·cos(mθ_i) − b·sin(mθ_i), a·sin(mθ_i) + b·cos(mθ_i)]``.  With
rational inputs and rational ``θ_i`` every rotated entry, and every score
``q_rot·k_rotᵀ`` (products turned into sums: ``cos x·cos y = (cos(x − y) +
cos(x + y))/2`` …), is a *trigonometric polynomial*
``√t·Σ_r (a_r·cos(r) + b_r·sin(r))`` with rational ``a_r``, ``b_r``, ``r``
(:class:`Trig`; ``r = 0`` is the rational part).

What is decided exactly, and what is not:

* equality of two trigonometric polynomials (Q_rot, K_rot, the scores and
  the scaled scores) is exact.  ``cos(r) = (e^{ir} + e^{−ir})/2`` and
  ``sin(r) = (e^{ir} − e^{−ir})/(2i)``; the numbers ``ir`` are algebraic
  and distinct for distinct ``r``, so by the Lindemann–Weierstrass theorem
  ``e^{ir}`` over distinct ``r`` are linearly independent over the
  algebraic numbers: a polynomial is zero exactly when every coefficient
  is.  :class:`Trig` keeps that canonical form (``r >= 0``, equal angles
  added), so ``==`` is exact;
* after the softmax the exponents are trigonometric polynomials themselves
  (``exp(cos(1)/2)``): no longer algebraic, so neither
  Lindemann–Weierstrass nor :mod:`.expoly` decides equality.  Equal
  exponents are still found exactly (weights of keys with the same scaled
  score are grouped), but a value is never simplified to a rational
  otherwise, and an answer is compared with it at many digits (mpmath,
  :func:`tutor.answers.values.equals_exact`'s numeric path): its text is
  exact, its equality test is not.
* the backward pass (issue 23) keeps the same form: a gradient entry is a
  sum over query rows of ``√r·Σ c·exp(a_j + a_k)/Z²`` whose exponents are
  these trigonometric polynomials and whose coefficients ``c`` are too (an
  entry of ``K_rot``, a ``cos(mθ)`` of ``R(mθ)ᵀ``): :mod:`tutor.exact.grad`
  sums them exactly (equal exponents found exactly) and compares them, as
  the softmax's values, at many digits.

Pure: no numpy, no sympy import at module level, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING, cast

from .numbers import NEG_INF, Exact, Rat, SoftmaxRow, frac_text, sum_text, surd

if TYPE_CHECKING:
    import mpmath
    import sympy

#: ``((r, a, b), …)`` sorted by ``r >= 0``: ``Σ a·cos(r) + b·sin(r)``; at ``r = 0``, ``b = 0``; no zero term.
Terms = tuple[tuple[Fraction, Fraction, Fraction], ...]


def _canon(acc: dict[Fraction, list[Fraction]]) -> Terms:
    return tuple((r, a, b if r else Fraction(0)) for r, (a, b) in sorted(acc.items()) if a or (b and r))


def _add_to(acc: dict[Fraction, list[Fraction]], r: Fraction, a: Fraction, b: Fraction) -> None:
    """Add ``a·cos(r) + b·sin(r)`` to ``acc``, folding a negative angle (``cos(−r) = cos r``, ``sin(−r) = −sin r``)."""
    if r < 0:
        r, b = -r, -b
    slot = acc.setdefault(r, [Fraction(0), Fraction(0)])
    slot[0] += a
    slot[1] += b


def _term_text(c: Fraction, t: int, fn: str, r: Fraction) -> str:
    """``c·√t·fn(r)`` in the answer grammar: ``cos(1)``, ``-sin(1/100)``, ``3*sqrt(2)*cos(2)/4``, ``1/2``."""
    if r == 0:  # the rational part (cos 0 = 1)
        head = "" if t == 1 else f"sqrt({t})"
        p, n = c.numerator, c.denominator
        if not head:
            return frac_text(c)
        core = head if abs(p) == 1 else f"{abs(p)}*{head}"
    else:
        p, n = c.numerator, c.denominator
        factors = ([] if abs(p) == 1 else [str(abs(p))]) + ([f"sqrt({t})"] if t != 1 else []) + [f"{fn}({frac_text(r)})"]
        core = "*".join(factors)
    return ("-" if p < 0 else "") + core + (f"/{n}" if n != 1 else "")


@dataclass(frozen=True, slots=True)
class Trig(Exact):
    """``√t·Σ_r (a_r·cos(r) + b_r·sin(r))``: rational ``a_r``, ``b_r``, angles ``r >= 0``, ``t`` square-free.

    Canonical (see the module): equal values have equal fields, so ``==`` and ``hash`` are exact.
    """

    terms: Terms
    t: int = 1

    def __post_init__(self) -> None:
        if not self.terms and self.t != 1:  # 0 has one form (a difference of equal exponents over √t is 0, t = 1)
            object.__setattr__(self, "t", 1)

    @classmethod
    def of(cls, q: Fraction) -> Trig:
        """The rational ``q``."""
        return cls(((Fraction(0), q, Fraction(0)),) if q else ())

    @classmethod
    def turn(cls, a: Fraction, b: Fraction, angle: Fraction) -> tuple[Trig, Trig]:
        """The pair ``[a, b]`` turned by ``angle``: ``(a·cos − b·sin, a·sin + b·cos)``."""
        x: dict[Fraction, list[Fraction]] = {}
        y: dict[Fraction, list[Fraction]] = {}
        _add_to(x, angle, a, -b)
        _add_to(y, angle, b, a)
        return cls(_canon(x)), cls(_canon(y))

    @classmethod
    def cos_sin(cls, angle: Fraction) -> tuple[Trig, Trig]:
        """``(cos(angle), sin(angle))`` (``cos 0 = 1``, ``sin 0 = 0``): the entries of a pair's rotation."""
        c: dict[Fraction, list[Fraction]] = {}
        s: dict[Fraction, list[Fraction]] = {}
        _add_to(c, angle, Fraction(1), Fraction(0))
        _add_to(s, angle, Fraction(0), Fraction(1))
        return cls(_canon(c)), cls(_canon(s))

    @property
    def is_zero(self) -> bool:
        return not self.terms

    def __bool__(self) -> bool:
        """False for 0 only (a gradient's coefficient that vanished is dropped as a zero ``Fraction`` is)."""
        return bool(self.terms)

    def rational(self) -> Fraction | None:
        """The value when it is rational (only a constant part, ``t = 1``), else ``None``."""
        if not self.terms:
            return Fraction(0)
        if len(self.terms) == 1 and self.terms[0][0] == 0 and self.t == 1:
            return self.terms[0][1]
        return None

    def __add__(self, other: Trig | Fraction | int) -> Trig:
        if not isinstance(other, Trig):  # a rational coefficient (the backward pass adds them to cos/sin ones)
            other = Trig.of(Fraction(other))
        if self.is_zero:
            return other
        if other.is_zero:
            return self
        assert self.t == other.t, "added trigonometric polynomials share √t"
        acc: dict[Fraction, list[Fraction]] = {}
        for r, a, b in self.terms + other.terms:
            _add_to(acc, r, a, b)
        return Trig(_canon(acc), self.t)

    def __radd__(self, other: Fraction | int) -> Trig:
        return self + other

    def __neg__(self) -> Trig:
        return Trig(tuple((r, -a, -b) for r, a, b in self.terms), self.t)

    def __sub__(self, other: Trig) -> Trig:
        return self + -other

    def times(self, q: Fraction) -> Trig:
        """``q`` times this value."""
        return Trig(tuple((r, a * q, b * q) for r, a, b in self.terms), self.t) if q else Trig(())

    def over_root(self, s: int, t: int) -> Trig:
        """This value divided by ``s·√t`` (``t`` square-free): ``x/(s√t) = √t·x/(s·t)``.  ``self.t`` is 1."""
        assert self.t == 1
        return Trig(tuple((r, a / (s * t), b / (s * t)) for r, a, b in self.terms), t if self.terms else 1)

    def __rmul__(self, other: Fraction | int) -> Trig:
        return self.times(Fraction(other))

    def __mul__(self, other: Trig | Fraction | int) -> Trig:
        """The product, products of cosines and sines turned into sums (both with ``t = 1``); a rational
        ``other`` scales every coefficient."""
        if not isinstance(other, Trig):
            return self.times(Fraction(other))
        assert self.t == 1 and other.t == 1
        acc: dict[Fraction, list[Fraction]] = {}
        half = Fraction(1, 2)
        for x, a1, b1 in self.terms:
            for y, a2, b2 in other.terms:
                # (a1 cos x + b1 sin x)(a2 cos y + b2 sin y)
                if a1 and a2:  # cos x cos y = (cos(x − y) + cos(x + y))/2
                    c = a1 * a2 * half
                    _add_to(acc, x - y, c, Fraction(0))
                    _add_to(acc, x + y, c, Fraction(0))
                if b1 and b2:  # sin x sin y = (cos(x − y) − cos(x + y))/2
                    c = b1 * b2 * half
                    _add_to(acc, x - y, c, Fraction(0))
                    _add_to(acc, x + y, -c, Fraction(0))
                if b1 and a2:  # sin x cos y = (sin(x + y) + sin(x − y))/2
                    c = b1 * a2 * half
                    _add_to(acc, x + y, Fraction(0), c)
                    _add_to(acc, x - y, Fraction(0), c)
                if a1 and b2:  # cos x sin y = (sin(x + y) − sin(x − y))/2
                    c = a1 * b2 * half
                    _add_to(acc, x + y, Fraction(0), c)
                    _add_to(acc, x - y, Fraction(0), -c)
        return Trig(_canon(acc))

    # --- reading it ---------------------------------------------------------------------------------------
    def __str__(self) -> str:
        parts: list[str] = []
        for r, a, b in self.terms:
            if a:
                parts.append(_term_text(a, self.t, "cos", r))
            if b:
                parts.append(_term_text(b, self.t, "sin", r))
        return sum_text(parts)

    def value(self) -> float:
        root = math.sqrt(self.t)
        terms = [x for r, a, b in self.terms for x in (float(a) * math.cos(r), float(b) * math.sin(r)) if x]
        total = math.fsum(terms)
        if terms and abs(total) < 1e-3 * max(abs(x) for x in terms):  # cancelled: recompute at 40 digits
            return float(self.precise_value(40))
        return total * root

    def precise_value(self, digits: int = 40) -> mpmath.mpf:
        import mpmath

        with mpmath.workdps(digits + 10):
            def q(x: Fraction) -> mpmath.mpf:
                return mpmath.mpf(x.numerator) / x.denominator

            total = mpmath.fsum(q(a) * mpmath.cos(q(r)) + q(b) * mpmath.sin(q(r)) for r, a, b in self.terms)
            return total * mpmath.sqrt(self.t)

    def to_sympy(self) -> sympy.Expr:
        import sympy

        def q(x: Fraction) -> sympy.Expr:
            return sympy.Rational(x.numerator, x.denominator)

        return sympy.sqrt(self.t) * sympy.Add(*(q(a) * sympy.cos(q(r)) + q(b) * sympy.sin(q(r)) for r, a, b in self.terms))


ZERO = Trig(())


@dataclass(frozen=True)
class TrigMat:
    """A matrix of :class:`Trig` entries ``[n][m]``: Q or K rotated, their scores, the scaled scores.

    ``den`` is 1: the entries carry their own fractions (the exact engine's mask reads ``num`` as
    :class:`tutor.exact.engine.QMat`'s, entries over ``den``).
    """

    num: tuple[tuple[Trig, ...], ...]
    den: int = 1

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.num), len(self.num[0]))

    @property
    def T(self) -> TrigMat:
        return TrigMat(tuple(zip(*self.num)))

    def __matmul__(self, other: TrigMat) -> TrigMat:
        """``[n, m] @ [m, p] -> [n, p]`` (the shapes chain: the caller's)."""
        cols = tuple(zip(*other.num))  # [p][m]
        out = []
        for row in self.num:
            line = []
            for col in cols:
                acc = ZERO
                for x, y in zip(row, col):
                    if not x.is_zero and not y.is_zero:
                        acc = acc + x * y
                line.append(acc)
            out.append(tuple(line))
        return TrigMat(tuple(out))

    def over_root(self, s: int, t: int) -> TrigMat:
        """Every entry divided by ``s·√t``."""
        return TrigMat(tuple(tuple(x.over_root(s, t) for x in row) for row in self.num))

    def exact(self) -> tuple[tuple[Exact, ...], ...]:
        return tuple(tuple(_lowest(x) for x in row) for row in self.num)


def _lowest(x: Trig) -> Exact:
    """A :class:`Trig` with no angle as the :class:`~tutor.exact.numbers.Rat` or
    :class:`~tutor.exact.numbers.Surd` it is (so such an entry prints and grades as one)."""
    if not x.terms:
        return Rat(Fraction(0))
    if len(x.terms) == 1 and x.terms[0][0] == 0:
        return surd(x.terms[0][1], x.t)
    return x


def rotate(rows: Sequence[Sequence[Fraction]], positions: Sequence[int], thetas: Sequence[Fraction],
           pairs: Sequence[tuple[int, int]]) -> TrigMat:
    """``rows [n, d_k]`` (rational: Q or K) with row ``p`` turned by its position: pair ``i`` = columns ``pairs[i]`` by
    ``positions[p]·θ_i`` (RoFormer §3.4.2; the caller gives ``(2i, 2i+1)`` or ``(i, i + d_k/2)``).  ``[n, d_k]``."""
    out = []
    for p, row in enumerate(rows):
        line: list[Trig] = [ZERO] * len(row)
        for (ia, ib), theta in zip(pairs, thetas):
            line[ia], line[ib] = Trig.turn(row[ia], row[ib], positions[p] * theta)
        out.append(tuple(line))
    return TrigMat(tuple(out))


def angle_texts(positions: Sequence[int], thetas: Sequence[Fraction]) -> list[list[str]]:
    """``m·θ_i`` of each position and pair as text (``0``, ``1``, ``1/100``): the angles a worked step shows."""
    return [[frac_text(m * th) for th in thetas] for m in positions]


# --- the softmax over trigonometric exponents ---------------------------------------------------------------


class TrigRow(SoftmaxRow):
    """One query row's softmax when its exponents are :class:`Trig` (``None`` = a masked key).

    The same interface as :class:`~tutor.exact.numbers.SoftmaxRow` (so :func:`~tutor.exact.numbers.mix`,
    :class:`~tutor.exact.numbers.Mix` and the output projection take it as they are): a key is the exponent
    itself, equal exponents grouped exactly; ``algebraic`` is False, so a sum of mixes over such rows is
    never simplified to a rational (see the module).
    """

    algebraic = False

    def __init__(self, exps: Sequence[Trig | None], t: int):
        self.t = t
        self.den, self.bden = 1, 1
        self.bias = None
        self.exps = tuple(exps)
        self.nums = tuple(None if e is None else 0 for e in exps)  # only is-None is read of a RoPE row's nums
        self.keys = self.exps  # type: ignore[assignment]
        self.live = tuple(j for j, e in enumerate(exps) if e is not None)
        self._float = {e: e.value() for e in exps if e is not None}
        live = [e for e in exps if e is not None]
        self.top = max(live, key=lambda e: self._float[e], default=ZERO)  # type: ignore[assignment]
        groups: dict[Trig, list[int]] = {}
        for j, e in enumerate(exps):
            if e is not None:
                groups.setdefault(e, []).append(j)
        order = sorted(groups.items(), key=lambda g: self._float[g[0]])
        self.groups = {e: tuple(js) for e, js in order}  # type: ignore[misc]
        self.distinct = len(self.groups) == len(self.live)
        self._exp = {}
        self._den = {}
        self._shape = {}

    def approx(self, k):
        return k.value()

    @staticmethod
    def diff(a, b):
        return a - b

    def term(self, c: int, d) -> str:
        if d.is_zero:
            return str(c)
        e = self._exp_of(d)
        if c == 1:
            return e
        return f"-{e}" if c == -1 else f"{c}*{e}"

    def _exp_of(self, d) -> str:
        e = self._exp.get(d)
        if e is None:
            e = self._exp[d] = f"exp({d})"
        return e

    def u(self, j: int) -> Fraction:  # pragma: no cover - never called: the backward pass keys RoPE's rows by
        raise NotImplementedError("a RoPE row has no rational exponent")  # their Trig exponents (tutor.exact.grad)

    def mp_shifted_exponent(self, j: int, ref=None):
        e = self.exps[j]
        assert e is not None
        other = cast(Trig, self.top if ref is None else ref)  # a RoPE row's keys are its Trig exponents
        return (e - other).precise_value(_mp_digits())

    def sympy_exponent(self, j: int, ref=None):
        e = self.exps[j]
        assert e is not None
        return (e if ref is None else e - ref).to_sympy()

    @cached_property
    def shifted(self) -> tuple[float, ...]:
        """``exp(a_j − max a)`` for live keys, 0 for masked ones."""
        top = self._float[cast(Trig, self.top)] if self.live else 0.0
        return tuple(0.0 if e is None else math.exp(self._float[e] - top) for e in self.exps)


def _mp_digits() -> int:
    """The working precision of mpmath now, in digits (the caller set it with ``workdps``)."""
    import mpmath

    return int(mpmath.mp.dps)


def scores(Q: TrigMat, K: TrigMat) -> TrigMat:
    """``Q_rot·K_rotᵀ``: ``[L, d_k]·[d_k, L_k]`` -> ``[L, L_k]``."""
    return Q @ K.T


def masked_exact(live: Sequence[Sequence[Trig | None]]) -> tuple[tuple[Exact, ...], ...]:
    """The masked scores: ``-inf`` where blocked, the scaled score elsewhere."""
    return tuple(tuple(NEG_INF if e is None else _lowest(e) for e in row) for row in live)


def softmax_rows(live: Sequence[Sequence[Trig | None]], t: int) -> tuple[TrigRow, ...]:
    """One softmax per query row over trigonometric exponents."""
    return tuple(TrigRow(row, t) for row in live)
