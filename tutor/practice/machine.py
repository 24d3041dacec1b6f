"""The practice drill as a pure state machine: ``handle(state, event) -> (state, effects)``.

A session walks the chosen steps in the order of the solution (head 0's steps,
then head 1's, ..., then ``concat`` and ``output``).  In ``matrix`` mode an
answer is a whole matrix on one line (``1 1; 2 2; 2 2``), or row by row: a
first line holding one row of a taller matrix starts row-by-row input, which
an empty line ends.  In ``entry`` mode every entry is asked for in turn, and
after a wrong answer only the wrong entries are asked again.  Typed text goes
through :mod:`tutor.answers` only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from tutor.answers import TRUNCATED, Entry, parse_entry, parse_matrix, parse_row
from tutor.base.errors import AnswerError
from tutor.base.messages import t
from tutor.steps import KINDS, Input, Solution, Step, worked_entry
from tutor.store.attempt import Attempt, Outcome

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
from .events import Command, EndOfInput, Event, Interrupt
from .grading import alike, grade


@dataclass(frozen=True)
class Settings:
    """How a session grades: ``mode`` (``matrix`` or ``entry``) and ``tolerance``, the interval
    ``--tolerance`` gives every decimal (``None``: the rounding rule of :mod:`tutor.answers.grading`)."""

    mode: Mode = "matrix"
    tolerance: float | None = None


# --- state ------------------------------------------------------------------------------


@dataclass(frozen=True)
class State:
    """Where a session is.  Build with :func:`start`; never mutate (use :func:`handle`)."""

    sol: Solution
    steps: tuple[Step, ...]
    settings: Settings = Settings()
    index: int = 0
    attempts: int = 0  # wrong answers at the current step
    hints: int = 0  # hints given at the current step
    diagnoses: tuple[str, ...] = ()  # diagnosis keys at the current step
    last_wrong: tuple[Cell, ...] = ()
    rows: Answered = ()  # matrix mode: rows typed so far, row by row
    grid: tuple[tuple[Entry | None, ...], ...] = ()  # entry mode: entries typed so far
    todo: tuple[Cell, ...] = ()  # entry mode: cells still to ask
    results: tuple[Result, ...] = ()
    done: bool = False
    multi_head: bool = field(default=False)
    record_as: str = ""  # the exercise id answers are recorded under (fresh numbers: the original's)
    begin_at: int = 0  # the steps before this index are given, not asked

    @property
    def step(self) -> Step:
        """The step being asked."""
        return self.steps[self.index]


def select(sol: Solution, steps: Sequence[str] | None = None, head: int | None = None) -> tuple[Step, ...]:
    """The steps of ``sol`` a session asks, in order: only ``steps`` (ids) if given, only
    ``head``'s per-head steps if given (layer steps are kept, as in ``explain --head``).
    A step grouped query heads share (``k``, ``v`` and the K/V gradients of grouped K/V
    heads: one matrix per K/V head) is asked once, under the first head of its group,
    unless the session is on one head."""
    chosen = []
    for s in sol.steps:
        if steps is not None and s.id not in steps:
            continue
        if head is not None and s.head is not None and s.head != head:
            continue
        if head is None and s.kv_head is not None and s.head != s.shared[0]:
            continue  # the same matrix as under the group's first head: asked there
        chosen.append(s)
    return tuple(chosen)


def start(sol: Solution, settings: Settings = Settings(), *, steps: Sequence[str] | None = None,
          head: int | None = None, begin_at: int = 0, record_as: str | None = None) -> tuple[State, list[Effect]]:
    """A new session over :func:`select`'s steps, and its first effects.

    ``begin_at`` is the 0-based index of the first step asked: the steps
    before it are given (a session resumed, or started at the weakest step;
    they count as ``given`` in the summary).  ``record_as`` is the exercise id
    the answers are recorded under (default ``sol``'s own; a session on fresh
    numbers drawn from an exercise records them under that exercise's id).
    """
    chosen = select(sol, steps, head)
    begin_at = max(0, min(begin_at, len(chosen)))
    given = tuple(Result(s, "given") for s in chosen[:begin_at])
    state = State(sol, chosen, settings, index=begin_at, results=given, multi_head=sol.exercise.num_heads > 1,
                  record_as=record_as or sol.exercise.id, begin_at=begin_at)
    if begin_at >= len(chosen):
        return replace(state, index=max(len(chosen) - 1, 0), done=True), [Summary(given, "done")]
    state = _begin(state)
    return state, [_present(state), _prompt(state)]


def handle(state: State, event: Event) -> tuple[State, list[Effect]]:
    """The next state and the effects of ``event``.  A finished state ignores every event."""
    if state.done:
        return state, []
    if isinstance(event, Interrupt):
        return _finish(_drop_pending(state), "interrupt")
    if isinstance(event, EndOfInput):
        effects: list[Effect] = []
        if state.rows:  # a script that ends without the blank line after its last row
            state, effects = _grade(state, state.rows, _rows_text(state.rows))
            effects = [e for e in effects if not isinstance(e, (Present, Prompt, Summary))]
            if state.done:
                return state, effects + [Summary(state.results, "done")]
        state, end = _finish(_drop_pending(state), "end")
        return state, effects + end
    if isinstance(event, Command):
        return _command(state, event.name)
    if state.settings.mode == "entry":
        return _entry(state, event.text)
    return _matrix(state, event.text)


# --- commands ---------------------------------------------------------------------------------


def _command(state: State, name: str) -> tuple[State, list[Effect]]:
    step = state.step
    if name == "quit":
        return _finish(_drop_pending(state), "quit")
    if name == "help":
        return state, [Help(state.settings.mode), _prompt(state)]
    if name == "shape":
        return state, [ShapeInfo(step), _prompt(state)]
    if name == "hint":
        level = state.hints + 1
        state = replace(state, hints=level)
        if level == 1:
            return state, [Hint(step, 1, formula=step.formula), _prompt(state)]
        if level == 2:
            i, j = _hint_cell(state)
            return state, [Hint(step, 2, cell=(i, j), work=worked_entry(state.sol, step, i, j)), _prompt(state)]
        return state, [Hint(step, level), _prompt(state)]
    outcome: Literal["shown", "skipped"] = "shown" if name == "show" else "skipped"
    record = _attempt(state, outcome, state.attempts + 1)
    shown: Effect = Reveal(step) if outcome == "shown" else Skipped(step)
    state = replace(state, results=state.results + (Result(step, outcome, state.attempts, state.hints, state.diagnoses),))
    state, more = _advance(state)
    return state, [record, shown] + more


def _hint_cell(state: State) -> Cell:
    """The entry a hint works out: the one being asked (entry mode), else the first one
    answered wrong, else the first with a finite value."""
    if state.todo:
        return state.todo[0]
    if state.last_wrong:
        return state.last_wrong[0]
    value = state.step.value
    for i, row in enumerate(value):
        for j, v in enumerate(row):
            if math.isfinite(v):
                return (i, j)
    return (0, 0)


# --- answers -----------------------------------------------------------------------------------


def _matrix(state: State, text: str) -> tuple[State, list[Effect]]:
    step = state.step
    rows_needed = step.shape[0]
    if not state.rows:
        if not text.strip():
            return state, [_prompt(state)]
        stripped = text.strip()
        if stripped.startswith("[[") and "]]" not in stripped:  # the first line of a pasted [[...],\n [...]]
            return _add_row(state, stripped[1:])
        try:
            m = parse_matrix(text)
        except AnswerError as err:
            return state, [Invalid(str(err)), _prompt(state)]
        if len(m) == 1 and rows_needed > 1:
            state = replace(state, rows=m)
            return state, [RowByRow(len(m)), _prompt(state)]
        return _grade(state, m, text.strip())
    if not text.strip():
        return _grade(state, state.rows, _rows_text(state.rows))
    return _add_row(state, text)


def _add_row(state: State, text: str) -> tuple[State, list[Effect]]:
    """One more row of a row-by-row answer; a row ending in ``]]`` ends the matrix."""
    number = len(state.rows) + 1
    stripped = text.strip()
    ends = stripped.endswith("]]")
    if ends:
        stripped = stripped[:-1]
    try:
        row = parse_row(stripped)
    except AnswerError as err:
        return state, [Invalid(t("practice.bad_row", row=number, message=str(err))), _prompt(state)]
    if state.rows and len(row) != len(state.rows[0]):
        message = t("matrix.ragged", row=number, found=len(row), expected=len(state.rows[0]))
        return state, [Invalid(message), _prompt(state)]
    state = replace(state, rows=state.rows + (row,))
    if ends or len(state.rows) == state.step.shape[0]:  # the last row: graded at once, no empty line needed
        return _grade(state, state.rows, _rows_text(state.rows))
    effects: list[Effect] = [RowByRow(len(state.rows))] if number == 1 else []
    return state, effects + [_prompt(state)]


def _entry(state: State, text: str) -> tuple[State, list[Effect]]:
    if not text.strip():
        return state, [_prompt(state)]
    i, j = state.todo[0]
    step = state.step
    try:
        entry = parse_entry(text)
    except AnswerError as err:
        message = t("practice.bad_entry", row=step.row_labels[i], col=step.col_labels[j], message=str(err))
        return state, [Invalid(message), _prompt(state)]
    grid = tuple(tuple(entry if (r, c) == (i, j) else e for c, e in enumerate(row)) for r, row in enumerate(state.grid))
    state = replace(state, grid=grid, todo=state.todo[1:])
    if state.todo:
        return state, [_prompt(state)]
    answered: Answered = tuple(tuple(e for e in row if e is not None) for row in grid)
    return _grade(state, answered, "; ".join(", ".join(e.text for e in row) for row in answered))


def _rows_text(rows: Answered) -> str:
    return "; ".join(", ".join(e.text for e in row) for row in rows)


def _grade(state: State, answer: Answered, text: str) -> tuple[State, list[Effect]]:
    """Grade a complete answer by the one rule (:func:`.grading.grade`): right, wrong (explained by
    :func:`tutor.mistakes.diagnose.diagnose_claim`), or written too coarsely -- then nothing is recorded and
    the coarse entries are asked again."""
    step = state.step
    attempt = state.attempts + 1
    g = grade(state.sol, step, answer, state.settings.tolerance)
    if g.right:
        record = _attempt(state, "correct", attempt, answer=text)
        state = replace(state, results=state.results + (
            Result(step, "correct", state.attempts, state.hints, state.diagnoses),))
        state, more = _advance(state)
        effects: list[Effect] = [record, Correct(step, attempt)]
        return state, effects + more
    if g.wrong == ():  # only entries too coarse: neither right nor wrong, nothing recorded
        state = _retry(replace(state, rows=()), answer, g.coarse)
        return state, [Coarse(step, answer, g.coarse, state.todo), _prompt(state)]
    from tutor.mistakes.diagnose import diagnose_claim

    # the cells grading refused are the ones to explain (never called right here)
    diagnoses = tuple(diagnose_claim(state.sol, step.id, step.head, g.claim, wrong=g.wrong))
    # one slipped entry that is only an exact form of a rounded value: the note on it says it better
    # (as in check); a masked key's near-zero weight keeps its "should be 0" sentence
    diagnoses = tuple(d for d in diagnoses if not (d.key == "single_entry" and set(d.cells) <= set(g.inexact)))
    notes = (TRUNCATED,) if g.truncated else ()
    record = _attempt(state, "wrong", attempt, diagnoses=tuple(d.key for d in diagnoses), notes=notes, answer=text)
    keys = state.diagnoses + tuple(d.key for d in diagnoses[:1] if d.key not in state.diagnoses)
    state = replace(state, attempts=attempt, diagnoses=keys, last_wrong=g.wrong or (), rows=())
    if state.settings.mode == "entry":
        assert g.wrong is not None  # entry mode always answers the step's shape
        state = _retry(state, answer, g.wrong + g.coarse)
    wrong_effect = Wrong(step, answer, g.wrong, g.inexact, diagnoses, attempt, state.todo, g.blocked,
                         alike(state.sol, step, diagnoses), g.coarse, g.truncated)
    return state, [record, wrong_effect, _prompt(state)]


def _retry(state: State, answer: Answered, cells: Sequence[Cell]) -> State:
    """Entry mode: ask ``cells`` again (in order), keeping the other entries of ``answer``."""
    if state.settings.mode != "entry":
        return state
    todo = tuple(sorted(cells))
    bad = set(todo)
    grid = tuple(tuple(None if (i, j) in bad else e for j, e in enumerate(row)) for i, row in enumerate(answer))
    return replace(state, grid=grid, todo=todo)


# --- moving on --------------------------------------------------------------------------------------


def _begin(state: State) -> State:
    """Reset the per-step fields for the step at ``state.index``."""
    rows, cols = state.step.shape
    state = replace(state, attempts=0, hints=0, diagnoses=(), last_wrong=(), rows=(), grid=(), todo=())
    if state.settings.mode == "entry":
        state = replace(state, grid=tuple((None,) * cols for _ in range(rows)),
                        todo=tuple((i, j) for i in range(rows) for j in range(cols)))
    return state


def _advance(state: State) -> tuple[State, list[Effect]]:
    index = state.index + 1
    if index >= len(state.steps):
        state = replace(state, index=index - 1, done=True)
        return state, [Summary(state.results, "done")]
    state = _begin(replace(state, index=index))
    return state, [_present(state), _prompt(state)]


def _drop_pending(state: State) -> State:
    return replace(state, rows=(), todo=(), grid=())


def _finish(state: State, reason: Literal["done", "quit", "end", "interrupt"]) -> tuple[State, list[Effect]]:
    reached = {(r.step.id, r.step.head) for r in state.results}
    current = state.step if not state.done else None  # the step being asked keeps its tries and hints
    results = state.results + tuple(
        Result(s, None, state.attempts, state.hints, state.diagnoses, seen=True) if s is current else Result(s)
        for s in state.steps if (s.id, s.head) not in reached)
    order = {(s.id, s.head): n for n, s in enumerate(state.steps)}
    results = tuple(sorted(results, key=lambda r: order[r.step.id, r.step.head]))
    state = replace(state, done=True, results=results)
    return state, [Summary(results, reason)]


def _attempt(state: State, outcome: Outcome, attempt: int, *, diagnoses: tuple[str, ...] = (),
             notes: tuple[str, ...] = (), answer: str | None = None) -> Attempt:
    """The effect that saves the current step's ``attempt``-th try (its hints so far included), a
    review of the skill (step, exercise family) in the schedule."""
    step = state.step
    return Attempt(state.record_as, step.id, step.head, outcome, attempt, state.hints, diagnoses, answer,
                   notes=notes, family=state.sol.exercise.family)


def _prompt(state: State) -> Prompt:
    if state.settings.mode == "entry" and state.todo:
        return Prompt(state.step, state.multi_head, cell=state.todo[0])
    if state.rows:
        return Prompt(state.step, state.multi_head, row=len(state.rows) + 1)
    return Prompt(state.step, state.multi_head)


# --- what a step needs ------------------------------------------------------------------------------


def result_name(step: Step) -> str:
    """The name of a step's result: ``Q``, ``scores``, ``head_1``, ``output``."""
    return step.name


def inputs_for(sol: Solution, step: Step) -> tuple[Input, ...]:
    """The matrices ``step`` is computed from, as the learner has them (the right values
    of the earlier steps): e.g. ``Q`` and ``K`` for ``scores``, ``X``, ``W_Q`` (and ``b_Q``) for ``q``."""
    return KINDS[step.id].given(sol, step)


def _present(state: State) -> Present:
    return Present(state.step, state.index + 1, len(state.steps), inputs_for(state.sol, state.step), state.multi_head)



