"""The practice drill as a pure state machine: ``handle(state, event) -> (state, effects)``.

No I/O: the CLI reads a line, turns it into an event with :func:`read_event`
(or sends :class:`EndOfInput` / :class:`Interrupt`), calls :func:`handle`, and
carries out the effects in order -- :class:`Record` goes to the progress store
(before the feedback that follows it is shown, so an answer is saved before
the learner reads the verdict), everything else to the renderer, and the last
:class:`Prompt` says what to ask next.

A session walks the chosen steps in the order of the solution (head 0's steps,
then head 1's, ..., then ``concat`` and ``output``).  In ``matrix`` mode an
answer is a whole matrix on one line (``1 1; 2 2; 2 2``), or row by row: a
first line holding one row of a taller matrix starts row-by-row input, which
an empty line ends.  In ``entry`` mode every entry is asked for in turn, and
after a wrong answer only the wrong entries are asked again.  Typed text goes
through :mod:`tutor.answers` only.

>>> from tutor.catalog import resolve; from tutor.steps import solve
>>> state, effects = start(solve(resolve("single-head-3x4")), steps=("q",))
>>> state, effects = handle(state, read_event("1 1; 2 2; 2 2"))
>>> [type(e).__name__ for e in effects]
['Record', 'Correct', 'Summary']
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from .answers import (
    DEFAULT_TOLERANCE,
    Entry,
    close,
    equals_exactly,
    parse_entry,
    parse_matrix,
    parse_row,
)
from .errors import AnswerError
from .exactnum import Exact
from .messages import t
from .steps import KINDS, Input, Solution, Step, worked_entry

if TYPE_CHECKING:
    from .diagnose import Diagnosis

Mode = Literal["matrix", "entry"]
Outcome = Literal["correct", "wrong", "shown", "skipped"]
COMMANDS = ("hint", "shape", "show", "skip", "quit", "help")
Cell = tuple[int, int]
Answered = tuple[tuple[Entry, ...], ...]


@dataclass(frozen=True)
class Settings:
    """How a session grades: ``mode`` (``matrix`` or ``entry``) and the decimal ``tolerance``."""

    mode: Mode = "matrix"
    tolerance: float = DEFAULT_TOLERANCE


# --- events --------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """A typed line that is not a command (possibly empty: it ends row-by-row input)."""

    text: str


@dataclass(frozen=True)
class Command:
    """One of :data:`COMMANDS`."""

    name: str


@dataclass(frozen=True)
class EndOfInput:
    """The input stream ended (Ctrl-D, or the end of a piped script)."""


@dataclass(frozen=True)
class Interrupt:
    """Ctrl-C."""


Event = Answer | Command | EndOfInput | Interrupt


def read_event(line: str) -> Answer | Command:
    """A typed line as an event: a command word (any case, surrounding blanks ignored) or an answer.

    >>> read_event("  Hint "), read_event("1 1; 2 2")
    (Command(name='hint'), Answer(text='1 1; 2 2'))
    """
    word = line.strip().lower()
    return Command(word) if word in COMMANDS else Answer(line.rstrip("\r\n"))


# --- effects ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Present:
    """Show a new step: its title, formula and inputs (never its result's shape)."""

    step: Step
    number: int
    total: int
    inputs: tuple[Input, ...]
    multi_head: bool


@dataclass(frozen=True)
class Prompt:
    """Ask for input.  ``row`` (1-based) during row-by-row input; ``cell`` in entry mode."""

    step: Step
    multi_head: bool
    row: int | None = None
    cell: Cell | None = None


@dataclass(frozen=True)
class Invalid:
    """Typed text that is not an answer: one line saying what and where; nothing was graded."""

    message: str


@dataclass(frozen=True)
class RowByRow:
    """Row 1 was read as the first row of a row-by-row answer."""

    rows: int


@dataclass(frozen=True)
class Correct:
    """The answer is right (``attempt`` is the 1-based try)."""

    step: Step
    attempt: int


@dataclass(frozen=True)
class Wrong:
    """The answer is wrong.

    ``wrong`` are the wrong cells when the shape is right (``None`` when it
    is not); ``inexact`` the wrong cells whose exact form (``3``, ``1/2``) is
    within the tolerance but not equal: they need decimals; ``blocked`` the
    wrong cells a mask blocks whose entry is within the tolerance of the right
    ``0`` (a weight must be exactly 0 there: see :func:`blocked_cells`);
    ``diagnoses`` the misconceptions that explain the answer, most specific
    first; ``alike`` how many of the first diagnoses recompute the very same
    matrix (1 to 3: the mistakes the answer cannot tell apart, all shown);
    ``retry`` the cells asked again in entry mode.
    """

    step: Step
    answer: Answered
    wrong: tuple[Cell, ...] | None
    inexact: tuple[Cell, ...]
    diagnoses: tuple[Diagnosis, ...]
    attempt: int
    retry: tuple[Cell, ...] = ()
    blocked: tuple[Cell, ...] = ()
    alike: int = 1

    @property
    def shown(self) -> tuple[Diagnosis, ...]:
        """The diagnoses to show: the first and those indistinguishable from it."""
        return self.diagnoses[: self.alike]


@dataclass(frozen=True)
class Hint:
    """Hint number ``level``: 1 is the formula, 2 one entry worked out; 3 and on: no more hints."""

    step: Step
    level: int
    formula: str = ""
    cell: Cell | None = None
    work: str = ""


@dataclass(frozen=True)
class ShapeInfo:
    """Reveal the shape of the step's result, and how it follows from the inputs."""

    step: Step


@dataclass(frozen=True)
class Reveal:
    """Show the right answer (after ``show``); the step counts as missed."""

    step: Step


@dataclass(frozen=True)
class Skipped:
    """The step was skipped (not counted)."""

    step: Step


@dataclass(frozen=True)
class Help:
    """List the commands and the answer formats."""

    mode: Mode


@dataclass(frozen=True)
class Record:
    """Save one answered step (the CLI commits it to the store at once)."""

    step: str
    head: int | None
    outcome: Outcome
    attempt: int
    hints: int
    diagnosis: str | None = None
    diagnosis_text: str | None = None
    answer: str | None = None


@dataclass(frozen=True)
class Result:
    """How one step of the session ended; ``outcome`` is ``None`` when it was not finished
    (``attempts`` and ``hints`` then say whether it was begun)."""

    step: Step
    outcome: Literal["correct", "shown", "skipped"] | None = None
    attempts: int = 0
    hints: int = 0
    diagnoses: tuple[str, ...] = ()


@dataclass(frozen=True)
class Summary:
    """The session is over: one :class:`Result` per chosen step, and why it ended."""

    results: tuple[Result, ...]
    reason: Literal["done", "quit", "end", "interrupt"]


Effect = (Present | Prompt | Invalid | RowByRow | Correct | Wrong | Hint | ShapeInfo | Reveal | Skipped | Help
          | Record | Summary)


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
    record = Record(step.id, step.head, outcome, state.attempts + 1, state.hints)
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


def blocked_cells(sol: Solution, step: Step) -> frozenset[Cell]:
    """The cells of ``step`` whose value a mask fixes exactly: the keys a query may not attend
    to, in the steps whose kind says what a mask fixes there (:attr:`tutor.steps.StepKind.fixed_by_mask`:
    ``masked`` ``-inf``, ``weights`` ``0``).  Every other step, and an exercise without a mask, has none.

    These entries are exact by construction, not computed, so no rounding
    tolerance applies to them: a weight of 0.0035 on a masked key is wrong.
    Other entries that come out exact (a weight of 1 on a query's only
    allowed key, whole-number products) are still graded with the tolerance:
    a decimal near them is an honest rounding of a computation.
    """
    allowed = sol.exercise.allowed()  # [L, L_k], True = may attend
    if allowed is None or KINDS[step.id].fixed_by_mask is None:
        return frozenset()
    return frozenset((i, j) for i, row in enumerate(allowed) for j, ok in enumerate(row) if not ok)


def _right(entry: Entry, expected: float, true: Exact, strict: bool, tolerance: float) -> bool:
    """Whether ``entry`` is right for the true value ``true`` (``expected`` is its float): exactly
    equal for a ``strict`` (mask-fixed) cell -- ``1e-400`` is not the 0 a mask fixes, though its
    float is --, else :func:`tutor.answers.close` (an exact entry equal to ``true`` exactly)."""
    if strict:
        return equals_exactly(entry, true)
    return close(entry, expected, tolerance=tolerance, exact=true)


def _alike(sol: Solution, step: Step, diagnoses: Sequence[Diagnosis], limit: int = 3) -> int:
    """How many of the leading ``diagnoses`` recompute the same matrix as the first (at most ``limit``):
    mistakes that give the same numbers here, which the answer cannot tell apart."""
    if len(diagnoses) < 2:
        return len(diagnoses)
    import numpy as np

    from .diagnose import MISCONCEPTIONS

    recompute = {m.key: m.recompute for m in MISCONCEPTIONS}
    if diagnoses[0].key not in recompute:
        return 1
    first = recompute[diagnoses[0].key](sol, step.id, step.head)  # [rows, cols] or None
    if first is None:
        return 1
    count = 1
    for d in diagnoses[1:]:
        if count == limit:
            break
        if d.key not in recompute:
            continue
        got = recompute[d.key](sol, step.id, step.head)  # [rows, cols] or None
        if got is not None and got.shape == first.shape and bool(np.allclose(got, first, rtol=1e-9, atol=1e-12)):
            count += 1
    return count


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
                      if not _right(e, step.value[i][j], step.exact[i][j], (i, j) in strict, tol))
        if not wrong:
            record = Record(step.id, step.head, "correct", attempt, state.hints, answer=text)
            state = replace(state, results=state.results + (
                Result(step, "correct", state.attempts, state.hints, state.diagnoses),))
            state, more = _advance(state)
            effects: list[Effect] = [record, Correct(step, attempt)]
            return state, effects + more
    from .diagnose import diagnose

    floats = [[e.value() for e in row] for row in answer]
    diagnoses = tuple(diagnose(state.sol, step.id, step.head, floats, tolerance=tol))
    near = tuple((i, j) for i, j in wrong or ()
                 if math.isfinite(step.value[i][j]) and abs(answer[i][j].value() - step.value[i][j]) <= tol)
    blocked = tuple(c for c in near if c in strict)
    inexact = tuple((i, j) for i, j in near if answer[i][j].is_exact and (i, j) not in strict)
    first = diagnoses[0] if diagnoses else None
    record = Record(step.id, step.head, "wrong", attempt, state.hints,
                    first.key if first else None, first.message if first else None, text)
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
                         _alike(state.sol, step, diagnoses))
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


