"""The float pipeline's walk, exactly: every step of an exercise under a misconception's :class:`Variant`.

:mod:`tutor.numeric.replay` computes each step in float64 the way a learner
holding a misconception would; this module computes the same steps with the
same knobs in exact arithmetic (:class:`tutor.exact.expoly.Value`: rationals,
square roots and exponentials), so that "this mistake gives exactly the
right matrix here" can be decided exactly, not to float round-off
(:mod:`tutor.mistakes.invisible`).  It mirrors ``numeric/replay.py`` function by
function -- the same shapes, the same ``None`` where a variant cannot reach
a step -- and a test checks that the two agree on every variant.

Formulas: Vaswani et al. 2017, eq. 1 (``softmax(Q Kᵀ / √d_k) V``) and
§3.2.2 (``Concat(head_0, …) W_O``), row-vector convention ``Q = X W_Q + b_Q``;
a fully masked row gets zero weights.  Pure: no numpy, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

from .exact import engine as exact
from .exact.expoly import NEG_INF, Poly, Value, _cut, _NegInf, root
from .steps import KINDS, Key, keys, upstream

if TYPE_CHECKING:
    from .exercise.record import Exercise
    from .numeric.replay import Variant

Entry = Value | Fraction | _NegInf  # a rational entry stays a Fraction (Q, K, V, scores): fast
Matrix = list[list[Entry]]

ZERO = Fraction(0)


def as_value(e: Entry) -> Value:
    """An entry that is a number, as a :class:`~tutor.exact.expoly.Value`."""
    assert not isinstance(e, _NegInf)
    return Value.of(e) if isinstance(e, Fraction) else e


def _rational(m: Sequence[Sequence[Fraction]]) -> Matrix:
    return [list(row) for row in m]


def _matmul(a: Matrix, b: Matrix) -> Matrix | None:
    """``[n, m] @ [m, p] -> [n, p]``, or ``None`` when the shapes do not chain (no ``-inf`` entries).

    ``b`` is rational (V, K, W_O) whenever ``a`` is not: each product is a
    value scaled by a fraction, and a row's values over one softmax
    denominator add up as one fraction.
    """
    if not a or not b or len(a[0]) != len(b):
        return None
    cols = list(zip(*b))  # [p][m]
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


def _plus(m: Matrix, b: Sequence[Fraction] | None) -> Matrix:
    if b is None:
        return m
    return [[x + y if isinstance(x, Fraction) else as_value(x) + Value.of(y) for x, y in zip(row, b)] for row in m]


def _transpose(m: Matrix) -> Matrix:
    return [list(col) for col in zip(*m)]


def transpose(m: Matrix) -> Matrix:
    """``mᵀ``: ``[r, c] -> [c, r]``."""
    return _transpose(m)


class _Walk:
    """One exact walk: the exercise, the variant, the steps so far (mirrors :class:`tutor.numeric.replay.Replay`)."""

    def __init__(self, ex: Exercise, variant: Variant):
        self.ex, self.variant = ex, variant
        self.values: dict[Key, Matrix] = {}
        self.qmats: dict[Key, exact.QMat] = {}  # Q, K, V as the exact engine's integer matrices (never rounded)
        allowed = ex.allowed()
        self.allowed = None if allowed is None else [list(r) for r in allowed]  # [L, L_k], True = may attend

    def input(self, id: str, head: int | None) -> Matrix | None:
        """Step ``(id, head)`` as the next step reads it (rounded where the variant says so)."""
        value = self.values.get((id, head))
        places = {"scaled": self.variant.round_scaled, "weights": self.variant.round_weights}.get(id)
        if value is None or places is None:
            return value
        if self.variant.truncate:  # the decimals cut off: 0.4458 -> 0.44
            return [[_truncated(x, places) for x in row] for row in value]
        return [[_rounded(x, places) for x in row] for row in value]

    def bias(self, name: str, b: tuple[Fraction, ...] | None) -> tuple[Fraction, ...] | None:
        return None if b is None or name in self.variant.drop else b

    # --- q, k, v ------------------------------------------------------------------------
    def project(self, id: str, head: int | None) -> Matrix | None:
        ex = self.ex
        hd = ex.heads[head or 0]
        x, w, b = {"q": (ex.x, hd.w_q, hd.b_q), "k": (ex.kv, hd.w_k, hd.b_k), "v": (ex.kv, hd.w_v, hd.b_v)}[id]
        m = exact.project(x, w, self.bias(f"b_{id}", b))  # [n, d_in]·[d_in, d] -> [n, d], on integers (QMat)
        self.qmats[id, head] = m
        return [list(row) for row in m.fractions()]

    def q(self, head: int | None) -> Matrix | None:
        return self.project("q", head)

    def k(self, head: int | None) -> Matrix | None:
        return self.project("k", head)

    def v(self, head: int | None) -> Matrix | None:
        return self.project("v", head)

    # --- scores, scaled, masked -------------------------------------------------------------
    def scores(self, head: int | None) -> Matrix | None:
        Q, K = self.qmats.get(("q", head)), self.qmats.get(("k", head))
        if Q is None or K is None:
            return None
        S = exact.scores(K, Q) if self.variant.kq else exact.scores(Q, K)  # [L_k, L] or [L, L_k], on integers
        return [list(row) for row in S.fractions()]

    def _factor(self, head: int | None) -> tuple[Fraction, int]:
        """The scale as ``(c, t)``: scores are multiplied by ``c·√t``."""
        d_k = self.ex.heads[head or 0].d_k

        def over_root(n: int) -> tuple[Fraction, int]:  # 1/√n = √t / (c·t) for √n = c·√t
            c, t = root(n)
            return Fraction(1, c * t), t

        return {
            "sqrt_dk": lambda: over_root(d_k), "none": lambda: (Fraction(1), 1),
            "sqrt_dmodel": lambda: over_root(self.ex.d_model), "dk": lambda: (Fraction(1, d_k), 1),
            "times_dk": lambda: (Fraction(d_k), 1), "times_sqrt_dk": lambda: (Fraction(root(d_k)[0]), root(d_k)[1]),
        }[self.variant.scale]()

    def scaled(self, head: int | None) -> Matrix | None:
        S = self.input("scores", head)
        if S is None:
            return None
        c, t = self._factor(head)
        if t == 1:
            return [[x * c for x in row] for row in S]  # type: ignore[operator]
        return [[Value.of(x * c, t) for x in row] for row in S]  # type: ignore[operator]

    def _keep(self, A: Matrix) -> list[list[bool]] | None:
        ex, v = self.ex, self.variant
        assert self.allowed is not None
        if (len(A), len(A[0])) != (len(self.allowed), len(self.allowed[0])):
            return None
        if v.mask == "inverted":
            return [[not a for a in row] for row in self.allowed]
        if v.mask == "padding_rows":
            if ex.key_padding is None or ex.L != ex.L_k:
                return None
            mask = [[True] * ex.L_k for _ in range(ex.L)] if ex.mask is None else [list(r) for r in ex.mask]
            return [[m and ex.key_padding[i] for m in row] for i, row in enumerate(mask)]
        return self.allowed

    def masked(self, head: int | None) -> Matrix | None:
        A = self.input("scaled", head)
        if A is None or self.variant.mask == "after_softmax":
            return None
        keep = self._keep(A)
        if keep is None:
            return None
        if self.variant.mask == "none":
            return A
        if self.variant.mask == "added":  # the booleans added as numbers: +1 where the query may attend, +0 where not
            return [[as_value(a) + Value.of(Fraction(1)) if k else a for a, k in zip(ar, kr)] for ar, kr in zip(A, keep)]
        blocked: Entry = ZERO if self.variant.mask == "zero" else NEG_INF
        return [[a if k else blocked for a, k in zip(ar, kr)] for ar, kr in zip(A, keep)]

    # --- weights, head output ---------------------------------------------------------------
    def weights(self, head: int | None) -> Matrix | None:
        v, ex = self.variant, self.ex
        src = ("masked", head) if ex.has_mask and ("masked", head) in self.values else ("scaled", head)
        A = self.input(*src)
        if A is None:
            return None
        if ex.has_mask and src != ("masked", head) and v.mask != "after_softmax":  # the mask could not be applied
            return None
        W: Matrix
        if not v.softmax:
            W = [[ZERO if isinstance(a, _NegInf) else a for a in row] for row in A]
        elif not v.normalise:
            W = [[ZERO if isinstance(a, _NegInf) else _exp(a) for a in row] for row in A]
        elif v.softmax_axis == 0:
            W = _transpose([_softmax_row(col) for col in _transpose(A)])
        else:
            W = [_softmax_row(row) for row in A]
        if v.mask == "after_softmax" and self.allowed is not None:
            keep = self._keep(A)
            if keep is None:
                return None
            W = [[w if k else ZERO for w, k in zip(wr, kr)] for wr, kr in zip(W, keep)]
        if v.empty_rows == "uniform":
            W = [[Fraction(1, len(wr)) for _ in wr] if all(isinstance(a, _NegInf) for a in ar) else wr
                 for wr, ar in zip(W, A)]
        return W

    def head_output(self, head: int | None) -> Matrix | None:
        W = self.input("weights", head)
        Vs = self.input("k" if self.variant.values == "k" else "v", head)
        if W is None or Vs is None:
            return None
        return _matmul(W, Vs)

    # --- concat, output ----------------------------------------------------------------------
    def concat(self, head: int | None) -> Matrix | None:
        outs = [o for h in range(self.ex.num_heads) if (o := self.input("head_output", h)) is not None]
        if len(outs) < self.ex.num_heads:
            return None
        order = outs[::-1] if self.variant.heads_reversed else outs
        return [[x for o in order for x in o[i]] for i in range(len(order[0]))]

    def output(self, head: int | None) -> Matrix | None:
        ex = self.ex
        assert ex.w_o is not None
        C = self.input("concat", None) if ex.num_heads > 1 else self.input("head_output", 0)
        W_O = _rational(ex.w_o)  # [H·d_v, d_out]
        if self.variant.w_o_transposed:
            if len(W_O) != len(W_O[0]):
                return None
            W_O = _transpose(W_O)
        if C is None:
            return None
        out = _matmul(C, W_O)
        return None if out is None else _plus(out, self.bias("b_o", ex.b_o))


def _rounded(x: Entry, places: int) -> Entry:
    """An entry rounded to ``places`` decimals, half to even (``np.round``), as the exact decimal it then is."""
    if isinstance(x, _NegInf):
        return x
    if isinstance(x, Fraction):
        return round(x, places)
    return x.rounded(places)


def _truncated(x: Entry, places: int) -> Entry:
    """An entry with its decimals after the ``places``-th cut off (``np.trunc``), as the exact decimal it then is."""
    if isinstance(x, _NegInf):
        return x
    if isinstance(x, Fraction):
        return _cut(x, places)
    return x.truncated(places)


def _exp(a: Entry) -> Value:
    exponent = as_value(a).constant()
    assert exponent is not None, "the softmax reads scores, never exponentials"
    return Value.exp(exponent)


def _softmax_row(row: Sequence[Entry]) -> list[Entry]:
    """``exp(a_j) / Σ_k exp(a_k)`` over the entries that are not ``-inf``; all 0 when every one is."""
    live = [_exp(a) for a in row if not isinstance(a, _NegInf)]
    if not live:
        return [ZERO for _ in row]
    den = Poly()
    for e in live:
        den = den + e.parts[0][0]
    return [ZERO if isinstance(a, _NegInf) else Value.ratio(_exp(a).parts[0][0], den) for a in row]


#: The knobs of :class:`tutor.numeric.replay.Variant` the exact walk follows; a variant turning any other
#: (the heads averaged, split or merged by a plain reshape; format v2's kv_order, cache, bias) has no exact
#: walk (:class:`NoExactForm`), nor has ``mask="top_left"`` (:func:`supports`).
EXACT_KNOBS = frozenset({"drop", "kq", "scale", "mask", "empty_rows", "softmax", "softmax_axis", "normalise",
                         "round_scaled", "round_weights", "truncate", "values", "heads_reversed", "w_o_transposed"})


class NoExactForm(Exception):
    """The exact walk does not follow one of the variant's knobs: decide by the floats (and say so)."""


