"""Text helpers shared by the renderers: pretty notation, decimals, wrapping (the ASCII fallback is :mod:`tutor.base.ascii`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from ..base.cells import width as cells
from ..base.cjk import join_lines
from ..base.decimals import pretty as pretty_decimal
from ..base.textsafe import lines
from ..exact.numbers import notation

#: Answer-grammar text -> notation: ``2*exp(-sqrt(2))`` -> ``2·exp(−√2)`` (:func:`tutor.exact.numbers.notation`).
pretty = notation


def reflow(text: str) -> str:
    """Join the lines of each paragraph (Markdown semantics: a space between them, none between two
    Chinese characters, :func:`tutor.base.cjk.join_lines`); paragraphs stay apart."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(join_lines(lines(p)) for p in paragraphs)  # not at U+2028: see lines()


#: ``v`` to ``places`` decimals in notation (``−0.5000``, ``−∞``; never ``-0``): :func:`tutor.base.decimals.pretty`.
decimal = pretty_decimal


def is_plain(exact: str) -> bool:
    """True when the exact text says all there is and no decimal is needed: an integer or ``-inf``."""
    return exact == "-inf" or exact.lstrip("-").isdigit()


def pack(items: list[str], width: int, sep: str = ", ") -> str:
    """``items`` joined by ``sep``, broken into lines of at most ``width`` cells *between*
    items, never inside one: a list of cell labels ``(t1, t2), (t3, t1)`` wraps at a label's end,
    not after ``(t1,``.  An item longer than ``width`` stands on a line of its own.

    >>> print(pack(["(I, I)", "(I, tea)", "(like, like)"], 18))
    (I, I), (I, tea),
    (like, like)
    """
    lines: list[str] = []
    for n, item in enumerate(items):
        piece = item + (sep.rstrip() if n < len(items) - 1 else "")
        if lines and cells(lines[-1]) + 1 + cells(piece) <= width:
            lines[-1] += " " + piece
        else:
            lines.append(piece)
    return "\n".join(lines)


def shell_lines(argv: Sequence[str], width: int) -> list[str]:
    r"""The command ``argv`` (its words as the program receives them) as a POSIX shell reads it, in lines of
    at most ``width`` cells (a Chinese character takes two): each word quoted where it needs to be (:func:`shlex.quote`), every line
    but the last ending with a backslash, which the shell removes with the newline.  Broken between words
    where they fit; a word wider than a line is cut into pieces quoted one by one, which the shell joins
    into the one word (a backslash-newline inside quotes would be kept as written).

    >>> shell_lines(["attn-tutor", "practice", "single-head-asym-3x4"], 24)
    ['attn-tutor practice \\', 'single-head-asym-3x4']
    >>> shell_lines(["attn-tutor", "practice", "decode-two-tokens-alignment"], 20)
    ['attn-tutor \\', 'practice \\', 'decode-two-tokens-a\\', 'lignment']
    >>> shell_lines(["attn-tutor", "practice", "/tmp/my exercises/mine.yaml"], 20)
    ['attn-tutor \\', 'practice \\', "'/tmp/my exercises'\\", '/mine.yaml']
    """
    import shlex

    lines: list[str] = []
    line = ""
    for n, raw in enumerate(argv):
        room = width if n == len(argv) - 1 else width - 2  # a line another follows ends with " \"
        word = shlex.quote(raw)
        joined = f"{line} {word}" if line else word
        if cells(joined) <= room:
            line = joined
            continue
        if line:  # the word starts the next line
            lines.append(line + " \\")
        if cells(word) <= room:
            line = word
            continue
        piece = ""  # wider than a line: pieces of the raw word, each quoted, each line ending with a backslash
        for ch in raw:
            if piece and cells(shlex.quote(piece + ch)) + 1 > width:
                lines.append(shlex.quote(piece) + "\\")
                piece = ""
            piece += ch
        line = shlex.quote(piece)
        if cells(line) > room:  # the last piece must leave room for " \" when a word follows
            lines.append(shlex.quote(piece[:-2]) + "\\")
            line = shlex.quote(piece[-2:])
    return lines + [line]


def print_command(console: Console, argv: Sequence[str]) -> None:
    """A command to copy (its words as the program receives them), on a line of its own after 2 spaces;
    too wide for the console, continued over lines as a shell reads it (:func:`shell_lines`), so that it
    is still copied whole and no line is wider than the console."""
    lines = shell_lines(argv, console.width - 2)
    if len(lines) == 1:
        console.print(Text("  " + lines[0]), soft_wrap=True)
    else:
        for part in shell_lines(argv, console.width):
            console.print(Text(part), soft_wrap=True)
