"""The exact engine's backward pass: the gradient of every step, exactly.

Given the upstream gradient ``G = ∂L/∂output`` ``[L, d_out]`` (rational),
the chain rule through ``output = concat·W_O + b_O`` and, per head,
``head = P·V``, ``P = softmax(S)``, ``S = Q·Kᵀ·s`` (``s = 1/√d_k``),
``Q = X·W_Q + b_Q``, ``K = X_kv·W_K + b_K``, ``V = X_kv·W_V + b_V``
(Vaswani et al. 2017, eq. 1 and §3.2.2; the softmax backward
``dS = P ∘ (dP − rowsum(dP ∘ P))`` as in Dao 2023, FlashAttention-2,
Algorithm 2).  Rational matrices are ``list[list[Fraction]]``; entries that
involve the weights are :class:`tutor.exact.grad.GradSum` (summed exactly,
reduced by :meth:`~tutor.exact.grad.GradSum.done`).  A masked key has
``P_ij = 0``, so its ``d_scaled`` entry is exactly 0, and a fully masked row
contributes nothing.  With RoPE (format v3, issue 23) the scores read
``Q_rot``, ``K_rot``: :func:`d_q_rot`, :func:`d_k_rot` take their entries
(:class:`~tutor.exact.rotary.Trig`) as coefficients, and :func:`unrotate`
turns the result back, ``d_Q = R(mθ)ᵀ·d_Q_rot`` (RoFormer, Su et al. 2021:
a rotation is orthogonal).  Pure: no numpy, no sympy.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from .engine import ExactMatrix, QMat
from .grad import GradSum
from .numbers import Rat, SoftmaxRow, square_free
from .rotary import Trig, TrigMat

Rational = list[list[Fraction]]
Grads = list[list[GradSum]]


def ones(rows: int, cols: int) -> Rational:
    """The default upstream gradient: all ones ``[rows, cols]``."""
    return [[Fraction(1)] * cols for _ in range(rows)]


def rmatmul(a: Sequence[Sequence[Fraction]], b: Sequence[Sequence[Fraction]]) -> Rational:
    """``a·b`` exactly: ``[n, m]·[m, p] -> [n, p]``."""
    cols = list(zip(*b))
    return [[sum((x * y for x, y in zip(row, col)), Fraction(0)) for col in cols] for row in a]


def rtranspose(a: Sequence[Sequence[Fraction]]) -> Rational:
    return [list(col) for col in zip(*a)]


def rational_exact(a: Sequence[Sequence[Fraction]]) -> ExactMatrix:
    return tuple(tuple(Rat(x) for x in row) for row in a)


def grads_exact(g: Grads) -> ExactMatrix:
    return tuple(tuple(x.done() for x in row) for row in g)


def qfrac(m: QMat) -> Rational:
    return m.fractions()


# --- the layer: d_output, d_concat, d_w_o, d_b_o ------------------------------------------


def d_concat(G: Rational, w_o: Sequence[Sequence[Fraction]]) -> Rational:
    """``d_concat = d_output·W_Oᵀ``: ``[L, d_out]·[d_out, H·d_v]`` -> ``[L, H·d_v]``."""
    return rmatmul(G, rtranspose(w_o))


def d_w_o(heads: Sequence[tuple[Sequence[SoftmaxRow], QMat]], G: Rational) -> Grads:
    """``d_W_O = concatᵀ·d_output``: ``[H·d_v, L]·[L, d_out]`` -> ``[H·d_v, d_out]``.

    ``concat[i, c] = Σ_j P_ij·V[j, c]`` for the head that owns column ``c``.
    """
    out: Grads = []
    d_out = len(G[0])
    for rows, V in heads:
        Vf = V.fractions()  # [L_k, d_v]
        for c in range(V.shape[1]):
            line = []
            for o in range(d_out):
                acc = GradSum()
                for i, row in enumerate(rows):
                    for j in row.live:
                        acc.weight(row, j, Vf[j][c] * G[i][o])
                line.append(acc)
            out.append(line)
    return out


def column_sums(m: Grads) -> Grads:
    """A bias gradient: the rows summed, ``[n, d]`` -> ``[1, d]`` (the bias is added to every row)."""
    line = []
    for c in range(len(m[0])):
        acc = GradSum()
        for row in m:
            acc.add(row[c], Fraction(1))
        line.append(acc)
    return [line]


def rational_grads(a: Sequence[Sequence[Fraction]]) -> Grads:
    return [[GradSum().const(x) for x in row] for row in a]


# --- one head -------------------------------------------------------------------------------


def d_weights(dH: Rational, V: QMat) -> Rational:
    """``d_weights = d_head·Vᵀ``: ``[L, d_v]·[d_v, L_k]`` -> ``[L, L_k]``."""
    return rmatmul(dH, rtranspose(V.fractions()))


def d_v(rows: Sequence[SoftmaxRow], dH: Rational, L_k: int) -> Grads:
    """``d_V = weightsᵀ·d_head``: ``[L_k, L]·[L, d_v]`` -> ``[L_k, d_v]``."""
    out: Grads = [[GradSum() for _ in range(len(dH[0]))] for _ in range(L_k)]
    for i, row in enumerate(rows):
        for j in row.live:
            for c, g in enumerate(dH[i]):
                out[j][c].weight(row, j, g)
    return out


def _add_d_scaled(acc: GradSum, row: SoftmaxRow, dP: Sequence[Fraction], j: int, c: Fraction | Trig, root: int) -> None:
    """``acc += c·√root·d_scaled_j`` with ``d_scaled_j = P_j·(dP_j − Σ_k dP_k·P_k)``."""
    if not c or row.nums[j] is None:
        return
    acc.weight(row, j, c * dP[j], root)
    for k in row.live:
        acc.quad(row, j, k, -c * dP[k], root)


def d_scaled(rows: Sequence[SoftmaxRow], dP: Rational) -> Grads:
    """``d_scaled = weights ∘ (d_weights − rowsum(d_weights ∘ weights))``: ``[L, L_k]``; 0 where masked."""
    out: Grads = []
    for i, row in enumerate(rows):
        line = []
        for j in range(len(dP[i])):
            acc = GradSum()
            _add_d_scaled(acc, row, dP[i], j, Fraction(1), 1)
            line.append(acc)
        out.append(line)
    return out


def _scale(d_k: int) -> tuple[Fraction, int]:
    """``1/√d_k = c·√t``: ``(c, t)`` with ``t`` square-free (``1/√8 = √2/4``)."""
    s, t = square_free(d_k)
    return Fraction(1, s * t), t


def d_q(rows: Sequence[SoftmaxRow], dP: Rational, K: QMat, d_k: int) -> Grads:
    """``d_Q = d_scaled·K / √d_k``: ``[L, L_k]·[L_k, d_k]`` -> ``[L, d_k]``."""
    c0, t = _scale(d_k)
    Kf = K.fractions()
    out: Grads = []
    for i, row in enumerate(rows):
        line = []
        for c in range(d_k):
            acc = GradSum()
            for j in row.live:
                _add_d_scaled(acc, row, dP[i], j, c0 * Kf[j][c], t)
            line.append(acc)
        out.append(line)
    return out


def d_k(rows: Sequence[SoftmaxRow], dP: Rational, Q: QMat, d_k: int, L_k: int) -> Grads:
    """``d_K = d_scaledᵀ·Q / √d_k``: ``[L_k, L]·[L, d_k]`` -> ``[L_k, d_k]``."""
    c0, t = _scale(d_k)
    Qf = Q.fractions()
    out: Grads = [[GradSum() for _ in range(d_k)] for _ in range(L_k)]
    for i, row in enumerate(rows):
        for j in row.live:
            for c in range(d_k):
                _add_d_scaled(out[j][c], row, dP[i], j, c0 * Qf[i][c], t)
    return out


def left_t(x: Sequence[Sequence[Fraction]], g: Grads) -> Grads:
    """``xᵀ·g``: ``[d_in, n]·[n, d]`` -> ``[d_in, d]`` (``d_W_Q = Xᵀ·d_Q``)."""
    out: Grads = []
    for a in range(len(x[0])):
        line = []
        for c in range(len(g[0])):
            acc = GradSum()
            for i in range(len(x)):
                acc.add(g[i][c], x[i][a])
            line.append(acc)
        out.append(line)
    return out


def right_t(g: Grads, w: Sequence[Sequence[Fraction]], into: Grads | None = None) -> Grads:
    """``g·Wᵀ`` (added to ``into`` when given): ``[n, d]·[d, d_in]`` -> ``[n, d_in]`` (``d_Q·W_Qᵀ``, a path of ``d_X``)."""
    n, d_in = len(g), len(w)
    out = into if into is not None else [[GradSum() for _ in range(d_in)] for _ in range(n)]
    for i in range(n):
        for a in range(d_in):
            for c in range(len(g[0])):
                out[i][a].add(g[i][c], w[a][c])
    return out


# --- RoPE (format v3, issue 23): the gradients of Q_rot and K_rot, and the rotation undone -----------------


def d_q_rot(rows: Sequence[SoftmaxRow], dP: Rational, K: TrigMat, d_k: int) -> Grads:
    """``d_Q_rot = d_scaled·K_rot / √d_k``: ``[L, L_k]·[L_k, d_k]`` -> ``[L, d_k]``, the scores reading the
    rotated keys; each coefficient an entry of ``K_rot`` (a :class:`~tutor.exact.rotary.Trig`)."""
    c0, t = _scale(d_k)
    out: Grads = []
    for i, row in enumerate(rows):
        line = []
        for c in range(d_k):
            acc = GradSum()
            for j in row.live:
                _add_d_scaled(acc, row, dP[i], j, K.num[j][c] * c0, t)
            line.append(acc)
        out.append(line)
    return out


def d_k_rot(rows: Sequence[SoftmaxRow], dP: Rational, Q: TrigMat, d_k: int, L_k: int) -> Grads:
    """``d_K_rot = d_scaledᵀ·Q_rot / √d_k``: ``[L_k, L]·[L, d_k]`` -> ``[L_k, d_k]``."""
    c0, t = _scale(d_k)
    out: Grads = [[GradSum() for _ in range(d_k)] for _ in range(L_k)]
    for i, row in enumerate(rows):
        for j in row.live:
            for c in range(d_k):
                _add_d_scaled(out[j][c], row, dP[i], j, Q.num[i][c] * c0, t)
    return out


def unrotate(g: Grads, positions: Sequence[int], thetas: Sequence[Fraction], pairs: Sequence[tuple[int, int]],
             kept: int = 0) -> Grads:
    """``g [n, d_k]`` (the gradient of a rotated Q or K) turned back: pair ``i`` of row ``p`` by ``R(m·θ_i)ᵀ``,
    ``[g_a, g_b] → [g_a·cos + g_b·sin, −g_a·sin + g_b·cos]`` with ``m = positions[p]`` (``R`` is orthogonal, so
    its transpose undoes it: RoFormer, Su et al. 2021, §3.2.2 and §3.4.2).  The first ``kept`` rows (a KV
    cache's keys, stored rotated) are copied as they are.  ``[n, d_k]``."""
    out: Grads = [[GradSum().add(x, Fraction(1)) for x in row] for row in g[:kept]]
    for p, row in enumerate(g[kept:], start=kept):
        line = [GradSum() for _ in row]
        for (a, b), theta in zip(pairs, thetas):
            cos, sin = Trig.cos_sin(positions[p] * theta)
            line[a].add(row[a], cos).add(row[b], sin)
            line[b].add(row[a], -sin).add(row[b], cos)
        out.append(line)
    return out
