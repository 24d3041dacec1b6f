"""A practice session of the online softmax (``practice EXERCISE --tiled``): the practice loop
(:func:`tutor.practice.session.drive`) run over :mod:`tutor.flash.drill`, with no progress store.

The same reading (:class:`tutor.practice.terminal.Lines`: a terminal with line
editing, or piped text echoed after its prompt), the same Ctrl-C (at any
moment it ends the session with its summary, whatever SIGINT's disposition
was), the same end of input.  Nothing is recorded: the intro and the
summary say so.  The view it shows effects on is passed in
(:class:`tutor.render.tiled_practice.TiledPracticeRenderer` is one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TextIO

from ..practice.events import Interrupt
from ..practice.session import Shows, drive
from ..practice.terminal import Lines, ctrl_c_interrupts
from . import drill

if TYPE_CHECKING:
    from ..practice.machine import State
    from .walk import TiledRow


class View(Shows, Protocol):
    """What the session shows its effects on."""

    def intro(self, row: TiledRow, chosen: bool) -> None: ...


def practise_tiled(row: TiledRow, *, chosen: bool, tolerance: float | None, stream: TextIO, view: View) -> State[Any]:
    """Run the session over ``row`` to its end, showing it on ``view``; returns the final state.

    ``chosen``: the row was named (``--query``), so the intro does not say why it was picked.
    """
    handle = drill.handle  # looked up now (a test may stand in for it)
    with ctrl_c_interrupts():
        state, effects = drill.start(row, tolerance)
        try:
            view.intro(row, chosen)
        except KeyboardInterrupt:
            view.console.print()
            state, effects = handle(state, Interrupt())
        return drive(state, effects, view, Lines(stream, view.console, view.echo), handle)
