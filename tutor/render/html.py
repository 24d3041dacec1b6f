"""Standalone pages: the SVG picture of the rich output, the blank worksheet layout, and the HTML page.

The SVG export is exactly what ``attn-tutor explain`` prints in a terminal,
recorded by a :class:`rich.console.Console` (``record=True``) that writes to
a string, then exported with ``export_svg``.  The HTML page
(:func:`export_html`, :mod:`.page`) is a semantic document built from the
outline.  A worksheet (``blank=True``) keeps the layout - inputs, formulas,
shapes, the reasons - and leaves every step's table empty (and drops the
heatmap of the weights, which would give them away).  Returns text; nothing
here prints.
"""

from __future__ import annotations

import io
import re

from rich.console import Console

from ..steps import Solution, Step
from .console import make_console
from .rich import RichRenderer

EXPORT_WIDTH = 100  # columns of an exported page, whatever the terminal's width
BLANK_WIDTH = 8  # characters of writing space per cell of a worksheet


class BlankRichRenderer(RichRenderer):
    """The rich layout with every step's result left empty: a worksheet.  Its outline
    (:func:`tutor.render.outline.outline` with ``blank``) has no arithmetic (it is what the learner
    writes), no notes ("K·Qᵀ = Q·Kᵀ here" would give part of the answer away) and no heatmap (the
    shades would show the answer)."""

    blank = True

    def step_cells(self, step: Step) -> tuple[list[list[str]], list[tuple[str, list[tuple[str, str]]]]]:
        """Empty cells, wide enough to write in; nothing listed below the table."""
        rows, cols = step.shape
        return [[" " * BLANK_WIDTH] * cols for _ in range(rows)], []


def renderer(console: Console, precision: int = 4, blank: bool = False, *, brief: bool = False) -> RichRenderer:
    """The rich renderer for an answer key, or for a worksheet when ``blank`` (``brief``: no arithmetic)."""
    return (BlankRichRenderer if blank else RichRenderer)(console, precision, brief=brief)


def recording_console(width: int = EXPORT_WIDTH) -> Console:
    """A console that records what is printed on it, writes nowhere else, and has a fixed width.

    The same kind as the terminal's (:func:`tutor.render.console.make_console`):
    no markup, and no raw control character in what it records; no terminal, and no
    environment variable read (what is exported does not depend on them).
    """
    return make_console(None, record=True, file=io.StringIO(), width=width)


def record(sol: Solution, *, head: int | None = None, precision: int = 4, blank: bool = False,
           width: int = EXPORT_WIDTH, brief: bool = False) -> Console:
    """A recording console holding the rich output of ``sol`` (a worksheet when ``blank``)."""
    console = recording_console(width)
    renderer(console, precision, blank, brief=brief).solution(sol, head)
    return console


def export_html(sol: Solution, *, head: int | None = None, precision: int = 4, blank: bool = False,
                brief: bool = False, student: str | None = None) -> str:
    """A standalone HTML page of the worked solution (a worksheet when ``blank``, ``student``'s when given):
    :func:`tutor.render.page.page`."""
    from .page import page

    return page(sol, head=head, precision=precision, blank=blank, brief=brief, student=student)


def export_svg(sol: Solution, *, head: int | None = None, precision: int = 4, blank: bool = False,
               brief: bool = False) -> str:
    """A standalone SVG image of the rich output, titled with the exercise's title."""
    svg = record(sol, head=head, precision=precision, blank=blank, brief=brief).export_svg(title=sol.exercise.local_title)
    return _offline(svg)


#: rich's ``@font-face`` rules, which fetch Fira Code from cdnjs.
_FONT_FACE = re.compile(r"\s*@font-face \{[^}]*\}")


def _offline(svg: str) -> str:
    """``svg`` without the rules that fetch a font from the network, falling back on local monospace fonts.

    An exported page is opened offline (a class handout, an archive), and
    nothing in it should ask the network for anything.
    """
    return _FONT_FACE.sub("", svg).replace("font-family: Fira Code, monospace;",
                                           "font-family: 'Fira Code', Menlo, 'DejaVu Sans Mono', Consolas, monospace;")
