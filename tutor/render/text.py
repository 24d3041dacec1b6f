"""Text helpers shared by the renderers: pretty notation, ASCII fallback, decimals."""

from __future__ import annotations

import re
import unicodedata

from ..base.decimals import pretty as pretty_decimal
from ..base.textsafe import lines
from ..exact.numbers import notation
from ..exercise.record import Exercise
from ..steps import KINDS, Step

_ASCII = {
    "√": "sqrt", "·": "*", "ᵀ": "^T", "×": "x", "→": "->", "Σ": "sum", "−∞": "-inf", "−": "-",
    "∞": "inf", "≈": "~", "≤": "<=", "≥": ">=", "≠": "!=", "—": "--", "–": "-", "…": "...",
    "█": "#", "▓": "#", "▒": "+", "░": ".", "•": "*", "✓": "ok", "✗": "x", "‘": "'", "’": "'",
    "“": '"', "”": '"', "╶": "-", "─": "-", "│": "|", "├": "+", "└": "+",
    "∘": "(.)", "∂": "d", "δ": "delta",  # the backward pass: elementwise product, partial derivatives
}
_ASCII_RE = re.compile("|".join(sorted(map(re.escape, _ASCII), key=len, reverse=True)))


def asciify(text: str) -> str:
    """``√2 · Kᵀ → [3×2]`` -> ``sqrt2 * K^T -> [3x2]``; any other non-ASCII character loses its accents
    (``é`` -> ``e``) or, with nothing left in ASCII, is written as its code point (``х`` -> ``\\u0445``)."""
    text = re.sub(r"(\d)√", r"\1*√", text)
    text = re.sub(r"√(\w+)", r"sqrt(\1)", text)
    text = _ASCII_RE.sub(lambda m: _ASCII[m.group(0)], text)
    if text.isascii():
        return text
    return "".join(ch if ch.isascii() else _ascii_char(ch) for ch in text)


def _ascii_char(ch: str) -> str:
    """One non-ASCII character in ASCII: its compatibility decomposition without the accents, else ``\\uXXXX``."""
    base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
    if base and base.isascii() and base.isprintable():
        return base
    return ch.encode("ascii", "backslashreplace").decode("ascii")


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


def why(step: Step, ex: Exercise) -> list[str]:
    """The sentences that say why a step exists (and what a fully masked row gives), for every renderer."""
    return KINDS[step.id].why(step, ex)


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
