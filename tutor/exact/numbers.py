"""Exact entries of attention steps: rationals, surds, -inf, and structured softmax mixes.

Every value attention produces from rational inputs has one of these forms:

* :class:`Rat` - a rational (Q, K, V, scores; anything a mask or a tie makes rational);
* :class:`Surd` - ``q·sqrt(t)``, ``t`` square-free (scaled scores: ``scores / sqrt(d_k)``);
* :class:`NegInf` - a masked score;
* :class:`Mix` - ``Σ_j c_j·exp(a_j) / Σ_j exp(a_j)`` over the unmasked keys of one
  query row, with ``a_j = u_j·sqrt(t)`` (``u_j`` rational): an attention weight
  (``c`` = indicator of key ``j``), a head-output entry (``c`` = a column of V),
  or one head's share of an output-projection entry (``c = V W_O[:, j]``);
* :class:`MixSum` - ``Σ_h Mix_h + const``: an entry of the output projection.

Keeping softmax in this structure (terms over the row's shared denominator
``Z_i``) is what makes the engine fast at the size limits: floats come from the
structure with max subtraction, exact strings are printed from it directly,
and a sympy expression is built only on request (:meth:`Exact.to_sympy`).
Strings are in the answer grammar of :mod:`tutor.answers` (``sqrt``, ``exp``,
``e``, ``-inf``), e.g. ``1/(1 + 2*exp(sqrt(2)))``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # sympy and mpmath are imported lazily: building an exact value never needs them
    import mpmath
    import sympy


def square_free(n: int) -> tuple[int, int]:
    """``n = s²·t`` with ``t`` square-free; returns ``(s, t)``.  ``n >= 1``."""
    s, t, p = 1, n, 2
    while p * p <= t:
        while t % (p * p) == 0:
            t //= p * p
            s *= p
        p += 1
    return s, t


def frac_text(q: Fraction) -> str:
    """``3``, ``-2/5`` (as sympy prints a Rational)."""
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def surd_text(q: Fraction, t: int) -> str:
    """``q·sqrt(t)`` as sympy prints it: ``sqrt(2)``, ``-3*sqrt(2)/4``, ``1/2`` (t = 1)."""
    if t == 1 or q == 0:
        return frac_text(q)
    p, n = q.numerator, q.denominator
    head = f"sqrt({t})" if abs(p) == 1 else f"{abs(p)}*sqrt({t})"
    return ("-" if p < 0 else "") + head + (f"/{n}" if n != 1 else "")


_SQRT = re.compile(r"sqrt\((\d+)\)")
_COEF_SQRT = re.compile(r"(\d)\*sqrt\((\d+)\)")


def notation(text: str) -> str:
    """Answer-grammar text as a learner writes it on paper: ``2*exp(-sqrt(2))`` -> ``2·exp(−√2)``, ``-inf`` -> ``−∞``."""
    text = _COEF_SQRT.sub(r"\1√\2", text)
    return _SQRT.sub(r"√\1", text).replace("*", "·").replace("-inf", "−∞").replace("-", "−")


_LABELS = re.compile(r"(\[[^\]]*\])")


def notation_of_work(text: str) -> str:
    """A worked entry (answer-grammar text, :func:`tutor.steps.worked_entry`) as :func:`notation` writes it on paper,
    its ``[row, column]`` labels as they are (a token may be named ``x-ray``): ``(-0.1331)·sin(1)`` ->
    ``(−0.1331)·sin(1)``, one minus sign beside the hints' and explanations' ``−``."""
    return "".join(part if part.startswith("[") else notation(part) for part in _LABELS.split(text))


def _exp_text(u: Fraction, t: int, r: Fraction | None = None) -> str:
    """``exp(u·sqrt(t) + r)`` as text: ``exp(1)``, ``exp(sqrt(2)/2)``, ``exp(sqrt(2) - 1/16)``, ``exp(1/16)``.

    Euler's number itself is written ``exp(1)``, never ``e``: as ``exp(-1)`` and ``exp(2)`` are, so that a
    program reading ``--format json`` (sympy, a spreadsheet) cannot take it for a variable named e."""
    if r:  # a bias part (format v2); t >= 2 here: a rational t = 1 is folded into u by the caller
        if u == 0:
            return f"exp({frac_text(r)})"
        return f"exp({sum_text([surd_text(u, t), frac_text(r)])})"
    return f"exp({surd_text(u, t)})"


def sum_text(terms: Iterable[str]) -> str:
    """Join terms with `` + `` / `` - ``: ``["1", "-exp(2)"]`` -> ``1 - exp(2)``."""
    out = ""
    for term in terms:
        if not out:
            out = term
        elif term.startswith("-"):
            out += " - " + term[1:]
        else:
            out += " + " + term
    return out or "0"


def _cancels(total: float, terms: list[float]) -> bool:
    """True when a float sum lost 3 or more digits to cancellation (|sum| < 1e-3 · its largest term)."""
    return abs(total) < 1e-3 * max((abs(x) for x in terms), default=0.0)


class Exact:
    """An exact entry.  ``str()`` gives the answer-grammar text."""

    __slots__ = ()

    def value(self) -> float:
        """The entry as a float64 (``-inf`` for a masked score)."""
        raise NotImplementedError

    def to_sympy(self) -> sympy.Expr:
        """The entry as a sympy expression (imports sympy)."""
        raise NotImplementedError

    def precise_value(self, digits: int = 40) -> mpmath.mpf:
        """The entry at ``digits`` significant digits (mpmath; ``-inf`` for a masked score),
        for comparing an exact claim beyond a float's precision."""
        raise NotImplementedError

    def __float__(self) -> float:
        return self.value()


