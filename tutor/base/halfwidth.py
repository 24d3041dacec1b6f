"""What a Chinese input method types, read as the ASCII it stands for: one character for one.

With a Chinese input method in its Chinese mode, the keys of an answer type
full-width forms: digits and letters (``１``, ``Ａ``), punctuation (``，``,
``；``, ``（）``, ``－``, ``．``, ``／``), the ideographic space, and for ``.``,
``[`` and ``]`` the ideographic full stop ``。`` and the lenticular brackets
``【】``.  :func:`halfwidth` maps each to its ASCII form (U+FF01…U+FF5E are
U+0021…U+007E shifted; NFKC would also change ``²`` and others, which the
answer grammar reads as they are); every other character is left alone, and
the text keeps its length, so a column an error names is still the one typed.

Pure: no I/O, usable from every layer.
"""

from __future__ import annotations

__all__ = ["halfwidth"]

_TABLE = {0xFF01 + i: 0x21 + i for i in range(0x5E)} | {
    0x3000: ord(" "),  # ideographic space
    0x3002: ord("."),  # 。 ideographic full stop: the "." key in Chinese mode
    0x3010: ord("["),  # 【 the "[" key in Chinese mode
    0x3011: ord("]"),  # 】 the "]" key
}


def halfwidth(text: str) -> str:
    """``text`` with full-width forms (and ``。【】``, the ideographic space) as ASCII, one character for one.

    >>> halfwidth("［［１，１］，［２，２］］"), halfwidth("１ １；２ ２"), halfwidth("（１＋√２）／２"), halfwidth("０。５")
    ('[[1,1],[2,2]]', '1 1;2 2', '(1+√2)/2', '0.5')
    """
    return text.translate(_TABLE)
