"""Exponential polynomials, exactly: the values attention builds from rational inputs, and a test of equality.

Every entry of every step -- under any misconception the float pipeline
replays (:class:`tutor.steps.Variant`) -- is a sum of fractions
``N/D`` whose numerators and denominators are *exponential polynomials*:
``Σ c·√t·exp(a)`` with ``c`` rational, ``t`` a square-free integer, and
``a`` an algebraic number of the form ``Σ u·√s`` (a scaled score, or a sum
of them).  :class:`Poly` holds one; :class:`Value` a sum of fractions of
them (or ``-inf``).

Equality is decidable exactly.  By the Lindemann–Weierstrass theorem the
numbers ``exp(a_1), …, exp(a_n)`` for distinct algebraic ``a_i`` are
linearly independent over the algebraic numbers, and the square roots of
distinct square-free integers are linearly independent over the rationals;
so ``Σ c_{a,t}·√t·exp(a) = 0`` exactly when every ``c_{a,t}`` is 0.  Two
values are equal when their difference, brought over one denominator, is
that zero polynomial (:meth:`Value.equals`).  Bringing many different
denominators together multiplies their terms; past :data:`MAX_TERMS` the
test is made at :data:`DIGITS` significant digits instead (mpmath), which
:meth:`Value.equals` reports.

Pure: no numpy, no sympy, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from fractions import Fraction

from .numbers import square_free

#: An algebraic number ``Σ u·√s``: ``((s, u), …)`` sorted by ``s`` (square-free), no zero ``u``; ``()`` is 0.
Surds = tuple[tuple[int, Fraction], ...]

#: The most terms an equality test multiplies out before it is made at :data:`DIGITS` digits instead.
MAX_TERMS = 200_000
DIGITS = 60
#: The largest magnitude (a power of ten) a value may have to be rounded to a decimal exactly.
MAX_ROUNDED = 60


class TooLarge(ArithmeticError):
    """An exact computation would take more terms or digits than it is worth (:data:`MAX_TERMS`,
    :data:`MAX_ROUNDED`, a :func:`budget`); the caller falls back to what floats say, and says so."""


#: The work one :func:`budget` allows by default, in units of one product of two coefficients of one
#: machine word each (a longer coefficient counts as many units as the products of its words: the cost of
#: multiplying and hashing it).  Every misconception of every bundled exercise is decided in a few
#: thousand units; a step of 16 tokens, or numbers with 24 digits, takes millions.
MAX_WORK = 400_000
_WORK: ContextVar[list[int] | None] = ContextVar("expoly_work", default=None)


@contextmanager
def budget(units: int = MAX_WORK) -> Iterator[None]:
    """Inside the block, exact arithmetic on :class:`Poly` and :class:`Value` may do at most ``units`` of
    work (see :data:`MAX_WORK`), then raises :class:`TooLarge`: the work is bounded by the size of the
    numbers as well as by how many there are.  Outside any budget nothing is counted."""
    token = _WORK.set([units])
    try:
        yield
    finally:
        _WORK.reset(token)


def words(q: Fraction) -> int:
    """How many machine words a fraction's numerator and denominator take (1 for a small one)."""
    return 1 + (q.numerator.bit_length() + q.denominator.bit_length()) // 64


def charge(units: int) -> None:
    """Count ``units`` of work against the current :func:`budget`; :class:`TooLarge` when it runs out."""
    left = _WORK.get()
    if left is None:
        return
    left[0] -= units
    if left[0] < 0:
        raise TooLarge("more exact work than the budget allows: numbers too long, or too many")


def surds(pairs: Iterable[tuple[int, Fraction]]) -> Surds:
    """``Σ u·√s`` in canonical form (equal roots added, zeros dropped)."""
    acc: dict[int, Fraction] = {}
    for s, u in pairs:
        acc[s] = acc.get(s, Fraction(0)) + u
    return tuple(sorted((s, u) for s, u in acc.items() if u))


def root(n: int) -> tuple[int, int]:
    """``√n = c·√t`` with ``t`` square-free: ``(c, t)``.  ``n >= 1``."""
    return square_free(n)