@dataclass(frozen=True, slots=True)
class Rat(Exact):
    q: Fraction

    def __str__(self) -> str:
        return frac_text(self.q)

    def value(self) -> float:
        return float(self.q)

    def precise_value(self, digits: int = 40) -> mpmath.mpf:
        import mpmath

        with mpmath.workdps(digits):
            return mpmath.mpf(self.q.numerator) / self.q.denominator

    def to_sympy(self) -> sympy.Expr:
        import sympy

        return sympy.Rational(self.q.numerator, self.q.denominator)


@dataclass(frozen=True, slots=True)
class Surd(Exact):
    """``q·sqrt(t)`` with ``t >= 2`` square-free."""

    q: Fraction
    t: int

    def __str__(self) -> str:
        return surd_text(self.q, self.t)

    def value(self) -> float:
        return float(self.q) * math.sqrt(self.t)

    def precise_value(self, digits: int = 40) -> mpmath.mpf:
        import mpmath

        with mpmath.workdps(digits):
            return mpmath.mpf(self.q.numerator) / self.q.denominator * mpmath.sqrt(self.t)

    def to_sympy(self) -> sympy.Expr:
        import sympy

        return sympy.Rational(self.q.numerator, self.q.denominator) * sympy.sqrt(self.t)


@dataclass(frozen=True, slots=True)
class SurdPlus(Exact):
    """``q·sqrt(t) + r`` with ``t >= 2`` square-free, ``q != 0``, ``r != 0``: a scaled score plus a rational bias."""

    q: Fraction
    t: int
    r: Fraction

    def __str__(self) -> str:
        return sum_text([surd_text(self.q, self.t), frac_text(self.r)])

    def value(self) -> float:
        return math.fsum([float(self.q) * math.sqrt(self.t), float(self.r)])

    def precise_value(self, digits: int = 40) -> mpmath.mpf:
        import mpmath

        with mpmath.workdps(digits + 10):
            return (mpmath.mpf(self.q.numerator) / self.q.denominator * mpmath.sqrt(self.t)
                    + mpmath.mpf(self.r.numerator) / self.r.denominator)

    def to_sympy(self) -> sympy.Expr:
        import sympy

        return (sympy.Rational(self.q.numerator, self.q.denominator) * sympy.sqrt(self.t)
                + sympy.Rational(self.r.numerator, self.r.denominator))


