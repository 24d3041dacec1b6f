"""FlashAttention's online softmax by hand: one query row, its keys in blocks, exactly and in floats.

FlashAttention-2's forward (Dao 2023, Algorithm 1) for one query row ``i``
of one head: the keys (and values) are read in blocks of ``B`` (the last
block may be smaller); after block ``b`` with scores ``s_j`` (``j`` in the
block; the scores the plain softmax reads: scaled, plus the additive bias of
format v2 if any, ``-inf`` where blocked):

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

:func:`online_row` is the exact walk (entries :class:`ExpSum`: sums of
``c·exp(u·√t + r)``), from the exact engine's softmax rows, its running max
compared exactly; :func:`online_floats` the float walk, with the
knobs of the misconceptions (:class:`TiledVariant`).  Pure: no I/O, no numpy
in the exact walk.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, cast

from ..base.errors import TutorError
from ..base.messages import t
from ..exact.numbers import NEG_INF, Exact, Rat, SoftmaxRow, _exp_text, sum_text, surd_plus
from ..exact.rotary import Trig

if TYPE_CHECKING:  # lazily imported
    import mpmath
    import sympy

    from ..exercise.record import Exercise

#: An exponent ``u·√t + r`` as ``(u, r)``: the scaled score (``u·√t``) plus a rational bias ``r`` (format v2);
#: with RoPE (format v3, issue 23) the scaled score itself, a :class:`~tutor.exact.rotary.Trig` (cosines and sines).
Exp = tuple[Fraction, Fraction] | Trig
ZERO_EXP: Exp = (Fraction(0), Fraction(0))

#: The precisions (digits) at which the sign of a non-zero RoPE exponent difference is sought, in turn.
_TRIG_DIGITS = (30, 60, 120, 240, 480, 960)


def _trig_sign(e: Trig) -> int:
    """The sign of a trigonometric polynomial, decided exactly.  ``e`` is zero exactly when it has no
    term (:class:`~tutor.exact.rotary.Trig` is canonical: Lindemann–Weierstrass).  Otherwise it is not
    zero, so evaluating it with mpmath at growing precision finds its sign: the value at ``D`` digits
    (computed at ``D + 10``) is off by far less than ``10^-D·(1 + Σ|a| + |b|)·√t``, so a value beyond
    that bound has the sign it shows.  Raises :class:`~tutor.base.errors.TutorError` if even 960 digits
    cannot tell (no hand-sized exercise comes near: its differences are at least about 10^-20)."""
    if e.is_zero:
        return 0
    import mpmath

    size = (1 + sum(abs(a) + abs(b) for _, a, b in e.terms)) * (e.t + 1)
    for digits in _TRIG_DIGITS:
        with mpmath.workdps(digits + 10):
            v = e.precise_value(digits)
            bound = mpmath.mpf(10) ** -digits * (mpmath.mpf(size.numerator) / size.denominator)
            if abs(v) > bound:
                return 1 if v > 0 else -1
    raise TutorError(t("rope.tiled.undecided", value=str(e)))


def _is_zero_exp(e: Exp) -> bool:
    return e.is_zero if isinstance(e, Trig) else e == ZERO_EXP


def exp_sign(e: Exp, t: int) -> int:
    """The sign of ``u·√t + r`` (``e = (u, r)``, ``t`` square-free), decided exactly: when the two parts
    have opposite signs, by comparing their squares ``u²·t`` and ``r²`` (never by floats, which cannot
    tell ``√2 − 1.4142135623730951`` from 0).  A RoPE exponent (a ``Trig``): :func:`_trig_sign`."""
    if isinstance(e, Trig):
        return _trig_sign(e)
    u, r = e
    if t == 1:
        s = u + r
        return (s > 0) - (s < 0)
    su, sr = (u > 0) - (u < 0), (r > 0) - (r < 0)
    if su == 0 or sr == 0 or su == sr:
        return su or sr
    big = u * u * t - r * r  # never 0: √t is irrational
    return su if big > 0 else sr if big < 0 else 0


def exp_sub(a: Exp, b: Exp) -> Exp:
    """``a − b`` of two exponents."""
    if isinstance(a, Trig):
        return a - cast(Trig, b)
    b = cast("tuple[Fraction, Fraction]", b)
    return (a[0] - b[0], a[1] - b[1])


def exp_add(a: Exp, b: Exp) -> Exp:
    """``a + b`` of two exponents."""
    if isinstance(a, Trig):
        return a + cast(Trig, b)
    if isinstance(b, Trig):  # ZERO_EXP + a RoPE exponent
        return b
    return (a[0] + b[0], a[1] + b[1])


def exp_greater(a: Exp, b: Exp, t: int) -> bool:
    """Whether exponent ``a`` is larger than ``b``, exactly (:func:`exp_sign`)."""
    return exp_sign(exp_sub(a, b), t) > 0


def _exp_float(e: Exp, t: int) -> float:
    if isinstance(e, Trig):
        return e.value()
    return float(e[0]) * math.sqrt(t) + float(e[1])


def _exp_show(e: Exp, t: int) -> Exact:
    """An exponent as the exact value a block shows (a score, the running max)."""
    if isinstance(e, Trig):
        from ..exact.rotary import _lowest

        return _lowest(e)
    return surd_plus(e[0], t, e[1])


@dataclass(frozen=True, slots=True)
class ExpSum(Exact):
    """``Σ_k c_k·exp(u_k·√t + r_k)``: a running sum or an accumulator entry relative to the running max.

    ``terms`` are ``((u, r), c)`` pairs, exponents distinct and in descending order (compared exactly);
    ``r`` is a bias part (format v2), 0 without one.  Build with :func:`exp_sum`.
    """

    terms: tuple[tuple[Exp, Fraction], ...]
    t: int

    def value(self) -> float:
        return math.fsum(float(c) * math.exp(_exp_float(e, self.t)) for e, c in self.terms)

    def precise_value(self, digits: int = 40) -> mpmath.mpf:
        import mpmath

        def q(x: Fraction) -> mpmath.mpf:
            return mpmath.mpf(x.numerator) / x.denominator

        with mpmath.workdps(digits + 10):
            root = mpmath.sqrt(self.t)

            def x(e: Exp) -> mpmath.mpf:
                if isinstance(e, Trig):
                    return e.precise_value(digits + 10)
                return q(e[0]) * root + q(e[1])

            return mpmath.fsum(q(c) * mpmath.exp(x(e)) for e, c in self.terms)

    def __str__(self) -> str:
        out = []
        for x, c in self.terms:
            if isinstance(x, Trig):
                e = "" if x.is_zero else f"exp({x})"
            else:
                e = "" if x == ZERO_EXP else _exp_text(x[0], self.t, x[1])
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

        def q(x: Fraction) -> sympy.Rational:
            return sympy.Rational(x.numerator, x.denominator)

        root = sympy.sqrt(self.t)

        def x(e: Exp) -> sympy.Expr:
            return e.to_sympy() if isinstance(e, Trig) else q(e[0]) * root + q(e[1])

        return sympy.Add(*(q(c) * sympy.exp(x(e)) for e, c in self.terms))


def _q(c: Fraction, paren: bool = False) -> str:
    text = str(c.numerator) if c.denominator == 1 else f"{c.numerator}/{c.denominator}"
    return f"({text})" if paren and c.denominator != 1 else text


def exp_sum(terms: dict[Exp, Fraction], t: int) -> Exact:
    """An :class:`ExpSum` in lowest form (its terms in descending order of exponent, compared
    exactly): a :class:`Rat` when only ``exp(0)`` is left (or nothing)."""
    from functools import cmp_to_key

    live = [(e, c) for e, c in terms.items() if c]
    if not live:
        return Rat(Fraction(0))
    if len(live) == 1 and _is_zero_exp(live[0][0]):
        return Rat(live[0][1])
    def descending(a: tuple[Exp, Fraction], b: tuple[Exp, Fraction]) -> int:
        return exp_sign(exp_sub(b[0], a[0]), t)

    live.sort(key=cmp_to_key(descending))
    return ExpSum(tuple(live), t)


@dataclass(frozen=True, slots=True)
class LogSumExp(Exact):
    """``m + log(l)`` (``l`` not 1): the lse of a row, FlashAttention's saved statistic.

    ``str()`` is ``m + log(l)``: not in the answer grammar (it has no ``log``); a typed answer is
    compared with it by value (:func:`tutor.answers.judge` reads :meth:`precise_value`)."""

    m: Exact
    l: Exact  # noqa: E741 -- the paper's name of the running sum

    def value(self) -> float:
        return self.m.value() + math.log(self.l.value())

    def precise_value(self, digits: int = 40) -> mpmath.mpf:
        import mpmath

        with mpmath.workdps(digits + 10):
            return self.m.precise_value(digits + 10) + mpmath.log(self.l.precise_value(digits + 10))

    def __str__(self) -> str:
        return f"{self.m} + log({self.l})"

    def to_sympy(self) -> sympy.Expr:
        import sympy

        return self.m.to_sympy() + sympy.log(self.l.to_sympy())


@dataclass(frozen=True)
class Block:
    """One block of keys after it is read: its key indices (0-based), scores, and the running state."""

    keys: tuple[int, ...]
    scores: tuple[Exact, ...]
    m: Exact
    alpha: Exact | None  # None for the first block
    l: Exact  # noqa: E741 -- the paper's and the contract's name of the running sum
    acc: tuple[Exact, ...]
    p: tuple[Exact, ...] = ()  # exp(s_j − m) for each key of the block (0 where blocked): the paper's P̃


@dataclass(frozen=True)
class TiledRow:
    """The online softmax of one query row of one head: its blocks, ``o = acc/l`` and ``lse = m + log l``.

    ``o`` holds the plain softmax's ``head_output`` row (the same numbers:
    :attr:`equal` says the exact check held); ``lse`` is ``-inf`` for a row
    that may attend to no key, ``m`` when ``l = 1``, else a :class:`LogSumExp`.
    """

    head: int
    row: int
    block_size: int
    blocks: tuple[Block, ...]
    o: tuple[Exact, ...]
    lse: Exact
    equal: bool
    V: tuple[tuple[Fraction, ...], ...] = ()  # [L_k, d_v]: the values the walk reads


def blocks_of(L_k: int, block_size: int) -> list[tuple[int, ...]]:
    """The key indices in blocks of ``block_size``, in order; the last block may be smaller."""
    return [tuple(range(b, min(b + block_size, L_k))) for b in range(0, L_k, block_size)]


def row_exponents(row: SoftmaxRow) -> tuple[Exp | None, ...]:
    """The exponents of a softmax row as ``(u, r)`` (``None`` = blocked): the scaled score ``u·√t``
    plus the bias ``r`` (0 without one; with ``t = 1`` the engine folds the bias into ``u``)."""
    if not row.algebraic:  # RoPE (issue 23): the keys are the scaled scores themselves (Trig)
        return tuple(cast("Exp | None", k) for k in row.keys)
    out: list[Exp | None] = []
    for k in row.keys:
        if k is None:
            out.append(None)
            continue
        u, r = row.parts(k)
        out.append((u + r, Fraction(0)) if row.t == 1 else (u, r))
    return tuple(out)


def online_row(row: SoftmaxRow, V: Sequence[Sequence[Fraction]], block_size: int, *, head: int = 0,
               index: int = 0, plain: Sequence[Exact] = ()) -> TiledRow:
    """The exact online softmax of one query row (``row``: its scores ``s_j = u_j·√t + r_j``, the
    scaled scores plus the bias if any; blocked keys ``None``) over ``V [L_k, d_v]`` in blocks of
    ``block_size`` (see the module docstring).  The running max is compared exactly
    (:func:`exp_greater`).  ``plain``: the plain softmax's ``head_output`` row, which ``o`` is
    (checked exactly: ``l·exp(m) = Σ_j exp(s_j)`` and ``acc·exp(m) = Σ_j exp(s_j)·V_j`` term by term)."""
    t = row.t
    s = row_exponents(row)
    d_v = len(V[0])
    m: Exp | None = None  # the running max; None = -inf
    lsum: dict[Exp, Fraction] = {}  # l: exponent relative to m -> coefficient
    acc: list[dict[Exp, Fraction]] = [{} for _ in range(d_v)]
    blocks = []
    for b, keys in enumerate(blocks_of(len(s), block_size)):
        live = [(j, e) for j in keys if (e := s[j]) is not None]
        scores = tuple(NEG_INF if (sj := s[j]) is None else _exp_show(sj, t) for j in keys)
        new = m
        for _, e in live:
            if new is None or exp_greater(e, new, t):
                new = e
        alpha: Exact | None = None
        if b:
            alpha = Rat(Fraction(0)) if m is None or new is None else exp_sum({exp_sub(m, new): Fraction(1)}, t)
        if m is not None and new is not None and new != m:  # rescale: every exponent moves by m_old − m_new
            shift = exp_sub(m, new)
            lsum = {exp_add(d, shift): c for d, c in lsum.items()}
            acc = [{exp_add(d, shift): c for d, c in a.items()} for a in acc]
        m = new
        for j, e in live:
            assert m is not None
            d = exp_sub(e, m)
            lsum[d] = lsum.get(d, Fraction(0)) + 1
            for c in range(d_v):
                acc[c][d] = acc[c].get(d, Fraction(0)) + V[j][c]
        p = tuple(Rat(Fraction(0)) if s[j] is None or m is None else exp_sum({exp_sub(s[j], m): Fraction(1)}, t)  # type: ignore[arg-type]
                  for j in keys)
        blocks.append(Block(keys, scores, NEG_INF if m is None else _exp_show(m, t), alpha,
                            exp_sum(lsum, t), tuple(exp_sum(a, t) for a in acc), p))
    # o = acc / l is the plain softmax row: l·exp(m) = Σ_j exp(s_j) and acc·exp(m) = Σ_j exp(s_j)·V_j, term by term
    z: dict[Exp, Fraction] = {}
    num: list[dict[Exp, Fraction]] = [{} for _ in range(d_v)]
    for j, e in enumerate(s):
        if e is None:
            continue
        z[e] = z.get(e, Fraction(0)) + 1
        for c in range(d_v):
            num[c][e] = num[c].get(e, Fraction(0)) + V[j][c]
    mm = ZERO_EXP if m is None else m

    def lifted(terms: dict[Exp, Fraction]) -> dict[Exp, Fraction]:
        return {exp_add(d, mm): c for d, c in terms.items() if c}

    equal = (lifted(lsum) == {e: c for e, c in z.items() if c}
             and all(lifted(a) == {e: c for e, c in nm.items() if c} for a, nm in zip(acc, num)))
    lse: Exact
    if m is None:
        lse = NEG_INF
    else:
        l_exact = blocks[-1].l
        lse = blocks[-1].m if isinstance(l_exact, Rat) and l_exact.q == 1 else LogSumExp(blocks[-1].m, l_exact)
    o = tuple(plain) if plain else tuple(Rat(Fraction(0)) for _ in range(d_v))
    return TiledRow(head, index, block_size, tuple(blocks), o, lse, equal, tuple(tuple(r) for r in V))


def tiled(ex: Exercise, block_size: int, head: int | None = None) -> list[TiledRow]:
    """Every query row's online softmax (of ``head``, 0-based, or of every head), from the exact engine:
    over the scores the plain softmax reads (scaled, plus the additive bias of format v2 if any,
    blocked keys ``-inf``); with RoPE (format v3) the scaled scores ``Q_rot·K_rotᵀ/√d_k``, trigonometric
    polynomials, whose running max is decided exactly too (:func:`_trig_sign`).  Raises
    :class:`~tutor.base.errors.TutorError` for the pre-norm block (no such row to walk)."""
    from ..exact.engine import QMat
    from ..steps.catalogue import KINDS, keys, upstream
    from ..steps.kind import Build

    if ex.has_norm:  # after a norm a row's scores mix square roots: no SoftmaxRow to walk (issue 23)
        raise TutorError(t("block.tiled", id=ex.id))
    heads = range(ex.num_heads) if head is None else [head]
    # only what the heads' outputs are computed from (post-norm's out_norm, after them, needs solve's exact walk)
    needed = {k for h in heads for k in upstream(ex, ("head_output", h)) | {("head_output", h)}}
    bd = Build(ex)
    for key in keys(ex):
        if key in needed:
            bd.steps[key] = KINDS[key[0]].build(bd, key[1])
    out = []
    for h in heads:
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


def block_floats(m: float, lsum: float, acc: Sequence[float], scores: Sequence[float],
                 V: Sequence[Sequence[float]], variant: TiledVariant = TiledVariant()
                 ) -> tuple[float, float, float, list[float]]:
    """One block of the float walk from the running state ``m``, ``lsum`` (l), ``acc [d_v]`` (``m = -inf``,
    ``lsum = 0`` before any key): the block's ``scores [B]`` (``-inf`` = blocked) and its rows of
    ``V [B][d_v]``, under ``variant``.  Returns ``(m_new, alpha, l_new, acc_new)`` (``alpha = 0`` while
    ``m_old = -inf``)."""
    new = max([m, *scores])
    if new == -math.inf or m == -math.inf:
        alpha = 0.0
    else:
        alpha = math.exp((new - m) if variant.alpha_inverted else (m - new))
    p = [0.0 if x == -math.inf else math.exp(x - new) for x in scores]
    lsum = (alpha if variant.rescale_l else 1.0) * lsum + math.fsum(p)
    out = [(alpha if variant.rescale_acc else 1.0) * a + math.fsum(pj * row[c] for pj, row in zip(p, V))
           for c, a in enumerate(acc)]
    if variant.divide_per_block and lsum:
        out = [a / lsum for a in out]
    return new, alpha, lsum, out


def online_floats(scores: Sequence[float], V: Sequence[Sequence[float]], block_size: int,
                  variant: TiledVariant = TiledVariant()) -> dict[str, object]:
    """The online softmax of one row in float64 under ``variant``: ``{"blocks": [{"keys", "m", "alpha"?, "l",
    "acc"}], "o", "lse"}``; ``scores [L_k]`` (``-inf`` = blocked), ``V [L_k][d_v]``."""
    d_v = len(V[0])
    m, lsum, acc = -math.inf, 0.0, [0.0] * d_v
    blocks: list[dict[str, object]] = []
    for b, keys in enumerate(blocks_of(len(scores), block_size)):
        m, alpha, lsum, acc = block_floats(m, lsum, acc, [scores[j] for j in keys], [V[j] for j in keys], variant)
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