def _times_root(t1: int, t2: int) -> tuple[int, int]:
    """``√t1·√t2 = g·√t`` for square-free ``t1``, ``t2``: ``(g, t)``."""
    g = math.gcd(t1, t2)
    return g, (t1 // g) * (t2 // g)


class Poly:
    """``Σ c·√t·exp(a)``: ``terms[(a, t)] = c`` (``a`` :data:`Surds`, ``t`` square-free, ``c`` a non-zero Fraction)."""

    __slots__ = ("terms", "_key", "_size")

    def __init__(self, terms: dict[tuple[Surds, int], Fraction] | None = None):
        self.terms = {k: c for k, c in (terms or {}).items() if c}
        self._key: tuple | None = None
        self._size: int | None = None

    @property
    def size(self) -> int:
        """The words of the longest coefficient or exponent of this polynomial (:func:`words`): what one
        of its terms costs to multiply, add and hash."""
        if self._size is None:
            self._size = max((max([words(c)] + [words(u) for _, u in a]) for (a, _), c in self.terms.items()),
                             default=1)
        return self._size

    @classmethod
    def const(cls, value: Surds) -> Poly:
        """The algebraic number ``Σ u·√s`` (``exp(0)`` times it)."""
        return cls({((), s): u for s, u in value})

    @classmethod
    def exp(cls, a: Surds) -> Poly:
        """``exp(a)``."""
        return cls({(a, 1): Fraction(1)})

    def __add__(self, other: Poly) -> Poly:
        charge((len(self.terms) + len(other.terms)) * max(self.size, other.size) ** 2)
        out = dict(self.terms)
        for k, c in other.terms.items():
            out[k] = out.get(k, Fraction(0)) + c
        return Poly(out)

    def __neg__(self) -> Poly:
        return Poly({k: -c for k, c in self.terms.items()})

    def scale(self, q: Fraction) -> Poly:
        """``q`` times this polynomial."""
        charge(len(self.terms) * self.size * words(q))
        return Poly({k: c * q for k, c in self.terms.items()})

    def __mul__(self, other: Poly) -> Poly:
        if len(self.terms) * len(other.terms) > MAX_TERMS:
            raise TooLarge(f"{len(self.terms)} × {len(other.terms)} terms")
        charge(len(self.terms) * len(other.terms) * (self.size + other.size) ** 2)
        out: dict[tuple[Surds, int], Fraction] = {}
        for (a1, t1), c1 in self.terms.items():
            for (a2, t2), c2 in other.terms.items():
                g, t = _times_root(t1, t2)
                key = (surds(a1 + a2), t)
                out[key] = out.get(key, Fraction(0)) + c1 * c2 * g
        return Poly(out)

    def key(self) -> tuple:
        """A hashable, canonical form (equal polynomials have equal keys); computed once."""
        if self._key is None:
            charge(len(self.terms) * self.size ** 2)  # sorted and hashed, every coefficient and exponent
            self._key = tuple(sorted(self.terms.items()))
        return self._key

    @property
    def is_zero(self) -> bool:
        return not self.terms

    def constant(self) -> Surds | None:
        """The algebraic number this is, when it has no ``exp`` of a non-zero exponent; else ``None``."""
        if any(a for a, _ in self.terms):
            return None
        return surds((t, c) for (_, t), c in self.terms.items())

    def precise(self, digits: int = DIGITS):  # -> mpmath.mpf
        """The value at ``digits`` significant digits (mpmath)."""
        import mpmath

        with mpmath.workdps(digits + 10):
            return mpmath.fsum(c.numerator / mpmath.mpf(c.denominator) * mpmath.sqrt(t) * mpmath.exp(_surds_mp(a))
                               for (a, t), c in self.terms.items())


def _surds_mp(a: Surds):  # -> mpmath.mpf
    import mpmath

    return mpmath.fsum(u.numerator / mpmath.mpf(u.denominator) * mpmath.sqrt(s) for s, u in a)


ONE = Poly.const(((1, Fraction(1)),))


class _NegInf:
    """``-inf``: a blocked score."""

    def __repr__(self) -> str:
        return "-inf"


NEG_INF = _NegInf()


class Value:
    """``Σ_p N_p / D_p``: one entry, exactly.  Build with :meth:`of`, :meth:`exp`, and ``+``, ``*``."""

    __slots__ = ("parts",)

    def __init__(self, parts: Iterable[tuple[Poly, Poly]]):
        merged: dict[tuple, tuple[Poly, Poly]] = {}
        for n, d in parts:
            if n.is_zero:
                continue
            k = d.key()
            if k in merged:
                n = merged[k][0] + n
            merged[k] = (n, d)
        self.parts = tuple(p for p in merged.values() if not p[0].is_zero)

    @classmethod
    def of(cls, q: Fraction | int, s: int = 1) -> Value:
        """The number ``q·√s`` (``s`` square-free)."""
        return cls([(Poly.const(((s, Fraction(q)),)), ONE)])

    @classmethod
    def algebraic(cls, a: Surds) -> Value:
        return cls([(Poly.const(a), ONE)])

    @classmethod
    def exp(cls, a: Surds) -> Value:
        return cls([(Poly.exp(a), ONE)])

    @classmethod
    def ratio(cls, n: Poly, d: Poly) -> Value:
        return cls([(n, d)])

    def __add__(self, other: Value) -> Value:
        return Value(self.parts + other.parts)

    def __neg__(self) -> Value:
        return Value((-n, d) for n, d in self.parts)

    def __mul__(self, other: Value) -> Value:
        return Value((n1 * n2, d1 * d2) for n1, d1 in self.parts for n2, d2 in other.parts)

    def scale(self, q: Fraction) -> Value:
        """``q`` times this value (a rational factor: cheaper than ``*``)."""
        return Value((n.scale(q), d) for n, d in self.parts) if q else Value(())

    def constant(self) -> Surds | None:
        """The algebraic number this is, when it is one written without ``exp`` (a score, a scaled score); else ``None``."""
        out: list[tuple[int, Fraction]] = []
        for n, d in self.parts:
            a, b = n.constant(), d.constant()
            if a is None or b is None or b != ((1, Fraction(1)),):
                return None
            out += a
        return surds(out)

    def precise(self, digits: int = DIGITS):  # -> mpmath.mpf
        import mpmath

        with mpmath.workdps(digits + 10):
            return mpmath.fsum(n.precise(digits) / d.precise(digits) for n, d in self.parts)

    def rounded(self, places: int) -> Fraction:
        """This value rounded to ``places`` decimals (half to even), as the exact decimal it then is.

        Read at :data:`DIGITS` digits; a value that close to a half-way point is compared to it exactly
        (:meth:`_is`), so ``1/4`` rounds to 0.2 whatever its digits.  Raises :class:`TooLarge` beyond
        ``10**MAX_ROUNDED``, or when that comparison runs out of the work budget (:func:`charge`)."""
        import mpmath

        v = self.precise()
        if v == 0 or abs(v) < mpmath.mpf(10) ** -(places + 2):  # rounds to 0 (also a value like exp(-10^20))
            return Fraction(0)
        if abs(v) > mpmath.mpf(10) ** MAX_ROUNDED:
            raise TooLarge(f"a value of magnitude {mpmath.nstr(v, 3)} to round")
        q, half = _fraction(v), Fraction(1, 2 * 10**places)
        tie = round(q / half) * half  # the nearest half-way point or decimal: a tie is decided exactly
        return round(tie if self._is(tie, q) else q, places)

    def truncated(self, places: int) -> Fraction:
        """This value with its decimals after the ``places``-th cut off (toward 0), as the exact decimal
        it then is.  Read at :data:`DIGITS` digits; a value that close to a decimal is compared to it exactly
        (:meth:`_is`), so ``7/5`` cuts to 1.40, never 1.39.  Raises :class:`TooLarge` beyond
        ``10**MAX_ROUNDED``, or when that comparison runs out of the work budget (:func:`charge`)."""
        import mpmath

        v = self.precise()
        if v == 0 or abs(v) < mpmath.mpf(10) ** -(places + 2):  # cuts to 0 (also a value like exp(-10^20))
            return Fraction(0)
        if abs(v) > mpmath.mpf(10) ** MAX_ROUNDED:
            raise TooLarge(f"a value of magnitude {mpmath.nstr(v, 3)} to cut")
        q = _fraction(v)
        point = Fraction(round(q * 10**places), 10**places)  # the nearest decimal: on it or not, exactly
        return _cut(point if self._is(point, q) else q, places)

    def _is(self, point: Fraction, q: Fraction) -> bool:
        """Whether this value (``q`` at :data:`DIGITS` digits) is exactly ``point``, a decimal or a half-way
        point where rounding or cutting turns: ``7/5`` read at 60 digits in binary is ``1.3999…``, which
        would cut to 1.39, not 1.40.  Decided by :meth:`equals` when ``q`` is that close, else no."""
        if abs(q - point) > Fraction(1, 10 ** (DIGITS // 2)) * max(Fraction(1), abs(point)):
            return False
        return self.equals(Value.of(point))[0]

    def equals(self, other: Value) -> tuple[bool, bool]:
        """``(equal, exact)``: whether the two values are equal, and whether that was decided exactly.

        Exactly (Lindemann–Weierstrass, see the module) unless bringing the
        parts over one denominator takes more than :data:`MAX_TERMS` terms;
        then at :data:`DIGITS` significant digits, ``exact`` False.
        """
        diff = self + -other
        if not diff.parts:
            return True, True
        size = math.prod(len(d.terms) for _, d in diff.parts) * max(len(n.terms) for n, _ in diff.parts)
        if size > MAX_TERMS:
            import mpmath

            with mpmath.workdps(DIGITS + 10):
                scale = max(abs(n.precise() / d.precise()) for n, d in diff.parts)
                return bool(abs(diff.precise()) <= scale * mpmath.mpf(10) ** -DIGITS), False
        total = Poly()
        for p, (n, _) in enumerate(diff.parts):
            term = n
            for q, (_, d) in enumerate(diff.parts):
                if q != p:
                    term = term * d
            total = total + term
        return total.is_zero, True


def _fraction(v) -> Fraction:  # v: mpmath.mpf
    """An mpmath number as the exact fraction it is: ``sign·man·2^exp`` (``man_exp`` leaves the sign out)."""
    sign, man, exp, _ = v._mpf_
    q = Fraction(int(man)) * Fraction(2) ** int(exp)
    return -q if sign else q


def _cut(q: Fraction, places: int) -> Fraction:
    """``q`` with its decimals after the ``places``-th cut off, toward 0 (``np.trunc(q·10^p)/10^p``)."""
    scale = 10**places
    return Fraction(math.trunc(q * scale), scale)
