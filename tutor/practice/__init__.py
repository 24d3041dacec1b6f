"""Practice: what a session asks (the plan: an exercise, its steps, where it
resumes), the drill as one pure state machine (``handle(state, event) ->
(state, effects)``) parameterised by what it asks (a worked solution's steps
here, the online softmax's quantities in ``flash``), the one line reader every
drill uses with Ctrl-C at any moment, and the session loop that feeds the
machine, records each answer and shows the effects on a view it is given.

The caller reads a line, turns it into an event with :func:`read_event` (or
sends :class:`EndOfInput` / :class:`Interrupt`), calls :func:`handle`, and
carries out the effects in order -- an :class:`~tutor.store.attempt.Attempt` goes
to the progress store (before the feedback that follows it is shown, so an
answer is saved before the learner reads the verdict), everything else to the
renderer, and the last :class:`Prompt` says what to ask next.

* :mod:`.events` -- what the learner does (:class:`Answer`, :class:`Command`, …);
* :mod:`.effects` -- what the caller is asked to do (:class:`Wrong`,
  :class:`Summary`, … and the shared :class:`~tutor.store.attempt.Attempt`);
* :mod:`.machine` -- the one state machine of every drill that asks for typed
  values: its :class:`State`, its transitions (:func:`handle`) and what a client
  supplies (:class:`Drill`: what is asked);
* :mod:`.worked` -- its client for the steps of a worked solution
  (:func:`start`, :class:`Present`); :mod:`tutor.flash.drill` is the other;
* :mod:`.grading` -- how a typed answer is judged, entry by entry, by the one rule.

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
    Opening,
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
from .machine import Drill, Settings, State, begin, handle
from .worked import Present, Worked, head_suffix, inputs_for, result_name, select, start, step_label

__all__ = [
    "COMMANDS",
    "Answer",
    "Answered",
    "Attempt",
    "Cell",
    "Coarse",
    "Command",
    "Correct",
    "Drill",
    "Effect",
    "EndOfInput",
    "Event",
    "Graded",
    "Help",
    "Hint",
    "Interrupt",
    "Invalid",
    "Mode",
    "Opening",
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
    "Worked",
    "Wrong",
    "begin",
    "blocked_cells",
    "grade",
    "handle",
    "head_suffix",
    "inputs_for",
    "read_event",
    "result_name",
    "select",
    "step_label",
    "start",
]