def supports(variant: Variant, ex: Exercise | None = None) -> bool:
    """Whether :class:`Walk` follows every knob ``variant`` turns (and, given ``ex``, its exercise).

    Format v2 (issue 12) is followed only where it changes nothing the walk
    computes: grouped K/V heads in repeat_interleave order (each query head
    holds its K/V head's weights) and the lower-right causal mask (in
    ``ex.allowed()``).  A KV cache (``k_new``, ``v_new``, K and V appended
    to the cache), a bias (the ``biased`` step), and the knobs of its
    misconceptions (``kv_order``, ``cache``, ``bias``, ``mask="top_left"``)
    have no exact walk: the floats decide.
    """
    if not variant.turned() <= EXACT_KNOBS or variant.mask == "top_left":
        return False
    return ex is None or not (ex.has_cache or ex.has_bias)


class Walk:
    """The exact walk of ``ex`` under ``variant``, taken only as far as it is asked (:meth:`get`).

    A step is computed with the steps it depends on (:func:`tutor.steps.upstream`)
    and its head's projections, nothing else: asking for head 1's scaled
    scores does not compute head 0's softmax.
    """

    def __init__(self, ex: Exercise, variant: Variant):
        if not supports(variant, ex):
            turned = sorted(variant.turned() - EXACT_KNOBS) or [f"mask={variant.mask}" if variant.mask == "top_left"
                                                               else "a KV cache or a bias (format v2)"]
            raise NoExactForm(f"no exact walk under {', '.join(turned)}")
        self._ex = ex
        self._walk = _Walk(ex, variant)
        self._done: set[Key] = set()
        self._order = {k: n for n, k in enumerate(keys(ex))}

    def get(self, key: Key) -> Matrix | None:
        """Step ``key`` exactly, or ``None`` when the variant cannot reach it (or the exercise has no such step)."""
        if key not in self._order:
            return None
        heads = range(self._ex.num_heads) if key[1] is None else (key[1],)
        needed = upstream(self._ex, key) | {key} | {(p, h) for h in heads for p in ("q", "k", "v")}
        for k in sorted(needed, key=self._order.__getitem__):
            if k not in self._done:
                self._done.add(k)
                value = getattr(self._walk, k[0])(k[1])
                if value is not None:
                    self._walk.values[k] = value
        return self._walk.values.get(key)


def replay(ex: Exercise, variant: Variant) -> dict[Key, Matrix]:
    """Every step of ``ex`` under ``variant``, exactly, in order (the steps a variant cannot reach left out).

    Mirrors :func:`tutor.steps.replay` over :mod:`tutor.numeric.replay`; shapes as there.
    """
    w = Walk(ex, variant)
    out = {}
    for key in keys(ex):
        value = w.get(key)
        if value is not None:
            out[key] = value
    assert all(k in KINDS for k, _ in out)
    return out


def entry_value(e: Entry) -> float:
    """The float an exact entry rounds to (``-inf`` for a blocked score)."""
    if isinstance(e, _NegInf):
        return float("-inf")
    if isinstance(e, Fraction):
        return float(e)
    return float(e.precise(30))


__all__ = ["NEG_INF", "Entry", "Matrix", "Value", "Walk", "as_value", "entry_value", "replay", "transpose"]
