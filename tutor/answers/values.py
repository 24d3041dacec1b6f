"""Bounded values for the answer parser: exact where that is cheap, intervals everywhere.

:mod:`.grammar` reads a typed answer into a tree of :class:`Value` nodes,
one per operation, built as it parses.  No sympy is involved (a sympy
expression is built only on request, by :attr:`.entry.Entry.expr`):
sympy's automatic evaluation and its assumption system made short inputs take
minutes (``sqrt(1e-93^64+1)`` factored a 6,000-digit integer; each level of a
nested ``1/(1+exp(…))`` tripled the time).  Here every operation costs a
bounded amount of work.

A value carries

* an **exact form** when it has one of these shapes (else ``None``):

  - ``lin``: ``Σ c·√n`` -- rational coefficients ``c``, integer radicands
    ``n`` (``n = 1`` is the rational part; a rational is one term, zero is no
    term).  Radicands are kept pairwise *incompatible* (``n·m`` never a
    perfect square: two compatible terms merge, found by :func:`math.isqrt`,
    never by factoring), so the square roots are linearly independent over
    the rationals and a ``lin`` is zero exactly when it has no term;
  - ``mono``: ``r·√n·exp(L)`` with ``L`` a non-empty ``lin`` (``e``,
    ``exp(√2)``, ``3·exp(-1/2)``): never zero, its sign is ``r``'s;

* an **interval** (:mod:`mpmath.libmp` interval arithmetic, lower bound
  rounded down and upper bound rounded up, at :data:`WORK_PREC` bits) that
  contains the value.  Signs and zero tests of values without an exact form
  come from it: a value whose interval contains 0 is *taken as zero* (a
  division by it is refused as "cannot be told from zero"; its square root
  is 0).  At 256 bits that is a value within about 10^-77 of zero relative
  to its parts.  A value's float, and the comparison of an exact claim
  (:func:`equals_exact`), re-evaluate the tree at a higher precision when
  this interval is too wide for them;

* a **tree** (the operation and its operands) for a value without an exact
  form, to rebuild it at a higher precision or as a sympy expression.

The exact forms' arithmetic is :mod:`.forms`; the interval primitives are
:mod:`.intervals`; this module builds values from both and bounds them.

Resource bounds, each refused with a :class:`Refused` that the parser turns
into an :class:`~tutor.base.errors.AnswerError` naming the column:

* every exact number held -- a rational, each coefficient and radicand of an
  exact form -- has at most :data:`MAX_EXACT_BITS` bits in numerator and
  denominator together, else it is "too large to check exactly (over 600
  digits)": every number of up to :data:`MAX_EXACT_DIGITS` digits fits, and
  every number refused has more;
* an exact form has at most :data:`MAX_TERMS` terms (beyond, the value keeps
  its interval and tree and loses its exact form: nothing is refused);
* every value has magnitude at most :data:`MAX_MAGNITUDE`; one that is not
  rational (rationals are bounded by their digits) and not (taken as) zero
  has magnitude at least 10^-600 (:data:`MIN_MAGNITUDE_EXP10`).

So one operation costs at most a few big-integer operations on 2,000-bit
numbers, a few square-root tests, or one interval operation at 256 bits; an
entry of 2,000 characters has at most about 1,000 operations.  Re-evaluating
a tree at :data:`CHECK_PREC` bits (for an exact claim the 256-bit intervals
cannot decide, or a float after a cancellation) costs one more pass, each
part computed only as precisely as the whole needs it; every node keeps the
most precise interval computed for it, so nothing is evaluated twice at a
precision it is already known to (nested ``exp(…) - 1`` around a sum that
cancels once re-evaluated everything below each level, seconds for one
entry).

And the work as a whole is bounded, not only each operation: every
operation and every evaluation above 256 bits is charged to the budgets in
force (:func:`budget`): :data:`MAX_ENTRY_WORK` per entry (about 60 ms) and
:data:`MAX_SHARED_WORK` (about 3 s) for all the entries of one typed matrix
or one solution file.  A value that would overspend one is refused: "too
large to check exactly; write it as a decimal".  The parser also computes,
within the entry's budget, what comparing an exact claim with the true
value will need (:func:`prepare_check`), so grading only reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from fractions import Fraction
from typing import Any

from . import intervals
from .forms import (
    MAX_EXACT_BITS,
    MAX_EXACT_DIGITS,
    MAX_TERMS,
    Lin,
    Mono,
    Refused,
    bits,
    checked,
    lin_add,
    lin_inverse,
    lin_mul,
    lin_scale,
    mono_inverse,
    sqrt_q,
    term_mul,
)
from .intervals import (
    Interval,
    contains_zero,
    iv_exp,
    iv_lin,
    iv_mono,
    iv_q,
    iv_root,
    iv_sign,
    iv_sqrt,
    lg,
    lg_iv,
    narrow,
    overlap,
)

__all__ = [
    "MAX_EXACT_BITS",
    "MAX_EXACT_DIGITS",
    "MAX_MAGNITUDE",
    "MIN_MAGNITUDE_EXP10",
    "MAX_TERMS",
    "WORK_PREC",
    "MAX_ENTRY_WORK",
    "MAX_SHARED_WORK",
    "Refused",
    "Value",
    "Work",
    "budget",
    "charge_operation",
]

#: Every value, and every intermediate value, is at most this in magnitude ...
MAX_MAGNITUDE = 1e300
#: ... and, unless it is rational or (taken as) zero, at least 10^-MIN_MAGNITUDE_EXP10.
MIN_MAGNITUDE_EXP10 = 600
#: Bits of the interval every value carries.
WORK_PREC = 256
#: Bits of relative precision an exact claim is compared at, when it is not decided
#: exactly (see :func:`equals_exact`): about 635 significant digits.
CHECK_PREC = 2_112
#: Bits of working precision used to reach it, at most (two tries: 2,176 and 4,352).
MAX_EVAL_PREC = 4_352

_L: Any = None  # mpmath.libmp, once loaded (see :func:`load`)
_I: Any = None  # mpmath.libmp.libmpi
_FLOOR: Any = None  # 10^-600 as an mpf
_TOP: Any = None  # MAX_MAGNITUDE as an mpf


def load() -> None:
    """Import mpmath's low-level interval functions (a few ms, once)."""
    global _L, _I, _FLOOR, _TOP
    if _L is None:
        intervals.load()
        from mpmath import libmp
        from mpmath.libmp import libmpi

        _FLOOR = libmp.mpf_div(libmp.fone, libmp.from_int(10**MIN_MAGNITUDE_EXP10), 64, libmp.round_floor)
        _TOP = libmp.from_float(MAX_MAGNITUDE)
        _I = libmpi
        _L = libmp


