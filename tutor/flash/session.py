"""A practice session of the online softmax (``practice EXERCISE --tiled``): read a line, feed
:mod:`tutor.flash.drill`, show its effects.

The loop of :mod:`tutor.practice.session` without the progress store: the same
reading (:class:`tutor.practice.terminal.Lines`: a terminal with line
editing, or piped text echoed after its prompt), the same Ctrl-C (at any
moment it ends the session with its summary, whatever SIGINT's disposition
was), the same end of input.  Nothing is recorded: the intro and the
summary say so.  The view it shows effects on is passed in
(:class:`tutor.render.tiled_practice.TiledPracticeRenderer` is one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TextIO

from ..practice.events import EndOfInput, Interrupt, read_event
from ..practice.terminal import Lines, ctrl_c_interrupts
from . import drill as tq

if TYPE_CHECKING:
    from rich.console import Console

    from ..exercise.record import Exercise
    from .drill import Effect, Prompt, State
    from .walk import TiledRow


class View(Protocol):
    """What the session shows its effects on."""

    console: Console

    def intro(self, row: TiledRow, chosen: bool) -> None: ...
    def show(self, effect: Effect) -> None: ...
    def prompt(self, p: Prompt) -> str: ...
    def echo(self, prompt: str, line: str) -> None: ...


def practise_tiled(ex: Exercise, row: TiledRow, *, chosen: bool, tolerance: float | None, stream: TextIO,
                   view: View) -> State:
    """Run the session over ``row`` (of ``ex``) to its end, showing it on ``view``; returns the final state.

    ``chosen``: the row was named (``--query``), so the intro does not say why it was picked.
    """
    console = view.console
    with ctrl_c_interrupts():
        state, effects = tq.start(row, tolerance)
        try:
            view.intro(row, chosen)
        except KeyboardInterrupt:
            console.print()
            state, effects = tq.handle(state, Interrupt())
        lines = Lines(stream, console, view.echo)
        while True:
            try:
                prompt = None
                for effect in effects:
                    if isinstance(effect, tq.Prompt):
                        prompt = effect
                    else:
                        view.show(effect)
                if state.done or prompt is None:
                    return state
                line = lines.read(view.prompt(prompt))
                state, effects = tq.handle(state, EndOfInput() if line is None else read_event(line))
            except KeyboardInterrupt:
                console.print()
                state, effects = tq.handle(state, Interrupt())
