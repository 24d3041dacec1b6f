"""Text helpers shared by the renderers: pretty notation, decimals, wrapping (the ASCII fallback is :mod:`tutor.base.ascii`)."""

from __future__ import annotations

import re

from ..base.decimals import pretty as pretty_decimal
from ..base.textsafe import lines
from ..exact.numbers import notation

#: Answer-grammar text -> notation: ``2*exp(-sqrt(2))`` -> ``2·exp(−√2)`` (:func:`tutor.exact.numbers.notation`).
pretty = notation


def reflow(text: str) -> str:
    """Join the lines of each paragraph (Markdown semantics); paragraphs stay apart."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(line.strip() for line in lines(p)) for p in paragraphs)  # not at U+2028: see lines()


#: ``v`` to ``places`` decimals in notation (``−0.5000``, ``−∞``; never ``-0``): :func:`tutor.base.decimals.pretty`.
decimal = pretty_decimal


def is_plain(exact: str) -> bool:
    """True when the exact text says all there is and no decimal is needed: an integer or ``-inf``."""
    return exact == "-inf" or exact.lstrip("-").isdigit()


def pack(items: list[str], width: int, sep: str = ", ") -> str:
    """``items`` joined by ``sep``, broken into lines of at most ``width`` characters *between*
    items, never inside one: a list of cell labels ``(t1, t2), (t3, t1)`` wraps at a label's end,
    not after ``(t1,``.  An item longer than ``width`` stands on a line of its own.

    >>> print(pack(["(I, I)", "(I, tea)", "(like, like)"], 18))
    (I, I), (I, tea),
    (like, like)
    """
    lines: list[str] = []
    for n, item in enumerate(items):
        piece = item + (sep.rstrip() if n < len(items) - 1 else "")
        if lines and len(lines[-1]) + 1 + len(piece) <= width:
            lines[-1] += " " + piece
        else:
            lines.append(piece)
    return "\n".join(lines)