@dataclass(frozen=True, slots=True)
class NegInf(Exact):
    def __str__(self) -> str:
        return "-inf"

    def value(self) -> float:
        return -math.inf

    def precise_value(self, digits: int = 40) -> mpmath.mpf:
        import mpmath

        return mpmath.mpf("-inf")

    def to_sympy(self) -> sympy.Expr:
        import sympy

        return -sympy.oo


NEG_INF = NegInf()
ZERO = Rat(Fraction(0))


def surd(u: Fraction, t: int) -> Rat | Surd:
    """``u·sqrt(t)`` in lowest form (a :class:`Rat` when ``t == 1`` or ``u == 0``)."""
    return Rat(u) if t == 1 or u == 0 else Surd(u, t)


def surd_plus(u: Fraction, t: int, r: Fraction) -> Rat | Surd | SurdPlus:
    """``u·sqrt(t) + r`` in lowest form: a :class:`Rat` or :class:`Surd` when one part vanishes."""
    if t == 1 or u == 0:
        return Rat(u * (t == 1) + r)
    return Surd(u, t) if r == 0 else SurdPlus(u, t, r)


_frac = Fraction  # n/d reduced
#: An exponent's key in a softmax row: ``n`` (``a = n/den·sqrt t``) or ``(n, b)`` (``a = n/den·sqrt t + b/bden``).
Key = int | tuple[int, int]


