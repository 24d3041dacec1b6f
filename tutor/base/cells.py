"""Widths in terminal cells: the one way text is measured and padded into columns.

A terminal shows a CJK character (``中``), a full-width form (``Ａ``) and most
emoji in two cells, a combining mark in none; ``len`` counts code points, so a
column padded with ``str.ljust`` or ``f"{s:<{w}}"`` comes out ragged as soon as
a label is Chinese.  Everything that lines text up in columns measures it with
:func:`width` and pads it with :func:`pad` / :func:`pad_left`, which count cells
as rich does when it prints (``rich.cells.cell_len``).

Pure: no I/O, usable from every layer.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable

from rich.cells import cell_len


def width(text: str) -> int:
    """The cells ``text`` takes in a terminal (one line of it): ``width("中文")`` is 4, ``width("ab")`` 2.

    >>> width("Q·Kᵀ"), width("注意力"), width("")
    (4, 6, 0)
    """
    return cell_len(text)


def pad(text: str, cells: int) -> str:
    """``text`` followed by spaces to fill ``cells`` cells (left-aligned; unchanged when it is as wide already).

    >>> pad("分数", 6) + "|", pad("ab", 6) + "|", pad("toolong", 3)
    ('分数  |', 'ab    |', 'toolong')
    """
    return text + " " * max(cells - cell_len(text), 0)


def pad_left(text: str, cells: int) -> str:
    """Spaces then ``text`` to fill ``cells`` cells (right-aligned, as numbers in a column).

    >>> "|" + pad_left("分数", 6), "|" + pad_left("1.5", 6)
    ('|  分数', '|   1.5')
    """
    return " " * max(cells - cell_len(text), 0) + text


def widest(texts: Iterable[str]) -> int:
    """The width in cells of the widest of ``texts`` (an iterable of str), 0 for none.

    >>> widest(["a", "中文", "abc"]), widest([])
    (4, 0)
    """
    return max((cell_len(s) for s in texts), default=0)


#: Punctuation a line never starts with (it stays after the character before it) and never ends with.
_CLOSING = set("，。、；：！？）」』”’》〉】,.;:!?)]}")
_OPENING = set("（「『“‘《〈【([{")
_CHUNKS = re.compile(r"\S+")


def _pieces(word: str) -> list[str]:
    """``word`` (no spaces) cut where a line may break inside it: before each wide character (a CJK text
    has no spaces), never before closing punctuation nor after opening; a run of narrow characters stays whole."""
    out: list[str] = []
    for ch in word:
        if out and (cell_len(ch) > 1 or cell_len(out[-1][-1]) > 1) and ch not in _CLOSING \
                and out[-1][-1] not in _OPENING:
            out.append(ch)
        elif out:
            out[-1] += ch
        else:
            out.append(ch)
    return out


def wrap(text: str, cells: int, *, initial: str = "", subsequent: str = "", break_long_words: bool = True,
         break_on_hyphens: bool = True) -> list[str]:
    """``text`` in lines of at most ``cells`` cells (each after ``initial``, the later ones after
    ``subsequent``), broken between words and, in CJK text, between characters.

    Text whose every character takes one cell is wrapped by :func:`textwrap.wrap` with the same options,
    as it always was; other text is measured in cells, a piece wider than a line standing alone on one.

    >>> wrap("注意力分数除以缩放因子", 12, initial="# ", subsequent="# ")
    ['# 注意力分数', '# 除以缩放因', '# 子']
    >>> wrap("two words", 6)
    ['two', 'words']
    """
    if cell_len(text + initial + subsequent) == len(text + initial + subsequent):
        return textwrap.wrap(text, cells, initial_indent=initial, subsequent_indent=subsequent,
                             break_long_words=break_long_words, break_on_hyphens=break_on_hyphens)
    if not text.strip():
        return []
    lines: list[str] = []
    line, lead = initial, initial
    for m in _CHUNKS.finditer(text):
        for n, piece in enumerate(_pieces(m.group())):
            glue = " " if n == 0 and line != lead else ""
            if line != lead and cell_len(line + glue + piece) > cells:
                lines.append(line)
                line = lead = subsequent
                glue = ""
            line += glue + piece
    if line != lead:
        lines.append(line)
    return lines
