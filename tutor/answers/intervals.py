"""Interval arithmetic on mpmath's low-level floats: every value of an answer carries an interval that contains it.

An interval is a pair ``(lower, upper)`` of mpmath ``mpf`` tuples, the lower
bound rounded down and the upper bound rounded up, at the precision asked
for (:data:`.values.WORK_PREC` bits for every value, more when an exact claim
needs it).  mpmath is imported on first use (:func:`load`), so that importing
the answer parser stays cheap.  Pure functions; see :mod:`.values` for what
the intervals are used for.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from .forms import Lin, Mono

Interval = tuple[Any, Any]  # (lower, upper) as mpmath mpf tuples

_L: Any = None  # mpmath.libmp
_I: Any = None  # mpmath.libmp.libmpi


def load() -> None:
    """Import mpmath's low-level interval functions (a few ms, once)."""
    global _L, _I
    if _L is None:
        from mpmath import libmp
        from mpmath.libmp import libmpi

        _I = libmpi
        _L = libmp


def iv_q(q: Fraction, prec: int) -> Interval:
    p, d = q.numerator, q.denominator
    L = _L
    if d == 1:
        return L.from_int(p, prec, L.round_floor), L.from_int(p, prec, L.round_ceiling)
    P, D = L.from_int(p), L.from_int(d)
    return L.mpf_div(P, D, prec, L.round_floor), L.mpf_div(P, D, prec, L.round_ceiling)


def iv_sqrt(a: Interval, prec: int) -> Interval:
    L = _L
    lo, hi = a
    if L.mpf_sign(lo) < 0:  # a value taken as zero may dip below it
        lo = L.fzero
    if L.mpf_sign(hi) < 0:
        hi = L.fzero
    if lo != hi:
        return _I.mpi_sqrt((lo, hi), prec)
    down = L.mpf_sqrt(lo, prec, L.round_floor)  # correctly rounded: the root is below down + 1 ulp
    if not down[1]:
        return down, down
    return down, L.mpf_add(down, L.mpf_shift(L.fone, down[2]), prec, L.round_ceiling)


_ROOTS: dict[tuple[int, int], Interval] = {}


def iv_root(n: int, prec: int) -> Interval:
    """``√n`` for an integer ``n >= 1`` (small ones remembered: √2 comes often)."""
    key = (n, prec)
    got = _ROOTS.get(key)
    if got is None:
        got = iv_sqrt((_L.from_int(n),) * 2, prec)
        if n.bit_length() <= 64:
            if len(_ROOTS) >= 4096:
                _ROOTS.clear()
            _ROOTS[key] = got
    return got


def iv_lin(lin: Lin, prec: int) -> Interval:
    total: Interval = (_L.fzero, _L.fzero)
    for n, c in lin:
        term = iv_q(c, prec)
        if n != 1:
            term = _I.mpi_mul(term, iv_root(n, prec), prec)
        total = _I.mpi_add(total, term, prec)
    return total


def iv_mono(m: Mono, prec: int) -> Interval:
    r, n, lin = m
    v = _I.mpi_mul(iv_q(r, prec), iv_exp(iv_lin(lin, prec + 20), prec), prec)
    if n != 1:
        v = _I.mpi_mul(v, iv_root(n, prec), prec)
    return v


def iv_exp(a: Interval, prec: int) -> Interval:
    """``exp`` of an interval with one ``exp`` (of its midpoint, at 8 more bits: mpmath's
    ``exp`` is good to about one ulp), widened by ``2h + 2^-prec`` relatively for a half-width
    ``h <= 2^-8`` (``exp(m ± h)`` lies within ``exp(m)·(1 ± 2h)``); a wider one by two."""
    L = _L
    lo, hi = a
    if lo == hi:
        h = L.fzero
        mid = lo
    else:
        h = L.mpf_shift(L.mpf_sub(hi, lo, 64, L.round_ceiling), -1)
        hl = lg(h)
        if hl is not None and hl > -8:
            return _I.mpi_exp(a, prec)
        mid = L.mpf_shift(L.mpf_add(lo, hi, prec + 16, L.round_nearest), -1)
    x = L.mpf_exp(mid, prec + 8, L.round_nearest)
    rel = L.mpf_add(L.mpf_shift(h, 1), L.mpf_shift(L.fone, -prec), 64, L.round_ceiling)
    d = L.mpf_mul(L.mpf_abs(x), rel, 64, L.round_ceiling)
    return L.mpf_sub(x, d, prec, L.round_floor), L.mpf_add(x, d, prec, L.round_ceiling)


def lg(x: Any) -> int | None:
    """An upper bound of log2|x| within 1 (``None`` for 0) of an mpf tuple."""
    _sign, man, exp, bc = x
    return None if not man else exp + bc


def lg_iv(a: Interval) -> int | None:
    lo, hi = lg(a[0]), lg(a[1])
    if lo is None:
        return hi
    return lo if hi is None else max(lo, hi)


def contains_zero(a: Interval) -> bool:
    return _L.mpf_sign(a[0]) <= 0 <= _L.mpf_sign(a[1])


def iv_sign(a: Interval) -> int:
    if _L.mpf_sign(a[0]) > 0:
        return 1
    if _L.mpf_sign(a[1]) < 0:
        return -1
    return 0



def narrow(a: Interval, prec: int) -> bool:
    """Whether ``a`` is a point or at most ``2^-prec`` of its magnitude wide."""
    width = _I.mpi_delta(a, 64)
    if not width[1]:
        return True
    la = lg_iv(a)
    lw = lg(width)
    return la is not None and lw is not None and lw <= la - prec


def overlap(a: Interval, b: Interval) -> bool:
    return _L.mpf_cmp(a[0], b[1]) <= 0 and _L.mpf_cmp(b[0], a[1]) <= 0

