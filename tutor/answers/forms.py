"""Exact forms of answer values: sums of surds ``Σ c·√n`` and monomials ``r·√n·exp(L)``, with bounded numbers.

A ``lin`` is a tuple of ``(n, c)``: rational coefficients ``c`` and integer
radicands ``n`` (``n = 1`` is the rational part; zero is no term), radicands
kept pairwise incompatible so that a ``lin`` is zero exactly when it has no
term; a ``mono`` is ``(r, n, L)`` for ``r·√n·exp(L)`` with ``L`` a non-empty
``lin``.  Every number held has at most :data:`MAX_EXACT_BITS` bits, else the
operation is :class:`Refused`; a ``lin`` of more than :data:`MAX_TERMS` terms
is given up (``None``), not refused.  No factoring: only :func:`math.isqrt`
and the squares of small primes.  See :mod:`.values` for how values use them.
"""

from __future__ import annotations

from fractions import Fraction
from math import gcd, isqrt
from typing import Any

#: Every exact number an answer creates has at most this many decimal digits
#: (numerator and denominator together).
MAX_EXACT_DIGITS = 600
#: ... checked as bits: a number over 2,000 bits has more than 600 digits, and
#: every number of up to 600 digits has at most 1,995 bits.
MAX_EXACT_BITS = 2_000
#: An exact form with more terms than this is kept as an interval only.
MAX_TERMS = 4

_SMALL_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47)

Lin = tuple[tuple[int, Fraction], ...]  # Σ c·√n, n = 1 first when present
Mono = tuple[Fraction, int, Lin]  # r·√n·exp(L)


class Refused(Exception):
    """An operation the bounds refuse: ``key`` is a message key of the catalogue
    (:mod:`tutor.base.messages`, ``answer.*``), ``fields`` its fields besides column and text."""

    def __init__(self, key: str, **fields: Any):
        super().__init__(key)
        self.key = key
        self.fields = fields



def bits(c: Fraction) -> int:
    return c.numerator.bit_length() + c.denominator.bit_length()


def checked(c: Fraction) -> Fraction:
    if c.numerator.bit_length() + c.denominator.bit_length() > MAX_EXACT_BITS:
        raise Refused("answer.too_large_exact", limit=MAX_EXACT_DIGITS)
    return c


def checked_int(n: int) -> int:
    if n.bit_length() > MAX_EXACT_BITS:
        raise Refused("answer.too_large_exact", limit=MAX_EXACT_DIGITS)
    return n


def _radical(n: int) -> tuple[int, int]:
    """``n = k²·m`` (``n >= 1``) with the squares of small primes moved out of ``m``;
    ``m == 1`` exactly when ``n`` is a perfect square.  No factoring."""
    s = isqrt(n)
    if s * s == n:
        return s, 1
    k = 1
    for p in _SMALL_PRIMES:
        pp = p * p
        if pp > n:
            break
        while n % pp == 0:
            n //= pp
            k *= p
    return k, n


def sqrt_q(q: Fraction) -> tuple[Fraction, int]:
    """``√q = c·√n`` for a rational ``q >= 0`` (``n == 1``: ``√q`` is rational)."""
    a, b = q.numerator, q.denominator
    k, n = _radical(checked_int(a * b))  # √(a/b) = √(a·b)/b
    return checked(Fraction(k, b)), n


def _merge(terms: dict[int, Fraction], n: int, c: Fraction) -> None:
    """Add ``c·√n`` into ``terms``, merging with a compatible radicand (``n·m`` a square)."""
    if n in terms:
        terms[n] = checked(terms[n] + c)
        return
    if n != 1:
        for m in terms:
            if m == 1:
                continue
            s = isqrt(n * m)
            if s * s == n * m:  # √n = (s/m)·√m
                terms[m] = checked(terms[m] + c * Fraction(s, m))
                return
    terms[n] = c


def _lin(terms: dict[int, Fraction]) -> Lin | None:
    out = tuple(sorted((n, c) for n, c in terms.items() if c))
    return out if len(out) <= MAX_TERMS else None


def lin_add(a: Lin, b: Lin, sign: int = 1) -> Lin | None:
    """``a + sign·b``; ``None`` when the sum has more than :data:`MAX_TERMS` terms."""
    terms = dict(a)
    for n, c in b:
        _merge(terms, n, c if sign > 0 else -c)
    return _lin(terms)


def term_mul(n1: int, c1: Fraction, n2: int, c2: Fraction) -> tuple[int, Fraction]:
    g = gcd(n1, n2)
    n = checked_int((n1 // g) * (n2 // g))
    c = c1 * c2 * g
    s = isqrt(n)
    if s * s == n:
        return 1, checked(c * s)
    return n, checked(c)


def lin_mul(a: Lin, b: Lin) -> Lin | None:
    if len(a) * len(b) > MAX_TERMS * MAX_TERMS:
        return None
    terms: dict[int, Fraction] = {}
    for n1, c1 in a:
        for n2, c2 in b:
            _merge(terms, *term_mul(n1, c1, n2, c2))
    return _lin(terms)


def lin_inverse(a: Lin) -> Lin | None:
    """``1/a`` for a non-zero ``a`` of one or two terms (the conjugate), else ``None``."""
    if len(a) == 1:
        n, c = a[0]
        return ((n, checked(1 / (c * n) if n != 1 else 1 / c)),)
    if len(a) == 2:
        (n1, c1), (n2, c2) = a
        d = checked(c1 * c1 * n1 - c2 * c2 * n2)  # ≠ 0: √n1 and √n2 are independent
        return lin_add(((n1, checked(c1 / d)),), ((n2, checked(c2 / d)),), -1)
    return None


def lin_scale(a: Lin, k: Fraction) -> Lin:
    return tuple((n, checked(c * k)) for n, c in a if c * k)



def mono_inverse(m: Mono) -> Mono:
    r, n, lin = m
    return checked(1 / (r * n)), n, tuple((k, -c) for k, c in lin)

