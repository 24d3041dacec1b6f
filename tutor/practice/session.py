"""A practice session: read a line, feed the machine, carry out its effects, record every answer.

The library below ``attn-tutor practice``; the command in
:mod:`tutor.cli.practice` parses options, plans the session
(:mod:`tutor.practice.plan`) and calls :func:`practise`.  Everything a
session touches is passed in (rich's ``Prompt(stream=...)`` idea): the
stream answers are read from, the :class:`View` it shows the drill's effects
on (:class:`tutor.render.quiz.QuizRenderer`), the open
:class:`tutor.store.Store`, and a ``report`` callable for the one error that
must reach stderr while another error ends the session.  The state machine
itself is the pure :mod:`tutor.practice.machine`; lines are read by
:class:`tutor.practice.terminal.Lines`; this module is the loop around them
(:func:`drive`, which runs the sessions of the machine's clients: practice,
and ``practice --tiled``, :mod:`tutor.flash.session`, with no store; the mock
interview's one hand calculation, :mod:`tutor.drills.interview`, is one try
and has a loop of its own).

A session reads one line at a time (a terminal, with line editing, or any
piped text: one answer per line), turns it into an event, and carries out the
effects -- each :class:`tutor.store.attempt.Attempt` committed to the progress store
before the feedback after it is shown.  Ctrl-C and the end of input end the
session with its summary.  Ctrl-C does so at any moment of the session -- at
the prompt, while an answer is graded (that answer is dropped, every one
graded before it is saved), while feedback is shown -- and a write to the
store is never cut in half (:func:`deferred_interrupt`).  It does so however the process was started:
a background job of a non-interactive shell (``make test &``, ``nohup``)
starts with SIGINT ignored, so :func:`practise` installs Python's own SIGINT
handler for the duration of the session and restores the one it found
(:func:`tutor.practice.terminal.ctrl_c_interrupts`).

An answer the store cannot take (the file locked by another program past the
busy timeout, a full disk) does not end the session: a one-line warning says
it is not saved yet, and a :class:`tutor.store.Recorder` keeps it and writes
it with a later answer or at the end.  When a write finds the file damaged,
nothing more is written to it and the warning says so (the session goes on).
Only when some answers still cannot be written at the end does the session
end with a :class:`tutor.base.errors.StoreError` naming how many, after its
summary, which marks each answer not saved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from ..base.errors import StoreError
from ..base.messages import plural
from ..store.attempt import Attempt
from ..store.recorder import why_unsaved
from .effects import Prompt, Summary
from .events import EndOfInput, Event, Interrupt, read_event
from .terminal import Lines, ctrl_c_interrupts, deferred_interrupt

if TYPE_CHECKING:
    from rich.console import Console

    from ..exercise.record import Exercise
    from ..store import Recorder, Store
    from .effects import Effect
    from .machine import Settings, State
    from .plan import Plan

#: The machine's transition, as a loop calls it (:func:`tutor.practice.handle`, looked up when the session starts).
Handle = Callable[["State[Any]", Event], "tuple[State[Any], list[Effect]]"]


class Shows(Protocol):
    """What a loop shows a drill's effects on."""

    console: Console

    def show(self, effect: Effect) -> None: ...
    def prompt(self, p: Prompt[Any]) -> str: ...
    def echo(self, prompt: str, line: str) -> None: ...


class View(Shows, Protocol):
    """What a practice session shows its effects on (:class:`tutor.render.quiz.QuizRenderer` is one)."""

    notes: dict
    why: dict
    unsaved: Sequence[Attempt]

    def intro(self, ex: Exercise, total: int, settings: Settings, opening: Sequence[str] = ()) -> None: ...
    def line(self, text: str, style: str = "", indent: int = 0) -> None: ...
    def unsaved_warning(self, reason: str, lost: bool = False) -> None: ...