class SoftmaxRow:
    """The exponents of one query row: ``a_j = (n_j / den)·sqrt(t)``, plus ``b_j / bden`` with a bias; ``None`` = masked key.

    Shared by every entry the row produces (weights, head output, output share).
    Exponents are integers over one denominator, so grouping equal exponents
    and subtracting them is integer work.  Without a bias an exponent's key is
    ``n_j``; with one (``t >= 2``: a rational ``t = 1`` is folded into ``n``
    by the caller) it is the pair ``(n_j, b_j)``, equal exactly when the
    exponents are (``sqrt(t)`` is irrational).  ``algebraic``: the exponents
    are algebraic numbers (False for RoPE's, :class:`tutor.exact.rotary.TrigRow`).
    """

    algebraic = True

    def __init__(self, nums: tuple[int | None, ...], den: int, t: int,
                 bias: tuple[int, ...] | None = None, bden: int = 1):
        self.nums, self.den, self.t = nums, den, t
        self.bias, self.bden = bias, bden
        self.keys: tuple[Key | None, ...] = nums if bias is None else tuple(
            None if x is None else (x, bias[j]) for j, x in enumerate(nums))
        self.live = tuple(j for j, x in enumerate(nums) if x is not None)
        live_keys = [k for k in self.keys if k is not None]
        if bias is None:
            self.top: Key = max(live_keys, default=0)
        else:
            self.top = max(live_keys, key=self.approx, default=(0, 0))
        groups: dict[Key, list[int]] = {}
        for j, k in enumerate(self.keys):
            if k is not None:
                groups.setdefault(k, []).append(j)
        order = sorted(groups.items()) if bias is None else sorted(groups.items(), key=lambda g: self.approx(g[0]))
        self.groups = {e: tuple(js) for e, js in order}  # exponent -> keys, ascending
        self.distinct = len(self.groups) == len(self.live)
        self._exp: dict[Key, str] = {}
        self._den: dict[Key, tuple[tuple[Key, ...], tuple[str, ...], str]] = {}
        self._shape: dict[int, tuple[tuple[int, int], ...]] = {}

    # exponent keys: an int n (a = n/den·sqrt t), or a pair (n, b) (a = n/den·sqrt t + b/bden) ---------------
    def approx(self, k: Key) -> float:
        """The exponent of key ``k`` as a float (for ordering)."""
        if isinstance(k, int):
            return k / self.den * math.sqrt(self.t)
        return k[0] / self.den * math.sqrt(self.t) + k[1] / self.bden

    @staticmethod
    def diff(a: Key, b: Key) -> Key:
        """``a - b`` of two keys (the exponent of ``exp(a_j - a_ref)``)."""
        if isinstance(a, int):
            return a - b  # type: ignore[operator]
        return (a[0] - b[0], a[1] - b[1])  # type: ignore[index]

    def parts(self, k: Key) -> tuple[Fraction, Fraction]:
        """``(u, r)`` of key ``k``: its exponent is ``u·sqrt(t) + r``."""
        if isinstance(k, int):
            return _frac(k, self.den), Fraction(0)
        return _frac(k[0], self.den), _frac(k[1], self.bden)

    def shape(self, scale: int) -> tuple[tuple[int, int], ...]:
        """The row's denominator ``Σ_j exp(a_j)`` up to a common factor, as ``(exponent, count)`` pairs
        over ``den·scale`` with the lowest exponent 0: two rows with the same shape have the same
        denominator up to a factor ``exp(shift)`` (:func:`_rational_part` groups by it).  A row
        without a bias only (its keys are the integers ``n_j``)."""
        assert self.bias is None
        out = self._shape.get(scale)
        if out is None:
            low = next(iter(self.groups))
            out = self._shape[scale] = tuple(((e - low) * scale, len(js))  # type: ignore[operator]
                                             for e, js in self.groups.items())
        return out

    def u(self, j: int) -> Fraction:
        """The rational part ``u_j`` of exponent ``a_j = u_j·sqrt(t) (+ r_j)``."""
        return _frac(self.nums[j], self.den)  # type: ignore[arg-type]

    def mp_shifted_exponent(self, j: int, ref: Key | None = None) -> mpmath.mpf:
        """``a_j - a_ref`` (``ref`` the row's largest by default) in mpmath, at the working precision."""
        import mpmath

        k = self.keys[j]
        assert k is not None
        u, r = self.parts(self.diff(k, self.top if ref is None else ref))
        return (mpmath.mpf(u.numerator) / u.denominator * mpmath.sqrt(self.t)
                + mpmath.mpf(r.numerator) / r.denominator)

    def sympy_exponent(self, j: int, ref: Key | None = None) -> sympy.Expr:
        """``a_j - a_ref`` (``ref`` = 0 by default: the exponent itself) as a sympy expression."""
        import sympy

        k = self.keys[j]
        assert k is not None
        u, r = self.parts(k if ref is None else self.diff(k, ref))
        return sympy.Rational(u.numerator, u.denominator) * sympy.sqrt(self.t) + sympy.Rational(r.numerator, r.denominator)

    @cached_property
    def shifted(self) -> tuple[float, ...]:
        """``exp(a_j - max a)`` for live keys, 0 for masked ones (max subtraction: no overflow)."""
        root, den, top = math.sqrt(self.t), self.den, self.top
        if self.bias is None:
            # (x - top) / den is an int division, correctly rounded whatever the size of the integers
            # (x - top) * (root / den) would turn a numerator or denominator beyond 1e308 into a float and overflow
            return tuple(0.0 if x is None else math.exp((x - top) / den * root) for x in self.nums)  # type: ignore[operator]
        bden, (tn, tb) = self.bden, top  # type: ignore[misc]
        return tuple(0.0 if k is None else math.exp((k[0] - tn) / den * root + (k[1] - tb) / bden)  # type: ignore[index]
                     for k in self.keys)

    @cached_property
    def z(self) -> float:
        """``Σ_j exp(a_j - max a)``: at least 1 when the row has a live key."""
        return math.fsum(self.shifted)

    def term(self, c: int, d: Key) -> str:
        """``c·exp(d)`` as text for an integer ``c`` and a key difference ``d``; the exp part is cached per row."""
        if d == 0 or d == (0, 0):
            return str(c)
        e = self._exp_of(d)
        if c == 1:
            return e
        return f"-{e}" if c == -1 else f"{c}*{e}"

    def _layout(self, ref: Key) -> tuple[tuple[Key, ...], tuple[str, ...], str]:
        """For divisor ``exp(a_ref)``: the exponent groups in print order (``ref`` first, then
        ascending), the text of each group's ``exp(...)`` (``""`` for ``ref``), and the denominator."""
        cached = self._den.get(ref)
        if cached is None:
            order = (ref, *(e for e in self.groups if e != ref))
            exps = tuple("" if e == ref else self._exp_of(self.diff(e, ref)) for e in order)
            den = sum_text([self.term(len(self.groups[e]), self.diff(e, ref)) for e in order])
            cached = self._den[ref] = (order, exps, den)
        return cached

    def _exp_of(self, d: Key) -> str:
        e = self._exp.get(d)
        if e is None:
            if isinstance(d, int):  # no bias: the hot path of explain at the size limits
                e = self._exp[d] = _exp_text(Fraction(d, self.den), self.t)
            else:
                u, r = self.parts(d)
                e = self._exp[d] = _exp_text(u, self.t, r)
        return e

    def ratio_text(self, cnums: tuple[int, ...], cden: int, ref: Key) -> str:
        """``Σ c_j exp(a_j) / Σ exp(a_j)`` as text, numerator and denominator divided by ``exp(a_ref)``.

        Equal exponents are grouped (the ``ref`` group first, then ascending);
        the numerator's coefficients are made integers, their common
        denominator k moving down: ``(3 + e)/(2*(1 + e))``.  The layout of a
        row (group order, exp texts, denominator) depends only on ``ref`` and
        is cached; this is the hot loop of ``explain`` at the size limits.
        """
        order, exps, den_text = self._layout(ref)
        groups = self.groups
        if self.distinct:
            coeffs = [cnums[groups[e][0]] for e in order]
        else:
            coeffs = [sum(cnums[j] for j in groups[e]) for e in order]
        g = math.gcd(cden, *coeffs)  # c/cden = (c/g) / k
        k = cden // g
        parts: list[str] = []
        for c, x in zip(coeffs, exps):
            if not c:
                continue
            c //= g
            if not x:
                term = str(c)
            elif c == 1:
                term = x
            elif c == -1:
                term = "-" + x
            else:
                term = f"{c}*{x}"
            if parts:
                parts.append(" - " + term[1:] if term[0] == "-" else " + " + term)
            else:
                parts.append(term)
        num_text = "".join(parts) if parts else "0"
        if len(parts) > 1:
            num_text = f"({num_text})"
        return f"{num_text}/({den_text})" if k == 1 else f"{num_text}/({k}*({den_text}))"


