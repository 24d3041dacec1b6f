"""Practice: what a session asks (the plan: an exercise, its steps, where it
resumes), the drill as a pure state machine (``handle(state, event) ->
(state, effects)``), the one line reader every drill uses with Ctrl-C at any
moment, and the session loop that feeds the machine, records each answer and
shows the effects on a view it is given.

The caller reads a line, turns it into an event with :func:`read_event` (or
sends :class:`EndOfInput` / :class:`Interrupt`), calls :func:`handle`, and
carries out the effects in order -- an :class:`~tutor.store.attempt.Attempt` goes
to the progress store (before the feedback that follows it is shown, so an
answer is saved before the learner reads the verdict), everything else to the
renderer, and the last :class:`Prompt` says what to ask next.

* :mod:`.events` -- what the learner does (:class:`Answer`, :class:`Command`, …);
* :mod:`.effects` -- what the caller is asked to do (:class:`Present`,
  :class:`Wrong`, :class:`Summary`, … and the shared :class:`~tutor.store.attempt.Attempt`);
* :mod:`.machine` -- the session's :class:`State` and its transitions
  (:func:`start`, :func:`handle`);
* :mod:`.grading` -- how an entry of a step is judged: the cells a mask
  fixes exactly (:func:`blocked_cells`), mistakes that give the same numbers.

>>> from tutor.exercise.catalog import resolve; from tutor.steps import solve
>>> state, effects = start(solve(resolve("single-head-3x4")), steps=("q",))
>>> state, effects = handle(state, read_event("1 1; 2 2; 2 2"))
>>> [type(e).__name__ for e in effects]
['Attempt', 'Correct', 'Summary']
"""

from tutor.store.attempt import Attempt, Outcome

from ..steps import blocked_cells  # the cells a mask fixes exactly: graded strictly
from .effects import (
    Answered,
    Cell,
    Coarse,
    Correct,
    Effect,
    Help,
    Hint,
    Invalid,
    Mode,
    Present,
    Prompt,
    Result,
    Reveal,
    RowByRow,
    ShapeInfo,
    Skipped,
    Summary,
    Wrong,
)
from .events import COMMANDS, Answer, Command, EndOfInput, Event, Interrupt, read_event
from .grading import Graded, grade
from .machine import Settings, State, handle, inputs_for, result_name, select, start

__all__ = [
    "COMMANDS",
    "Answer",
    "Answered",
    "Attempt",
    "Cell",
    "Coarse",
    "Command",
    "Correct",
    "Effect",
    "EndOfInput",
    "Event",
    "Graded",
    "Help",
    "Hint",
    "Interrupt",
    "Invalid",
    "Mode",
    "Outcome",
    "Present",
    "Prompt",
    "Result",
    "Reveal",
    "RowByRow",
    "Settings",
    "ShapeInfo",
    "Skipped",
    "State",
    "Summary",
    "Wrong",
    "blocked_cells",
    "grade",
    "handle",
    "inputs_for",
    "read_event",
    "result_name",
    "select",
    "start",
]
