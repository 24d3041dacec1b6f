"""FlashAttention's online softmax by hand: one query row, its keys in blocks, exactly and in floats.

FlashAttention-2's forward (Dao 2023, Algorithm 1) for one query row ``i``
of one head: the keys (and values) are read in blocks of ``B`` (the last
block may be smaller); after block ``b`` with scores ``s_j`` (``j`` in the
block; the scaled, masked scores of the plain forward):

    ``m_b = max(m_{b-1}, max_j s_j)``                      the running max
    ``alpha_b = exp(m_{b-1} − m_b)``                        the rescale factor (<= 1)
    ``l_b = alpha_b·l_{b-1} + Σ_j exp(s_j − m_b)``          the running sum
    ``acc_b = alpha_b·acc_{b-1} + Σ_j exp(s_j − m_b)·V_j``  the rescaled accumulator

and at the end ``o = acc / l`` and ``lse = m + log l``, which are the plain
softmax's ``weights·V`` row and ``log Σ_j exp(s_j)`` exactly: ``l·exp(m)``
and ``acc·exp(m)`` are the softmax's denominator and numerator, whatever
the blocks.  A blocked key (``s_j = -inf``) adds nothing; before the first
key a query may attend, ``m = -inf``, ``l = 0``, ``acc = 0`` (and ``alpha =
0``); a row that may attend to no key ends with ``o = 0``, ``lse = -inf``.

:func:`online_row` is the exact walk (entries :class:`ExpSum`), from the
exact engine's softmax rows; :func:`online_floats` the float walk, with the
knobs of the misconceptions (:class:`TiledVariant`).  Pure: no I/O, no numpy
in the exact walk.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, cast

from .exactnum import NEG_INF, Exact, Rat, SoftmaxRow, _exp_text, sum_text, surd

if TYPE_CHECKING:  # lazily imported
    import mpmath
    import sympy

    from .exercise.record import Exercise


@dataclass(frozen=True, slots=True)
class ExpSum(Exact):
    """``Σ_d c_d·exp((d/den)·√t)``: a running sum or an accumulator entry relative to the running max."""

    terms: tuple[tuple[int, Fraction], ...]  # (exponent numerator over den, coefficient), descending
    den: int
    t: int

    def value(self) -> float:
        r = math.sqrt(self.t)
        return math.fsum(float(c) * math.exp(d / self.den * r) for d, c in self.terms)

    def precise_value(self, digits: int = 40) -> mpmath.mpf:
        import mpmath

        with mpmath.workdps(digits):
            r = mpmath.sqrt(self.t) / self.den
            return mpmath.fsum(mpmath.mpf(c.numerator) / c.denominator * mpmath.exp(d * r) for d, c in self.terms)

    def __str__(self) -> str:
        out = []
        for d, c in self.terms:
            e = "" if d == 0 else _exp_text(Fraction(d, self.den), self.t)
            if not e:
                out.append(_q(c))
            elif c == 1:
                out.append(e)
            elif c == -1:
                out.append("-" + e)
            else:
                out.append(f"{_q(c, paren=True)}*{e}")
        return sum_text(out)

    def to_sympy(self) -> sympy.Expr:
        import sympy

        r = sympy.sqrt(self.t)
        return sympy.Add(*(sympy.Rational(c.numerator, c.denominator) * sympy.exp(sympy.Rational(d, self.den) * r)
                           for d, c in self.terms))


def _q(c: Fraction, paren: bool = False) -> str:
    text = str(c.numerator) if c.denominator == 1 else f"{c.numerator}/{c.denominator}"
    return f"({text})" if paren and c.denominator != 1 else text


def exp_sum(terms: dict[int, Fraction], den: int, t: int) -> Exact:
    """An :class:`ExpSum` in lowest form: a :class:`Rat` when only ``exp(0)`` is left (or nothing)."""
    live = tuple(sorted(((d, c) for d, c in terms.items() if c), reverse=True))
    if not live:
        return Rat(Fraction(0))
    if len(live) == 1 and live[0][0] == 0:
        return Rat(live[0][1])
    return ExpSum(live, den, t)


@dataclass(frozen=True)
class Block:
    """One block of keys after it is read: its key indices (0-based), scores, and the running state."""

    keys: tuple[int, ...]
    scores: tuple[Exact, ...]
    m: Exact
    alpha: Exact | None  # None for the first block
    l: Exact  # noqa: E741 -- the paper's and the contract's name of the running sum
    acc: tuple[Exact, ...]


@dataclass(frozen=True)
class TiledRow:
    """The online softmax of one query row of one head: its blocks, ``o = acc/l`` and ``lse = m + log l``.

    ``o`` holds the plain softmax's ``head_output`` row (the same numbers:
    :attr:`equal` says the exact check held), ``lse_text`` the exact form
    ``m + log(l)`` as text (the answer grammar has no ``log``), ``lse`` its value.
    """

    head: int
    row: int
    block_size: int
    blocks: tuple[Block, ...]
    o: tuple[Exact, ...]
    lse: float
    lse_text: str
    equal: bool


def blocks_of(L_k: int, block_size: int) -> list[tuple[int, ...]]:
    """The key indices in blocks of ``block_size``, in order; the last block may be smaller."""
    return [tuple(range(b, min(b + block_size, L_k))) for b in range(0, L_k, block_size)]


def online_row(row: SoftmaxRow, V: Sequence[Sequence[Fraction]], block_size: int, *, head: int = 0,
               index: int = 0, plain: Sequence[Exact] = ()) -> TiledRow:
    """The exact online softmax of one query row (``row``: its scaled scores ``(n_j/den)·√t``, ``None`` = blocked)
    over ``V [L_k, d_v]`` in blocks of ``block_size`` (see the module docstring).  ``plain``: the plain
    softmax's ``head_output`` row, which ``o`` is (checked exactly: ``l·exp(m) = Σ_j exp(s_j)`` and
    ``acc·exp(m) = Σ_j exp(s_j)·V_j`` term by term)."""
    den, t = row.den, row.t
    d_v = len(V[0])
    m: int | None = None  # numerator of the running max; None = -inf
    lsum: dict[int, Fraction] = {}  # l: exponent numerator relative to m -> coefficient
    acc: list[dict[int, Fraction]] = [{} for _ in range(d_v)]
    blocks = []
    for b, keys in enumerate(blocks_of(len(row.nums), block_size)):
        live = [j for j in keys if row.nums[j] is not None]
        scores = tuple(NEG_INF if row.nums[j] is None else surd(Fraction(row.nums[j], den), t) for j in keys)  # type: ignore[arg-type]
        top = max((row.nums[j] for j in live), default=None)  # type: ignore[type-var]
        new = m if top is None else top if m is None else max(m, top)
        alpha: Exact | None = None
        if b:
            alpha = Rat(Fraction(0)) if m is None else exp_sum({m - new: Fraction(1)}, den, t)  # type: ignore[operator]
        if m is not None and new != m:  # rescale: every exponent moves by m_old − m_new
            shift = m - new  # type: ignore[operator]
            lsum = {d + shift: c for d, c in lsum.items()}
            acc = [{d + shift: c for d, c in a.items()} for a in acc]
        m = new
        for j in live:
            d = row.nums[j] - m  # type: ignore[operator]
            lsum[d] = lsum.get(d, Fraction(0)) + 1
            for c in range(d_v):
                acc[c][d] = acc[c].get(d, Fraction(0)) + V[j][c]
        blocks.append(Block(keys, scores, NEG_INF if m is None else surd(Fraction(m, den), t), alpha,
                            exp_sum(lsum, den, t), tuple(exp_sum(a, den, t) for a in acc)))
    # o = acc / l is the plain softmax row: l·exp(m) = Σ_j exp(s_j) and acc·exp(m) = Σ_j exp(s_j)·V_j, term by term
    z: dict[int, Fraction] = {}
    num: list[dict[int, Fraction]] = [{} for _ in range(d_v)]
    for j in row.live:
        n = row.nums[j]
        assert n is not None
        z[n] = z.get(n, Fraction(0)) + 1
        for c in range(d_v):
            num[c][n] = num[c].get(n, Fraction(0)) + V[j][c]
    mm = m or 0
    equal = ({d + mm: c for d, c in lsum.items() if c} == {e: c for e, c in z.items() if c}
             and all({d + mm: c for d, c in a.items() if c} == {e: c for e, c in nm.items() if c}
                     for a, nm in zip(acc, num)))
    if m is None:
        lse, lse_text = -math.inf, "-inf"
    else:
        l_exact = exp_sum(lsum, den, t)
        lse = blocks[-1].m.value() + math.log(l_exact.value())
        lse_text = f"{blocks[-1].m} + log({l_exact})" if not (isinstance(l_exact, Rat) and l_exact.q == 1) else str(blocks[-1].m)
    o = tuple(plain) if plain else tuple(Rat(Fraction(0)) for _ in range(d_v))
    return TiledRow(head, index, block_size, tuple(blocks), o, lse, lse_text, equal)


def tiled(ex: Exercise, block_size: int, head: int | None = None) -> list[TiledRow]:
    """Every query row's online softmax (of ``head``, 0-based, or of every head), from the exact engine.

    Raises :class:`~tutor.errors.TutorError` for scores with an additive bias (format v2): the
    walk is built for exponents that are multiples of one surd."""
    if ex.has_bias:
        from .errors import TutorError
        from .messages import t

        raise TutorError(t("tiled.bias", id=ex.id))
    from .exact import QMat
    from .steps.catalogue import KINDS, keys
    from .steps.kind import Build

    bd = Build(ex)
    for key in keys(ex):
        bd.steps[key] = KINDS[key[0]].build(bd, key[1])
    out = []
    for h in range(ex.num_heads) if head is None else [head]:
        rows = cast("tuple[SoftmaxRow, ...]", bd.data["weights", h])
        V = bd.data["v", h]
        assert isinstance(V, QMat)
        Vf = V.fractions()
        plain = bd.steps["head_output", h].exact
        for i, row in enumerate(rows):
            out.append(online_row(row, Vf, block_size, head=h, index=i, plain=plain[i]))
    return out


# --- the float walk, and the mistakes ---------------------------------------------------------------


@dataclass(frozen=True)
class TiledVariant:
    """The knobs of the online softmax's misconceptions; the defaults are FlashAttention-2's.

    ``rescale_acc``/``rescale_l``: False = the old accumulator (running sum)
    is not multiplied by alpha when the max changes.  ``alpha_inverted``:
    alpha = exp(m_new − m_old).  ``divide_per_block``: acc divided by l at
    every block (and not at the end).
    """

    rescale_acc: bool = True
    rescale_l: bool = True
    alpha_inverted: bool = False
    divide_per_block: bool = False


def online_floats(scores: Sequence[float], V: Sequence[Sequence[float]], block_size: int,
                  variant: TiledVariant = TiledVariant()) -> dict[str, object]:
    """The online softmax of one row in float64 under ``variant``: ``{"blocks": [{"keys", "m", "alpha"?, "l",
    "acc"}], "o", "lse"}``; ``scores [L_k]`` (``-inf`` = blocked), ``V [L_k][d_v]``."""
    d_v = len(V[0])
    m, lsum, acc = -math.inf, 0.0, [0.0] * d_v
    blocks: list[dict[str, object]] = []
    for b, keys in enumerate(blocks_of(len(scores), block_size)):
        new = max([m] + [scores[j] for j in keys])
        if new == -math.inf:
            alpha = 0.0
        else:
            alpha = math.exp((new - m) if variant.alpha_inverted else (m - new)) if m != -math.inf else 0.0
        p = [0.0 if scores[j] == -math.inf else math.exp(scores[j] - new) for j in keys]
        lsum = (alpha if variant.rescale_l else 1.0) * lsum + sum(p)
        acc = [(alpha if variant.rescale_acc else 1.0) * a + sum(pj * V[j][c] for pj, j in zip(p, keys))
               for c, a in enumerate(acc)]
        if variant.divide_per_block and lsum:
            acc = [a / lsum for a in acc]
        m = new
        block: dict[str, object] = {"keys": list(keys), "m": m, "l": lsum, "acc": list(acc)}
        if b:
            block["alpha"] = alpha
        blocks.append(block)
    if lsum == 0:
        o, lse = [0.0] * d_v, -math.inf
    else:
        o = list(acc) if variant.divide_per_block else [a / lsum for a in acc]
        lse = m + math.log(lsum)
    return {"blocks": blocks, "o": o, "lse": lse}