@dataclass(frozen=True, slots=True)
class Mix(Exact):
    """``Σ_j c_j·exp(a_j) / Σ_j exp(a_j)`` over the live keys of ``row``, ``c_j = cnums[j]/cden``.

    Build with :func:`mix`, which returns a :class:`Rat` when the value is rational.
    """

    row: SoftmaxRow
    cnums: tuple[int, ...]
    cden: int

    @property
    def coeffs(self) -> tuple[Fraction, ...]:
        return tuple(_frac(c, self.cden) for c in self.cnums)

    def value(self) -> float:
        s, cden = self.row.shifted, self.cden
        terms = [c / cden * s[j] for j, c in enumerate(self.cnums) if c]  # c / cden: an int division, never overflows
        num = math.fsum(terms)
        if _cancels(num, terms):  # mixed signs cancelled: recompute from the exact exponents
            import mpmath

            with mpmath.workdps(40):
                return float(self.precise() / cden / self.row.z)
        return num / self.row.z

    def precise(self, digits: int = 40) -> mpmath.mpf:
        """``Σ c_j exp(a_j - max a)`` times ``cden·Z``… i.e. the value times ``cden·Z``, at ``digits`` digits."""
        import mpmath

        with mpmath.workdps(digits):
            return mpmath.fsum(c * mpmath.exp(self.row.mp_shifted_exponent(j))
                               for j, c in enumerate(self.cnums) if c and j in self.row.live)

    def precise_value(self, digits: int = 40) -> mpmath.mpf:
        """The entry at ``digits`` significant digits (mpmath), for sums that cancel."""
        import mpmath

        with mpmath.workdps(digits):
            z = mpmath.fsum(mpmath.exp(self.row.mp_shifted_exponent(j)) for j in self.row.live)
            return self.precise(digits) / (self.cden * z)

    def _ref(self) -> Key:
        keys, cnums = self.row.keys, self.cnums
        nz = [keys[j] for j in self.row.live if cnums[j]]
        if nz and nz.count(nz[0]) == len(nz):  # one exponent in the numerator: divide by it, so it reads c/(...)
            return nz[0]  # type: ignore[return-value]
        return self.row.top

    def __str__(self) -> str:
        return self.row.ratio_text(self.cnums, self.cden, self._ref())

    def to_sympy(self) -> sympy.Expr:
        import sympy

        live = self.row.live

        def e(j: int) -> sympy.Expr:
            return sympy.exp(self.row.sympy_exponent(j))

        num = sympy.Add(*(sympy.Rational(c, self.cden) * e(j) for j, c in enumerate(self.cnums) if c and j in live))
        return num / sympy.Add(*(e(j) for j in live))


