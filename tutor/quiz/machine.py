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

from tutor.answers import DEFAULT_TOLERANCE, Entry, parse_entry, parse_matrix, parse_row
from tutor.attempt import Attempt, Outcome
from tutor.errors import AnswerError
from tutor.messages import t
from tutor.steps import KINDS, Input, Solution, Step, worked_entry

from .effects import (
    Answered,
    Cell,
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
from .grading import alike, blocked_cells, right


@dataclass(frozen=True)
class Settings:
    """How a session grades: ``mode`` (``matrix`` or ``entry``) and the decimal ``tolerance``."""

    mode: Mode = "matrix"
    tolerance: float = DEFAULT_TOLERANCE


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

    @property
    def step(self) -> Step:
        """The step being asked."""
        return self.steps[self.index]


def select(sol: Solution, steps: Sequence[str] | None = None, head: int | None = None) -> tuple[Step, ...]:
    """The steps of ``sol`` a session asks, in order: only ``steps`` (ids) if given, only
    ``head``'s per-head steps if given (layer steps are kept, as in ``explain --head``)."""
    chosen = []
    for s in sol.steps:
        if steps is not None and s.id not in steps:
            continue
        if head is not None and s.head is not None and s.head != head:
            continue
        chosen.append(s)
    return tuple(chosen)


def start(sol: Solution, settings: Settings = Settings(), *, steps: Sequence[str] | None = None,
          head: int | None = None) -> tuple[State, list[Effect]]:
    """A new session over :func:`select`'s steps, and its first effects."""
    chosen = select(sol, steps, head)
    state = State(sol, chosen, settings, multi_head=sol.exercise.num_heads > 1)
    if not chosen:
        return replace(state, done=True), [Summary((), "done")]
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
    if ends:
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
    """Grade a complete answer: right entries by :func:`tutor.answers.close` (mask-fixed entries
    exactly, see :func:`blocked_cells`), wrong ones explained by :func:`tutor.diagnose.diagnose`."""
    step = state.step
    tol = state.settings.tolerance
    attempt = state.attempts + 1
    shape = (len(answer), len(answer[0]))
    wrong: tuple[Cell, ...] | None = None
    strict = blocked_cells(state.sol, step)
    if shape == step.shape:
        wrong = tuple((i, j) for i, row in enumerate(answer) for j, e in enumerate(row)
                      if not right(e, step.value[i][j], step.exact[i][j], (i, j) in strict, tol))
        if not wrong:
            record = _attempt(state, "correct", attempt, answer=text)
            state = replace(state, results=state.results + (
                Result(step, "correct", state.attempts, state.hints, state.diagnoses),))
            state, more = _advance(state)
            effects: list[Effect] = [record, Correct(step, attempt)]
            return state, effects + more
    from tutor.diagnose import Claim, diagnose_claim

    floats = [[e.value() for e in row] for row in answer]
    # the cells grading refused are the ones to explain (never called right here); a misconception is
    # read off the typed numbers, each within the tolerance
    claim = Claim.around(floats, tol, texts=[[e.text for e in row] for row in answer])
    diagnoses = tuple(diagnose_claim(state.sol, step.id, step.head, claim, wrong=wrong))
    near = tuple((i, j) for i, j in wrong or ()
                 if math.isfinite(step.value[i][j]) and abs(answer[i][j].value() - step.value[i][j]) <= tol)
    blocked = tuple(c for c in near if c in strict)
    inexact = tuple((i, j) for i, j in near if answer[i][j].is_exact and (i, j) not in strict)
    # one slipped entry that is only a masked key's near-zero weight or an exact form of a rounded
    # value: the note on it says it better (as in check)
    diagnoses = tuple(d for d in diagnoses if not (d.key == "single_entry" and set(d.cells) <= {*blocked, *inexact}))
    first = diagnoses[0] if diagnoses else None
    record = _attempt(state, "wrong", attempt, diagnosis=first.key if first else None,
                      diagnosis_text=first.message if first else None, answer=text)
    keys = state.diagnoses + tuple(d.key for d in diagnoses[:1] if d.key not in state.diagnoses)
    state = replace(state, attempts=attempt, diagnoses=keys, last_wrong=wrong or (), rows=())
    retry: tuple[Cell, ...] = ()
    if state.settings.mode == "entry":
        assert wrong is not None  # entry mode always answers the step's shape
        retry = wrong
        bad = set(wrong)
        grid = tuple(tuple(None if (i, j) in bad else e for j, e in enumerate(row)) for i, row in enumerate(answer))
        state = replace(state, grid=grid, todo=wrong)
    wrong_effect = Wrong(step, answer, wrong, inexact, diagnoses, attempt, retry, blocked,
                         alike(state.sol, step, diagnoses))
    return state, [record, wrong_effect, _prompt(state)]


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
        Result(s, None, state.attempts, state.hints, state.diagnoses) if s is current else Result(s)
        for s in state.steps if (s.id, s.head) not in reached)
    order = {(s.id, s.head): n for n, s in enumerate(state.steps)}
    results = tuple(sorted(results, key=lambda r: order[r.step.id, r.step.head]))
    state = replace(state, done=True, results=results)
    return state, [Summary(results, reason)]


def _attempt(state: State, outcome: Outcome, attempt: int, *, diagnosis: str | None = None,
             diagnosis_text: str | None = None, answer: str | None = None) -> Attempt:
    """The effect that saves the current step's ``attempt``-th try (its hints so far included)."""
    step = state.step
    return Attempt(state.sol.exercise.id, step.id, step.head, outcome, attempt, state.hints, diagnosis, diagnosis_text,
                   answer)


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



