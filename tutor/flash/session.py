"""A practice session of the online softmax (``practice EXERCISE --tiled``): read a line, feed
:mod:`tutor.flash.drill`, show its effects.

The loop of :mod:`tutor.practice.session` without the progress store: the same
reading (a terminal with line editing, or piped text echoed after its
prompt), the same Ctrl-C (at any moment it ends the session with its
summary, whatever SIGINT's disposition was), the same end of input.  Nothing
is recorded: the intro and the summary say so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console

    from ..exercise.record import Exercise
    from .drill import State
    from .walk import TiledRow


def practise_tiled(ex: Exercise, row: TiledRow, *, chosen: bool, tolerance: float | None, stream: TextIO,
                   console: Console) -> State:
    """Run the session over ``row`` (of ``ex``) to its end; returns the final state.

    ``chosen``: the row was named (``--query``), so the intro does not say why it was picked.
    """
    from ..practice import EndOfInput, Interrupt, read_event
    from ..practice.session import ctrl_c_interrupts, read_line, reading
    from ..render.tiled_practice import TiledPracticeRenderer
    from . import drill as tq

    renderer = TiledPracticeRenderer(console, ex)
    with ctrl_c_interrupts():
        state, effects = tq.start(row, tolerance)
        try:
            renderer.intro(row, chosen)
        except KeyboardInterrupt:
            console.print()
            state, effects = tq.handle(state, Interrupt())
        interactive = reading(stream)
        while True:
            try:
                prompt = None
                for effect in effects:
                    if isinstance(effect, tq.Prompt):
                        prompt = effect
                    else:
                        renderer.show(effect)
                if state.done or prompt is None:
                    return state
                line = read_line(renderer.prompt(prompt), stream, console, renderer.echo, interactive)
                state, effects = tq.handle(state, EndOfInput() if line is None else read_event(line))
            except KeyboardInterrupt:
                console.print()
                state, effects = tq.handle(state, Interrupt())
