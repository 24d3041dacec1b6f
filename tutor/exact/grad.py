"""Exact entries of the backward pass: polynomials of degree at most 2 in each row's softmax.

Every gradient of attention with respect to its inputs, for a rational
upstream gradient, is a sum over query rows ``i`` (of one or more heads) of

    ``√r · N_i(e) / Z_i²``,   ``Z_i = Σ_j exp(a_ij)``,  ``N_i = Σ c·exp(a_ij + a_ik)``

(``P_ij = exp(a_ij)/Z_i`` are the weights; ``d_scaled_ij = P_ij·(g_ij − Σ_k
g_ik P_ik)`` is quadratic in them, and every other gradient is linear in the
weights and in ``d_scaled``), with ``r`` 1 or the square-free part of
``d_k`` (the factor ``1/√d_k`` of ``d_q`` and ``d_k``), plus a constant.
:class:`Grad` keeps that structure: one numerator per (row, root), its
exponents integers over the row's denominator (pairs ``(n, b)`` with an
additive bias: ``n/den·√t + b/bden``), so that sums are integer work and a numerator that ``Z_i`` divides is reduced (``N/Z² = M/Z``, or a
constant).  Strings are in the answer grammar (``-4*exp(sqrt(2))/(1 +
2*exp(sqrt(2)))^2``); floats come from the structure with max subtraction;
:meth:`Grad.precise_value` (mpmath) and :meth:`Grad.to_sympy` as for every
:class:`tutor.exact.numbers.Exact`.  Pure: no numpy; sympy and mpmath only on request.

Formulas: the chain rule through ``softmax(Q Kᵀ/√d_k) V`` (Vaswani et al.
2017, eq. 1); the softmax Jacobian ``∂P_ij/∂S_ik = P_ij(δ_jk − P_ik)``, as in
FlashAttention-2 (Dao 2023, §2.2 and Algorithm 2, ``dS = P ∘ (dP − D)``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import cmp_to_key
from typing import TYPE_CHECKING, Any, cast

from .numbers import Exact, Key, Rat, SoftmaxRow, _cancels, sum_text, surd
from .rotary import ZERO as TRIG_ZERO
from .rotary import Trig

if TYPE_CHECKING:  # lazily imported
    import mpmath
    import sympy

Numer = dict[Key, Fraction]  # exponent key (as SoftmaxRow.keys: n, or (n, b) with a bias) -> coefficient
#: A coefficient: rational, or with RoPE (issue 23) a trigonometric polynomial (an entry of K_rot, cos(mθ)).
Coef = Fraction | Trig
CNumer = dict[Key, Coef]  # a numerator being summed: RoPE's coefficients may be Trig
_MAX_DIVISION_STEPS = 256
#: A numerator with more distinct exponents is not reduced by Z: still exact, only less short.  Every
#: hand-sized exercise (at most 4 keys: at most 16 exponents in a row's Z²) is far below it; past it a
#: division that fails (most do) costs a pass over every term, which made the backward pass of a
#: 16-token exercise take minutes.
_MAX_DIVIDED_TERMS = 64


def _add(a: Key, b: Key) -> Key:
    """The key of ``exp(a)·exp(b)`` (RoPE's keys are the :class:`Trig` exponents themselves: their sum)."""
    if isinstance(a, Trig):
        return a + b
    if isinstance(a, int):
        return a + b  # type: ignore[operator]
    return (a[0] + b[0], a[1] + b[1])  # type: ignore[index]


def _times(k: Key, c: int) -> Key:
    """The key of ``exp(a)^c``."""
    if isinstance(k, Trig):
        return k.times(Fraction(c))
    return k * c if isinstance(k, int) else (k[0] * c, k[1] * c)


def _zero(row: SoftmaxRow) -> Key:
    if not row.algebraic:  # RoPE's row: its keys are Trig
        return TRIG_ZERO  # type: ignore[return-value]
    return 0 if row.bias is None else (0, 0)


def _order(row: SoftmaxRow) -> Callable[[Key], Any]:
    """A sort key that orders exponent keys by their exact value.

    Without a bias a key is ``n`` (the exponent ``n/den·√t``): its own order.  With one it is
    ``(n, b)``, the exponent ``n/den·√t + b/bden``; ``√t`` is irrational, so two keys compare by the
    sign of ``p·√t + q`` (``p = Δn·bden``, ``q = Δb·den``), found exactly by comparing ``p²t`` with
    ``q²``: never a float, even for exponents closer than a float can tell apart.  The order is
    compatible with adding keys, as long division needs.
    """
    if not row.algebraic:  # RoPE's Trig keys: by value (the order only lays out text and long division's
        return row.approx  # leading term; a quotient is kept only when the remainder is exactly 0)
    if row.bias is None:
        return lambda k: k
    t, den, bden = row.t, row.den, row.bden

    def cmp(a: Key, b: Key) -> int:
        p, q = (a[0] - b[0]) * bden, (a[1] - b[1]) * den  # type: ignore[index]
        if p >= 0 and q >= 0:
            return int(p > 0 or q > 0)
        if p <= 0 and q <= 0:
            return -1
        big = p * p * t > q * q
        return (1 if big else -1) if p > 0 else (-1 if big else 1)

    return cmp_to_key(cmp)


def _groups(row: SoftmaxRow) -> dict[Key, tuple[int, ...]]:
    """A row's exponent groups by their key (integers without a bias, ``(n, b)`` pairs with one)."""
    return row.groups


def _low(row: SoftmaxRow) -> Key:
    """A row's smallest exponent key, exactly (``row.groups`` is ordered by a float with a bias)."""
    return min(row.groups, key=_order(row))


def _top(row: SoftmaxRow) -> Key:
    """A row's largest exponent key (the floats' reference; any live key would do)."""
    return row.top


def _mp_exponent(row: SoftmaxRow, k: Key) -> mpmath.mpf:
    import mpmath

    if isinstance(k, Trig):  # RoPE: the exponent is the trigonometric polynomial itself
        return k.precise_value(int(mpmath.mp.dps))
    u, r = row.parts(k)
    return mpmath.mpf(u.numerator) / u.denominator * mpmath.sqrt(row.t) + mpmath.mpf(r.numerator) / r.denominator


def _norm(c: Coef) -> Coef:
    """A coefficient as a ``Fraction`` when it is rational (``cos(0)``, a cached key's entry), else itself."""
    if isinstance(c, Trig):
        r = c.rational()
        return c if r is None else r
    return c


def _cf(c: Coef) -> float:
    return c.value() if isinstance(c, Trig) else float(c)


def _cmp(c: Coef) -> mpmath.mpf:
    import mpmath

    if isinstance(c, Trig):
        return c.precise_value(int(mpmath.mp.dps))
    return mpmath.mpf(c.numerator) / c.denominator


def _csym(c: Coef) -> sympy.Expr:
    import sympy

    return c.to_sympy() if isinstance(c, Trig) else sympy.Rational(c.numerator, c.denominator)


def _z2(row: SoftmaxRow) -> Numer:
    """``Z²`` of a row as a numerator: ``Σ_{j,k} exp(a_j + a_k)``."""
    out: Numer = {}
    for e1, g1 in _groups(row).items():
        for e2, g2 in _groups(row).items():
            e = _add(e1, e2)
            out[e] = out.get(e, Fraction(0)) + len(g1) * len(g2)
    return out


def _divide(n: Numer, row: SoftmaxRow) -> Numer | None:
    """``n / Z`` when ``Z = Σ_j exp(a_j)`` divides ``n`` exactly (a sparse long division), else ``None``.

    The leading terms are found by the exponents' float values (a heap): the arithmetic is exact
    whatever the order, so a quotient is returned only when ``n − quotient·Z`` is exactly 0; an
    order a float gets wrong (two exponents closer than 1e-15) can only make the division give up.
    """
    z = {e: len(g) for e, g in _groups(row).items()}
    if not z or not n:
        return None if n else {}
    cache: dict[Key, float] = {}

    def ap(k: Key) -> float:
        v = cache.get(k)
        if v is None:
            v = cache[k] = row.approx(k)
        return v

    ztop, zlow = max(z, key=ap), min(z, key=ap)
    lowest = ap(min(n, key=ap)) - ap(zlow)
    slack = 1e-9 * (1 + abs(lowest))
    # integers over one denominator D (Fraction arithmetic was most of the backward pass's time); the
    # quotient's coefficients stay integers while the leading group of Z is one key (else it scales D)
    D = math.lcm(*(c.denominator for c in n.values()))
    rem: dict[Key, int] = {e: int(c * D) for e, c in n.items() if c}
    heap = [(-ap(e), e) for e in rem]
    heapq.heapify(heap)
    out: dict[Key, int] = {}
    zt = z[ztop]
    # each step takes one term off the top; a quotient the backward pass reduces by has at most as many terms
    # as the numerator, so a division still going after len(n) + len(z) steps will not end (generic exponents,
    # as long numbers give, make such remainders grow without end: give up, the numerator stays over Z^deg)
    for _ in range(min(_MAX_DIVISION_STEPS * max(1, len(z)), len(n) + len(z))):
        while heap and not rem.get(heap[0][1]):
            heapq.heappop(heap)
        if not heap:
            return {e: Fraction(c, D) for e, c in out.items() if c}
        top = heap[0][1]
        shift = _add(top, _times(ztop, -1))
        if ap(shift) < lowest - slack:
            return None
        if rem[top] % zt:  # not a whole multiple: scale everything by zt (D too)
            D *= zt
            rem = {e: c * zt for e, c in rem.items()}
            out = {e: c * zt for e, c in out.items()}
        c = rem[top] // zt
        out[shift] = out.get(shift, 0) + c
        for e, m in z.items():
            k = _add(e, shift)
            old = rem.get(k, 0)
            rem[k] = old - c * m
            if rem[k] and not old:  # a term (back) in the remainder: on the heap again
                heapq.heappush(heap, (-ap(k), k))
    return None


@dataclass(frozen=True)
class Part:
    """``√root · Σ_e c_e·exp((e/row.den)·√row.t) / Z^deg`` for one softmax row; ``deg`` 1 or 2."""

    row: SoftmaxRow
    root: int
    deg: int
    numer: tuple[tuple[Key, Coef], ...]  # (exponent key, coefficient), ascending; Trig coefficients with RoPE

    def shifted_terms(self) -> list[float]:
        """Each term divided by ``exp(deg·max a)``, as floats (no overflow)."""
        row = self.row
        ref = _times(_top(row), self.deg)
        return [_cf(c) * math.exp(row.approx(row.diff(e, ref))) for e, c in self.numer]

    def value(self) -> float:
        return math.sqrt(self.root) * math.fsum(self.shifted_terms()) / self.row.z ** self.deg

    def precise_value(self, digits: int) -> mpmath.mpf:
        import mpmath

        row = self.row
        with mpmath.workdps(digits):
            z = mpmath.fsum(mpmath.exp(row.mp_shifted_exponent(j)) for j in row.live)
            ref = _times(_top(row), self.deg)
            num = mpmath.fsum(_cmp(c) * mpmath.exp(_mp_exponent(row, row.diff(e, ref))) for e, c in self.numer)
            return mpmath.sqrt(self.root) * num / z ** self.deg

    def text(self) -> str:
        """``-4*exp(sqrt(2))/(1 + 2*exp(sqrt(2)))^2``: numerator and ``Z^deg`` divided by ``exp(deg·min a)``."""
        row = self.row
        ref = _low(row)
        _, _, den_text = row._layout(ref)
        if any(isinstance(c, Trig) for _, c in self.numer):
            return self._trig_text(ref, den_text)
        fracs = cast("tuple[tuple[Key, Fraction], ...]", self.numer)  # no Trig coefficient (above)
        k = math.lcm(*(c.denominator for _, c in fracs))
        terms = [row.term(int(c * k), row.diff(e, _times(ref, self.deg))) for e, c in fracs]
        num = sum_text(terms)
        if len(terms) > 1:
            num = f"({num})"
        den = f"({den_text})" + ("^2" if self.deg == 2 else "")
        if k != 1:
            den = f"({k}*{den})"
        if self.root != 1:  # the surd goes after the sign: -4*sqrt(2)*exp(…)/…, sqrt(2)*(a + b)/…
            sign, num = ("-", num[1:]) if num.startswith("-") else ("", num)
            coef, _, rest = num.partition("*")
            if coef.isdigit() and rest:  # 2*exp(…) -> 2*sqrt(2)*exp(…)
                num = f"{sign}{coef}*sqrt({self.root})*{rest}"
            else:
                num = f"{sign}sqrt({self.root})" + ("" if num == "1" else f"*{num}")
        return f"{num}/{den}"

    def _trig_text(self, ref: Key, den_text: str) -> str:
        """With RoPE's coefficients (``cos(1)/2 - sin(1)``): each term ``(coefficient)*exp(d)`` over ``Z^deg``,
        both divided by ``exp(deg·min a)``; ``sqrt(root)`` in front."""
        row = self.row
        terms = []
        for e, c in self.numer:
            d = row.diff(e, _times(ref, self.deg))
            ct = str(c) if not isinstance(c, Trig) else f"({c})"
            terms.append(ct if row.term(1, d) == "1" else f"{ct}*{row.term(1, d)}")
        num = sum_text(terms)
        if len(terms) > 1:
            num = f"({num})"
        if self.root != 1:
            num = f"sqrt({self.root})*{num}"
        return f"{num}/({den_text})" + ("^2" if self.deg == 2 else "")

    def to_sympy(self) -> sympy.Expr:
        import sympy

        row = self.row

        def e(k: Key) -> sympy.Expr:
            if isinstance(k, Trig):  # RoPE: the exponent itself
                return sympy.exp(k.to_sympy())
            u, r = row.parts(k)
            return sympy.exp(sympy.Rational(u.numerator, u.denominator) * sympy.sqrt(row.t)
                             + sympy.Rational(r.numerator, r.denominator))

        z = sympy.Add(*(e(k) for k in row.keys if k is not None))
        num = sympy.Add(*(_csym(c) * e(n) for n, c in self.numer))
        return sympy.sqrt(self.root) * num / z ** self.deg


@dataclass(frozen=True, slots=True)
class Grad(Exact):
    """``Σ parts + Σ_r c_r·√r``: a gradient entry (see the module docstring).  Build with :class:`GradSum`."""

    parts: tuple[Part, ...]
    consts: tuple[tuple[int, Fraction], ...]  # (root, coefficient)

    def value(self) -> float:
        terms = [p.value() for p in self.parts] + [float(c) * math.sqrt(r) for r, c in self.consts]
        v = math.fsum(terms)
        if _cancels(v, terms) or any(_cancels(sum(p.shifted_terms()), p.shifted_terms()) for p in self.parts):
            return float(self.precise_value(40))
        return v

    def precise_value(self, digits: int = 40) -> mpmath.mpf:
        import mpmath

        with mpmath.workdps(digits):
            consts = [mpmath.mpf(c.numerator) / c.denominator * mpmath.sqrt(r) for r, c in self.consts]
            return mpmath.fsum([p.precise_value(digits) for p in self.parts] + consts)

    def __str__(self) -> str:
        terms = [p.text() for p in self.parts] + [str(surd(c, r)) for r, c in self.consts]
        return sum_text(terms)

    def to_sympy(self) -> sympy.Expr:
        import sympy

        consts = [sympy.Rational(c.numerator, c.denominator) * sympy.sqrt(r) for r, c in self.consts]
        return sympy.Add(*(p.to_sympy() for p in self.parts), *consts)


class GradSum:
    """An exact gradient entry being summed: add weights, ``d_scaled`` entries and constants, then :meth:`done`.

    Terms of one row (and root) are kept over ``Z²`` so that they cancel
    where they should; :meth:`done` reduces each numerator by ``Z`` where
    it divides, and returns a :class:`Rat` or :class:`Surd` when the entry
    is one.
    """

    def __init__(self) -> None:
        self.rows: dict[tuple[object, ...], tuple[SoftmaxRow, int, CNumer]] = {}
        self.consts: dict[int, Fraction] = {}

    def _numer(self, row: SoftmaxRow, root: int) -> CNumer:
        # rows with the same exponents share Z: one numerator (rows t2, t3 of the classic add up)
        live = [k for k in row.keys if k is not None]
        exps = tuple(sorted(live)) if row.algebraic else tuple(sorted(live, key=repr))
        key = (exps, row.den, row.bden, row.t, root)
        if key not in self.rows:
            self.rows[key] = (row, root, {})
        return self.rows[key][2]

    def add(self, other: GradSum, c: Coef) -> GradSum:
        """Add ``c·other`` (a linear combination of entries: ``d_w_q = Xᵀ·d_q`` from the entries of ``d_q``;
        with RoPE ``c`` may be ``cos(mθ)`` or ``sin(mθ)``: ``d_Q = R(mθ)ᵀ·d_Q_rot``)."""
        c = _norm(c)
        if not c:
            return self
        for (row, root, numer) in other.rows.values():
            n = self._numer(row, root)
            for e, x in numer.items():
                n[e] = n.get(e, Fraction(0)) + c * x
        for root, x in other.consts.items():
            self.const(c * x, root)
        return self

    def const(self, c: Coef, root: int = 1) -> GradSum:
        c = _norm(c)
        if isinstance(c, Trig):  # cannot happen: the backward pass adds no constant times a cosine
            raise AssertionError("a gradient's constant is rational")
        if c:
            self.consts[root] = self.consts.get(root, Fraction(0)) + c
        return self

    def weight(self, row: SoftmaxRow, j: int, c: Coef, root: int = 1) -> GradSum:
        """Add ``c·√root·P_j`` (``P_j = exp(a_j)/Z``, written ``exp(a_j)·Z/Z²``); nothing for a masked key."""
        if not c or row.nums[j] is None:
            return self
        n = self._numer(row, root)
        a = row.keys[j]
        assert a is not None
        for e, g in _groups(row).items():
            k = _add(a, e)
            n[k] = n.get(k, Fraction(0)) + c * len(g)
        return self

    def quad(self, row: SoftmaxRow, j: int, k: int, c: Coef, root: int = 1) -> GradSum:
        """Add ``c·√root·P_j·P_k``."""
        if not c or row.nums[j] is None or row.nums[k] is None:
            return self
        n = self._numer(row, root)
        a, b = row.keys[j], row.keys[k]
        assert a is not None and b is not None
        e = _add(a, b)
        n[e] = n.get(e, Fraction(0)) + c
        return self

    def done(self) -> Exact:
        consts = dict(self.consts)
        parts = []
        for row, root, numer in self.rows.values():
            n: Numer | None = {e: _norm(c) for e, c in numer.items() if c}  # type: ignore[misc]
            deg = 2
            if n and any(isinstance(c, Trig) for c in n.values()):  # RoPE's cos/sin coefficients: left over Z²
                parts.append(Part(row, root, deg, tuple(sorted(n.items(), key=lambda kv: _order(row)(kv[0])))))
                continue
            while n and deg and len(n) <= _MAX_DIVIDED_TERMS:  # a long numerator is left over Z² (see below)
                q = _divide(n, row)
                if q is None:
                    break
                n, deg = q, deg - 1
            assert n is not None
            if not n:
                continue
            if deg == 0:  # a constant: Σ c·exp(e) with e = 0 only
                zero = _zero(row)
                assert set(n) == {zero}, (n, zero)
                consts[root] = consts.get(root, Fraction(0)) + n[zero]
                continue
            order = _order(row)
            parts.append(Part(row, root, deg, tuple(sorted(n.items(), key=lambda kv: order(kv[0])))))
        consts = {r: c for r, c in consts.items() if c}
        if not parts:
            if not consts:
                return Rat(Fraction(0))
            if len(consts) == 1:
                (r, c), = consts.items()
                return surd(c, r)
        return Grad(tuple(parts), tuple(sorted(consts.items())))


__all__ = ["Grad", "GradSum", "Part"]