def practise(plan: Plan, settings: Settings, *, store: Store, stream: TextIO, view: View,
             report: Callable[[str], None]) -> State[Any]:
    """Run the practice session ``plan`` (:mod:`tutor.practice.plan`) to its end; returns the final state.

    The session and each answer are recorded in ``store`` (open, left open),
    under ``plan``'s selection (so that an interrupted session can be
    resumed) and marked complete when every step asked was finished.  Raises
    :class:`StoreError` after the summary when answers could not be saved by
    the end; when another error breaks the session off, what is still waiting
    is saved if it can be, else ``report`` gets the sentence saying how many
    answers are lost, and the error goes on.
    """
    from ..mistakes.invisible import notes
    from ..steps import KINDS
    from ..store import Recorder
    from . import handle  # the package's, looked up now (a test may stand in for it)
    from .worked import select, start

    sol = plan.sol
    total = len(select(sol, plan.steps, plan.head)) - plan.begin_at
    renderer, console = view, view.console
    renderer.notes = notes(sol)  # said after a right answer at a step whose check cannot catch a core mistake
    renderer.why = {s.key: KINDS[s.id].why(s, sol.exercise) for s in sol.steps}  # said once a step is answered or shown
    with ctrl_c_interrupts():
        state, effects = start(sol, settings, steps=plan.steps, head=plan.head, begin_at=plan.begin_at,
                               record_as=plan.exercise_id)
        try:  # from here on, Ctrl-C at any moment ends the session with its summary
            with deferred_interrupt():
                session = store.begin_session(plan.exercise_id, mode=settings.mode, tolerance=settings.tolerance,
                                              steps=plan.steps_key, head=plan.head, begin_at=plan.begin_at)
                recorder = Recorder(store, session)
            renderer.intro(sol.exercise, total, settings, plan.opening)
        except KeyboardInterrupt:
            console.print()
            state, effects = handle(state, Interrupt())
        finished = False
        try:
            keeper = Keeper(recorder, renderer)
            state = drive(state, effects, renderer, Lines(stream, console, renderer.echo), handle, keeper)
            finished = True
        finally:
            with deferred_interrupt():
                if not recorder.flush() and not finished:  # broken off by another error: still save what is
                    unsaved = plural("practice.unsaved.end", len(recorder.pending), reason=why_unsaved(recorder))
                    report(unsaved)  # waiting, and never lose it silently
                if not recorder.pending:
                    try:  # recorder.session: a new id if the file was made again
                        store.end_session(recorder.session, complete=finished and _complete(state))
                    except StoreError:  # only the end time is lost: the session reads as one that was killed
                        pass
    if recorder.pending:
        raise StoreError(plural("practice.unsaved.end", len(recorder.pending), reason=why_unsaved(recorder)))
    return state


def _complete(state: State[Any]) -> bool:
    """Whether every step of a finished session was given or finished (right, shown, skipped)."""
    return state.done and all(r.outcome is not None for r in state.results)


@dataclass
class Keeper:
    """Where a recording session's answers go: ``recorder``, and the ``view`` its warnings are said on."""

    recorder: Recorder
    view: View

    def save(self, waiting: list[Effect]) -> None:
        """Save the answer first in ``waiting``, taken off the list together; a warning when it waits."""
        with deferred_interrupt():
            attempt = waiting.pop(0)
            assert isinstance(attempt, Attempt)
            saved = self.recorder.add(attempt)
        self._notice()
        if not saved:
            self.view.unsaved_warning(why_unsaved(self.recorder), lost=self.recorder.lost)

    def summary(self) -> None:
        """Before the summary: the last chance to save what is still waiting; the view learns what is not."""
        with deferred_interrupt():
            self.recorder.flush()
        self._notice()
        self.view.unsaved = tuple(self.recorder.pending)

    def interrupted(self, waiting: Sequence[Effect]) -> None:
        """Ctrl-C: the answers graded before it, not saved yet, saved like the others."""
        for effect in waiting:
            if isinstance(effect, Attempt):
                with deferred_interrupt():
                    self.recorder.add(effect)

    def _notice(self) -> None:
        if self.recorder.notice is not None:  # the file was deleted or replaced: say where the answers are
            self.view.line(self.recorder.notice, "bold yellow")
            self.recorder.notice = None


def drive(state: State[Any], effects: Sequence[Effect], view: Shows, lines: Lines, handle: Handle,
          keeper: Keeper | None = None) -> State[Any]:
    """Run a session to its end: carry out ``effects``, read the next line, ``handle`` it, repeat.

    Lines come from ``lines`` (:class:`~tutor.practice.terminal.Lines`).  Every
    answer (an :class:`~tutor.store.attempt.Attempt` effect, made only by a client
    that records) goes to ``keeper``.  Ctrl-C at any moment ends the session with
    its summary.  Returns the final state.
    """
    while True:
        waiting = list(effects)  # the effects not carried out yet: on Ctrl-C, the answers among them are saved
        try:
            prompt = None
            while waiting:
                effect = waiting[0]
                if isinstance(effect, Attempt):
                    assert keeper is not None  # a client that records is run with a keeper
                    keeper.save(waiting)
                    continue
                waiting.pop(0)
                if isinstance(effect, Prompt):
                    prompt = effect
                else:
                    if isinstance(effect, Summary) and keeper is not None:
                        keeper.summary()
                    view.show(effect)
            if state.done or prompt is None:
                return state
            line = lines.read(view.prompt(prompt))
            state, effects = handle(state, EndOfInput() if line is None else read_event(line))  # Ctrl-C here
        except KeyboardInterrupt:  # drops the answer being graded
            lines.console.print()
            if keeper is not None:
                keeper.interrupted(waiting)
            state, effects = handle(state, Interrupt())
