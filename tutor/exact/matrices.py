"""Matrices of exact values, as the exact walk builds them: products, a bias added, softmax rows, rounding.

An entry is a :class:`fractions.Fraction` while it is rational (Q, K, V,
the scores: fast), an :class:`~tutor.exact.expoly.Value` once a square root
or an exponential enters it, or ``-inf`` (:data:`~tutor.exact.expoly.NEG_INF`)
for a blocked score.  The step kinds' exact-walk functions
(:mod:`tutor.steps`) compute with these, under a misconception's knobs, so
that "this mistake gives exactly the right matrix" is decided exactly
(:mod:`tutor.mistakes.invisible`).  Pure: no numpy, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from .expoly import NEG_INF, Poly, Value, _cut, _NegInf, charge, words

Entry = Value | Fraction | _NegInf  # a rational entry stays a Fraction (Q, K, V, scores): fast
Matrix = list[list[Entry]]

ZERO = Fraction(0)


def blocked(e: Entry) -> bool:
    """Whether ``e`` is ``-inf`` (a blocked score)."""
    return isinstance(e, _NegInf)


def as_value(e: Entry) -> Value:
    """An entry that is a number, as a :class:`~tutor.exact.expoly.Value`."""
    assert not isinstance(e, _NegInf)
    return Value.of(e) if isinstance(e, Fraction) else e


def rational(m: Sequence[Sequence[Fraction]]) -> Matrix:
    return [list(row) for row in m]


def matmul(a: Matrix, b: Matrix) -> Matrix | None:
    """``[n, m] @ [m, p] -> [n, p]``, or ``None`` when the shapes do not chain (no ``-inf`` entries).

    ``b`` is rational (V, K, W_O) whenever ``a`` is not: each product is a
    value scaled by a fraction, and a row's values over one softmax
    denominator add up as one fraction.
    """
    if not a or not b or len(a[0]) != len(b):
        return None
    cols = list(zip(*b))  # [p][m]
    if any(isinstance(y, Value) for col in cols for y in col):  # after a norm (issue 23): V, K hold square roots
        return [[_dot(row, col) for col in cols] for row in a]
    out: Matrix = []
    for row in a:
        line: list[Entry] = []
        rational = all(isinstance(x, Fraction) for x in row)
        shared = _shared_denominator(row)
        for col in cols:
            if shared is not None:  # a softmax row: Σ_j v_j·exp(a_j) over the row's one denominator, built at once
                line.append(_over(row, col, shared))
                continue
            if rational:
                charge(sum(words(x) * words(y) for x, y in zip(row, col)))  # type: ignore[arg-type,misc]
                line.append(sum((x * y for x, y in zip(row, col)), ZERO))
                continue
            parts: list = []
            for x, y in zip(row, col):
                assert isinstance(y, Fraction), "a product of two values never occurs in attention"
                if isinstance(x, Fraction):
                    parts += Value.of(x * y).parts
                elif y:
                    parts += as_value(x).scale(y).parts
            line.append(Value(parts))
        out.append(line)
    return out


def _dot(row: Sequence[Entry], col: Sequence[Entry]) -> Entry:
    """``Σ_j row_j·col_j`` for entries that may both be values (the pre-norm block's Q·Kᵀ and weights·V)."""
    parts: list = []
    for x, y in zip(row, col):
        if isinstance(x, Fraction) and isinstance(y, Fraction):
            parts += Value.of(x * y).parts
        elif isinstance(x, Fraction) or isinstance(y, Fraction):
            v, q = (y, x) if isinstance(x, Fraction) else (x, y)
            if q:
                parts += as_value(v).scale(q).parts  # type: ignore[arg-type]
        else:
            parts += _times(as_value(x), as_value(y))
    return Value(parts)


def _times(a: Value, b: Value) -> list:
    """The parts of ``a·b``; when one is an algebraic number (a V or K entry: one part over 1), the other's
    denominators are kept as they are (the same objects: a softmax row's one denominator stays one)."""
    for u, v in ((a, b), (b, a)):
        c = v.constant()
        if c is not None:
            factor = Poly.const(c)
            return [(n * factor, d) for n, d in u.parts]
    return list((a * b).parts)


def _shared_denominator(row: Sequence[Entry]) -> Poly | None:
    """The one denominator every entry of ``row`` has (a row of softmax weights: entries ``exp(a_j)/D`` or 0),
    or ``None``."""
    den: Poly | None = None
    for x in row:
        if isinstance(x, Fraction) and x == 0:
            continue
        if not isinstance(x, Value) or len(x.parts) != 1:
            return None
        d = x.parts[0][1]
        if den is None:
            den = d
        elif d is not den:
            return None
    return den


def _over(row: Sequence[Entry], col: Sequence[Entry], den: Poly) -> Value:
    """``Σ_j row_j·col_j`` for a row over the one denominator ``den`` and a rational ``col``."""
    terms: dict = {}
    for x, y in zip(row, col):
        assert isinstance(y, Fraction), "a product of two values never occurs in attention"
        if not y or not isinstance(x, Value):
            continue
        for k, c in x.parts[0][0].terms.items():
            terms[k] = terms.get(k, Fraction(0)) + c * y
    return Value.ratio(Poly(terms), den)


def plus(m: Matrix, b: Sequence[Fraction] | None) -> Matrix:
    if b is None:
        return m
    return [[x + y if isinstance(x, Fraction) else as_value(x) + Value.of(y) for x, y in zip(row, b)] for row in m]


def transpose(m: Matrix) -> Matrix:
    """``mᵀ``: ``[r, c] -> [c, r]``."""
    return [list(col) for col in zip(*m)]


def rounded(x: Entry, places: int) -> Entry:
    """An entry rounded to ``places`` decimals, half to even (``np.round``), as the exact decimal it then is."""
    if isinstance(x, _NegInf):
        return x
    if isinstance(x, Fraction):
        return round(x, places)
    return x.rounded(places)


def truncated(x: Entry, places: int) -> Entry:
    """An entry with its decimals after the ``places``-th cut off (``np.trunc``), as the exact decimal it then is."""
    if isinstance(x, _NegInf):
        return x
    if isinstance(x, Fraction):
        return _cut(x, places)
    return x.truncated(places)


def exp(a: Entry) -> Value:
    exponent = as_value(a).constant()
    assert exponent is not None, "the softmax reads scores, never exponentials"
    return Value.exp(exponent)


def softmax_row(row: Sequence[Entry]) -> list[Entry]:
    """``exp(a_j) / Σ_k exp(a_k)`` over the entries that are not ``-inf``; all 0 when every one is."""
    live = [exp(a) for a in row if not isinstance(a, _NegInf)]
    if not live:
        return [ZERO for _ in row]
    den = Poly()
    for e in live:
        den = den + e.parts[0][0]
    return [ZERO if isinstance(a, _NegInf) else Value.ratio(exp(a).parts[0][0], den) for a in row]


def entry_value(e: Entry) -> float:
    """The float an exact entry rounds to (``-inf`` for a blocked score)."""
    if isinstance(e, _NegInf):
        return float("-inf")
    if isinstance(e, Fraction):
        return float(e)
    return float(e.precise(30))


__all__ = ["NEG_INF", "ZERO", "Entry", "Matrix", "Value", "as_value", "blocked", "entry_value", "exp", "matmul", "plus", "rational",
           "rounded", "softmax_row", "transpose", "truncated"]
