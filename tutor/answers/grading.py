"""Grading a parsed entry against the true value: within a tolerance, exactly, or within its rounding.

>>> from tutor.answers import parse_entry
>>> close(parse_entry("0.45"), 0.4502), close(parse_entry("9/20"), 0.4502)
(True, False)
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

from .entry import Entry
from .values import equals_exact

if TYPE_CHECKING:
    from tutor.exactnum import Exact

#: The quiz's default: accepts any answer rounded to 2 decimal places.
DEFAULT_TOLERANCE = 0.005 + 1e-12
#: Exact entries must match to this relative (and absolute) precision.
EXACT_REL_TOL = 1e-9
EXACT_ABS_TOL = 1e-12


def close(entry: Entry, expected: float, *, tolerance: float = DEFAULT_TOLERANCE, exact: Exact | None = None) -> bool:
    """Whether ``entry`` is a right answer for ``expected``.

    Infinite values match only the same infinity.  An entry with decimals
    passes within ``tolerance``.  An exact entry claims exactly its value:
    given the true value ``exact`` (from :mod:`tutor.exactnum`) it must equal
    it (:func:`equals_exactly`: ``1000000001/1000000000`` is not 1); given
    only the float ``expected``, it must equal that float to
    :data:`EXACT_REL_TOL` (relative; :data:`EXACT_ABS_TOL` near zero), which
    is what a float can tell.

    >>> from tutor.answers import parse_entry
    >>> close(parse_entry("0.45"), 0.4502), close(parse_entry("9/20"), 0.4502)
    (True, False)
    """
    v = entry.value()
    if math.isnan(expected):
        return False
    if entry.is_exact and exact is not None:
        return equals_exactly(entry, exact)
    if math.isinf(v) or math.isinf(expected):
        return v == expected
    if entry.is_exact:
        return math.isclose(v, expected, rel_tol=EXACT_REL_TOL, abs_tol=EXACT_ABS_TOL)
    return abs(v - expected) <= tolerance


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
    >>> from tutor.exactnum import Rat
    >>> equals_exactly(parse_entry("1000000001/1000000000"), Rat(Fraction(1)))
    False
    >>> equals_exactly(parse_entry("2/2"), Rat(Fraction(1))), equals_exactly(parse_entry("1.0"), Rat(Fraction(1)))
    (True, True)
    """
    from tutor.exactnum import NegInf

    if entry.infinity:
        return entry.infinity < 0 and isinstance(true, NegInf)
    assert entry.number is not None
    return equals_exact(entry.number, true)


def rounding_interval(entry: Entry) -> tuple[float, float]:
    """The values ``entry`` claims: ``v ± 0.5·10^-places`` for a decimal
    written to ``places`` places, else the zero-width ``(v, v)``.

    Only a lone decimal literal carries a rounding claim; an expression that
    contains decimals (``1.41/2``) claims its value exactly.

    >>> from tutor.answers import parse_entry
    >>> rounding_interval(parse_entry("0.45")), rounding_interval(parse_entry("1/2"))
    ((0.445, 0.455), (0.5, 0.5))
    """
    exact = entry.fraction
    if entry.places is None or exact is None:
        v = entry.value()
        return v, v
    half = Fraction(1, 2) * Fraction(10) ** -entry.places
    return float(exact - half), float(exact + half)