def mix(row: SoftmaxRow, cnums: tuple[int, ...], cden: int = 1) -> Rat | Mix:
    """``Σ_j c_j·softmax(a)_j`` with ``c_j = cnums[j]/cden``, exactly.

    Rational when the row's exponents make it so: grouping keys by equal
    exponent, if every group's coefficient sum is the same multiple λ of its
    size, the value is λ.  A fully masked row gives 0 (the contract: zero
    weights and a zero output row).
    """
    live = row.live
    if not live:
        return ZERO
    if row.distinct:  # every group is one key: rational iff all live coefficients are equal
        first = cnums[live[0]]
        if all(cnums[j] == first for j in live):
            return Rat(_frac(first, cden))
        return Mix(row, cnums, cden)
    sums: dict[Key, list[int]] = {}
    for j in live:
        acc = sums.setdefault(row.keys[j], [0, 0])  # type: ignore[arg-type]
        acc[0] += cnums[j]
        acc[1] += 1
    (s0, n0), *rest = sums.values()
    if all(s * n0 == s0 * n for s, n in rest):
        return Rat(_frac(s0, n0 * cden))
    return Mix(row, cnums, cden)


@dataclass(frozen=True, slots=True)
class MixSum(Exact):
    """``Σ_h part_h + const``: an output-projection entry (one :class:`Mix` per head)."""

    parts: tuple[Mix, ...]
    const: Fraction

    def value(self) -> float:
        terms = [p.value() for p in self.parts] + [float(self.const)]
        v = math.fsum(terms)
        if _cancels(v, terms):  # e.g. 2 - 2/(1 + 2e^(-8√2)): recompute at 40 digits
            import mpmath

            with mpmath.workdps(40):
                exact = mpmath.fsum([p.precise_value(40) for p in self.parts]) + mpmath.mpf(self.const.numerator) / self.const.denominator
                return float(exact)
        return v

    def precise_value(self, digits: int = 40) -> mpmath.mpf:
        import mpmath

        with mpmath.workdps(digits):
            return mpmath.fsum([p.precise_value(digits) for p in self.parts]) + mpmath.mpf(self.const.numerator) / self.const.denominator

    def __str__(self) -> str:
        terms = [str(p) for p in self.parts]
        if self.const:
            terms.append(frac_text(self.const))
        return sum_text(terms)

    def to_sympy(self) -> sympy.Expr:
        import sympy

        return sympy.Add(*(p.to_sympy() for p in self.parts)) + sympy.Rational(self.const.numerator, self.const.denominator)


#: How many terms the cross-multiplied test of :func:`_rational_part` may build before it gives up.
CROSS_TERMS = 20_000

Laurent = dict[int, Fraction]  # exponent n -> coefficient of x^n


