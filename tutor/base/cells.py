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
