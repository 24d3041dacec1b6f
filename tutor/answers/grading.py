"""The one grading rule, for ``practice`` and ``check`` alike: :func:`judge`.

**The rule.**  An entry claims an interval, and it is right when the true
value lies in it:

* a decimal written to ``p`` places claims ``value ± 0.5·10⁻ᵖ``: ``0.45``
  claims [0.445, 0.455], ``0.4458`` claims [0.44575, 0.44585] (``1e-3`` is
  written to 3 places, ``1.5e2`` to -1).  ``0.1044`` for 0.1084 is wrong
  however close a fixed tolerance would call it;
* an expression that contains decimals (``1.41/2``) claims its value ± half
  a unit in the last place of its least precise decimal;
* an exact form -- an integer, a fraction, ``2√2``, ``1/(1 + 2*exp(√2))``,
  ``-inf`` -- claims exactly its value, and must be exactly equal
  (:func:`equals_exactly`);
* an entry a mask fixes (``-inf`` scores, zero weights) must be exactly it,
  whatever is written: it is not computed, so no rounding applies.

``--tolerance T`` (``practice`` and ``check``) replaces the interval of every
decimal by ``value ± T``; exact forms and masked entries stay exact.

**How coarse an answer may be** is each command's policy, on top of the
rule (:func:`practice_verdict`, and :mod:`tutor.audit.check`):

* ``practice`` asks for at least :data:`MIN_PLACES` decimal places for a
  value that is not an integer: a coarser decimal whose interval contains the
  true value (``0.1`` for 0.1084) gets "give at least 2 decimals" -- neither
  right nor wrong, and not recorded as an attempt.  A whole number is an exact
  form in ``practice`` as in ``check``: ``1`` for 0.9965 is wrong (with the note
  that an exact form must be exact), ``0`` for cos(2) too (the rope trial, F20:
  ``practice`` called them coarse while ``check`` called them wrong);
* ``check`` audits what was published at any precision: the rule alone gives
  the verdict, and entries written to fewer than 2 places are noted.

**Truncation.**  A wrong decimal that is the true value cut (not rounded) to
the places written -- ``0.10`` for 0.1084, whose rounding is ``0.11`` -- is
named: the grading note ``truncated_decimal`` (a note of the grading, not a
misconception of :mod:`tutor.mistakes.diagnose`).  Its sibling, the value
rounded away from zero when its nearest is towards it (``0.4459`` for
0.445808, whose rounding is ``0.4458``), is ``rounded_away_decimal``.

>>> from tutor.answers import parse_entry
>>> from tutor.exact.numbers import Rat
>>> from fractions import Fraction
>>> judge(parse_entry("0.45"), Rat(Fraction(9, 20))).right, judge(parse_entry("0.44"), Rat(Fraction(9, 20))).right
(True, False)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Literal

from .entry import Entry
from .values import equals_exact

if TYPE_CHECKING:
    from tutor.exact.numbers import Exact

#: ``practice`` asks for at least this many decimal places for a value that is not an integer.
MIN_PLACES = 2
#: The key of the grading note for a decimal truncated instead of rounded.
TRUNCATED = "truncated_decimal"
#: The key of the grading note for a decimal rounded away from zero when its nearest is towards zero.
ROUNDED_AWAY = "rounded_away_decimal"
#: Within this of the true value, a wrong exact form or masked entry gets a note saying why it is
#: still wrong (an exact form must be exact; a masked weight is exactly 0).
NEAR = 0.005

Verdict = Literal["right", "wrong", "coarse"]


@dataclass(frozen=True)
class Judgement:
    """One entry judged by the rule.

    ``right``: the true value lies in the claim (exact forms: equal);
    ``lo``, ``hi``: the claim as floats (``lo == hi`` for an exact form);
    ``places``: the decimal places the claim is written to (``None`` for an
    exact form, and under ``--tolerance``); ``coarse``: the true value is not
    an integer and the entry is a decimal written to fewer than :data:`MIN_PLACES`
    places (never an exact form: a whole number claims exactly itself); ``truncated``: wrong, and the true value cut
    towards zero at ``places`` gives exactly the entry (its rounding does
    not); ``rounded_away``: wrong, and the true value rounded away from
    zero at ``places`` gives exactly the entry (its nearest is towards
    zero); ``near``: wrong, an exact form or masked entry within
    :data:`NEAR` of the true value.
    """

    right: bool
    lo: float
    hi: float
    places: int | None = None
    coarse: bool = False
    truncated: bool = False
    near: bool = False
    rounded_away: bool = False


def judge(entry: Entry, true: Exact, *, tolerance: float | None = None, strict: bool = False) -> Judgement:
    """``entry`` judged against the true value ``true`` (a :mod:`tutor.exact.numbers` value) by the rule.

    ``tolerance`` replaces the interval of a decimal (``--tolerance``);
    ``strict`` marks an entry a mask fixes (exactly equal, whatever is
    written).  The comparison is exact: the bounds are fractions and the true
    value is compared at 40 significant digits (:meth:`Exact.precise_value`),
    so a value on the edge of a claim (0.125 for ``0.12``) is inside it.
    """
    v = entry.value()
    value = true.value()
    if entry.infinity or math.isinf(value) or strict or entry.is_exact:
        right = equals_exactly(entry, true)
        near = not right and math.isfinite(v) and math.isfinite(value) and abs(v - value) <= NEAR
        return Judgement(right, v, v, None, False, False, near)  # exact: a whole number too, never "coarse"
    assert entry.number is not None
    written = entry.fraction
    places = entry.places if entry.places is not None else least_places(entry.text)
    if tolerance is not None:
        half = Fraction(tolerance)
        places = None
    elif places is None:  # no decimal literal found (cannot happen for an inexact entry): claim the value
        half = Fraction(0)
    else:
        half = Fraction(1, 2) * Fraction(10) ** -places
    if written is None:  # an expression with decimals and an irrational value: its float, widened by an ulp
        mid = Fraction(v)
        lo, hi = mid - half - Fraction(abs(v) * 2.0 ** -52), mid + half + Fraction(abs(v) * 2.0 ** -52)
    else:
        lo, hi = written - half, written + half
    right = _inside(true, lo, hi)
    coarse = places is not None and places < MIN_PLACES and not _is_integer(true)
    way = (_misrounded(true, written, places) if not right and places is not None and written is not None
           and entry.places is not None else None)
    return Judgement(right, float(lo), float(hi), places, coarse, way == "cut", rounded_away=way == "away")


def practice_verdict(j: Judgement) -> Verdict:
    """``practice``'s policy on a :class:`Judgement`: ``coarse`` ("give at least 2 decimals",
    neither right nor wrong) for a decimal written to fewer than :data:`MIN_PLACES` places for a
    value that is not an integer whose claim holds it, else ``right`` or ``wrong`` by the rule (an exact
    form, a whole number included, is right only when exactly equal, as in ``check``)."""
    if j.coarse and j.right:  # a decimal that holds the value
        return "coarse"
    return "right" if j.right else "wrong"


def claim(entry: Entry, *, tolerance: float | None = None) -> tuple[float, float]:
    """The interval ``entry`` claims, as floats (what :func:`judge` compares with; for the checks
    that compare whole matrices): see the module docstring.  ``(v, v)`` for an exact form."""
    v = entry.value()
    if entry.is_exact or entry.infinity:
        return v, v
    places = entry.places if entry.places is not None else least_places(entry.text)
    if tolerance is not None:
        return v - tolerance, v + tolerance
    if places is None:
        return v, v
    half = Fraction(1, 2) * Fraction(10) ** -places
    written = entry.fraction
    if written is None:
        return float(Fraction(v) - half), float(Fraction(v) + half)
    return float(written - half), float(written + half)


def least_places(text: str) -> int | None:
    """The places of the least precise decimal literal in ``text`` (``1.41/2`` -> 2; ``1.5e2`` -> -1),
    ``None`` when it has none.

    >>> least_places("1.41/2.5"), least_places("2*sqrt(2)")
    (1, None)
    """
    from .grammar import decimal_places

    found = decimal_places(text)
    return min(found) if found else None


def equals_exactly(entry: Entry, true: Exact) -> bool:
    """Whether the value of ``entry`` (exact or with decimals: ``0.0`` is 0) is exactly ``true``.

    ``-inf`` equals only a masked score; rationals compare as fractions; a
    one-term surd such as ``3*sqrt(2)/4`` compares with a surd by its square;
    the rest (softmax values, entries with ``exp``) compare at a precision
    that shows every part of the entry -- see
    :func:`.values.equals_exact` for the bounds and the argument
    that distinct values do not collide.

    >>> from fractions import Fraction
    >>> from tutor.answers import parse_entry
    >>> from tutor.exact.numbers import Rat
    >>> equals_exactly(parse_entry("1000000001/1000000000"), Rat(Fraction(1)))
    False
    >>> equals_exactly(parse_entry("2/2"), Rat(Fraction(1))), equals_exactly(parse_entry("1.0"), Rat(Fraction(1)))
    (True, True)
    """
    from tutor.exact.numbers import NegInf

    if entry.infinity:
        return entry.infinity < 0 and isinstance(true, NegInf)
    if isinstance(true, NegInf):
        return False
    assert entry.number is not None
    return equals_exact(entry.number, true)


# --- helpers ---------------------------------------------------------------------------------


def _is_integer(true: Exact) -> bool:
    from tutor.exact.numbers import Rat

    return isinstance(true, Rat) and true.q.denominator == 1


def _rational(true: Exact) -> Fraction:
    """``true`` as a fraction: exactly for a rational, else its value at 40 significant digits
    (an irrational value is never on the edge of a decimal claim; 40 digits tell which side it is on)."""
    from tutor.exact.numbers import Rat

    if isinstance(true, Rat):
        return true.q
    x = true.precise_value(40)
    man, exp = x.man_exp  # |x| = man · 2^exp, exactly: mpmath's man_exp is unsigned
    return (-1 if x < 0 else 1) * Fraction(int(man)) * Fraction(2) ** int(exp)


def _inside(true: Exact, lo: Fraction, hi: Fraction) -> bool:
    """Whether ``lo <= true <= hi`` (see :func:`_rational`)."""
    return lo <= _rational(true) <= hi


def _misrounded(true: Exact, written: Fraction, places: int) -> Literal["cut", "away"] | None:
    """How ``written`` is ``true``'s other neighbour at ``places`` places, when it is: ``"cut"`` towards
    zero, ``"away"`` from it (``true`` not itself a decimal of that many places; the caller knows ``written``
    is not ``true``'s rounding)."""
    q = _rational(true)
    scale = Fraction(10) ** places
    cut = Fraction(math.trunc(q * scale)) / scale
    if cut == q:
        return None
    away = cut + (Fraction(1) if q > 0 else Fraction(-1)) / scale
    return "cut" if written == cut else "away" if written == away else None