def _laurent(m: Mix, scale: int) -> Laurent:
    """The numerator ``P`` of ``m = P(x)/Q(x)`` in ``x = exp(sqrt(t)/M)``, ``M = den·scale``, shifted as
    :meth:`SoftmaxRow.shape` shifts ``Q`` (its lowest power 0): rational coefficients by exponent."""
    row = m.row
    low = next(iter(row.groups))
    p: Laurent = {}
    for e, js in row.groups.items():
        c = sum(m.cnums[j] for j in js)
        if c:
            p[(e - low) * scale] = Fraction(c, m.cden)  # type: ignore[operator]  # int keys: no bias (_rational_part)
    return p


def _ends(m: Mix) -> tuple[Fraction, Fraction]:
    """``P/Q`` at its lowest and its highest power of ``x``: the coefficient sums of the keys with the
    smallest and with the largest exponent, over their counts (the limits of ``m`` as the exponents
    spread to -∞ and +∞)."""
    groups = m.row.groups
    lo, hi = groups[next(iter(groups))], groups[next(reversed(groups))]
    return (Fraction(sum(m.cnums[j] for j in lo), m.cden * len(lo)),
            Fraction(sum(m.cnums[j] for j in hi), m.cden * len(hi)))


def _ratio(p: Laurent, q: Laurent) -> Fraction | None:
    """``λ`` when ``p = λ·q`` as Laurent polynomials (``q`` non-zero), else ``None``."""
    e0, q0 = next(iter(q.items()))
    lam = p.get(e0, Fraction(0)) / q0
    if any(e not in q for e in p) or any(p.get(e, 0) != lam * c for e, c in q.items()):
        return None
    return lam


def _times(a: Laurent, b: Laurent) -> Laurent | None:
    """``a·b``, or ``None`` past :data:`CROSS_TERMS` terms."""
    if len(a) * len(b) > CROSS_TERMS:
        return None
    out: Laurent = {}
    for ea, ca in a.items():
        for eb, cb in b.items():
            out[ea + eb] = out.get(ea + eb, Fraction(0)) + ca * cb
    return {e: c for e, c in out.items() if c}


