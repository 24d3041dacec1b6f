"""The exact engine: every step of multi-head attention, exactly.

``Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V`` per head, then
``MultiHead = Concat(head_0, …, head_{h-1}) W_O`` (Vaswani et al. 2017,
"Attention Is All You Need", eq. 1 and §3.2.2), in the row-vector convention
of hand calculation (``Q = X W_Q``).

Inputs are exact rationals (:class:`fractions.Fraction`), so Q, K, V and the
scores are rational; ``1/√d_k`` is kept as a surd (``√8 = 2√2``); each row's
softmax is kept structured (:class:`tutor.exactnum.SoftmaxRow`), and every
entry after it is a :class:`tutor.exactnum.Mix` over that row's shared
denominator.  Masked scores are ``-inf`` exactly; a fully masked row has zero
weights and a zero output row.  Pure: no printing, no numpy, no sympy import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import lcm

from .errors import ShapeError
from .exactnum import NEG_INF, Exact, Rat, SoftmaxRow, mix, mix_sum, square_free, surd
from .model import Exercise, Matrix, Vector
from .steps import Operand, Solution, Step


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

    def exact(self) -> tuple[tuple[Exact, ...], ...]:
        return tuple(tuple(Rat(Fraction(x, self.den)) for x in row) for row in self.num)


def matmul(a: Matrix, b: Matrix) -> list[list[Fraction]]:
    """Exact ``a @ b`` for ``a [n, m]``, ``b [m, p]`` -> ``[n, p]``.  Raises :class:`ShapeError`."""
    return (QMat.of(a) @ QMat.of(b)).fractions()


def _dims(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i + 1}" for i in range(n))


def solve(ex: Exercise) -> Solution:
    """Every step of ``ex``, exactly, in the order of the contract.

    Shapes: ``q [L, d_k]``, ``k [L_k, d_k]``, ``v [L_k, d_v]``, ``scores``/
    ``scaled``/``masked``/``weights`` ``[L, L_k]``, ``head_output [L, d_v]``,
    ``concat [L, num_heads·d_v]`` (only with more than one head), ``output
    [L, d_out]`` (only with ``w_o``).
    """
    L, L_k = ex.L, ex.L_k
    q_rows, k_rows = ex.query_labels, ex.key_labels
    x_name = "X_kv" if ex.is_cross else "X"
    allowed = ex.allowed()
    steps: list[Step] = []
    per_head: list[tuple[list[SoftmaxRow], QMat]] = []  # (rows, V) for the output projection
    head_out_exact: list[tuple[tuple[Exact, ...], ...]] = []

    for h, head in enumerate(ex.heads):
        d_k, d_v = head.d_k, head.d_v

        def proj(sid: str, sym: str, x: Matrix, w: Matrix, b: Vector | None, src: str, rows: tuple[str, ...], h: int = h) -> QMat:
            m = (QMat.of(x) @ QMat.of(w)).plus(b)  # [n, d_in]·[d_in, d] -> [n, d]
            ops = (Operand(src, (len(x), len(x[0]))), Operand(f"W_{sym}", (len(w), len(w[0]))))
            formula = f"{sym} = {src}·W_{sym}"
            if b is not None:
                ops += (Operand(f"b_{sym}", (len(b),)),)
                formula += f" + b_{sym}"
            steps.append(Step(sid, h, formula, ops, "·", m.exact(), rows, _dims("d", len(w[0]))))  # type: ignore[arg-type]
            return m

        Q = proj("q", "Q", ex.x, head.w_q, head.b_q, "X", q_rows)  # [L, d_k]
        K = proj("k", "K", ex.kv, head.w_k, head.b_k, x_name, k_rows)  # [L_k, d_k]
        V = proj("v", "V", ex.kv, head.w_v, head.b_v, x_name, k_rows)  # [L_k, d_v]

        S = Q @ K.T  # [L, d_k]·[d_k, L_k] -> [L, L_k]
        steps.append(Step("scores", h, "scores = Q·Kᵀ", (Operand("Q", (L, d_k)), Operand("Kᵀ", (d_k, L_k))), "·",
                          S.exact(), q_rows, k_rows))

        # scores / √d_k with d_k = s²·t:  = scores/(s·t) · √t, so u = scores/(s·t) is rational
        s, t = square_free(d_k)
        U = S.over(s * t)  # [L, L_k], the rational parts u_ij
        root = f"√{d_k}" + (f" = {s}" if t == 1 else (f" = {s}√{t}" if s != 1 else ""))
        steps.append(Step("scaled", h, f"scaled = scores / √d_k,  √d_k = {root}",
                          (Operand("scores", (L, L_k)), Operand(f"√{d_k}", ())), "/",
                          tuple(tuple(surd(u, t) for u in row) for row in U.fractions()), q_rows, k_rows))

        live: list[tuple[int | None, ...]] = list(U.num)
        if allowed is not None:
            live = [tuple(u if allowed[i][j] else None for j, u in enumerate(row)) for i, row in enumerate(U.num)]
            steps.append(Step("masked", h, "masked = scaled + M,  M_ij = 0 if query i may attend key j, else −∞",
                              (Operand("scaled", (L, L_k)), Operand("M", (L, L_k))), "+",
                              tuple(tuple(NEG_INF if u is None else surd(Fraction(u, U.den), t) for u in row) for row in live),
                              q_rows, k_rows))
        rows = [SoftmaxRow(r, U.den, t) for r in live]
        src = "masked" if allowed is not None else "scaled"

        unit = [tuple(int(i == j) for i in range(L_k)) for j in range(L_k)]
        steps.append(Step("weights", h, f"weights_ij = exp({src}_ij) / Σ_k exp({src}_ik)",
                          (Operand(src, (L, L_k)),), "softmax",
                          tuple(tuple(mix(r, unit[j]) for j in range(L_k)) for r in rows), q_rows, k_rows))

        v_cols = V.T.num  # d_v columns, each [L_k]
        out = tuple(tuple(mix(r, col, V.den) for col in v_cols) for r in rows)  # [L, d_v]
        steps.append(Step("head_output", h, f"head_{h} = weights·V",
                          (Operand("weights", (L, L_k)), Operand("V", (L_k, d_v))), "·",
                          out, q_rows, _dims("d", d_v)))
        per_head.append((rows, V))
        head_out_exact.append(out)

    H = ex.num_heads
    width = sum(hd.d_v for hd in ex.heads)
    if H > 1:
        concat = tuple(tuple(e for out in head_out_exact for e in out[i]) for i in range(L))
        cols = tuple(f"h{h}.d{k + 1}" for h, hd in enumerate(ex.heads) for k in range(hd.d_v))
        steps.append(Step("concat", None, "concat = [" + ", ".join(f"head_{h}" for h in range(H)) + "]",
                          tuple(Operand(f"head_{h}", (L, hd.d_v)) for h, hd in enumerate(ex.heads)), "concat",
                          concat, q_rows, cols))
    if ex.w_o is not None:
        d_out = len(ex.w_o[0])
        # output_ij = Σ_h Σ_k head_h[i,k]·W_O[h·d_v + k, j] + b_j = Σ_h mix(row_h,i ; V_h W_O,h[:, j]) + b_j
        w_o = QMat.of(ex.w_o)  # [H·d_v, d_out]
        coeffs = []  # per head: V_h @ W_O[rows of head h], [L_k, d_out], kept as its d_out columns
        offset = 0
        for _, V in per_head:
            d_v = V.shape[1]
            coeffs.append((V @ w_o.rows(slice(offset, offset + d_v))).T)  # [d_out][L_k]
            offset += d_v
        b_o = ex.b_o or (Fraction(0),) * d_out
        output = tuple(
            tuple(mix_sum((mix(per_head[h][0][i], c.num[j], c.den) for h, c in enumerate(coeffs)), b_o[j])
                  for j in range(d_out))
            for i in range(L)
        )
        src = "concat" if H > 1 else "head_0"
        ops = (Operand(src, (L, width)), Operand("W_O", (width, d_out)))
        formula = f"output = {src}·W_O"
        if ex.b_o is not None:
            ops += (Operand("b_O", (d_out,)),)
            formula += " + b_O"
        steps.append(Step("output", None, formula, ops, "·", output, q_rows, _dims("o", d_out)))
    return Solution(ex, tuple(steps))
