"""The numbers of a new exercise, small enough for paper: drawn for a :class:`~tutor.authoring.shape.Shape`.

How the numbers stay small: ``x`` holds small integers (``{0, 1}`` at
difficulty 1-2) with no all-zero row, and every column of every weight
matrix has only one or two non-zero entries (``1``, or ``±1`` from
difficulty 2), so each entry of ``Q = x·W_Q`` (and of K and V) is a sum of
at most two small products.  Inputs and weights are drawn from a seeded
:class:`random.Random` (each head's weights until its Q, K, V and scores
``Q·Kᵀ`` stay within the difficulty's bounds and its scores are not all
equal); the first draw within bounds is kept, else the one with the
smallest numbers (:func:`pick`).

Not dull, unless asked (``allow_dull``): among the draws within bounds the
first one is kept whose heads have no two identical Q rows, no row of
equal scores (uniform weights), no all-zero row and no two equal columns of V, and numbers that tell the classic mistakes
apart where the shape allows -- scores that are not symmetric (``K·Qᵀ``
shows), weights that a softmax down the columns does not give, ``K ≠ V``,
a square W_O that is not symmetric (``W_Oᵀ`` shows).  A missing or wrong
scaling shows by itself when ``d_k ≠ 1`` and ``d_k ≠ d_model``, which is
the shape's to allow.  With grouped K/V heads (format v2) the whole draw is
made again while two query heads of a group would have the same weights
(:func:`draw`).  Pure: no printing, no files.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from .shape import HeadShape, Shape

TRIES = 200  # ten times the inputs x drawn at most, fewer for big exercises (see _x_tries)
WORK = 3_000_000  # multiplications spent on candidates at most
GROUP_TRIES = 20  # whole draws at most until no two query heads of a group have the same weights


Matrix = list[list[int]]
T = TypeVar("T")


def matmul(a: Matrix, b: Matrix) -> Matrix:
    """``[n, m] @ [m, p] -> [n, p]`` on Python ints."""
    cols = list(zip(*b))  # [p][m]
    return [[sum(x * y for x, y in zip(row, col)) for col in cols] for row in a]


def transposed(m: Sequence[Sequence[T]]) -> list[list[T]]:
    """``[n, m] -> [m, n]``."""
    return [list(c) for c in zip(*m)]


def plus(m: Matrix, b: list[int] | None) -> Matrix:
    """``m [n, p] + b [p]`` row by row (``m`` itself without a bias)."""
    return m if b is None else [[x + y for x, y in zip(row, b)] for row in m]


@dataclass(frozen=True)
class Level:
    """What a difficulty allows: the values of x and of the weights, and the bounds kept on Q, K, V and scores."""

    x: tuple[int, ...]  # values of x, repeated to weight them
    w: tuple[int, ...]  # non-zero values of the weights
    qkv: int  # bound on |Q|, |K|, |V|
    scores: int  # bound on |scores| for d_k <= 2

    def score_bound(self, d_k: int) -> int:
        """The bound on |scores|: a score is a sum of d_k products, so it grows with every two more terms."""
        return self.scores * max(1, (d_k + 1) // 2)


LEVELS = {
    1: Level((0, 1, 1), (1,), 2, 4),
    2: Level((0, 1, 1), (1, 1, -1), 2, 4),
    3: Level((0, 0, 1, 1, 2), (1, 1, -1), 3, 6),
    4: Level((-1, 0, 0, 1, 1, 2), (1, 1, -1), 3, 8),
    5: Level((-2, -1, 0, 1, 1, 2), (1, -1, 2), 4, 12),
}

def _inputs(rng: random.Random, rows: int, cols: int, values: Sequence[int], varied: bool = False) -> Matrix:
    """``[rows, cols]`` entries from ``values``; no all-zero row, and with ``varied`` (``cols >= 2``) no row
    whose entries are all equal (LayerNorm's variance of such a row is 0: Ba et al. 2016, §3.1)."""
    out = []
    for _ in range(rows):
        row = [0] * cols
        while not any(row) or varied and len(set(row)) == 1:
            row = [values[rng.randrange(len(values))] for _ in range(cols)]
        out.append(row)
    return out


def _weight(rng: random.Random, d_in: int, d_out: int, values: Sequence[int]) -> Matrix:
    """``[d_in, d_out]``: each column has one or two non-zero entries."""
    w = [[0] * d_out for _ in range(d_in)]
    for c in range(d_out):
        k = 1 if d_in == 1 else 1 + rng.randrange(2)
        for r in rng.sample(range(d_in), k):
            w[r][c] = values[rng.randrange(len(values))]
    return w


def _row_softmax(rows: Sequence[Sequence[float]]) -> list[list[float]]:
    """Each row's softmax over its finite entries (``-inf`` blocked; a row of nothing but ``-inf`` is 0).
    Only to compare two ways of normalising here; the tutor's softmax is :func:`tutor.numeric.softmax`."""
    out = []
    for row in rows:
        live = [v for v in row if v != -math.inf]
        top = max(live, default=0.0)
        e = [0.0 if v == -math.inf else math.exp(v - top) for v in row]
        z = sum(e) or 1.0
        out.append([x / z for x in e])
    return out


def _dull(q: Matrix, k: Matrix, v: Matrix, s: Matrix, d_k: int, allowed: tuple[tuple[bool, ...], ...] | None) -> int:
    """How dull a head is: two identical Q rows, a row of equal scores (uniform weights), an all-zero
    row of V or two equal columns of V (issue 20, E: a token that adds nothing, an output column
    computed twice), and each classic mistake its numbers cannot tell apart -- K·Qᵀ (symmetric
    scores), a softmax down the columns (it gives the same weights), weights·K (K = V)."""
    n = int(len({tuple(r) for r in q}) < len(q))
    L, L_k = len(s), len(s[0])
    for i, row in enumerate(s):
        live = [x for j, x in enumerate(row) if allowed is None or allowed[i][j]]
        n += int(len(live) >= 2 and len(set(live)) == 1)
    if L == L_k and s == transposed(s):
        n += 1
    if k == v:
        n += 1
    n += int(any(not any(row) for row in v))  # a token whose value is all zero: it adds nothing to any output
    if len(v[0]) > 1 and len({tuple(c) for c in zip(*v)}) < len(v[0]):
        n += 1  # two equal columns of V: the same two columns in the head's output, one computed twice
    a = [[x / math.sqrt(d_k) if allowed is None or allowed[i][j] else -math.inf for j, x in enumerate(row)]
         for i, row in enumerate(s)]  # [L, L_k]
    rows, cols = _row_softmax(a), transposed(_row_softmax(transposed(a)))
    if all(abs(x - y) <= 1e-9 for r, c in zip(rows, cols) for x, y in zip(r, c)):
        n += 1
    return n


@dataclass(frozen=True)
class Head:
    """One head's weights as drawn, and what its numbers are like (to compare draws)."""

    w: tuple[Matrix, Matrix, Matrix]  # w_q, w_k, w_v
    b: tuple[list[int] | None, list[int] | None, list[int] | None]  # b_q, b_k, b_v
    qkv: tuple[int, int]  # smallest and largest entry of Q, K, V
    scores: tuple[int, int]  # smallest and largest score
    flat: bool  # the scores are all equal (and need not be), or V is all zero
    dull: int  # see _dull (0 when dull exercises are allowed)
    out: tuple[tuple[float, ...], ...] = ()  # the head's output in floats [L, d_v] (only to compare heads)

    def cost(self, level: Level) -> tuple[int, int, int, int, int]:
        """Lexicographic: flat first, then how far past the bounds, then how dull, then the largest score and entry."""
        q = max(abs(v) for v in self.qkv)
        s = max(abs(v) for v in self.scores)
        d_k = len(self.w[0][0])
        return (int(self.flat), max(0, q - level.qkv) + max(0, s - level.score_bound(d_k)), self.dull, s, q)


@dataclass(frozen=True)
class Candidate:
    """One draw for a whole shape: ``x [L, d_model]``, ``x_kv [L_k, d_kv]`` (cross-attention), each head's
    weights, and W_O ``[Σ d_v, d_out]`` and b_O when the shape has them."""

    x: Matrix
    x_kv: Matrix | None
    heads: tuple[Head, ...]
    w_o: Matrix | None = None
    b_o: list[int] | None = None

    def cost(self, level: Level) -> tuple[int, ...]:
        """The heads' costs combined: any flat head, the total excess over the bounds, dullness (with
        heads whose order cannot be told: the concatenation read backwards is the same), the largest numbers."""
        costs = [h.cost(level) for h in self.heads]
        outs = [h.out for h in self.heads]
        mirrored = len(outs) > 1 and all(outs) and all(
            abs(a - b) <= 1e-9 for o, r in zip(outs, outs[::-1]) for ra, rb in zip(o, r) for a, b in zip(ra, rb))
        return (max(c[0] for c in costs), sum(c[1] for c in costs), sum(c[2] for c in costs) + int(mirrored),
                max(c[3] for c in costs), max(c[4] for c in costs))



def _bias(rng: random.Random, n: int, level: Level) -> list[int]:
    """A bias ``[n]``: mostly 0, else a value the weights use."""
    values = (0, 0) + level.w
    return [values[rng.randrange(len(values))] for _ in range(n)]


def _head(rng: random.Random, x: Matrix, kv: Matrix, shape: Shape, hs: HeadShape, level: Level,
          allow_dull: bool) -> Head:
    d_kv = len(kv[0])
    w_q, w_k = _weight(rng, shape.d_model, hs.d_k, level.w), _weight(rng, d_kv, hs.d_k, level.w)  # [d, d_k]
    w_v = _weight(rng, d_kv, hs.d_v, level.w)  # [d_kv, d_v]
    b = (_bias(rng, hs.d_k, level) if hs.b_q else None, _bias(rng, hs.d_k, level) if hs.b_k else None,
         _bias(rng, hs.d_v, level) if hs.b_v else None)
    q, k, v = plus(matmul(x, w_q), b[0]), plus(matmul(kv, w_k), b[1]), plus(matmul(kv, w_v), b[2])
    s = matmul(q, [list(c) for c in zip(*k)])  # [L, d_k]·[d_k, L_k] -> [L, L_k]
    qkv = [e for m in (q, k, v) for row in m for e in row]
    scores = [e for row in s for e in row]
    same_inputs = all(r == x[0] for r in x) and all(r == kv[0] for r in kv)  # then equal scores cannot be avoided
    flat = (len(set(scores)) == 1 and len(scores) > 1 and not same_inputs) or not any(e for row in v for e in row)
    if allow_dull:
        return Head((w_q, w_k, w_v), b, (min(qkv), max(qkv)), (min(scores), max(scores)), flat, 0)
    allowed = shape.allowed()
    a = [[x / math.sqrt(hs.d_k) if allowed is None or allowed[i][j] else -math.inf for j, x in enumerate(row)]
         for i, row in enumerate(s)]  # [L, L_k]
    out = tuple(tuple(sum(w * vr[c] for w, vr in zip(wr, v)) for c in range(hs.d_v)) for wr in _row_softmax(a))  # [L, d_v]
    return Head((w_q, w_k, w_v), b, (min(qkv), max(qkv)), (min(scores), max(scores)), flat,
                 _dull(q, k, v, s, hs.d_k, allowed), out)


HEAD_TRIES = 40  # weight draws per head for one x
W_O_TRIES = 20  # draws of a square W_O until it is not symmetric


def _x_tries(shape: Shape) -> int:
    """How many inputs x to draw: fewer when one head's draws cost many multiplications (:data:`WORK`)."""
    L, L_k, d = shape.L, shape.keys, shape.d_model
    d_kv = shape.d_kv or d
    per_head = sum(L * d * h.d_k + L_k * d_kv * (h.d_k + h.d_v) + L * L_k * h.d_k for h in shape.heads)  # Q, K, V, scores
    return max(1, min(TRIES // 10, WORK // (HEAD_TRIES * per_head)))


def _w_o(rng: random.Random, shape: Shape, level: Level, allow_dull: bool) -> tuple[Matrix | None, list[int] | None]:
    """W_O ``[Σ d_v, d_out]`` (a square one not symmetric, so that W_Oᵀ gives another output) and b_O."""
    if shape.w_o is None:
        return None, None
    rows = sum(h.d_v for h in shape.heads)
    w = _weight(rng, rows, shape.w_o, level.w)
    for _ in range(W_O_TRIES):
        if allow_dull or rows != shape.w_o or w != transposed(w):
            break
        w = _weight(rng, rows, shape.w_o, level.w)
    return w, _bias(rng, shape.w_o, level) if shape.b_o else None


def pick(shape: Shape, level: Level, seed: int, allow_dull: bool = False, varied: bool = False) -> Candidate:
    """Draw x, then each head's weights until that head is within bounds (and not dull); the first x
    whose heads all are wins.  ``varied``: no row of x has all its entries equal (for LayerNorm)."""
    rng = random.Random(seed)
    best: Candidate | None = None
    for _ in range(_x_tries(shape)):
        x = _inputs(rng, shape.L, shape.d_model, level.x, varied)  # [L, d_model]
        x_kv = _inputs(rng, shape.keys, shape.d_kv or shape.d_model, level.x) if shape.cross else None  # [L_k, d_kv]
        kv = x_kv if x_kv is not None else x
        heads = []
        for hs in shape.heads:
            head = _head(rng, x, kv, shape, hs, level, allow_dull)
            for _ in range(HEAD_TRIES - 1):
                if head.cost(level)[:3] == (0, 0, 0):
                    break
                other = _head(rng, x, kv, shape, hs, level, allow_dull)
                if other.cost(level) < head.cost(level):
                    head = other
            heads.append(head)
        c = Candidate(x, x_kv, tuple(heads))
        if c.cost(level)[:3] == (0, 0, 0):
            best = c
            break
        if best is None or c.cost(level) < best.cost(level):
            best = c
    assert best is not None
    w_o, b_o = _w_o(rng, shape, level, allow_dull)
    return Candidate(best.x, best.x_kv, best.heads, w_o, b_o)


def same_weights(c: Candidate, shape: Shape) -> bool:
    """Whether two query heads of one K/V group (``shape.kv_heads``) would have the same weights: their
    scores differ by a constant along every row (over the keys each row may attend to), so the softmax,
    and, with their shared V, their outputs, are the same; such heads teach nothing the first one does not.

    Each group's K is its first head's; the rows are the new tokens' (after ``shape.past`` cached
    ones).  Never true without grouping (one query head per group).
    """
    N, per = shape.past, shape.per_group
    x_new = c.x[N:]
    kv = c.x_kv if c.x_kv is not None else c.x
    causal = shape.mask == "causal"
    for g in range(len(c.heads) // per):
        k = matmul(kv, c.heads[g * per].w[1])  # the group's K, every key [L_k, d_k]
        scores = [matmul(matmul(x_new, c.heads[h].w[0]), transposed(k))  # [L - N, L_k] each
                  for h in range(g * per, (g + 1) * per)]
        for a in range(len(scores)):
            for b in range(a + 1, len(scores)):
                rows = [[s1 - s2 for j, (s1, s2) in enumerate(zip(r1, r2)) if not causal or j <= i + N]
                        for i, (r1, r2) in enumerate(zip(scores[a], scores[b]))]
                if all(len(set(r)) <= 1 for r in rows):
                    return True
    return False


def draw(shape: Shape, level: Level, seed: int, allow_dull: bool = False, varied: bool = False) -> Candidate:
    """The numbers of a new exercise of ``shape`` (deterministic for ``seed``): :func:`pick`, and with
    grouped K/V heads, :func:`pick` again from a seed drawn from the last one while two query heads of
    a group would have the same weights (:func:`same_weights`; at most :data:`GROUP_TRIES` draws).
    Without grouping, or when ``allow_dull``, the first draw.  ``varied``: no row of x with every entry
    equal (:func:`pick`; LayerNorm cannot divide one); ``shape.d_model`` must then be at least 2."""
    for _ in range(GROUP_TRIES):
        c = pick(shape, level, seed, allow_dull, varied)
        if allow_dull or not same_weights(c, shape):
            break
        seed = random.Random(seed).randrange(2**31)
    return c