# --- exact forms, with their intervals ------------------------------------------------------


def _lin_sign(a: Lin, iv: Interval) -> int:
    if not a:
        return 0
    if len(a) == 1:
        return 1 if a[0][1] > 0 else -1
    if len(a) == 2:  # c1√n1 + c2√n2: compare the squares
        (n1, c1), (n2, c2) = a
        s1, s2 = (1 if c1 > 0 else -1), (1 if c2 > 0 else -1)
        if s1 == s2:
            return s1
        return s1 if c1 * c1 * n1 > c2 * c2 * n2 else s2
    s = iv_sign(iv)
    prec = 4 * WORK_PREC
    while s == 0 and prec <= MAX_EVAL_PREC:  # non-zero (independent roots): look closer
        _charge(_lin_cost(len(a), prec))
        s = iv_sign(iv_lin(a, prec))
        prec *= 4
    if s == 0:
        raise Refused("answer.too_close")
    return s


def _mono_mul(a: Mono, b: Mono, iv: Interval) -> Value | None:
    n, c = term_mul(a[1], a[0], b[1], b[0])
    lin = lin_add(a[2], b[2])
    if lin is None:
        return None
    if not lin:
        return _exact_lin(((n, c),), iv)
    return _exact_mono((c, n, lin), iv)


def _as_mono(v: Value) -> Mono | None:
    """A value as ``r·√n·exp(L)`` (``L`` may be empty for a one-term lin), else ``None``."""
    if v.mono is not None:
        return v.mono
    if v.lin is not None and len(v.lin) == 1:
        n, c = v.lin[0]
        return c, n, ()
    return None



# --- the value ----------------------------------------------------------------------------