def _rational_part(mixes: list[Mix]) -> tuple[Fraction, list[Mix]]:
    """Split ``Σ mixes`` into a rational part and the mixes it does not explain: ``(λ, rest)``,
    ``Σ mixes = λ + Σ rest``, with ``rest == []`` exactly when the sum is rational.

    Why this decides rationality.  Every mix of the sum shares ``t`` (the
    heads share ``d_k``), so with ``M`` the common denominator of the
    exponents each one is ``P_i(x)/Q_i(x)`` in the one number
    ``x = exp(sqrt(t)/M)``: ``P_i`` a Laurent polynomial with rational
    coefficients, ``Q_i`` one with positive integer coefficients (so
    ``Q_i(x) > 0``).  ``x`` is transcendental (Hermite-Lindemann: ``e^α``
    is transcendental for every algebraic ``α ≠ 0``), so a Laurent
    polynomial with rational coefficients vanishes at ``x`` only if all its
    coefficients are 0.  Write ``Σ P_i/Q_i = N(x)/D(x)`` with ``D = Π Q_i``
    and ``N = Σ_i P_i Π_{j≠i} Q_j``.  If the sum equals a rational ``r``,
    then ``N - r·D`` vanishes at ``x``, so ``N = r·D`` coefficient by
    coefficient; conversely ``N = λ·D`` gives the value ``λ``.  So the sum
    is rational iff ``N`` is a rational multiple of ``D``.  Comparing the
    lowest and the highest powers (``P_i`` lives within the powers of
    ``Q_i``), that multiple can only be ``Σ_i P_i/Q_i`` read at the lowest
    powers, and only the same read at the highest.

    The steps, cheapest first:

    1. mixes over the same denominator up to a factor ``exp(shift)`` (the
       same row of scores up to a shift, e.g. two heads whose scores on a
       row differ by a constant: :meth:`SoftmaxRow.shape`) are added over
       it; a group whose numerator is a multiple of its denominator is
       rational (one fraction: the same theorem), and a group of one is
       not (:func:`mix` already returns a :class:`Rat` when it is);
    2. with at most one group left that decides it (a rational plus an
       irrational number is irrational);
    3. otherwise the two readings of the multiple must agree (exact), and
       the value must equal it at 40 digits (an mpmath error of 10^-38 per
       part, against a margin of 10^-25: a value that differs is
       irrational);
    4. only then, ``N`` and ``D`` are multiplied out and compared (past
       :data:`CROSS_TERMS` terms this is skipped and the groups stay as
       they are: never wrongly rational, at worst not simplified).
    """
    if len({m.row.t for m in mixes}) > 1:  # exponents over different roots: not one variable (cannot happen)
        return Fraction(0), mixes
    if any(not m.row.algebraic for m in mixes):  # RoPE's exponents (cos, sin): the theorem does not apply
        return Fraction(0), mixes  # left as they are: never wrongly rational, at worst not simplified
    if any(m.row.bias is not None for m in mixes):  # exponents u·sqrt(t) + r (format v2's bias): not powers of one x
        return Fraction(0), mixes  # left as they are: never wrongly rational, at worst not simplified
    big = math.lcm(*(m.row.den for m in mixes))
    groups: dict[tuple[tuple[int, int], ...], list[Mix]] = {}
    for m in mixes:
        groups.setdefault(m.row.shape(big // m.row.den), []).append(m)
    lam, rest = Fraction(0), []
    left: list[tuple[Laurent, list[Mix]]] = []
    for shape, members in groups.items():
        q = {e: Fraction(c) for e, c in shape}
        if len(members) == 1:
            rest += members
            left.append((q, members))
            continue
        num: Laurent = {}
        for m in members:
            for e, c in _laurent(m, big // m.row.den).items():
                num[e] = num.get(e, Fraction(0)) + c
        r = _ratio({e: c for e, c in num.items() if c}, q)
        if r is None:
            rest += members
            left.append((q, members))
        else:
            lam += r
    if len(left) < 2:
        return lam, rest
    ends = [_ends(m) for m in rest]
    low, high = sum((a for a, _ in ends), Fraction(0)), sum((b for _, b in ends), Fraction(0))
    if low != high:
        return lam, rest
    import mpmath

    with mpmath.workdps(40):
        value = mpmath.fsum([m.precise_value(40) for m in rest])
        size = sum(max(abs(Fraction(c, m.cden)) for c in m.cnums) for m in rest) + 1
        if abs(value - mpmath.mpf(low.numerator) / low.denominator) > mpmath.mpf(10) ** -25 * (mpmath.mpf(size.numerator) / size.denominator):
            return lam, rest
    den: Laurent | None = {0: Fraction(1)}
    num_all: Laurent | None = {}
    for q, members in left:  # N/D accumulates p/q: N <- N·q + p·D, D <- D·q
        p: Laurent = {}
        for m in members:
            for e, c in _laurent(m, big // m.row.den).items():
                p[e] = p.get(e, Fraction(0)) + c
        assert den is not None and num_all is not None
        a, b, d = _times(num_all, q), _times(p, den), _times(den, q)
        if a is None or b is None or d is None:
            return lam, rest
        num_all = {e: a.get(e, Fraction(0)) + b.get(e, Fraction(0)) for e in a.keys() | b.keys()}
        num_all = {e: c for e, c in num_all.items() if c}
        den = d
    assert den is not None and num_all is not None
    r = _ratio(num_all, den)
    return (lam, rest) if r is None else (lam + r, [])


def mix_sum(parts: Iterable[Rat | Mix], const: Fraction) -> Rat | Mix | MixSum:
    """``Σ parts + const``, exactly: a :class:`Rat` when the value is rational (decided by
    :func:`_rational_part`), else the parts that are not rational with the rest folded into the
    constant; a lone part with no constant stays a :class:`Mix`."""
    mixes = []
    for p in parts:
        if isinstance(p, Rat):
            const += p.q
        else:
            mixes.append(p)
    if len(mixes) > 1:
        lam, mixes = _rational_part(mixes)
        const += lam
    if not mixes:
        return Rat(const)
    if len(mixes) == 1 and const == 0:
        return mixes[0]
    return MixSum(tuple(mixes), const)
