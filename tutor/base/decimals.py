"""Decimals as text: the one place a float becomes the digits a learner reads.

Pure: no I/O.  Every renderer, hint, diagnosis and report formats numbers
through these functions, so a rule (never ``-0``, places ≤ 0 round to tens,
a value that is not finite named) holds everywhere.
"""

from __future__ import annotations

import math


def fixed(v: float, places: int) -> str:
    """``v`` rounded to ``places`` decimal places, as text; never ``-0``.

    ``places`` may be 0 or negative (an entry such as ``1e1`` is written to
    -1 places: to the tens): ``fixed(12.5, 2) == "12.50"``,
    ``fixed(12.5, 0) == "12"``, ``fixed(17.0, -1) == "20"``.  ``inf``,
    ``-inf`` and ``nan`` for the values that are not finite.
    """
    if not math.isfinite(v):
        return "nan" if math.isnan(v) else ("-inf" if v < 0 else "inf")
    text = f"{v:.{places}f}" if places > 0 else f"{round(v, places):.0f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def trimmed(v: float, places: int = 4) -> str:
    """``5``, ``0.4458``, ``-inf``: at most ``places`` decimals, trailing zeros dropped, never ``-0``.

    How a learner writes a number: a whole number has no decimals.
    """
    if not math.isfinite(v):
        return fixed(v, places)
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    text = fixed(v, places).rstrip("0").rstrip(".") if places > 0 else fixed(v, places)
    return "0" if text in ("-0", "") else text


def legible(v: float, places: int) -> str:
    """:func:`fixed`, except that a value that is not 0 but rounds to 0 at ``places`` keeps two
    significant digits in scientific notation, so that it never reads as 0.

    ``legible(1.23e-5, 4) == "1.2e-5"``, ``legible(-4e-9, 2) == "-4.0e-9"``,
    ``legible(0.1084, 4) == "0.1084"``, ``legible(0.0, 4) == "0.0000"``.
    """
    text = fixed(v, places)
    if math.isfinite(v) and v != 0 and float(text) == 0:
        mantissa, exponent = f"{v:.1e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return text


def pretty(v: float, places: int, *, keep_small: bool = False) -> str:
    """:func:`fixed` in notation: ``−0.5000`` with a minus sign, ``−∞`` for a masked score.

    ``keep_small``: a value that is not 0 but rounds to 0 is written as :func:`legible` does (``1.2e−5``).
    """
    if math.isinf(v):
        return "−∞" if v < 0 else "∞"
    return (legible(v, places) if keep_small else fixed(v, places)).replace("-", "−")


def tex(v: float, places: int, *, keep_small: bool = False) -> str:
    r""":func:`fixed` for LaTeX: ``-0.5000``, ``-\infty`` for a masked score.

    ``keep_small``: a value that is not 0 but rounds to 0 is written ``1.2 \times 10^{-5}``.
    """
    if math.isinf(v):
        return r"-\infty" if v < 0 else r"\infty"
    text = legible(v, places) if keep_small else fixed(v, places)
    if "e" in text:
        mantissa, exponent = text.split("e")
        return rf"{mantissa} \times 10^{{{exponent}}}"
    return text
