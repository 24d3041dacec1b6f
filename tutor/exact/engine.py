"""The exact engine: the math of every step of multi-head attention, exactly.

``Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V`` per head, then
``MultiHead = Concat(head_1, …, head_h) W_O`` (Vaswani et al. 2017,
"Attention Is All You Need", eq. 1 and §3.2.2), in the row-vector convention
of hand calculation (``Q = X W_Q``).

One pure function per step; the step catalogue (:mod:`tutor.steps`) calls
them in order and wraps each result in a :class:`tutor.steps.Step`.
Inputs are exact rationals (:class:`fractions.Fraction`), so Q, K, V and the
scores are rational (:class:`QMat`: integers over one denominator);
``1/√d_k`` is kept as a surd (``√8 = 2√2``); each row's softmax is kept
structured (:class:`tutor.exact.numbers.SoftmaxRow`), and every entry after it is
a :class:`tutor.exact.numbers.Mix` over that row's shared denominator.  Masked
scores are ``-inf`` exactly; a fully masked row has zero weights and a zero
output row.  Pure: no printing, no numpy, no sympy import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import lcm

from ..base.errors import ShapeError
from ..exercise.record import BoolMatrix, Matrix, Vector
from . import rotary
from .numbers import NEG_INF, Exact, Rat, SoftmaxRow, mix, mix_sum, square_free, surd, surd_plus

ExactMatrix = tuple[tuple[Exact, ...], ...]


@dataclass(frozen=True)
class QMat:
    """An exact rational matrix ``num / den``: integers ``[n][m]`` over one denominator.

    Products run on Python ints (fast); entries are reduced only when read.
    """

    num: tuple[tuple[int, ...], ...]
    den: int

    @classmethod
    def of(cls, m: Matrix | Sequence[Sequence[Fraction]]) -> QMat:
        den = lcm(*(x.denominator for row in m for x in row))
        return cls(tuple(tuple(x.numerator * (den // x.denominator) for x in row) for row in m), den)

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.num), len(self.num[0]))

    @property
    def T(self) -> QMat:
        return QMat(tuple(zip(*self.num)), self.den)

    def __matmul__(self, other: QMat) -> QMat:
        """``[n, m] @ [m, p] -> [n, p]``.  Raises :class:`ShapeError` if the shapes do not chain."""
        (n, m), (m2, p) = self.shape, other.shape
        if m != m2:
            raise ShapeError(f"[{n}×{m}]·[{m2}×{p}]: inner sizes differ")
        cols = tuple(zip(*other.num))  # [p][m]
        mul = int.__mul__
        return QMat(tuple(tuple(sum(map(mul, r, c)) for c in cols) for r in self.num), self.den * other.den)

    def plus(self, b: Vector | None) -> QMat:
        """``self + b`` with ``b [m]`` added to every row (a bias); ``None`` adds nothing."""
        if b is None:
            return self
        bb = QMat.of([b])
        den = lcm(self.den, bb.den)
        k, kb = den // self.den, den // bb.den
        return QMat(tuple(tuple(x * k + y * kb for x, y in zip(row, bb.num[0])) for row in self.num), den)

    def over(self, k: int) -> QMat:
        """``self / k``."""
        return QMat(self.num, self.den * k)

    def rows(self, sl: slice) -> QMat:
        return QMat(self.num[sl], self.den)

    def fractions(self) -> list[list[Fraction]]:
        return [[Fraction(x, self.den) for x in row] for row in self.num]

    def exact(self) -> ExactMatrix:
        return tuple(tuple(Rat(Fraction(x, self.den)) for x in row) for row in self.num)


def matmul(a: Matrix, b: Matrix) -> list[list[Fraction]]:
    """Exact ``a @ b`` for ``a [n, m]``, ``b [m, p]`` -> ``[n, p]``.  Raises :class:`ShapeError`."""
    return (QMat.of(a) @ QMat.of(b)).fractions()


# --- one function per step ------------------------------------------------------------


def project(x: Matrix, w: Matrix, b: Vector | None) -> QMat:
    """``x·W + b``: ``x [n, d_in]``, ``W [d_in, d]``, ``b [d]`` -> ``[n, d]`` (Q, K or V)."""
    return (QMat.of(x) @ QMat.of(w)).plus(b)  # [n, d_in]·[d_in, d] -> [n, d]


def scores(Q: QMat, K: QMat) -> QMat:
    """``Q·Kᵀ``: ``[L, d_k]·[d_k, L_k]`` -> ``[L, L_k]``."""
    return Q @ K.T


@dataclass(frozen=True)
class Scaled:
    """``scores / √d_k = U·√t`` with ``d_k = s²·t`` (``t`` square-free), so ``U = scores/(s·t)`` is rational.

    ``root`` is ``(s, t)``: ``√d_k = s·√t``.  With an additive bias (:func:`biased`) ``B`` holds it
    (rational, ``[L, L_k]``) and the entries are ``U·√t + B``; when ``t = 1`` the bias is folded into ``U``.
    """

    U: QMat
    s: int
    t: int
    B: QMat | None = None

    def exact(self) -> ExactMatrix:
        if isinstance(self.U, rotary.TrigMat):  # RoPE: the entries are trigonometric polynomials (issue 23)
            return self.U.exact()
        if self.B is None:
            return tuple(tuple(surd(u, self.t) for u in row) for row in self.U.fractions())
        return tuple(tuple(surd_plus(u, self.t, b) for u, b in zip(ru, rb))
                     for ru, rb in zip(self.U.fractions(), self.B.fractions()))


def scale(S: QMat, d_k: int) -> Scaled:
    """``scores / √d_k`` (Vaswani et al. 2017, eq. 1), kept exact: ``[L, L_k]``."""
    s, t = square_free(d_k)
    if isinstance(S, rotary.TrigMat):  # RoPE: each entry divided by s·√t, kept a trigonometric polynomial
        return Scaled(S.over_root(s, t), s, t)
    return Scaled(S.over(s * t), s, t)


def biased(sc: Scaled, bias: Matrix) -> Scaled:
    """``scaled + bias`` (an additive attention bias, ALiBi's or a float ``attn_mask``): ``[L, L_k]``, exact.

    With ``t = 1`` (``d_k`` a perfect square) the sum is rational and folded into ``U``;
    otherwise it is kept as ``U·√t + B``.  Raises :class:`ShapeError` when the shapes differ.
    """
    B = QMat.of(bias)
    if B.shape != sc.U.shape:
        raise ShapeError(f"bias [{B.shape[0]}×{B.shape[1]}] differs from the scores [{sc.U.shape[0]}×{sc.U.shape[1]}]")
    if sc.t != 1:
        return Scaled(sc.U, sc.s, sc.t, B)
    den = lcm(sc.U.den, B.den)
    k, kb = den // sc.U.den, den // B.den
    return Scaled(QMat(tuple(tuple(u * k + b * kb for u, b in zip(ru, rb)) for ru, rb in zip(sc.U.num, B.num)), den),
                  sc.s, sc.t)


def append(past: Matrix, new: QMat) -> QMat:
    """``[past; new]``: the cached rows ``[L_past, d]`` with the new rows ``[L, d]`` below (a KV-cache append)."""
    P = QMat.of(past)
    den = lcm(P.den, new.den)
    k, kn = den // P.den, den // new.den
    return QMat(tuple(tuple(x * k for x in row) for row in P.num) + tuple(tuple(x * kn for x in row) for row in new.num), den)


Exponents = tuple[tuple[int | None, ...], ...]


def mask(scaled: Scaled, allowed: BoolMatrix | None) -> Exponents:
    """The numerators of the softmax exponents over ``scaled.U.den``; ``None`` where ``allowed`` blocks.

    Without a mask every entry is live.  ``[L, L_k]``.
    """
    U = scaled.U
    if allowed is None:
        return tuple(U.num)
    return tuple(tuple(u if allowed[i][j] else None for j, u in enumerate(row)) for i, row in enumerate(U.num))


def masked_exact(live: Exponents, scaled: Scaled) -> ExactMatrix:
    """The masked scores: ``-inf`` where blocked, the scaled score elsewhere."""
    if isinstance(scaled.U, rotary.TrigMat):  # RoPE: the exponents are the entries themselves
        return rotary.masked_exact(live)
    den, t = scaled.U.den, scaled.t
    if scaled.B is not None:
        B = scaled.B
        return tuple(tuple(NEG_INF if u is None else surd_plus(Fraction(u, den), t, Fraction(B.num[i][j], B.den))
                           for j, u in enumerate(row)) for i, row in enumerate(live))
    return tuple(tuple(NEG_INF if u is None else surd(Fraction(u, den), t) for u in row) for row in live)


def softmax_rows(live: Exponents, scaled: Scaled) -> tuple[SoftmaxRow, ...]:
    """One structured softmax per query row (the exponents ``a_j = (n_j/den)·√t``, plus ``B_ij`` with a bias)."""
    if isinstance(scaled.U, rotary.TrigMat):  # RoPE: exponents are trigonometric polynomials
        return rotary.softmax_rows(live, scaled.t)
    if scaled.B is not None:
        return tuple(SoftmaxRow(r, scaled.U.den, scaled.t, scaled.B.num[i], scaled.B.den) for i, r in enumerate(live))
    return tuple(SoftmaxRow(r, scaled.U.den, scaled.t) for r in live)


def weights(rows: Sequence[SoftmaxRow], L_k: int) -> ExactMatrix:
    """``softmax`` along each row (over the keys): ``[L, L_k]``; a fully masked row is all 0."""
    unit = [tuple(int(i == j) for i in range(L_k)) for j in range(L_k)]
    return tuple(tuple(mix(r, unit[j]) for j in range(L_k)) for r in rows)


def attend(rows: Sequence[SoftmaxRow], V: QMat) -> ExactMatrix:
    """``weights·V``: ``[L, L_k]·[L_k, d_v]`` -> ``[L, d_v]``, each entry a mix over its row."""
    return tuple(tuple(mix(r, col, V.den) for col in V.T.num) for r in rows)


def concat(outs: Sequence[ExactMatrix]) -> ExactMatrix:
    """The heads side by side, head 0 first: ``[L, H·d_v]``."""
    return tuple(tuple(e for out in outs for e in out[i]) for i in range(len(outs[0])))


def out_project(heads: Sequence[tuple[Sequence[SoftmaxRow], QMat]], w_o: Matrix, b_o: Vector | None) -> ExactMatrix:
    """``concat·W_O + b_O``: ``[L, H·d_v]·[H·d_v, d_out]`` -> ``[L, d_out]``.

    ``heads`` holds each head's softmax rows and V.  Entry ``(i, j)`` is
    ``Σ_h mix(row_h,i ; V_h·W_O,h[:, j]) + b_j``: one mix per head over that
    head's row, so the exact form keeps each head's shared denominator.
    """
    d_out = len(w_o[0])
    W = QMat.of(w_o)  # [H·d_v, d_out]
    coeffs = []  # per head: (V_h @ W_O[rows of head h])ᵀ, [d_out][L_k]
    offset = 0
    for _, V in heads:
        d_v = V.shape[1]
        coeffs.append((V @ W.rows(slice(offset, offset + d_v))).T)
        offset += d_v
    b = b_o or (Fraction(0),) * d_out
    L = len(heads[0][0])
    return tuple(
        tuple(mix_sum((mix(heads[h][0][i], c.num[j], c.den) for h, c in enumerate(coeffs)), b[j]) for j in range(d_out))
        for i in range(L)
    )