class Value:
    """One parsed value; see the module docstring.  Built by the functions below."""

    __slots__ = ("fine", "iv", "lin", "mono", "size", "tree")

    def __init__(self, iv: Interval, lin: Lin | None = None, mono: Mono | None = None,
                 tree: tuple[Any, ...] | None = None):
        self.iv = iv
        self.lin = lin
        self.mono = mono
        self.tree = tree
        #: nodes in this value's tree (itself included): the guard bits of a re-evaluation
        self.size: int = 1 + sum(k.size for k in tree[1:] if isinstance(k, Value)) if tree is not None else 1
        #: the most precise interval computed above WORK_PREC, with the precision it was computed at:
        #: a node is never evaluated again at that precision or below (see :meth:`interval`)
        self.fine: tuple[int, Interval] | None = None

    @property
    def fraction(self) -> Fraction | None:
        """The exact rational value, or ``None`` when the value is not (known to be) rational."""
        lin = self.lin
        if lin is None:
            return None
        if not lin:
            return Fraction(0)
        if len(lin) == 1 and lin[0][0] == 1:
            return lin[0][1]
        return None

    @property
    def exact(self) -> bool:
        return self.lin is not None or self.mono is not None

    def is_e(self) -> bool:
        return self.mono is not None and self.mono == (1, 1, ((1, 1),))

    def float(self) -> float:
        """The value as a float: from the fraction, else from an interval narrow enough
        to round it (the 256-bit one unless the value cancelled more than 190 bits)."""
        q = self.fraction
        if q is not None:
            return float(q)
        iv = self.iv
        work = CHECK_PREC + 64
        while not narrow(iv, 60) and work <= MAX_EVAL_PREC:
            iv = self.interval(work)
            if contains_zero(iv):  # zero, or so near it that 0.0 is its float
                break
            work *= 2
        return _L.to_float(_I.mpi_mid(iv, 64))

    def sign(self) -> int:
        """-1, 0 or 1: exact for an exact form, else from the interval (0 when it contains 0)."""
        if self.lin is not None:
            return _lin_sign(self.lin, self.iv)
        if self.mono is not None:
            return 1 if self.mono[0] > 0 else -1
        return iv_sign(self.iv)

    def interval(self, prec: int) -> Interval:
        """An interval containing the value, about ``2^-prec`` of it wide.

        Each part is computed only as precisely as the whole needs it (a
        summand 10^-300 times smaller than the sum needs 1,000 bits less; the
        argument of ``exp`` needs absolute precision), so a tiny part of an
        entry costs little however many operations it holds.  No recursion:
        a left-leaning chain of a thousand sums is fine.

        Every node keeps the most precise interval computed for it
        (:attr:`fine`), and a node already known as precisely as asked is
        not evaluated again, nor anything below it: nested ``exp(…) - 1``
        that each ask for their argument's float re-evaluate nothing twice.
        The work done is charged to the budgets in force (:func:`budget`):
        over one, :class:`Refused` ("too large to check exactly").
        """
        if prec <= WORK_PREC:
            return self.iv
        # errors of n operations add up to n ulps at most: log2(n) guard bits, once, at the top
        top = prec + self.size.bit_length() + 4
        if self.fine is not None and self.fine[0] >= top:
            return self.fine[1]
        # top-down: what precision each node needs; a node already known that precisely is a leaf here
        order: list[tuple[Value, int]] = []  # parents before their operands (a tree: one parent each)
        stack: list[tuple[Value, int]] = [(self, top)]
        while stack:
            v, r = stack.pop()
            order.append((v, r))
            if v.tree is None or (v.fine is not None and v.fine[0] >= r):
                continue
            op = v.tree[0]
            lv = lg_iv(v.iv)
            for k in v.tree[1:]:
                if not isinstance(k, Value):
                    continue
                lk = lg_iv(k.iv)
                if op in ("+", "-") and lk is not None and lv is not None:
                    need = r + lk - lv + 1  # the same absolute precision as the sum
                elif op == "exp":
                    need = r + max(0, lk or 0) + 1  # absolute precision of the argument
                elif op in ("cos", "sin"):  # absolute precision of the argument, more for a small result
                    need = r + max(0, lk or 0) + max(0, -(lv or 0)) + 1
                elif op == "pow":
                    need = r + v.tree[2].bit_length()
                else:
                    need = r + 1
                stack.append((k, min(MAX_EVAL_PREC, max(64, need))))
        memo: dict[int, Interval] = {}
        forms: dict[tuple[Any, ...], Interval] = {}  # exact forms met twice (exp(3/7) in two sums) cost once
        for v, p in reversed(order):
            if v.fine is not None and v.fine[0] >= p:
                memo[id(v)] = v.fine[1]
                continue
            if v.tree is None:
                p = -(-p // 64) * 64  # whole words: two copies of exp(3/7) ask alike
                key = (v.lin, v.mono, p)
                got = forms.get(key)
                if got is None:
                    _charge(_form_cost(v, p))
                    got = forms[key] = _exact_iv(v, p)
            else:
                _charge(_op_cost(v.tree[0], p))
                got = _apply(v.tree, memo, p)
            memo[id(v)] = got
            v.fine = (p, got)
        return memo[id(self)]


# --- the work budget ------------------------------------------------------------------------

#: The work of evaluating one entry above WORK_PREC, at most, in units of about 10 ns
#: (see :func:`budget`): about 60 ms.
MAX_ENTRY_WORK = 6_000_000
#: ... and of all the entries of one typed matrix or one solution file together: about 3 s.
MAX_SHARED_WORK = 50 * MAX_ENTRY_WORK


class Work:
    """A budget of high-precision evaluation work, in bit-operations (see :func:`budget`).

    ``key`` is the message a value that would overspend it is refused with.
    """

    __slots__ = ("key", "left", "limit")

    def __init__(self, limit: int, key: str = "answer.too_costly"):
        self.limit = limit
        self.left = limit
        self.key = key


_BUDGETS: ContextVar[tuple[Work, ...]] = ContextVar("attn_tutor_answer_budgets", default=())


@contextmanager
def budget(work: Work) -> Iterator[Work]:
    """Charge every evaluation above :data:`WORK_PREC` inside the block to ``work`` too.

    Budgets nest: the parser opens one per entry (:data:`MAX_ENTRY_WORK`)
    inside the one a typed matrix or a solution file opens for all of its
    entries (:data:`MAX_SHARED_WORK`); an evaluation is charged to each, and
    one that overspends any is :class:`Refused` with that budget's key.  Work
    is counted per interval operation at ``p`` bits, in units of about 10 ns
    of mpmath's time (:func:`_op_cost`: a sum costs its overhead, a product
    and a square root grow as ``p²``, an ``exp`` fastest), so a budget is a
    bound on time that does not depend on how busy the machine is.  Each
    operation of the parser with a result that is not rational is charged its
    work at :data:`WORK_PREC` bits (:func:`charge_operation`; rationals are
    bounded by their digits), every evaluation above it as it is done
    (:meth:`Value.interval`).  Outside every budget
    (grading, which re-reads what the parser already computed: see
    :func:`prepare_check`) nothing is charged.
    """
    token = _BUDGETS.set((*_BUDGETS.get(), work))
    try:
        yield work
    finally:
        _BUDGETS.reset(token)


def _charge(amount: int) -> None:
    for work in _BUDGETS.get():
        work.left -= amount
        if work.left < 0:
            raise Refused(work.key, limit=MAX_EXACT_DIGITS)


def _op_cost(op: str, p: int) -> int:
    """The work of one interval operation at ``p`` bits, in units of about 10 ns (mpmath's
    time, measured: a sum costs its overhead, a product grows as ``p²``, ``exp`` fastest)."""
    if op == "exp":
        return 1_000 + p * p // 370
    if op in ("cos", "sin"):
        return 1_000 + p * p // 200
    if op in ("sqrt", "pow"):
        return 1_000 + p * p // 2_000
    if op == "/":
        return 200 + p * p // 4_000
    if op == "*":
        return 200 + p * p // 9_000
    return 200 + p // 10


def _lin_cost(terms: int, p: int) -> int:
    return terms * (500 + p * p // 8_000)


def _form_cost(v: Value, p: int) -> int:
    """The work of an exact form's interval at ``p`` bits (see :func:`_op_cost`)."""
    if v.mono is not None:
        lin = v.mono[2]
        whole = len(lin) == 1 and lin[0][0] == 1 and lin[0][1].denominator == 1
        exp = 1_000 + p * p // 1_500 if whole else _op_cost("exp", p)  # e^n: mpmath raises e to n
        return exp + _lin_cost(len(lin) + 1, p)
    return _lin_cost(max(1, len(v.lin or ())), p)


def prepare_check(v: Value) -> None:
    """Evaluate ``v`` as precisely as :func:`equals_exact` will ask (charged to the budgets in force).

    The parser calls it for an entry that claims an exact value and has no
    exact form, so that grading it later only reads what is already
    computed: grading is never refused, and never costs more than reading.
    """
    if v.tree is None:
        return
    work = CHECK_PREC + 64
    while work <= MAX_EVAL_PREC:
        if narrow(v.interval(work), CHECK_PREC):
            return
        work *= 2


def _exact_iv(v: Value, prec: int) -> Interval:
    if v.lin is not None:
        q = v.fraction
        return iv_q(q, prec) if q is not None else iv_lin(v.lin, prec)
    assert v.mono is not None
    return iv_mono(v.mono, prec)


def _apply(tree: tuple[Any, ...], memo: dict[int, Interval], prec: int) -> Interval:
    op = tree[0]
    a = memo[id(tree[1])]
    if op == "+":
        return _I.mpi_add(a, memo[id(tree[2])], prec)
    if op == "-":
        return _I.mpi_sub(a, memo[id(tree[2])], prec)
    if op == "*":
        return _I.mpi_mul(a, memo[id(tree[2])], prec)
    if op == "/":
        return _I.mpi_div(a, memo[id(tree[2])], prec)
    if op == "neg":
        return _I.mpi_neg(a, prec)
    if op == "sqrt":
        return iv_sqrt(a, prec)
    if op == "exp":
        return iv_exp(a, prec)
    if op == "cos":
        return _I.mpi_cos(a, prec)
    if op == "sin":
        return _I.mpi_sin(a, prec)
    assert op == "pow"
    return _I.mpi_pow_int(a, tree[2], prec)


def _exact_lin(lin: Lin, iv: Interval | None = None) -> Value:
    if not lin:
        return Value((_L.fzero, _L.fzero), ())
    if len(lin) == 1 and lin[0][0] == 1:
        return Value(iv_q(lin[0][1], WORK_PREC), lin)
    return Value(iv if iv is not None else iv_lin(lin, WORK_PREC), lin)


def _exact_mono(m: Mono, iv: Interval | None = None) -> Value:
    return Value(iv if iv is not None else iv_mono(m, WORK_PREC), mono=m)


def rational(q: Fraction) -> Value:
    """A rational value (a number literal).  Raises :class:`Refused` over the bound."""
    load()
    if not q:
        return Value((_L.fzero, _L.fzero), ())
    checked(q)
    p, d = q.numerator, q.denominator
    if p.bit_length() - d.bit_length() > 996 and abs(q) > _TOP_Q:  # 2^996 < 1e300 < 2^997
        raise Refused("answer.too_large")
    return Value(iv_q(q, WORK_PREC), ((1, q),))


_TOP_Q = Fraction(MAX_MAGNITUDE)


_E: Value | None = None


def e() -> Value:
    """The constant e (one shared value: values are never changed once built)."""
    global _E
    load()
    if _E is None:
        _E = _exact_mono((Fraction(1), 1, ((1, Fraction(1)),)))
    return _E


def _bounded(v: Value) -> Value:
    """Refuse a value beyond :data:`MAX_MAGNITUDE` or (not rational, not zero) below 10^-600."""
    _check_iv(v.iv, v.fraction is not None)
    return v


def _check_iv(iv: Interval, rational: bool) -> None:
    lo, hi = iv
    lg_lo, lg_hi = lg(lo), lg(hi)
    if (lg_lo is not None and lg_hi is not None and max(lg_lo, lg_hi) < 990
            and (rational or min(lg_lo, lg_hi) > -1990) and _L.mpf_sign(lo) == _L.mpf_sign(hi)):
        return  # well inside both bounds
    L = _L
    big = L.mpf_abs(lo) if L.mpf_cmp(L.mpf_abs(lo), L.mpf_abs(hi)) > 0 else L.mpf_abs(hi)
    if L.mpf_cmp(big, _TOP) > 0:
        mid = L.to_float(_I.mpi_mid(iv, 64))
        if not abs(mid) <= MAX_MAGNITUDE:
            raise Refused("answer.too_large")
    if not rational and not contains_zero(iv) and L.mpf_cmp(big, _FLOOR) < 0:
        raise Refused("answer.too_small", limit=MIN_MAGNITUDE_EXP10)


# --- operations ---------------------------------------------------------------------------


def add(a: Value, b: Value, sign: int = 1) -> Value:
    """``a + b`` (``sign = -1``: ``a - b``)."""
    qa, qb = a.fraction, b.fraction
    if qa is not None and qb is not None:
        return rational(qa + qb if sign > 0 else qa - qb)
    iv = _I.mpi_add(a.iv, b.iv, WORK_PREC) if sign > 0 else _I.mpi_sub(a.iv, b.iv, WORK_PREC)
    v: Value | None = None
    if a.lin is not None and b.lin is not None:
        lin = lin_add(a.lin, b.lin, sign)
        if lin is not None:
            v = _exact_lin(lin, iv)
    elif a.mono is not None and b.mono is not None:
        (r1, n1, l1), (r2, n2, l2) = a.mono, b.mono
        if lin_add(l1, l2, -1) == ():  # the same exp(L): add the r·√n parts
            part = lin_add(((n1, r1),), ((n2, r2),), sign)
            if part is not None and len(part) <= 1:
                v = _exact_lin(()) if not part else _exact_mono((part[0][1], part[0][0], l1), iv)
    if v is None:
        v = Value(iv, tree=("+" if sign > 0 else "-", a, b))
    return _bounded(v)


def neg(a: Value) -> Value:
    q = a.fraction
    if q is not None:
        return rational(-q)
    iv = _I.mpi_neg(a.iv)
    if a.lin is not None:
        v = Value(iv, tuple((n, -c) for n, c in a.lin))
    elif a.mono is not None:
        v = Value(iv, mono=(-a.mono[0], a.mono[1], a.mono[2]))
    else:
        v = Value(iv, tree=("neg", a))
    return v


def _product(a: Value, b: Value, iv: Interval) -> Value | None:
    """``a·b`` in an exact form, or ``None``."""
    if a.lin is not None and b.lin is not None:
        lin = lin_mul(a.lin, b.lin)
        return None if lin is None else _exact_lin(lin, iv)
    ma, mb = _as_mono(a), _as_mono(b)
    if ma is not None and mb is not None:
        return _mono_mul(ma, mb, iv)
    return None


def mul(a: Value, b: Value) -> Value:
    qa, qb = a.fraction, b.fraction
    if qa is not None and qb is not None:
        return rational(qa * qb)
    if qa == 0 or qb == 0:  # 0·x is 0 exactly, whatever x is
        return rational(Fraction(0))
    iv = _I.mpi_mul(a.iv, b.iv, WORK_PREC)
    v = _product(a, b, iv) or Value(iv, tree=("*", a, b))
    if v.lin == ():
        v.iv = (_L.fzero, _L.fzero)
    return _bounded(v)


def div(a: Value, b: Value) -> Value:
    """``a / b``; refuses a divisor that is (or is taken as) zero."""
    if b.sign() == 0:
        raise Refused("answer.div_zero" if b.exact else "answer.div_near_zero")
    qa, qb = a.fraction, b.fraction
    if qa is not None and qb is not None:
        return rational(qa / qb)
    if qa == 0:
        return rational(Fraction(0))
    iv = _I.mpi_div(a.iv, b.iv, WORK_PREC)
    inverse: Value | None = None
    if b.lin is not None:
        inv = lin_inverse(b.lin)
        if inv is not None:
            inverse = Value(iv, inv)  # only its exact form is used
    elif b.mono is not None:
        inverse = Value(iv, mono=mono_inverse(b.mono))
    v = _product(a, inverse, iv) if inverse is not None else None
    if v is None:
        v = Value(iv, tree=("/", a, b))
    return _bounded(v)


def sqrt(a: Value) -> Value:
    """``√a``; refuses a negative ``a``; 0 when ``a`` is (taken as) zero."""
    s = a.sign()
    if s < 0:
        raise Refused("answer.sqrt_negative")
    if s == 0:
        return rational(Fraction(0))
    iv = iv_sqrt(a.iv, WORK_PREC)
    v: Value | None = None
    q = a.fraction
    if q is not None:
        c, n = sqrt_q(q)
        v = _exact_lin(((n, c),), iv)
    elif a.mono is not None and a.mono[1] == 1:  # √(r·exp(L)) = √r·exp(L/2)
        c, n = sqrt_q(a.mono[0])
        v = _exact_mono((c, n, lin_scale(a.mono[2], Fraction(1, 2))), iv)
    if v is None:
        v = Value(iv, tree=("sqrt", a))
    return _bounded(v)


def exp(a: Value, limit: float) -> Value:
    """``exp(a)``; refuses ``|a| > limit``.

    Decided from the 256-bit interval (one inside ``±limit`` is fine, one
    outside it refused); only an interval across ``±limit`` asks for the
    float, so nested ``exp`` never re-evaluates its argument at a higher
    precision just to bound it.
    """
    lo, hi = a.iv
    bound = _L.from_float(limit)
    inside = _L.mpf_cmp(lo, _L.mpf_neg(bound)) >= 0 and _L.mpf_cmp(hi, bound) <= 0
    outside = _L.mpf_cmp(lo, bound) > 0 or _L.mpf_cmp(hi, _L.mpf_neg(bound)) < 0
    if outside or (not inside and not abs(a.float()) <= limit):
        raise Refused("answer.exp_range", limit=int(limit))
    iv = iv_exp(a.iv, WORK_PREC)
    if a.lin is not None:
        v = _exact_mono((Fraction(1), 1, a.lin), iv) if a.lin else rational(Fraction(1))
    else:
        v = Value(iv, tree=("exp", a))
    return _bounded(v)


#: The largest argument of ``cos`` and ``sin`` in magnitude: RoPE's angles ``m·θ_i`` of a hand-sized
#: exercise are a few radians (issue 23).
MAX_TRIG_ARGUMENT = 1_000


def cos(a: Value) -> Value:
    """``cos(a)`` (RoPE's exact forms, ``cos(1)``); refuses ``|a| >`` :data:`MAX_TRIG_ARGUMENT`."""
    return _trig("cos", a)


def sin(a: Value) -> Value:
    """``sin(a)``; refuses ``|a| >`` :data:`MAX_TRIG_ARGUMENT`."""
    return _trig("sin", a)


def _trig(op: str, a: Value) -> Value:
    """``cos`` or ``sin`` of ``a``: exact at 0 (1 and 0), else an interval (mpmath's ``mpi_cos``/``mpi_sin``)
    and a tree; never an exact form otherwise (the value of a rational angle's cosine is transcendental)."""
    if a.fraction == 0:
        return rational(Fraction(1 if op == "cos" else 0))
    if not abs(a.float()) <= MAX_TRIG_ARGUMENT:
        raise Refused("answer.trig_range", limit=MAX_TRIG_ARGUMENT, name=op)
    iv = (_I.mpi_cos if op == "cos" else _I.mpi_sin)(a.iv, WORK_PREC)
    return _bounded(Value(iv, tree=(op, a)))


def power(a: Value, k: Fraction) -> Value:
    """``a^k`` for a whole or half ``k`` (the parser bounds ``|k|``).

    Refuses a half power of a negative number, a negative power of zero, and a
    result over the bounds -- estimated *before* computing it.
    """
    s = a.sign()
    if k.denominator == 2 and s < 0:
        raise Refused("answer.sqrt_negative")
    if s == 0 and k < 0:
        raise Refused("answer.div_zero" if a.exact else "answer.div_near_zero")
    if s == 0:
        return rational(Fraction(1 if k == 0 else 0))
    if k.denominator == 2:
        a, k = sqrt(a), k * 2
    m = int(k)
    if m == 0:
        return rational(Fraction(1))
    if m < 0:
        a, m = div(rational(Fraction(1)), a), -m
    if m == 1:
        return a
    q = a.fraction
    if q is not None:
        if (bits(q) - 2) * m > MAX_EXACT_BITS:
            _check_iv(_I.mpi_pow_int(a.iv, m, WORK_PREC), True)  # (10^50)^64: too large, not just long
            raise Refused("answer.too_large_exact", limit=MAX_EXACT_DIGITS)
        return rational(q**m)
    iv = _I.mpi_pow_int(a.iv, m, WORK_PREC)
    _check_iv(iv, a.fraction is not None)  # the magnitude first: (10^50)^64 is too large, whatever its digits
    _check_power_size(a, m)
    v: Value | None = None
    if a.lin is not None or a.mono is not None:
        v = _exact_power(a, m, iv)
    if v is None:
        v = Value(iv, tree=("pow", a, m))
    return _bounded(v)


def _check_power_size(a: Value, m: int) -> None:
    """Refuse ``a^m`` when its exact form would surely exceed the bound."""
    if a.lin is not None:
        terms = a.lin
    elif a.mono is not None:
        terms = ((a.mono[1], a.mono[0]),)
    else:
        return
    biggest = max((bits(c) + n.bit_length() // 2 for n, c in terms), default=0)
    if len(terms) == 1 and (biggest - 2) * m > MAX_EXACT_BITS:
        raise Refused("answer.too_large_exact", limit=MAX_EXACT_DIGITS)


def _exact_power(a: Value, m: int, iv: Interval) -> Value | None:
    if a.mono is not None:
        r, n, lin = a.mono
        rr = checked(r**m)
        if n != 1:  # (√n)^m = n^(m//2)·√n^(m%2)
            half, odd = divmod(m, 2)
            rr = checked(rr * n**half)
            if not odd:
                n = 1
        lin2 = lin_scale(lin, Fraction(m))
        return _exact_mono((rr, n, lin2), iv)
    assert a.lin is not None
    result: Lin | None = ((1, Fraction(1)),)
    base: Lin | None = a.lin
    while m and result is not None and base is not None:
        if m & 1:
            result = lin_mul(result, base)
        m >>= 1
        if m:
            base = lin_mul(base, base)
    if result is None or base is None:
        return None
    return _exact_lin(result, iv)


# --- comparing with a true value ----------------------------------------------------------


def equals_exact(v: Value, true: Any) -> bool:
    """Whether ``v`` is exactly the true value ``true`` (a :class:`tutor.exact.numbers.Exact`).

    Decided exactly where the forms allow:

    * a rational true value (:class:`~tutor.exact.numbers.Rat`) and ``v`` with a
      ``lin`` form: the rationals compare as fractions (a ``lin`` with a
      square root is irrational: never equal);
    * a surd ``q·√t`` (:class:`~tutor.exact.numbers.Surd`) and a ``lin``: equal
      exactly when ``v`` is one term ``c·√n`` with the sign of ``q`` and
      ``c²·n = q²·t``.

    Anything else -- a softmax value (:class:`~tutor.exact.numbers.Mix`,
    :class:`~tutor.exact.numbers.MixSum`), or an entry with ``exp`` or a quotient
    of sums -- is compared numerically.  Intervals at 256 bits that do not
    overlap decide "not equal" at once (a wrong answer costs nothing more);
    otherwise ``v`` is evaluated to :data:`CHECK_PREC` = 2,112 bits of
    relative precision (each part only as precisely as the whole needs it)
    and equals the true value when they agree to that precision (the parser
    computed those intervals already, within the entry's work budget:
    :func:`prepare_check`; here they are only read).  A value
    that intervals cannot narrow to 2^-2112 of the true value by
    :data:`MAX_EVAL_PREC` bits is not equal: an exact claim must be
    checkable; a true value 0 is equalled by a ``v`` that 2,176-bit
    intervals cannot tell from zero (the parser's own rule, taken further).

    Why distinct values cannot collide in practice: every part an entry is
    made of is at least 10^-600 in magnitude -- a rational has at most 600
    digits, so a nonzero one is at least 10^-599, and any other value below
    10^-600 is refused -- and the true values of the engine are far below
    10^10.  An entry that differs from the true value by one of its parts
    (an added term, a factor ``1 + t``, a shifted exponent ``exp(a + t)``)
    therefore differs from it by more than 2^-2048 relatively, which 2,112
    bits see.  Only a construction whose parts cancel to far below 10^-600
    (a Taylor remainder such as ``exp(t) - 1 - t - t²/2``) could hide a
    difference; no value a person computes by hand does.
    """
    from tutor.exact.numbers import NegInf, Rat, Surd

    load()
    if isinstance(true, NegInf):
        return False
    if isinstance(true, Rat) and v.lin is not None:
        return v.fraction == true.q
    if isinstance(true, Surd) and v.lin is not None:
        if len(v.lin) != 1:
            return False
        n, c = v.lin[0]
        return (c > 0) == (true.q > 0) and c * c * n == true.q * true.q * true.t
    if not overlap(v.iv, _true_ball(true, WORK_PREC - 16)):
        return False
    zero = isinstance(true, Rat) and true.q == 0
    ball = _true_ball(true, CHECK_PREC + 32)
    work = CHECK_PREC + 64
    while work <= MAX_EVAL_PREC:
        got = v.interval(work)
        if zero:
            return contains_zero(got)
        if narrow(got, CHECK_PREC):
            return overlap(got, ball)
        work *= 2
    return False



def _true_ball(true: Any, prec: int) -> Interval:
    """An interval around an exact engine value at about ``prec`` bits; its width is
    estimated from two evaluations 40 bits apart (softmax sums may cancel)."""
    from tutor.exact.numbers import Rat, Surd

    if isinstance(true, Rat):
        return iv_q(true.q, prec)
    if isinstance(true, Surd):
        return _I.mpi_mul(iv_q(true.q, prec), iv_root(true.t, prec), prec)
    digits = int(prec * 0.30103) + 5
    a = true.precise_value(digits)._mpf_
    b = true.precise_value(digits + 12)._mpf_
    L = _L
    slack = L.mpf_add(L.mpf_abs(L.mpf_sub(a, b, prec + 16)), L.mpf_shift(L.mpf_abs(b), -prec), prec + 16, L.round_ceiling)
    return L.mpf_sub(b, slack, prec + 16, L.round_floor), L.mpf_add(b, slack, prec + 16, L.round_ceiling)


#: The work of each operation of the parser at :data:`WORK_PREC` bits (see :func:`budget`).
_OPERATION_WORK = {add: _op_cost("+", WORK_PREC),
                   mul: _op_cost("*", WORK_PREC), div: _op_cost("/", WORK_PREC),
                   sqrt: _op_cost("sqrt", WORK_PREC), power: _op_cost("pow", WORK_PREC),
                   exp: _op_cost("exp", WORK_PREC), cos: _op_cost("cos", WORK_PREC),
                   sin: _op_cost("sin", WORK_PREC)}


def charge_operation(fn: Any) -> None:
    """Charge one operation of the parser (``add``, ``exp`` ...) with a result that is not
    rational to the budgets in force (a rational's work is bounded by its digits)."""
    _charge(_OPERATION_WORK.get(fn, _op_cost("exp", WORK_PREC)))
