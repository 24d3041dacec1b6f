"""Text for a stream that cannot encode it: the one ASCII fallback, and the one test of a UTF-8 stream.

A terminal or pipe whose encoding is not UTF-8 (``PYTHONIOENCODING=ascii``,
``LC_ALL=C``) gets the notation spelled in ASCII (``√2·Kᵀ`` ->
``sqrt(2)*K^T``) rather than ``?`` or an encoding error.
"""

from __future__ import annotations

import codecs
import re
import unicodedata


def is_utf(encoding: str | None) -> bool:
    """Whether a stream of ``encoding`` writes every character (UTF-8, -16, -32, and GB18030, China's Unicode
    encoding); ``None`` counts as UTF-8."""
    try:
        name = codecs.lookup(encoding or "utf-8").name
        return name.startswith("utf") or name == "gb18030"
    except LookupError:
        return False


_ASCII = {
    "√": "sqrt", "·": "*", "ᵀ": "^T", "×": "x", "→": "->", "Σ": "sum", "−∞": "-inf", "−": "-",
    "∞": "inf", "≈": "~", "≤": "<=", "≥": ">=", "≠": "!=", "—": "--", "–": "-", "…": "...",
    "█": "#", "▓": "#", "▒": "+", "░": ".", "•": "*", "✓": "ok", "✗": "x", "‘": "'", "’": "'",
    "“": '"', "”": '"', "╶": "-", "─": "-", "│": "|", "├": "+", "└": "+",
    "∘": "(.)", "∂": "d", "δ": "delta",  # the backward pass: elementwise product, partial derivatives
    # RoPE's angle, the norms' epsilon, a paper's section, a bound, the paged blocks' rounding, squares
    # and cubes (NFKD would write x² as x2), a division, a sum over a group, CJK's comma and full stop
    # (tests/test_ascii_fallback.py holds that every character the catalogs and the steps use is here
    # or NFKD-spelled in ASCII, never a \u escape)
    "θ": "theta", "ε": "eps", "§": "sec. ", "±": "+/-", "⌈": "ceil(", "⌉": ")", "⌊": "floor(", "⌋": ")",
    "²": "^2", "³": "^3", "÷": "/", "⋅": "*", "∈": " in ", "∑": "sum", "、": ", ", "。": ". ",
    "\ufffd": "?",  # an undecodable byte, as the line reader shows it
}
_ASCII_RE = re.compile("|".join(sorted(map(re.escape, _ASCII), key=len, reverse=True)))


def asciify(text: str) -> str:
    """``√2 · Kᵀ → [3×2]`` -> ``sqrt2 * K^T -> [3x2]``; any other non-ASCII character loses its accents
    (``é`` -> ``e``) or, with nothing left in ASCII, is written as its code point (``х`` -> ``\\u0445``)."""
    text = re.sub(r"(\d)√", r"\1*√", text)
    text = re.sub(r"√(\w+)", r"sqrt(\1)", text)
    text = re.sub(r"(?<=[A-Za-z0-9])θ", "*θ", text)  # R(mθ) -> R(m*theta), as m·θ_0 -> m*theta_0
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
